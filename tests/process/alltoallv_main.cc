// weft-test-alltoallv: one rank of a real multi-process job that runs weftAllToAllv (all-to-all
// with unequal splits) through the public C API and checks every byte of its buffers against a
// reference of its own: every rank derives the whole count matrix (counts[src][dst]) from the
// case's seed, and the bytes of the block from src to dst from (src, dst, seed, offset), so that
// what lands where, and that nothing else is written, needs nothing from the library. Started by
// test_alltoallv.cc.
//
// Modes (argv[1]):
//   check           every data type, counts that are zero, one, odd and prime (up to 262147
//                   elements, past the shared-memory transport's 1 MiB staging chunk), whole rows
//                   and columns of zeros, blocks packed, reversed with gaps and rotated; blocking
//                   calls, then three asynchronous ones in flight at once; the empty call with
//                   NULL buffers; then the argument errors, each refused on every rank before
//                   anything moves (the communicator stays usable). Last line "rank R: OK <calls> calls".
//   mismatch more   rank 0 sends rank 1 two elements more than rank 1 expects (a truncated receive)
//   mismatch less   the last rank sends rank 0 nothing where rank 0 expects elements
//                   Every rank calls in a loop until it fails: "rank R: ERROR <code> in call <k> after <ms> ms: <message>",
//                   then "rank R: AFTER <code>" for the next call (the communicator is broken).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <weft/weft.h>

namespace {

using Clock = std::chrono::steady_clock;

size_t type_size(weftDataType_t t) {
  switch (t) {
    case weftInt8: case weftUint8: return 1;
    case weftFloat16: case weftBfloat16: return 2;
    case weftInt32: case weftFloat32: return 4;
    default: return 8;
  }
}

uint64_t mix(uint64_t x) {
  x ^= x >> 31;
  x *= 0x9e3779b97f4a7c15ULL;
  x ^= x >> 29;
  return x;
}

// Element counts: zero, one, odd, prime; 262147 (prime) once per case at most.
uint64_t count_of(int seed, int n, int src, int dst) {
  static const uint64_t kCounts[] = {0, 1, 2, 3, 5, 7, 13, 31, 97, 1009, 4099, 65537};
  if (seed % 7 == 1 && src == seed % n) return 0;            // a rank that sends nothing
  if (seed % 7 == 2 && dst == (seed + 1) % n) return 0;      // a rank that receives nothing
  if (seed % 7 == 3 && src == (dst + 1) % n && src == 1 % n) return 262147;
  if (seed % 7 == 4) return 0;                               // nothing anywhere (0-byte messages only)
  return kCounts[mix(static_cast<uint64_t>(seed) * 1000003 + static_cast<uint64_t>(src * 64 + dst)) % 12];
}

uint8_t pattern(int src, int dst, int seed, size_t i) {
  return static_cast<uint8_t>((src * 151 + dst * 37 + seed * 11 + i * 7 + (i >> 9)) & 0xff);
}
constexpr uint8_t kSendFill = 0x5a, kRecvFill = 0xee;
constexpr size_t kGuard = 64;  // bytes after the last block, which must stay untouched

// Displacements for counts c (one per rank), in one of three layouts; returns the elements spanned.
// Zero-count blocks get a displacement far outside the buffer: it must be ignored.
uint64_t lay_out(const std::vector<size_t>& c, int layout, int rank, std::vector<size_t>& displs) {
  const int n = static_cast<int>(c.size());
  displs.assign(n, 0);
  uint64_t at = 0;
  for (int k = 0; k < n; ++k) {
    const int p = layout == 0 ? k : layout == 1 ? n - 1 - k : (rank + 1 + k) % n;
    if (c[p] == 0) {
      displs[p] = layout == 0 ? at : (size_t{1} << 40);
      continue;
    }
    displs[p] = at;
    at += c[p] + (layout == 1 ? 3 : layout == 2 ? static_cast<uint64_t>(p % 2) : 0);
  }
  return at;
}

struct Case {
  weftDataType_t type;
  int seed;
  std::vector<size_t> sc, sd, rc, rd;
  std::vector<uint8_t> send, send_copy, recv;

  Case(weftDataType_t t, int s, int rank, int n) : type(t), seed(s) {
    const size_t es = type_size(t);
    sc.resize(n);
    rc.resize(n);
    for (int p = 0; p < n; ++p) {
      sc[p] = count_of(seed, n, rank, p);
      rc[p] = count_of(seed, n, p, rank);
    }
    const uint64_t send_elems = lay_out(sc, seed % 3, rank, sd);
    const uint64_t recv_elems = lay_out(rc, (seed + 1) % 3, rank, rd);
    send.assign(send_elems * es + kGuard, kSendFill);
    recv.assign(recv_elems * es + kGuard, kRecvFill);
    for (int p = 0; p < n; ++p)
      for (size_t i = 0; i < sc[p] * es; ++i) send[sd[p] * es + i] = pattern(rank, p, seed, i);
    send_copy = send;
  }
  // "" when recv holds exactly the expected blocks (and the fill elsewhere) and send is unchanged.
  std::string check(int rank) const {
    const size_t es = type_size(type);
    std::vector<uint8_t> want(recv.size(), kRecvFill);
    for (size_t p = 0; p < rc.size(); ++p)
      for (size_t i = 0; i < rc[p] * es; ++i) want[rd[p] * es + i] = pattern(static_cast<int>(p), rank, seed, i);
    for (size_t b = 0; b < recv.size(); ++b) {
      if (recv[b] == want[b]) continue;
      std::string where = "outside every block (a gap or the guard)";
      for (size_t p = 0; p < rc.size(); ++p)
        if (rc[p] && b >= rd[p] * es && b < (rd[p] + rc[p]) * es)
          where = "in the block from rank " + std::to_string(p) + " (byte " + std::to_string(b - rd[p] * es) + " of " +
                  std::to_string(rc[p] * es) + ")";
      return "recvbuff byte " + std::to_string(b) + " is " + std::to_string(recv[b]) + ", want " + std::to_string(want[b]) +
             ", " + where;
    }
    if (send != send_copy) return "sendbuff was modified";
    return "";
  }
  std::string label() const {
    std::string s = "type " + std::to_string(static_cast<int>(type)) + " seed " + std::to_string(seed) + " sendcounts";
    for (size_t c : sc) s += " " + std::to_string(c);
    return s;
  }
  const void* sbuf() const { return send.data(); }
  void* rbuf() { return recv.data(); }
};

struct Runner {
  weftComm_t comm;
  int rank = 0, n = 0, calls = 0, failures = 0;

  bool fail(const std::string& what) {
    std::printf("rank %d: WRONG %s\n", rank, what.c_str());
    std::fflush(stdout);
    ++failures;
    return false;
  }
  bool checked(const Case& c) {
    const std::string err = c.check(rank);
    return err.empty() || fail(c.label() + ": " + err);
  }
  bool sync(weftDataType_t t, int seed) {
    Case c(t, seed, rank, n);
    ++calls;
    if (weftAllToAllv(c.sbuf(), c.sc.data(), c.sd.data(), c.rbuf(), c.rc.data(), c.rd.data(), t, comm) != weftSuccess)
      return fail(c.label() + ": " + weftCommGetLastError(comm));
    return checked(c);
  }
  // Three calls in flight at once, waited in reverse order.
  bool async(weftDataType_t t, int seed) {
    std::vector<Case> cs;
    for (int k = 0; k < 3; ++k) cs.emplace_back(t, seed + 7 * k, rank, n);
    std::vector<weftRequest_t> reqs(cs.size(), nullptr);
    for (size_t k = 0; k < cs.size(); ++k) {
      Case& c = cs[k];
      ++calls;
      if (weftAllToAllvAsync(c.sbuf(), c.sc.data(), c.sd.data(), c.rbuf(), c.rc.data(), c.rd.data(), t, comm, &reqs[k]) !=
          weftSuccess)
        return fail(c.label() + " (async): " + weftCommGetLastError(comm));
      // The arrays are the caller's only during the call: clobbered now, they must not matter.
      std::fill(c.sd.begin(), c.sd.end(), size_t{1} << 50);
    }
    bool ok = true;
    for (size_t k = cs.size(); k-- > 0;)
      if (weftWait(reqs[k], -1) != weftSuccess) ok = fail(cs[k].label() + " (async wait): " + weftCommGetLastError(comm));
    if (!ok) return false;
    for (const Case& c : cs) {
      Case fresh(t, c.seed, rank, n);  // the displacements as they were
      fresh.recv = c.recv;
      if (!checked(fresh)) return false;
    }
    return true;
  }
  // An argument error: refused here, before anything moves, with `text` in the message.
  bool refused(const char* what, weftResult_t got, const char* text) {
    ++calls;
    const std::string msg = weftCommGetLastError(comm);
    if (got != weftInvalidArgument || msg.find(text) == std::string::npos)
      return fail(std::string(what) + ": got " + std::to_string(static_cast<int>(got)) + " '" + msg + "', want weftInvalidArgument with '" +
                  text + "'");
    if (rank == 0) std::printf("rank 0: refused %s: %s\n", what, msg.c_str());
    return true;
  }
  bool errors() {
    Case c(weftInt32, 5, rank, n);
    const auto t = weftInt32;
    if (!refused("NULL sendcounts", weftAllToAllv(c.sbuf(), nullptr, c.sd.data(), c.rbuf(), c.rc.data(), c.rd.data(), t, comm),
                 "sendcounts is NULL"))
      return false;
    if (!refused("NULL rdispls", weftAllToAllv(c.sbuf(), c.sc.data(), c.sd.data(), c.rbuf(), c.rc.data(), nullptr, t, comm),
                 "rdispls is NULL"))
      return false;
    std::vector<size_t> rc = c.rc;
    rc[rank] += 1;
    if (!refused("own block", weftAllToAllv(c.sbuf(), c.sc.data(), c.sd.data(), c.rbuf(), rc.data(), c.rd.data(), t, comm),
                 "this rank's block to itself"))
      return false;
    std::vector<size_t> ones(n, 4), at(n, 0);
    std::vector<int32_t> buf(4 * n + 4);
    for (int p = 0; p < n; ++p) at[p] = 4 * p;
    if (!refused("in place", weftAllToAllv(buf.data(), ones.data(), at.data(), buf.data(), ones.data(), at.data(), t, comm),
                 "in place is not supported"))
      return false;
    std::vector<int32_t> out(4 * n + 4);
    std::vector<size_t> close = at;
    close[n - 1] = close[n - 2] + 2;  // the last two receive blocks overlap
    if (!refused("overlap", weftAllToAllv(buf.data(), ones.data(), at.data(), out.data(), ones.data(), close.data(), t, comm),
                 "overlap"))
      return false;
    weftRequest_t q = nullptr;
    if (!refused("async NULL recvcounts",
                 weftAllToAllvAsync(c.sbuf(), c.sc.data(), c.sd.data(), c.rbuf(), nullptr, c.rd.data(), t, comm, &q),
                 "recvcounts is NULL"))
      return false;
    if (q) return fail("a refused asynchronous call left a request");
    return sync(weftInt32, 5);  // still usable
  }
  bool check_mode() {
    const weftDataType_t types[] = {weftInt8, weftUint8, weftInt32, weftInt64, weftFloat16, weftBfloat16, weftFloat32, weftFloat64};
    for (weftDataType_t t : types)
      for (int seed = 0; seed < 7; ++seed)
        if (!sync(t, seed + 7 * static_cast<int>(t))) return false;
    for (weftDataType_t t : {weftUint8, weftFloat32, weftInt64, weftBfloat16})
      if (!async(t, 100 + static_cast<int>(t))) return false;
    // Nothing to move anywhere, NULL buffers: every rank still takes part.
    std::vector<size_t> zero(n, 0);
    ++calls;
    if (weftAllToAllv(nullptr, zero.data(), zero.data(), nullptr, zero.data(), zero.data(), weftFloat64, comm) != weftSuccess)
      return fail(std::string("empty call: ") + weftCommGetLastError(comm));
    return errors();
  }
};

int mismatch(Runner& R, const std::string& how) {
  const int n = R.n, r = R.rank;
  const auto t0 = Clock::now();
  for (int it = 0; it < 1000; ++it) {
    Case c(weftFloat32, 5, r, n);
    for (int p = 0; p < n; ++p) {
      if (c.sc[p] == 0 || c.rc[p] == 0) {  // every pair carries something here: a clear reference
        c.sc[p] = std::max<size_t>(c.sc[p], 1);
        c.rc[p] = std::max<size_t>(c.rc[p], 1);
      }
    }
    // Re-laid out with room for two more elements per block.
    c.sd.assign(n, 0);
    c.rd.assign(n, 0);
    for (int p = 1; p < n; ++p) {
      c.sd[p] = c.sd[p - 1] + c.sc[p - 1] + 2;
      c.rd[p] = c.rd[p - 1] + c.rc[p - 1] + 2;
    }
    c.send.assign((c.sd[n - 1] + c.sc[n - 1] + 2) * 4, 1);
    c.recv.assign((c.rd[n - 1] + c.rc[n - 1] + 2) * 4, 0);
    if (how == "more" && r == 0) c.sc[1] += 2;
    if (how == "less" && r == n - 1) c.sc[0] = 0;
    ++R.calls;
    const weftResult_t res = weftAllToAllv(c.sbuf(), c.sc.data(), c.sd.data(), c.rbuf(), c.rc.data(), c.rd.data(), weftFloat32, R.comm);
    if (res != weftSuccess) {
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      std::printf("rank %d: ERROR %d in call %d after %.0f ms: %s\n", r, static_cast<int>(res), it, ms, weftCommGetLastError(R.comm));
      // The communicator is broken: the next call fails at once.
      const weftResult_t after = weftBarrier(R.comm);
      std::printf("rank %d: AFTER %d %s\n", r, static_cast<int>(after), weftCommGetLastError(R.comm));
      std::fflush(stdout);
      if (r == 0) usleep(1000000);  // rank 0 serves the store: let the others read the cause first
      _exit(0);  // a broken communicator: leave without teardown
    }
    if (std::chrono::duration<double>(Clock::now() - t0).count() > 60) break;
  }
  std::printf("rank %d: NO-ERROR after %d calls\n", r, R.calls);
  std::fflush(stdout);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "check";
  weftComm_t comm = nullptr;
  if (weftCommInitFromEnv(&comm) != weftSuccess) {
    std::printf("rank ?: FATAL %s\n", weftGetLastErrorMessage());
    return 2;
  }
  Runner R{comm};
  weftCommRank(comm, &R.rank);
  weftCommCount(comm, &R.n);
  if (mode == "mismatch") return mismatch(R, argc > 2 ? argv[2] : "more");
  const auto t0 = Clock::now();
  const bool completed = R.check_mode();
  if (completed && weftBarrier(comm) != weftSuccess) ++R.failures;
  std::printf("rank %d: %s %d calls in %.2f s, %d wrong\n", R.rank, R.failures == 0 && completed ? "OK" : "FAILED", R.calls,
              std::chrono::duration<double>(Clock::now() - t0).count(), R.failures);
  std::fflush(stdout);
  if (!completed) _exit(1);  // the communicator may be broken: leave without teardown
  weftCommDestroy(comm);
  return R.failures == 0 ? 0 : 1;
}
