// Weft's C++ face: a RAII communicator, work handles and exceptions, over the stable C API.
//
//   weft::Comm comm = weft::Comm::from_env();
//   comm.all_reduce(grad.data(), grad.data(), grad.size(), weft::Float32, weft::Sum);
//   weft::Work w = comm.all_reduce_async(...);  ...  w.wait();
#ifndef WEFT_WEFT_HPP
#define WEFT_WEFT_HPP

#include <weft/error.hpp>
#include <weft/weft.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace weft {

inline constexpr weftDataType_t Int8 = weftInt8, Uint8 = weftUint8, Int32 = weftInt32, Int64 = weftInt64,
                                Float16 = weftFloat16, Bfloat16 = weftBfloat16, Float32 = weftFloat32,
                                Float64 = weftFloat64;
inline constexpr weftRedOp_t Sum = weftSum, Prod = weftProd, Min = weftMin, Max = weftMax, Avg = weftAvg;

namespace detail {
inline void check(weftResult_t r, weftComm_t comm) {
  if (r == weftSuccess) return;
  std::string msg = comm ? weftCommGetLastError(comm) : weftGetLastErrorMessage();
  if (msg.empty()) msg = weftGetLastErrorMessage();
  throw Error(static_cast<ErrorCode>(r), msg.empty() ? weftGetErrorString(r) : msg);
}
}  // namespace detail

/// The handle of an asynchronous operation. wait() rethrows its error as weft::Error.
class Work {
 public:
  Work() = default;
  Work(weftRequest_t r, weftComm_t c) : req_(r), comm_(c) {}
  Work(Work&& o) noexcept : req_(std::exchange(o.req_, nullptr)), comm_(o.comm_) {}
  Work& operator=(Work&& o) noexcept {
    if (this != &o) {
      finish_quietly();
      req_ = std::exchange(o.req_, nullptr);
      comm_ = o.comm_;
    }
    return *this;
  }
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;
  ~Work() { finish_quietly(); }

  /// Waits; returns false if still running after timeout (negative: the communicator's timeout).
  bool wait(std::chrono::milliseconds timeout = std::chrono::milliseconds(-1)) {
    if (!req_) return true;
    weftResult_t r = weftWait(req_, static_cast<int>(timeout.count()));
    if (r == weftTimeout && timeout.count() >= 0) {
      int done = 0;
      if (weftTest(req_, &done) == weftSuccess && !done) return false;
    }
    req_ = nullptr;
    detail::check(r, comm_);
    return true;
  }
  /// True once the operation has finished (wait() then returns at once).
  bool test() {
    if (!req_) return true;
    int done = 0;
    detail::check(weftTest(req_, &done), comm_);
    return done != 0;
  }

 private:
  void finish_quietly() noexcept {
    if (req_) weftWait(req_, -1);
    req_ = nullptr;
  }
  weftRequest_t req_ = nullptr;
  weftComm_t comm_ = nullptr;
};

/// A communicator, destroyed with the object.
class Comm {
 public:
  Comm() = default;
  explicit Comm(weftComm_t c) : c_(c) {}
  Comm(Comm&& o) noexcept : c_(std::exchange(o.c_, nullptr)) {}
  Comm& operator=(Comm&& o) noexcept {
    if (this != &o) {
      reset();
      c_ = std::exchange(o.c_, nullptr);
    }
    return *this;
  }
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;
  ~Comm() { reset(); }

  /// The world communicator of the job described by the environment (mpirun, weftrun, WEFT_*).
  static Comm from_env() {
    weftComm_t c = nullptr;
    detail::check(weftCommInitFromEnv(&c), nullptr);
    return Comm(c);
  }
  weftComm_t get() const { return c_; }
  explicit operator bool() const { return c_ != nullptr; }
  void reset() {
    if (c_) weftCommDestroy(c_);
    c_ = nullptr;
  }

  int rank() const { return get_int(weftCommRank); }
  int size() const { return get_int(weftCommCount); }
  int local_rank() const { return get_int(weftCommLocalRank); }
  int local_size() const { return get_int(weftCommLocalCount); }

  Comm split(int color, int key) const {
    weftComm_t n = nullptr;
    detail::check(weftCommSplit(c_, color, key, &n), c_);
    return Comm(n);
  }
  // weftCommSplitLevel: the ranks of this node (weftLevelNode) or of this rank's rail (weftLevelRail).
  Comm split_level(weftLevel_t level) const {
    weftComm_t n = nullptr;
    detail::check(weftCommSplitLevel(c_, level, &n), c_);
    return Comm(n);
  }
  // weftCommShrink: the survivors' communicator. exclude empty: the ranks that failed, agreed
  // among the survivors; else the ranks to leave out (the same on every survivor).
  Comm shrink(const std::vector<int>& exclude = {}) const {
    weftComm_t n = nullptr;
    detail::check(weftCommShrink(c_, exclude.empty() ? nullptr : exclude.data(), static_cast<int>(exclude.size()), &n), c_);
    return Comm(n);
  }
  // weftMemAlloc (collective, the same size on every rank) and weftMemFree: buffers in memory every
  // rank of the node maps; all-reduces on them run without copies.
  void* mem_alloc(size_t bytes) const {
    void* p = nullptr;
    detail::check(weftMemAlloc(c_, bytes, &p), c_);
    return p;
  }
  void mem_free(void* p) const { detail::check(weftMemFree(c_, p), c_); }
  // weftCommGetFailedRanks: the ranks known to have died, ascending.
  std::vector<int> failed_ranks() const {
    std::vector<int> ranks(static_cast<size_t>(size()));
    int n = 0;
    detail::check(weftCommGetFailedRanks(c_, ranks.data(), &n), c_);
    ranks.resize(static_cast<size_t>(n));
    return ranks;
  }
  void abort() { detail::check(weftCommAbort(c_), c_); }
  /// Writes the flight recorder of this process (weftCommDump).
  void dump() { detail::check(weftCommDump(c_), c_); }
  // weftCommSetAlgorithm: "" restores the automatic choice.
  void set_algorithm(const std::string& algorithm) { detail::check(weftCommSetAlgorithm(c_, algorithm.c_str()), c_); }
  /// weftCommSetDeterministic: reductions combine every element in rank order (docs/DETERMINISM.md).
  void set_deterministic(bool on) { detail::check(weftCommSetDeterministic(c_, on ? 1 : 0), c_); }
  bool deterministic() const {
    int d = 0;
    detail::check(weftCommGetDeterministic(c_, &d), c_);
    return d != 0;
  }
  /// weftAllReduceShards: `send` holds this rank's shards/size() shards of `n` elements each;
  /// the same bits for every rank count that can hold them.
  void all_reduce_shards(const void* send, void* recv, size_t n, int shards, weftDataType_t t, weftRedOp_t op) {
    detail::check(weftAllReduceShards(send, recv, n, shards, t, op, c_), c_);
  }

  void all_reduce(const void* s, void* r, size_t n, weftDataType_t t, weftRedOp_t op) {
    detail::check(weftAllReduce(s, r, n, t, op, c_), c_);
  }
  Work all_reduce_async(const void* s, void* r, size_t n, weftDataType_t t, weftRedOp_t op) {
    weftRequest_t q = nullptr;
    detail::check(weftAllReduceAsync(s, r, n, t, op, c_, &q), c_);
    return Work(q, c_);
  }
  void reduce_scatter(const void* s, void* r, size_t recvcount, weftDataType_t t, weftRedOp_t op) {
    detail::check(weftReduceScatter(s, r, recvcount, t, op, c_), c_);
  }
  Work reduce_scatter_async(const void* s, void* r, size_t recvcount, weftDataType_t t, weftRedOp_t op) {
    weftRequest_t q = nullptr;
    detail::check(weftReduceScatterAsync(s, r, recvcount, t, op, c_, &q), c_);
    return Work(q, c_);
  }
  void all_gather(const void* s, void* r, size_t sendcount, weftDataType_t t) {
    detail::check(weftAllGather(s, r, sendcount, t, c_), c_);
  }
  Work all_gather_async(const void* s, void* r, size_t sendcount, weftDataType_t t) {
    weftRequest_t q = nullptr;
    detail::check(weftAllGatherAsync(s, r, sendcount, t, c_, &q), c_);
    return Work(q, c_);
  }
  void broadcast(const void* s, void* r, size_t n, weftDataType_t t, int root) {
    detail::check(weftBroadcast(s, r, n, t, root, c_), c_);
  }
  Work broadcast_async(const void* s, void* r, size_t n, weftDataType_t t, int root) {
    weftRequest_t q = nullptr;
    detail::check(weftBroadcastAsync(s, r, n, t, root, c_, &q), c_);
    return Work(q, c_);
  }
  void reduce(const void* s, void* r, size_t n, weftDataType_t t, weftRedOp_t op, int root) {
    detail::check(weftReduce(s, r, n, t, op, root, c_), c_);
  }
  void all_to_all(const void* s, void* r, size_t n, weftDataType_t t) { detail::check(weftAllToAll(s, r, n, t, c_), c_); }
  Work all_to_all_async(const void* s, void* r, size_t n, weftDataType_t t) {
    weftRequest_t q = nullptr;
    detail::check(weftAllToAllAsync(s, r, n, t, c_, &q), c_);
    return Work(q, c_);
  }
  /// weftAllToAllv: unequal splits, counts and displacements in elements, one of each per rank
  /// (each vector holds size() entries; checked here, since the C call reads that many).
  void all_to_allv(const void* s, const std::vector<size_t>& sendcounts, const std::vector<size_t>& sdispls, void* r,
                   const std::vector<size_t>& recvcounts, const std::vector<size_t>& rdispls, weftDataType_t t) {
    check_splits("all_to_allv", sendcounts, sdispls, recvcounts, rdispls);
    detail::check(weftAllToAllv(s, sendcounts.data(), sdispls.data(), r, recvcounts.data(), rdispls.data(), t, c_), c_);
  }
  /// The counts are copied when the call is made: the vectors may go at once; the buffers may not.
  Work all_to_allv_async(const void* s, const std::vector<size_t>& sendcounts, const std::vector<size_t>& sdispls, void* r,
                         const std::vector<size_t>& recvcounts, const std::vector<size_t>& rdispls, weftDataType_t t) {
    check_splits("all_to_allv_async", sendcounts, sdispls, recvcounts, rdispls);
    weftRequest_t q = nullptr;
    detail::check(weftAllToAllvAsync(s, sendcounts.data(), sdispls.data(), r, recvcounts.data(), rdispls.data(), t, c_, &q), c_);
    return Work(q, c_);
  }
  void barrier() { detail::check(weftBarrier(c_), c_); }
  void send(const void* s, size_t n, weftDataType_t t, int peer) { detail::check(weftSend(s, n, t, peer, c_), c_); }
  void recv(void* r, size_t n, weftDataType_t t, int peer) { detail::check(weftRecv(r, n, t, peer, c_), c_); }
  /// Receives from whichever rank's message arrives first; returns that rank.
  int recv_any(void* r, size_t n, weftDataType_t t) {
    int src = -1;
    detail::check(weftRecvAnySource(r, n, t, &src, c_), c_);
    return src;
  }
  Work send_async(const void* s, size_t n, weftDataType_t t, int peer) {
    weftRequest_t q = nullptr;
    detail::check(weftSendAsync(s, n, t, peer, c_, &q), c_);
    return Work(q, c_);
  }
  Work recv_async(void* r, size_t n, weftDataType_t t, int peer) {
    weftRequest_t q = nullptr;
    detail::check(weftRecvAsync(r, n, t, peer, c_, &q), c_);
    return Work(q, c_);
  }

 private:
  void check_splits(const char* fn, const std::vector<size_t>& sc, const std::vector<size_t>& sd, const std::vector<size_t>& rc,
                    const std::vector<size_t>& rd) const {
    const size_t n = static_cast<size_t>(size());
    if (sc.size() != n || sd.size() != n || rc.size() != n || rd.size() != n)
      throw Error(ErrorCode::kInvalidArgument, std::string("weft::Comm::") + fn + ": sendcounts, sdispls, recvcounts and rdispls need " +
                                           std::to_string(n) + " entries each (one per rank); got " + std::to_string(sc.size()) +
                                           ", " + std::to_string(sd.size()) + ", " + std::to_string(rc.size()) + " and " +
                                           std::to_string(rd.size()));
  }
  int get_int(weftResult_t (*fn)(weftComm_t, int*)) const {
    int v = 0;
    detail::check(fn(c_, &v), c_);
    return v;
  }
  weftComm_t c_ = nullptr;
};

/// weftGroupStart / weftGroupEnd as a scope: the blocking calls made while it lives are posted
/// together and waited for when it ends (end() throws the first error; the destructor swallows it).
class Group {
 public:
  Group() { detail::check(weftGroupStart(), nullptr); }
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;
  ~Group() {
    if (open_) weftGroupEnd();
  }
  void end() {
    open_ = false;
    detail::check(weftGroupEnd(), nullptr);
  }

 private:
  bool open_ = true;
};

}  // namespace weft

#endif
