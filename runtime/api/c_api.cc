// The C API: argument checks, handle registries (so that a destroyed communicator or a request
// waited twice is an error, not a crash), and weft::Error -> weftResult_t.
#include <weft/weft.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <optional>
#include <unordered_set>

#include "runtime/bootstrap/bootstrap.h"
#include "runtime/api/c_api_internal.h"
#include "runtime/comm/communicator.h"
#include "runtime/base/log.h"
#include "weft/config.h"

struct weftComm {
  std::shared_ptr<weft::Communicator> impl;
};
struct weftRequest {
  std::shared_ptr<weft::Operation> work;
  weftComm_t comm;
};

namespace {

using weft::CollectiveArgs;
using weft::CollectiveKind;
using weft::Error;
using weft::ErrorCode;

std::mutex g_mu;
std::unordered_set<weftComm_t> g_comms;
std::unordered_set<weftRequest_t> g_requests;
thread_local std::string t_last_error;
// live()'s fast path: the communicator this thread found live last, valid while no communicator
// has been destroyed since (g_destroys counts them, under g_mu). A handle is checked against the
// registry only when it changes or after a destroy: no lock per call.
std::atomic<uint64_t> g_destroys{0};
struct LiveCache {
  weftComm_t comm = nullptr;
  weft::Communicator* impl = nullptr;
  uint64_t destroys = 0;
};
thread_local LiveCache t_live;

weftResult_t record(weftComm_t comm, weftResult_t code, const std::string& msg) {
  t_last_error = msg;
  std::lock_guard<std::mutex> lock(g_mu);
  if (comm && g_comms.count(comm)) comm->impl->set_last_error(msg);
  return code;
}

using weft::capi::guarded;

// The communicator behind a live handle. Like NCCL's, a communicator must not be destroyed while
// another thread is still calling it; destroyed before (or never created), it is an error here.
weft::Communicator* live(weftComm_t comm, const char* fn) {
  if (comm && comm == t_live.comm && t_live.destroys == g_destroys.load(std::memory_order_acquire)) return t_live.impl;
  if (!comm) throw Error(ErrorCode::kInvalidArgument, std::string(fn) + ": comm is NULL");
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_comms.count(comm)) {
    throw Error(ErrorCode::kInvalidUsage, std::string(fn) + ": comm is not a live communicator (destroyed, or never created)");
  }
  t_live = {comm, comm->impl.get(), g_destroys.load(std::memory_order_relaxed)};
  return comm->impl.get();
}

void check_enums(const char* fn, int dtype, int op, bool reducing) {
  if (!weft::dtype_valid(dtype)) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: datatype {} is not a weftDataType_t", fn, dtype));
  }
  if (reducing && !weft::redop_valid(op)) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: op {} is not a weftRedOp_t", fn, op));
  }
}

// weftGroupStart / weftGroupEnd (NCCL's ncclGroupStart/End): the blocking calls made between them
// on this thread are posted as they are made and waited for together at the outermost end.
thread_local int t_group_depth = 0;
struct GroupOp {
  weftComm_t comm;
  std::shared_ptr<weft::Operation> work;
};
thread_local std::vector<GroupOp> t_group_ops;

// weftAllToAllv's arrays (one entry per rank) copied into the call's arguments, which keep them
// while the call is in flight; a NULL array is refused, named.
struct VArrays {
  const size_t* send_counts;
  const size_t* send_displs;
  const size_t* recv_counts;
  const size_t* recv_displs;
};
std::shared_ptr<const weft::AllToAllvSplits> copy_splits(const char* fn, const VArrays& v, int size) {
  const std::pair<const size_t*, const char*> arrays[] = {
      {v.send_counts, "sendcounts"}, {v.send_displs, "sdispls"}, {v.recv_counts, "recvcounts"}, {v.recv_displs, "rdispls"}};
  for (const auto& [p, name] : arrays)
    if (!p) throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: {} is NULL (it takes one entry per rank)", fn, name));
  auto s = std::make_shared<weft::AllToAllvSplits>();
  const auto n = static_cast<size_t>(size);
  s->send_counts.assign(v.send_counts, v.send_counts + n);
  s->send_displs.assign(v.send_displs, v.send_displs + n);
  s->recv_counts.assign(v.recv_counts, v.recv_counts + n);
  s->recv_displs.assign(v.recv_displs, v.recv_displs + n);
  return s;
}

weftResult_t start(const char* fn, CollectiveKind kind, const void* send, void* recv, size_t count, int dtype, int op,
                   int root, weftComm_t comm, weftRequest_t* request, void* stream = nullptr, bool on_stream = false,
                   const VArrays* v = nullptr) {
  if (request) *request = nullptr;  // never a stale handle when the call fails
#if !WEFT_HAVE_NCCL
  if (on_stream) return record(comm, weftInvalidUsage, std::string(fn) + ": built without NCCL (no device buffers or streams)");
#endif
  return guarded(comm, [&] {
    auto c = live(comm, fn);
    bool reducing = kind == CollectiveKind::kAllReduce || kind == CollectiveKind::kReduceScatter || kind == CollectiveKind::kReduce;
    check_enums(fn, dtype, op, reducing);
    CollectiveArgs a;
    a.kind = kind;
    a.count = count;
    a.dtype = static_cast<weft::DataType>(dtype);
    a.op = reducing ? static_cast<weft::RedOp>(op) : weft::RedOp::kSum;
    a.root = root;
    if (kind == CollectiveKind::kRecv && root < 0)  // kAnySource is weftRecvAnySource's, not a peer
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: peer {} is outside the communicator (0..{}); weftRecvAnySource receives from any "
                              "source", fn, root, c->size() - 1));
    if (v) {
      a.splits = copy_splits(fn, *v, c->size());
      a.count = a.splits->sent();
    }
    if (on_stream && request) throw Error(ErrorCode::kInternalError, std::string(fn) + ": a stream call cannot also be asynchronous");
    if (!on_stream && !request && t_group_depth == 0) return c->run(a, send, recv);
    auto work = c->submit(a, send, recv, on_stream ? weft::SubmitMode::kOnStream : weft::SubmitMode::kAsync, stream);
    if (!on_stream && !request) {  // a blocking call inside weftGroupStart/End: posted now, waited by weftGroupEnd
      t_group_ops.push_back({comm, std::move(work)});
      return;
    }
    if (request) {
      auto* r = new weftRequest{std::move(work), comm};
      std::lock_guard<std::mutex> lock(g_mu);
      g_requests.insert(r);
      *request = r;
    }
  });
}

weftResult_t need_request(const char* fn, weftComm_t comm, weftRequest_t* request) {
  if (!request) return record(comm, weftInvalidArgument, std::string(fn) + ": request is NULL");
  return weftSuccess;
}

}  // namespace

extern "C" {

weftResult_t weftGetVersion(int* version) {
  if (!version) return record(nullptr, weftInvalidArgument, "weftGetVersion: version is NULL");
  *version = WEFT_VERSION_MAJOR * 10000 + WEFT_VERSION_MINOR * 100 + WEFT_VERSION_PATCH;
  return weftSuccess;
}

const char* weftGetErrorString(weftResult_t result) {
  switch (result) {
    case weftSuccess: return "success";
    case weftInvalidArgument: return "invalid argument";
    case weftInvalidUsage: return "invalid usage";
    case weftSystemError: return "system error";
    case weftRemoteError: return "remote error";
    case weftTimeout: return "timeout";
    case weftInternalError: return "internal error";
    default: return "unknown weftResult_t";
  }
}

const char* weftGetLastErrorMessage(void) { return t_last_error.c_str(); }

const char* weftCommGetLastError(weftComm_t comm) {
  static thread_local std::string copy;
  std::lock_guard<std::mutex> lock(g_mu);
  if (!comm || !g_comms.count(comm)) {
    copy = "not a live communicator";
    return copy.c_str();
  }
  copy = comm->impl->last_error();
  return copy.c_str();
}

weftResult_t weftCommInitFromEnv(weftComm_t* comm) {
  if (!comm) return record(nullptr, weftInvalidArgument, "weftCommInitFromEnv: comm is NULL");
  *comm = nullptr;
  return guarded(nullptr, [&] {
    auto impl = weft::init_world_from_env(weft::process_env());
    auto* c = new weftComm{std::move(impl)};
    std::lock_guard<std::mutex> lock(g_mu);
    g_comms.insert(c);
    *comm = c;
  });
}

weftResult_t weftCommSplit(weftComm_t comm, int color, int key, weftComm_t* newcomm) {
  if (!newcomm) return record(comm, weftInvalidArgument, "weftCommSplit: newcomm is NULL");
  *newcomm = nullptr;
  return guarded(comm, [&] {
    auto impl = live(comm, "weftCommSplit")->split(color, key);
    if (!impl) return;
    auto* c = new weftComm{std::move(impl)};
    std::lock_guard<std::mutex> lock(g_mu);
    g_comms.insert(c);
    *newcomm = c;
  });
}

weftResult_t weftCommSplitLevel(weftComm_t comm, weftLevel_t level, weftComm_t* newcomm) {
  if (!newcomm) return record(comm, weftInvalidArgument, "weftCommSplitLevel: newcomm is NULL");
  *newcomm = nullptr;
  if (level != weftLevelNode && level != weftLevelRail) {
    return record(comm, weftInvalidArgument,
                  fmt::format("weftCommSplitLevel: level {} is not weftLevelNode (0) or weftLevelRail (1)",
                              static_cast<int>(level)));
  }
  return guarded(comm, [&] {
    auto c = live(comm, "weftCommSplitLevel");
    const int node = c->node(), local = c->local_rank();
    auto impl = level == weftLevelNode ? c->split(node, local) : c->split(local, node);
    auto* n = new weftComm{std::move(impl)};
    std::lock_guard<std::mutex> lock(g_mu);
    g_comms.insert(n);
    *newcomm = n;
  });
}

weftResult_t weftCommSetAlgorithm(weftComm_t comm, const char* algorithm) {
  return guarded(comm, [&] { live(comm, "weftCommSetAlgorithm")->set_algorithm(algorithm ? algorithm : ""); });
}

#define WEFT_COMM_GETTER(fn, expr)                                                 \
  weftResult_t fn(weftComm_t comm, int* out) {                                     \
    if (!out) return record(comm, weftInvalidArgument, #fn ": output is NULL");    \
    return guarded(comm, [&] { *out = live(comm, #fn)->expr; });                   \
  }
WEFT_COMM_GETTER(weftCommRank, rank())
WEFT_COMM_GETTER(weftCommCount, size())
WEFT_COMM_GETTER(weftCommLocalRank, local_rank())
WEFT_COMM_GETTER(weftCommLocalCount, local_size())
#undef WEFT_COMM_GETTER

weftResult_t weftCommNode(weftComm_t comm, int* node, int* node_count) {
  if (!node || !node_count) return record(comm, weftInvalidArgument, "weftCommNode: output is NULL");
  return guarded(comm, [&] {
    auto c = live(comm, "weftCommNode");
    *node = c->node();
    *node_count = c->num_nodes();
  });
}

weftResult_t weftCommAbort(weftComm_t comm) {
  return guarded(comm, [&] { live(comm, "weftCommAbort")->abort(); });
}

weftResult_t weftCommDump(weftComm_t comm) {
  return guarded(comm, [&] {
    auto c = live(comm, "weftCommDump");
    if (c->config().trace_buffer == 0) throw Error(ErrorCode::kInvalidUsage, "weftCommDump: the flight recorder is off (WEFT_TRACE_BUFFER=0)");
    if (c->dump("weftCommDump").empty()) throw Error(ErrorCode::kSystemError, "weftCommDump: the dump could not be written (see the log)");
  });
}

weftResult_t weftMemAlloc(weftComm_t comm, size_t bytes, void** ptr) {
  if (!ptr) return record(comm, weftInvalidArgument, "weftMemAlloc: ptr is NULL");
  return guarded(comm, [&] { *ptr = live(comm, "weftMemAlloc")->mem_alloc(bytes); });
}

weftResult_t weftMemFree(weftComm_t comm, void* ptr) {
  return guarded(comm, [&] { live(comm, "weftMemFree")->mem_free(ptr); });
}

weftResult_t weftCommLastAlgorithm(weftComm_t comm, const char** algorithm) {
  if (!algorithm) return record(comm, weftInvalidArgument, "weftCommLastAlgorithm: algorithm is NULL");
  return guarded(comm, [&] { *algorithm = live(comm, "weftCommLastAlgorithm")->last_algorithm(); });
}

weftResult_t weftCommDestroy(weftComm_t comm) {
  return guarded(comm, [&] {
    live(comm, "weftCommDestroy");
    std::shared_ptr<weft::Communicator> c;
    {
      std::lock_guard<std::mutex> lock(g_mu);
      if (!g_comms.erase(comm)) {  // another thread destroyed it just now
        throw Error(ErrorCode::kInvalidUsage, "weftCommDestroy: comm is not a live communicator (destroyed, or never created)");
      }
      g_destroys.fetch_add(1, std::memory_order_release);
      c = std::move(comm->impl);
    }
    delete comm;
    c->destroy();
  });
}

weftResult_t weftCommShrink(weftComm_t comm, const int* excludeRanks, int excludeCount, weftComm_t* newcomm) {
  if (!newcomm) return record(comm, weftInvalidArgument, "weftCommShrink: newcomm is NULL");
  *newcomm = nullptr;
  return guarded(comm, [&] {
    auto c = live(comm, "weftCommShrink");
    if (excludeCount < 0) throw Error(ErrorCode::kInvalidArgument, fmt::format("weftCommShrink: excludeCount is {}", excludeCount));
    if (excludeCount > 0 && !excludeRanks)
      throw Error(ErrorCode::kInvalidArgument, fmt::format("weftCommShrink: excludeRanks is NULL but excludeCount is {}", excludeCount));
    std::optional<std::vector<int>> exclude;
    if (excludeCount > 0) exclude.emplace(excludeRanks, excludeRanks + excludeCount);
    auto impl = c->shrink(exclude);
    auto* n = new weftComm{std::move(impl)};
    std::lock_guard<std::mutex> lock(g_mu);
    g_comms.insert(n);
    *newcomm = n;
  });
}

weftResult_t weftCommGetFailedRanks(weftComm_t comm, int* ranks, int* count) {
  if (!count) return record(comm, weftInvalidArgument, "weftCommGetFailedRanks: count is NULL");
  return guarded(comm, [&] {
    std::vector<int> failed = live(comm, "weftCommGetFailedRanks")->failed_ranks();
    *count = static_cast<int>(failed.size());
    if (ranks) std::copy(failed.begin(), failed.end(), ranks);
  });
}

weftResult_t weftGroupStart(void) {
  ++t_group_depth;
  return weftSuccess;
}

weftResult_t weftGroupEnd(void) {
  if (t_group_depth == 0) return record(nullptr, weftInvalidUsage, "weftGroupEnd: no weftGroupStart on this thread");
  if (--t_group_depth > 0) return weftSuccess;
  std::vector<GroupOp> ops;
  ops.swap(t_group_ops);
  weftResult_t first = weftSuccess;
  for (auto& g : ops) {  // every operation of the group ends (an error does not leave others in flight unwaited)
    weftResult_t rc = guarded(g.comm, [&] {
      while (!g.work->test()) g.work->wait(std::chrono::hours(1));
      if (g.work->failed()) throw Error(g.work->error_code(), g.work->error_message());
    });
    if (first == weftSuccess) first = rc;
  }
  return first;
}

weftResult_t weftWait(weftRequest_t request, int timeout_ms) {
  weftComm_t comm = nullptr;
  return guarded(nullptr, [&] {
    if (!request) throw Error(ErrorCode::kInvalidArgument, "weftWait: request is NULL");
    {
      std::lock_guard<std::mutex> lock(g_mu);
      if (!g_requests.count(request)) {
        throw Error(ErrorCode::kInvalidUsage, "weftWait: request is not live (already waited for, or never created)");
      }
      comm = g_comms.count(request->comm) ? request->comm : nullptr;
    }
    auto timeout = timeout_ms < 0 ? std::chrono::milliseconds(comm ? comm->impl->config().timeout.count() * 2 : 600000)
                                  : std::chrono::milliseconds(timeout_ms);
    if (!request->work->wait(timeout) && !request->work->test()) {
      throw Error(ErrorCode::kTimeout, fmt::format("weftWait: not finished within {} ms (the request stays valid)", timeout.count()));
    }
    {
      std::lock_guard<std::mutex> lock(g_mu);
      g_requests.erase(request);
    }
    auto work = std::move(request->work);
    delete request;
    if (work->failed()) {
      std::string msg = work->error_message();
      if (comm) comm->impl->set_last_error(msg);
      throw Error(work->error_code(), msg);
    }
  });
}

weftResult_t weftTest(weftRequest_t request, int* done) {
  if (!done) return record(nullptr, weftInvalidArgument, "weftTest: done is NULL");
  return guarded(nullptr, [&] {
    std::lock_guard<std::mutex> lock(g_mu);
    if (!request || !g_requests.count(request)) {
      throw Error(ErrorCode::kInvalidUsage, "weftTest: request is not live (already waited for, or never created)");
    }
    *done = request->work->test() ? 1 : 0;
  });
}

weftResult_t weftAllReduce(const void* s, void* r, size_t count, weftDataType_t dt, weftRedOp_t op, weftComm_t comm) {
  return start("weftAllReduce", CollectiveKind::kAllReduce, s, r, count, dt, op, 0, comm, nullptr);
}
weftResult_t weftAllReduceAsync(const void* s, void* r, size_t count, weftDataType_t dt, weftRedOp_t op, weftComm_t comm,
                                weftRequest_t* req) {
  if (auto e = need_request("weftAllReduceAsync", comm, req)) return e;
  return start("weftAllReduceAsync", CollectiveKind::kAllReduce, s, r, count, dt, op, 0, comm, req);
}
weftResult_t weftReduceScatter(const void* s, void* r, size_t count, weftDataType_t dt, weftRedOp_t op, weftComm_t comm) {
  return start("weftReduceScatter", CollectiveKind::kReduceScatter, s, r, count, dt, op, 0, comm, nullptr);
}
weftResult_t weftReduceScatterAsync(const void* s, void* r, size_t count, weftDataType_t dt, weftRedOp_t op,
                                    weftComm_t comm, weftRequest_t* req) {
  if (auto e = need_request("weftReduceScatterAsync", comm, req)) return e;
  return start("weftReduceScatterAsync", CollectiveKind::kReduceScatter, s, r, count, dt, op, 0, comm, req);
}
weftResult_t weftAllGather(const void* s, void* r, size_t count, weftDataType_t dt, weftComm_t comm) {
  return start("weftAllGather", CollectiveKind::kAllGather, s, r, count, dt, 0, 0, comm, nullptr);
}
weftResult_t weftAllGatherAsync(const void* s, void* r, size_t count, weftDataType_t dt, weftComm_t comm, weftRequest_t* req) {
  if (auto e = need_request("weftAllGatherAsync", comm, req)) return e;
  return start("weftAllGatherAsync", CollectiveKind::kAllGather, s, r, count, dt, 0, 0, comm, req);
}
weftResult_t weftBroadcast(const void* s, void* r, size_t count, weftDataType_t dt, int root, weftComm_t comm) {
  return start("weftBroadcast", CollectiveKind::kBroadcast, s, r, count, dt, 0, root, comm, nullptr);
}
weftResult_t weftBroadcastAsync(const void* s, void* r, size_t count, weftDataType_t dt, int root, weftComm_t comm,
                                weftRequest_t* req) {
  if (auto e = need_request("weftBroadcastAsync", comm, req)) return e;
  return start("weftBroadcastAsync", CollectiveKind::kBroadcast, s, r, count, dt, 0, root, comm, req);
}
weftResult_t weftReduce(const void* s, void* r, size_t count, weftDataType_t dt, weftRedOp_t op, int root, weftComm_t comm) {
  return start("weftReduce", CollectiveKind::kReduce, s, r, count, dt, op, root, comm, nullptr);
}
weftResult_t weftReduceAsync(const void* s, void* r, size_t count, weftDataType_t dt, weftRedOp_t op, int root,
                             weftComm_t comm, weftRequest_t* req) {
  if (auto e = need_request("weftReduceAsync", comm, req)) return e;
  return start("weftReduceAsync", CollectiveKind::kReduce, s, r, count, dt, op, root, comm, req);
}
weftResult_t weftAllToAll(const void* s, void* r, size_t count, weftDataType_t dt, weftComm_t comm) {
  return start("weftAllToAll", CollectiveKind::kAllToAll, s, r, count, dt, 0, 0, comm, nullptr);
}
weftResult_t weftAllToAllAsync(const void* s, void* r, size_t count, weftDataType_t dt, weftComm_t comm, weftRequest_t* req) {
  if (auto e = need_request("weftAllToAllAsync", comm, req)) return e;
  return start("weftAllToAllAsync", CollectiveKind::kAllToAll, s, r, count, dt, 0, 0, comm, req);
}
weftResult_t weftAllToAllv(const void* s, const size_t sendcounts[], const size_t sdispls[], void* r, const size_t recvcounts[],
                           const size_t rdispls[], weftDataType_t dt, weftComm_t comm) {
  const VArrays v{sendcounts, sdispls, recvcounts, rdispls};
  return start("weftAllToAllv", CollectiveKind::kAllToAllv, s, r, 0, dt, 0, 0, comm, nullptr, nullptr, false, &v);
}
weftResult_t weftAllToAllvAsync(const void* s, const size_t sendcounts[], const size_t sdispls[], void* r,
                                const size_t recvcounts[], const size_t rdispls[], weftDataType_t dt, weftComm_t comm,
                                weftRequest_t* req) {
  if (auto e = need_request("weftAllToAllvAsync", comm, req)) return e;
  const VArrays v{sendcounts, sdispls, recvcounts, rdispls};
  return start("weftAllToAllvAsync", CollectiveKind::kAllToAllv, s, r, 0, dt, 0, 0, comm, req, nullptr, false, &v);
}
weftResult_t weftBarrier(weftComm_t comm) {
  return start("weftBarrier", CollectiveKind::kBarrier, nullptr, nullptr, 0, weftUint8, 0, 0, comm, nullptr);
}
weftResult_t weftBarrierAsync(weftComm_t comm, weftRequest_t* req) {
  if (auto e = need_request("weftBarrierAsync", comm, req)) return e;
  return start("weftBarrierAsync", CollectiveKind::kBarrier, nullptr, nullptr, 0, weftUint8, 0, 0, comm, req);
}
weftResult_t weftSend(const void* s, size_t count, weftDataType_t dt, int peer, weftComm_t comm) {
  return start("weftSend", CollectiveKind::kSend, s, nullptr, count, dt, 0, peer, comm, nullptr);
}
weftResult_t weftSendAsync(const void* s, size_t count, weftDataType_t dt, int peer, weftComm_t comm, weftRequest_t* req) {
  if (auto e = need_request("weftSendAsync", comm, req)) return e;
  return start("weftSendAsync", CollectiveKind::kSend, s, nullptr, count, dt, 0, peer, comm, req);
}
weftResult_t weftRecv(void* r, size_t count, weftDataType_t dt, int peer, weftComm_t comm) {
  return start("weftRecv", CollectiveKind::kRecv, nullptr, r, count, dt, 0, peer, comm, nullptr);
}
weftResult_t weftRecvAnySource(void* r, size_t count, weftDataType_t dt, int* source, weftComm_t comm) {
  if (!source) return record(comm, weftInvalidArgument, "weftRecvAnySource: source is NULL");
  return guarded(comm, [&] {
    auto c = live(comm, "weftRecvAnySource");
    check_enums("weftRecvAnySource", dt, 0, false);
    CollectiveArgs a;
    a.kind = CollectiveKind::kRecv;
    a.count = count;
    a.dtype = static_cast<weft::DataType>(dt);
    a.root = weft::kAnySource;
    auto work = c->submit(a, nullptr, r, weft::SubmitMode::kAsync);
    while (!work->wait(std::chrono::hours(1))) {
    }
    *source = work->args().root;
  });
}

weftResult_t weftRecvAsync(void* r, size_t count, weftDataType_t dt, int peer, weftComm_t comm, weftRequest_t* req) {
  if (auto e = need_request("weftRecvAsync", comm, req)) return e;
  return start("weftRecvAsync", CollectiveKind::kRecv, nullptr, r, count, dt, 0, peer, comm, req);
}

weftResult_t weftNcclAvailable(int* available) {
  if (!available) return record(nullptr, weftInvalidArgument, "weftNcclAvailable: available is NULL");
  *available = WEFT_HAVE_NCCL;
  return weftSuccess;
}
weftResult_t weftAllReduceStream(const void* s, void* r, size_t count, weftDataType_t dt, weftRedOp_t op, weftComm_t comm,
                                 void* stream) {
  return start("weftAllReduceStream", CollectiveKind::kAllReduce, s, r, count, dt, op, 0, comm, nullptr, stream, true);
}
weftResult_t weftReduceScatterStream(const void* s, void* r, size_t count, weftDataType_t dt, weftRedOp_t op,
                                     weftComm_t comm, void* stream) {
  return start("weftReduceScatterStream", CollectiveKind::kReduceScatter, s, r, count, dt, op, 0, comm, nullptr, stream, true);
}
weftResult_t weftAllGatherStream(const void* s, void* r, size_t count, weftDataType_t dt, weftComm_t comm, void* stream) {
  return start("weftAllGatherStream", CollectiveKind::kAllGather, s, r, count, dt, 0, 0, comm, nullptr, stream, true);
}
weftResult_t weftBroadcastStream(const void* s, void* r, size_t count, weftDataType_t dt, int root, weftComm_t comm,
                                 void* stream) {
  return start("weftBroadcastStream", CollectiveKind::kBroadcast, s, r, count, dt, 0, root, comm, nullptr, stream, true);
}
weftResult_t weftReduceStream(const void* s, void* r, size_t count, weftDataType_t dt, weftRedOp_t op, int root,
                              weftComm_t comm, void* stream) {
  return start("weftReduceStream", CollectiveKind::kReduce, s, r, count, dt, op, root, comm, nullptr, stream, true);
}

}  // extern "C"

namespace weft::capi {
std::shared_ptr<Communicator> comm_of(weftComm_t comm, const char* fn) {
  live(comm, fn);
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_comms.count(comm)) throw Error(ErrorCode::kInvalidUsage, std::string(fn) + ": comm is not a live communicator (destroyed, or never created)");
  return comm->impl;
}
weftResult_t record_error(weftComm_t comm, weftResult_t code, const std::string& msg) { return ::record(comm, code, msg); }
}  // namespace weft::capi
