// weft-perf: nccl-tests for Weft. Every collective, nccl-tests' flags, columns and bus-bandwidth
// factors; checked results with guard zones; CSV/JSON output; and --ceiling, this machine's memory
// bound. Runs under mpirun, weftrun or plain WEFT_* variables. See docs/PERFORMANCE.md.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ceiling.h"
#include "check.h"
#include "report.h"

using namespace wperf;

namespace {

constexpr size_t kGuard = 4096;
constexpr unsigned char kGuardByte = 0xA5;

struct SizeSpec {
  size_t bytes;
  int iters, warmup;
};

size_t parse_bytes(const std::string& s) {
  size_t pos = 0;
  double v = std::stod(s, &pos);
  double mult = 1;
  if (pos < s.size()) switch (s[pos] | 0x20) {
      case 'k': mult = 1024.0; break;
      case 'm': mult = 1024.0 * 1024; break;
      case 'g': mult = 1024.0 * 1024 * 1024; break;
      default: throw CLI::ValidationError("size", "bad size '" + s + "' (use K, M or G)");
    }
  return static_cast<size_t>(v * mult);
}

struct Opts {
  std::string colls = "allreduce", type = "float", op = "sum", minb = "32M", maxb = "32M", step = "1M", sizes;
  std::string algo, csv, json;
  double factor = 0;
  int iters = 20, warmup = 5, check = 1, root = 0, average = 1, blocking = 0, threads = 0;
  bool ceiling = false;
  bool shared = false;
  bool mixed = false;  // odd ranks take the other placement (in place where even ranks are out of place)
};

struct Bench {
  weftComm_t comm = nullptr;
  int rank = 0, n = 1;
  Opts o;
  unsigned char *send_base = nullptr, *recv_base = nullptr;  // kGuard | max bytes | kGuard
  long oob = 0;
  bool failed = false;
};

#define WCHECK(call)                                                                                      \
  do {                                                                                                    \
    weftResult_t r_ = (call);                                                                             \
    if (r_ != weftSuccess) {                                                                              \
      std::fprintf(stderr, "weft-perf: rank %d: %s: %s: %s\n", b.rank, #call, weftGetErrorString(r_),      \
                   b.comm ? weftCommGetLastError(b.comm) : weftGetLastErrorMessage());                      \
      std::exit(2);                                                                                       \
    }                                                                                                     \
  } while (0)

// Starts one call; blocking calls finish before returning, others append their requests.
void start(Bench& b, Coll c, const void* s, void* r, const Shape& sh, const TypeInfo& t, weftRedOp_t op,
           std::vector<weftRequest_t>* reqs) {
  weftRequest_t q = nullptr, q2 = nullptr;
  const bool async = reqs != nullptr;
  switch (c) {
    case Coll::kAllReduce:
      WCHECK(async ? weftAllReduceAsync(s, r, sh.count, t.dt, op, b.comm, &q) : weftAllReduce(s, r, sh.count, t.dt, op, b.comm));
      break;
    case Coll::kReduceScatter:
      WCHECK(async ? weftReduceScatterAsync(s, r, sh.count, t.dt, op, b.comm, &q)
                   : weftReduceScatter(s, r, sh.count, t.dt, op, b.comm));
      break;
    case Coll::kAllGather:
      WCHECK(async ? weftAllGatherAsync(s, r, sh.count, t.dt, b.comm, &q) : weftAllGather(s, r, sh.count, t.dt, b.comm));
      break;
    case Coll::kBroadcast:
      WCHECK(async ? weftBroadcastAsync(s, r, sh.count, t.dt, b.o.root, b.comm, &q)
                   : weftBroadcast(s, r, sh.count, t.dt, b.o.root, b.comm));
      break;
    case Coll::kReduce:
      WCHECK(async ? weftReduceAsync(s, r, sh.count, t.dt, op, b.o.root, b.comm, &q)
                   : weftReduce(s, r, sh.count, t.dt, op, b.o.root, b.comm));
      break;
    case Coll::kAllToAll:
      WCHECK(async ? weftAllToAllAsync(s, r, sh.count, t.dt, b.comm, &q) : weftAllToAll(s, r, sh.count, t.dt, b.comm));
      break;
    case Coll::kSendRecv:  // ring: send to rank+1, receive from rank-1
      // A communicator runs its operations one at a time in program order, so a ring where every
      // rank posts its receive (or its send) first would deadlock: even ranks send first.
      if (b.rank % 2 == 0) WCHECK(weftSendAsync(s, sh.count, t.dt, (b.rank + 1) % b.n, b.comm, &q2));
      WCHECK(weftRecvAsync(r, sh.count, t.dt, (b.rank - 1 + b.n) % b.n, b.comm, &q));
      if (b.rank % 2 == 1) WCHECK(weftSendAsync(s, sh.count, t.dt, (b.rank + 1) % b.n, b.comm, &q2));
      break;
  }
  for (weftRequest_t x : {q, q2}) {
    if (!x) continue;
    if (async) reqs->push_back(x);
    else WCHECK(weftWait(x, -1));
  }
}

double combine(Bench& b, double v) {  // nccl-tests' -a: 0 rank 0, 1 average, 2 min, 3 max
  double out = 0;
  if (b.o.average == 0) {
    double mine = b.rank == 0 ? v : 0;
    WCHECK(weftAllReduce(&mine, &out, 1, weftFloat64, weftSum, b.comm));
    return out;
  }
  weftRedOp_t op = b.o.average == 2 ? weftMin : b.o.average == 3 ? weftMax : weftSum;
  WCHECK(weftAllReduce(&v, &out, 1, weftFloat64, op, b.comm));
  return b.o.average == 1 ? out / b.n : out;
}

long guards_changed(const unsigned char* base, size_t used) {
  long bad = 0;
  for (size_t i = 0; i < kGuard; ++i) bad += base[i] != kGuardByte;
  for (size_t i = 0; i < kGuard; ++i) bad += base[kGuard + used + i] != kGuardByte;
  return bad;
}
void set_guards(unsigned char* base, size_t used) {
  std::memset(base, kGuardByte, kGuard);
  std::memset(base + kGuard + used, kGuardByte, kGuard);
}

Half run_one(Bench& b, Coll c, const TypeInfo& t, weftRedOp_t op, const SizeSpec& sz, bool in_place) {
  Half h;
  if (b.o.mixed && b.rank % 2) in_place = !in_place;
  const Shape sh = make_shape(c, sz.bytes / t.size, b.n, b.rank);
  unsigned char* S = b.send_base + kGuard;
  unsigned char* R = b.recv_base + kGuard;
  const void* s = S;
  void* r = R;
  size_t send_used = sh.send_elems * t.size, recv_used = sh.recv_elems * t.size;
  if (in_place) {  // NCCL's conventions; only the receive allocation is used
    s = R + sh.inplace_send_off * t.size;
    r = R + sh.inplace_recv_off * t.size;
    recv_used = std::max(send_used, recv_used);
  }
  std::vector<weftRequest_t> reqs;
  reqs.reserve(static_cast<size_t>(2 * std::max(sz.iters, sz.warmup)));
  auto loop = [&](int iters) {
    bool async = !b.o.blocking;
    for (int i = 0; i < iters; ++i) start(b, c, s, r, sh, t, op, async ? &reqs : nullptr);
    for (weftRequest_t q : reqs) WCHECK(weftWait(q, -1));
    reqs.clear();
  };
  loop(sz.warmup);
  WCHECK(weftBarrier(b.comm));
  auto t0 = std::chrono::steady_clock::now();
  loop(sz.iters);
  double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / std::max(1, sz.iters);
  h.ran = true;
  const char* ran = "";
  WCHECK(weftCommLastAlgorithm(b.comm, &ran));  // before the bookkeeping calls below (combine, the check)
  h.algorithm = ran;
  h.time_us = combine(b, sec) * 1e6;
  const double bytes = static_cast<double>(sh.total * t.size);
  h.algbw = h.time_us > 0 ? bytes / (h.time_us * 1e-6) / 1e9 : 0;
  h.busbw = h.algbw * bus_factor(c, b.n);
  if (b.o.check) {  // fresh inputs, one call, then count wrong elements and touched guard bytes
    if (!in_place) {
      fill_input(c, op, t, b.rank, S, sh.send_elems);
      std::memset(R, 0xff, recv_used);
      set_guards(b.send_base, send_used);
    } else if (c == Coll::kAllGather) {
      std::memset(R, 0xff, recv_used);
      fill_input(c, op, t, b.rank, const_cast<void*>(s), sh.send_elems);
    } else {
      fill_input(c, op, t, b.rank, R, sh.send_elems);
    }
    set_guards(b.recv_base, recv_used);
    WCHECK(weftBarrier(b.comm));
    loop(1);
    int64_t wrong = static_cast<int64_t>(count_wrong(c, op, t, b.rank, b.n, b.o.root, r, sh)), total = 0;
    int64_t oob = guards_changed(b.recv_base, recv_used) + (in_place ? 0 : guards_changed(b.send_base, send_used)), all_oob = 0;
    WCHECK(weftAllReduce(&wrong, &total, 1, weftInt64, weftSum, b.comm));
    WCHECK(weftAllReduce(&oob, &all_oob, 1, weftInt64, weftSum, b.comm));
    h.wrong = static_cast<long>(total);
    b.oob += static_cast<long>(all_oob);
    if (total || all_oob) b.failed = true;
  } else {
    h.wrong = -1;
  }
  return h;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t p = 0;
  while (p <= s.size()) {
    size_t q = s.find(',', p);
    if (q == std::string::npos) q = s.size();
    if (q > p) out.push_back(s.substr(p, q - p));
    p = q + 1;
  }
  return out;
}

std::vector<SizeSpec> size_list(const Opts& o) {
  std::vector<SizeSpec> out;
  if (!o.sizes.empty()) {  // SIZE[:ITERS[:WARMUP]],...
    for (auto& item : split(o.sizes)) {
      SizeSpec s{0, o.iters, o.warmup};
      size_t c1 = item.find(':');
      s.bytes = parse_bytes(item.substr(0, c1));
      if (c1 != std::string::npos) {
        size_t c2 = item.find(':', c1 + 1);
        s.iters = std::stoi(item.substr(c1 + 1, c2 - c1 - 1));
        if (c2 != std::string::npos) s.warmup = std::stoi(item.substr(c2 + 1));
      }
      out.push_back(s);
    }
    return out;
  }
  size_t lo = parse_bytes(o.minb), hi = parse_bytes(o.maxb), step = parse_bytes(o.step);
  for (size_t v = lo; v <= hi && out.size() < 100000;) {
    out.push_back({v, o.iters, o.warmup});
    size_t next = o.factor > 1 ? static_cast<size_t>(static_cast<double>(v) * o.factor) : v + step;
    if (next <= v) break;
    v = next;
  }
  return out;
}

void add_options(CLI::App& app, Opts& o, std::vector<std::string>& c_values) {
  app.add_option("-c", c_values, "a collective (allreduce|reducescatter|allgather|broadcast|reduce|alltoall|sendrecv, "
                                 "a comma list, or all) or check 0/1; may be repeated: -c allreduce -c 0");
  app.add_option("--collective", o.colls, "the collective(s), as -c");
  app.add_option("-b,--minbytes", o.minb, "smallest size (K/M/G suffixes)");
  app.add_option("-e,--maxbytes", o.maxb, "largest size");
  app.add_option("-f,--stepfactor", o.factor, "multiply the size by this (> 1) between steps");
  app.add_option("-i,--stepbytes", o.step, "add this to the size between steps (when no -f)");
  app.add_option("--sizes", o.sizes, "explicit SIZE[:ITERS[:WARMUP]],... (overrides -b/-e/-f/-i)");
  app.add_option("-n,--iters", o.iters, "timed iterations");
  app.add_option("-w,--warmup_iters", o.warmup, "warm-up iterations at each size");
  app.add_option("-d,--datatype", o.type, "int8 uint8 int32 int64 half bfloat16 float double, or all");
  app.add_option("-o,--op", o.op, "sum prod min max avg, or all");
  app.add_option("-r,--root", o.root, "root of broadcast and reduce");
  app.add_option("--check", o.check, "check results (0/1), as -c 0/1")->check(CLI::Range(0, 1));
  app.add_option("-a,--average", o.average, "combine times across ranks: 0 rank 0, 1 average, 2 min, 3 max")->check(CLI::Range(0, 3));
  app.add_option("-z,--blocking", o.blocking, "1: each call completes before the next (0: all issued, then waited)")->check(CLI::Range(0, 1));
  app.add_option("--algo", o.algo,
                 "force an algorithm (sets WEFT_ALGO before init); a comma list (e.g. ring,hier,auto; auto = the "
                 "automatic choice) runs each size with each algorithm in turn in this one job "
                 "(weftCommSetAlgorithm), so that they are compared under the same conditions");
  app.add_option("--csv", o.csv, "write CSV to this file ('-': stdout, instead of the table)");
  app.add_option("--json", o.json, "write JSON to this file ('-': stdout, instead of the table)");
  app.add_flag("--mixed", o.mixed,
               "mixed placement: odd ranks call in place where even ranks call out of place, and the other way round");
  app.add_flag("--shared", o.shared,
               "buffers from weftMemAlloc (windows: node-shared memory; all-reduces on them run without copies) instead of malloc");
  app.add_flag("--ceiling", o.ceiling, "measure this machine's copy / a+=b bandwidth and the all-reduce bound; no Weft");
  app.add_option("--threads", o.threads, "--ceiling: threads (= ranks) for the aggregate figures (default 2)");
}

// What to run: -c's collective or check value, and the collectives, types and ops named.
struct Choices {
  std::vector<Coll> colls;
  std::vector<const TypeInfo*> types;
  std::vector<weftRedOp_t> ops;
};

bool parse_choices(Opts& o, const std::vector<std::string>& c_values, Choices& ch) {
  auto& colls = ch.colls;
  auto& types = ch.types;
  auto& ops = ch.ops;
  for (auto& v : c_values) {
    if (v == "0" || v == "1") o.check = v[0] - '0';
    else o.colls = v;
  }
  for (auto& name : split(o.colls == "all" ? "allreduce,reducescatter,allgather,broadcast,reduce,alltoall,sendrecv" : o.colls)) {
    Coll c;
    if (!parse_coll(name, &c)) return std::fprintf(stderr, "weft-perf: unknown collective '%s'\n", name.c_str()), false;
    colls.push_back(c);
  }
  if (o.type == "all")
    for (auto& t : all_types()) types.push_back(&t);
  for (auto& name : o.type == "all" ? std::vector<std::string>{} : split(o.type)) {
    const TypeInfo* t = find_type(name);
    if (!t) return std::fprintf(stderr, "weft-perf: unknown type '%s'\n", name.c_str()), false;
    types.push_back(t);
  }
  for (auto& name : split(o.op == "all" ? "sum,prod,min,max,avg" : o.op)) {
    weftRedOp_t op;
    if (!parse_op(name, &op)) return std::fprintf(stderr, "weft-perf: unknown op '%s'\n", name.c_str()), false;
    ops.push_back(op);
  }
  return true;
}

// The send and receive buffers, allocated once at the largest size and touched now.
bool allocate(Bench& b, const std::vector<SizeSpec>& sizes) {
  const Opts& o = b.o;
  size_t max_bytes = 0;
  for (auto& s : sizes) max_bytes = std::max(max_bytes, s.bytes);
  max_bytes = (max_bytes + 63) / 64 * 64;
  // Allocated once at the largest size and touched now, so no call pays for first-touch faults.
  const size_t alloc_bytes = (max_bytes + 2 * kGuard + 4095) / 4096 * 4096;
  if (o.shared) {  // collective: every rank the same size
    void *sp = nullptr, *rp = nullptr;
    WCHECK(weftMemAlloc(b.comm, alloc_bytes, &sp));
    WCHECK(weftMemAlloc(b.comm, alloc_bytes, &rp));
    b.send_base = static_cast<unsigned char*>(sp);
    b.recv_base = static_cast<unsigned char*>(rp);
  } else {
    b.send_base = static_cast<unsigned char*>(std::aligned_alloc(4096, alloc_bytes));
    b.recv_base = static_cast<unsigned char*>(std::aligned_alloc(4096, alloc_bytes));
  }
  if (!b.send_base || !b.recv_base) return std::fprintf(stderr, "weft-perf: out of memory\n"), false;
  std::memset(b.send_base, 0, max_bytes + 2 * kGuard);
  std::memset(b.recv_base, 0, max_bytes + 2 * kGuard);

  return true;
}

// What the figures mean: how calls were made, the sizes with their timed and warm-up calls, how
// ranks' times combine, and whether results were checked.
std::string how_measured(const Opts& o, bool several, const std::vector<SizeSpec>& sizes) {
  std::string how = std::string(o.blocking ? "blocking" : "non-blocking") + " calls, time " +
                    (o.average == 0 ? "of rank 0" : o.average == 1 ? "averaged over ranks" : o.average == 2 ? "min over ranks" : "max over ranks") +
                    " (-a " + std::to_string(o.average) + "), results " + (o.check ? "checked" : "not checked") +
                    (o.algo.empty() ? "" : (several ? ", algorithms " : ", WEFT_ALGO=") + o.algo) + "\n# sizes (B:timed:warm-up):";
  for (size_t k = 0; k < sizes.size(); ++k) {
    if (k == 8 && sizes.size() > 10) {
      how += " ... " + std::to_string(sizes.size() - 9) + " more ...";
      k = sizes.size() - 1;
    }
    how += " " + std::to_string(sizes[k].bytes) + ":" + std::to_string(sizes[k].iters) + ":" + std::to_string(sizes[k].warmup);
  }
  return how;
}

}  // namespace

int main(int argc, char** argv) {
  Bench b;
  Opts& o = b.o;
  CLI::App app{"weft-perf: Weft's collectives, measured and checked as nccl-tests does"};
  std::vector<std::string> c_values;  // -c is both nccl-tests' check (0/1) and the collective here
  add_options(app, o, c_values);
  CLI11_PARSE(app, argc, argv);
  std::vector<SizeSpec> sizes;
  try {
    sizes = size_list(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "weft-perf: %s\n", e.what());
    return 2;
  }
  if (o.ceiling) {
    std::vector<size_t> bytes;
    for (auto& s : sizes) bytes.push_back(s.bytes);
    int threads = o.threads > 0 ? o.threads : 2;
    print_ceiling(measure_ceiling(bytes, threads), threads, o.csv);
    return 0;
  }
  Choices ch;
  if (!parse_choices(o, c_values, ch)) return 2;
  const auto& colls = ch.colls;
  const auto& types = ch.types;
  const auto& ops = ch.ops;
  std::vector<std::string> algos = split(o.algo);
  if (algos.size() == 1 && algos[0] != "auto") setenv("WEFT_ALGO", algos[0].c_str(), 1);
  if (algos.size() == 1 && algos[0] == "auto") unsetenv("WEFT_ALGO");
  const bool several = algos.size() > 1;
  if (!several) algos = {""};

  WCHECK(weftCommInitFromEnv(&b.comm));
  WCHECK(weftCommRank(b.comm, &b.rank));
  WCHECK(weftCommCount(b.comm, &b.n));
  if (several)  // every name checked before anything runs
    for (const std::string& a : algos) WCHECK(weftCommSetAlgorithm(b.comm, a == "auto" ? "" : a.c_str()));
  if (o.root < 0 || o.root >= b.n) return std::fprintf(stderr, "weft-perf: root %d out of range\n", o.root), 2;
  if (!allocate(b, sizes)) return 2;

  const bool table = b.rank == 0 && o.csv != "-" && o.json != "-";
  Report rep(b.rank == 0 ? o.csv : "", b.rank == 0 ? o.json : "", table, several);
  // Progress on stderr: on a terminal one line, erased before each row is printed; without one a
  // line every 10 s (a long -c all -d all run is not silent).
  const bool progress = b.rank == 0 && isatty(2);
  auto last_note = std::chrono::steady_clock::now();
  size_t total_steps = 0, step = 0;
  for (Coll c : colls) total_steps += sizes.size() * algos.size() * types.size() * (coll_reduces(c) ? ops.size() : 1);
  double bw_sum = 0;
  int bw_n = 0;
  for (Coll c : colls) {
    const std::string how = how_measured(o, several, sizes);
    rep.header(coll_name(c), b.n, how);
    for (const TypeInfo* t : types)
      for (weftRedOp_t op : coll_reduces(c) ? ops : std::vector<weftRedOp_t>{weftSum})
        for (auto& sz : sizes)
          for (const std::string& algo : algos) {
            if (several) WCHECK(weftCommSetAlgorithm(b.comm, algo == "auto" ? "" : algo.c_str()));
            ++step;
            if (progress) {
              std::fprintf(stderr, "\r[%zu/%zu] %s %s %zu B   ", step, total_steps, coll_name(c), t->name, sz.bytes);
            } else if (b.rank == 0 && std::chrono::steady_clock::now() - last_note > std::chrono::seconds(10)) {
              last_note = std::chrono::steady_clock::now();
              std::fprintf(stderr, "weft-perf: [%zu/%zu] %s %s %zu B\n", step, total_steps, coll_name(c), t->name, sz.bytes);
            }
            Row row;
            row.coll = coll_name(c), row.type = t->name, row.op = coll_reduces(c) ? op_name(op) : "none";
            row.nranks = b.n;
            row.root = coll_rooted(c) ? o.root : -1;
            row.algo = algo;
            const Shape sh = make_shape(c, sz.bytes / t->size, b.n, b.rank);
            row.count = sh.total, row.bytes = sh.total * t->size;
            row.oop = run_one(b, c, *t, op, sz, false);
            if (c != Coll::kSendRecv) row.ip = run_one(b, c, *t, op, sz, true);
            row.ran = row.ip.ran ? row.ip.algorithm : row.oop.algorithm;
            for (const Half* h : {&row.oop, &row.ip})
              if (h->ran) bw_sum += h->busbw, ++bw_n;
            if (progress) std::fprintf(stderr, "\r%60s\r", "");
            if (b.rank == 0) rep.row(row);
          }
  }
  if (progress) std::fprintf(stderr, "\r%60s\r", "");
  if (b.rank == 0) rep.footer(b.oob, bw_n ? bw_sum / bw_n : 0);
  if (o.shared) {
    WCHECK(weftMemFree(b.comm, b.send_base));
    WCHECK(weftMemFree(b.comm, b.recv_base));
  }
  WCHECK(weftCommDestroy(b.comm));
  if (!o.shared) {
    std::free(b.send_base);
    std::free(b.recv_base);
  }
  return b.failed ? 1 : 0;
}
