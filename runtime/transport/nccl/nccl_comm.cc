#include "runtime/transport/nccl/nccl_comm.h"

#include <cstring>
#include <thread>

#include "runtime/base/log.h"
#include "runtime/base/waiter.h"
#include "runtime/transport/nccl/device.h"
#include "runtime/transport/nccl/nccl_map.h"
#include "runtime/transport/nccl/unique_id.h"

namespace weft::nccl {

using Clock = std::chrono::steady_clock;

namespace {

// Yield first (the latency of a small collective), then sleep briefly: a waiting rank costs
// little CPU, which matters when ranks outnumber cores. No spin: a GPU collective takes longer.
Waiter nccl_waiter() { return Waiter(std::chrono::microseconds(0), std::chrono::microseconds(500)); }
constexpr auto kNap = std::chrono::microseconds(50);

ncclConfig_t nonblocking_config() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  return config;
}

}  // namespace

std::unique_ptr<NcclComm> NcclComm::create(Store& store, int rank, int size, int device, const WaitCtl& ctl) {
  cuda_check(cudaSetDevice(device), "cudaSetDevice");
  auto left = std::chrono::duration_cast<Millis>(ctl.deadline - Clock::now());
  Bytes id = exchange_unique_id(
      store, "nccl/uid", rank, sizeof(ncclUniqueId),
      [] {
        ncclUniqueId u{};
        check(ncclGetUniqueId(&u), "ncclGetUniqueId");
        Bytes b(sizeof u);
        std::memcpy(b.data(), &u, sizeof u);
        return b;
      },
      std::max(left, Millis(1)));
  ncclUniqueId uid{};
  std::memcpy(&uid, id.data(), sizeof uid);
  std::unique_ptr<NcclComm> c(new NcclComm(rank, size, device));
  {
    std::lock_guard<std::mutex> lock(c->mu_);
    ncclConfig_t config = nonblocking_config();
    ncclResult_t r = ncclCommInitRankConfig(&c->comm_, size, uid, rank, &config);
    if (r != ncclSuccess && r != ncclInProgress) {
      if (c->comm_) c->abort_locked("ncclCommInitRankConfig failed");
      check(r, "ncclCommInitRankConfig");
    }
  }
  c->settle(ctl);
  c->init_stream();
  WEFT_LOG_INFO("NCCL communicator ready: rank {}/{} on device {}", rank, size, device);
  return c;
}

void NcclComm::init_stream() {
  // A blocking stream: it orders with the legacy default stream, so a kernel that wrote the buffer
  // on stream 0 finishes before the collective reads it.
  cuda_check(cudaStreamCreate(&stream_), "cudaStreamCreate");
}

NcclComm::~NcclComm() {
  std::lock_guard<std::mutex> lock(mu_);
  if (cudaSetDevice(device_) != cudaSuccess) cudaGetLastError();
  if (comm_) {
    // Finalize flushes what is in flight; bounded, then abort rather than hang in a destructor.
    ncclResult_t r = ncclCommFinalize(comm_);
    ncclResult_t st = r;
    if (r == ncclSuccess || r == ncclInProgress) {
      const auto deadline = Clock::now() + std::chrono::seconds(10);
      Waiter waiter = nccl_waiter();
      for (auto now = Clock::now(); ncclCommGetAsyncError(comm_, &st) == ncclSuccess && st == ncclInProgress && now < deadline;
           now = Clock::now())
        if (waiter.idle(now) == Waiter::Phase::kSleep) std::this_thread::sleep_for(kNap);
    }
    if (st == ncclSuccess) {
      ncclCommDestroy(comm_);
    } else {
      WEFT_LOG_WARN("NCCL finalize: {}; aborting the NCCL communicator", describe(st));
      ncclCommAbort(comm_);
    }
    comm_ = nullptr;
  }
  if (stream_ && cudaStreamDestroy(stream_) != cudaSuccess) cudaGetLastError();
}

std::string NcclComm::failure() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failure_;
}

void NcclComm::abort_locked(const std::string& why) {
  if (failure_.empty()) failure_ = why;
  if (comm_) {
    ncclCommAbort(comm_);  // ends kernels in flight; the handle is gone afterwards
    comm_ = nullptr;
  }
}

void NcclComm::abort(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  abort_locked(why);
}

void NcclComm::fail_locked(ErrorCode code, const std::string& why) {
  abort_locked(why);
  throw Error(code, why);
}

void NcclComm::check_locked(const WaitCtl& ctl, Clock::time_point now) {
  if (!comm_) throw Error(ErrorCode::kRemoteError, fmt::format("{}: the NCCL communicator was aborted: {}", ctl.what, failure_));
  ncclResult_t st = ncclSuccess;
  ncclResult_t r = ncclCommGetAsyncError(comm_, &st);
  if (r != ncclSuccess) fail_locked(error_code_of(r), fmt::format("{}: ncclCommGetAsyncError: {}", ctl.what, describe(r)));
  if (st != ncclSuccess && st != ncclInProgress) {
    fail_locked(error_code_of(st), fmt::format("{}: NCCL reported {}", ctl.what, describe(st)));
  }
  if (ctl.abort && ctl.abort->load()) fail_locked(ErrorCode::kRemoteError, fmt::format("{}: aborted (weftCommAbort)", ctl.what));
  if (now > ctl.deadline) {
    fail_locked(ErrorCode::kTimeout, fmt::format("{}: NCCL did not finish before the deadline (WEFT_TIMEOUT_MS); the NCCL "
                                                 "communicator was aborted", ctl.what));
  }
}

void NcclComm::watch(const WaitCtl& ctl, Clock::time_point now, Every& poll) {
  if (!ctl.poll || !poll.due(now)) return;
  try {
    ctl.poll();
  } catch (const std::exception& e) {
    abort(e.what());
    throw;
  }
}

void NcclComm::settle(const WaitCtl& ctl) {
  wait_until(
      [&] {
        std::lock_guard<std::mutex> lock(mu_);
        ncclResult_t st = ncclSuccess;
        return comm_ && ncclCommGetAsyncError(comm_, &st) == ncclSuccess && st == ncclSuccess;
      },
      ctl);
}

void NcclComm::wait_until(const std::function<bool()>& done, const WaitCtl& ctl) {
  Every poll(kWatchdogEvery, Clock::now() + kWatchdogEvery);
  Waiter waiter = nccl_waiter();
  for (;;) {
    bool finished = false;
    try {
      finished = done();
    } catch (const std::exception& e) {
      abort(e.what());
      throw;
    }
    auto now = Clock::now();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (finished) {
        check_locked(ctl, Clock::time_point::min());  // an error raised by the last kernel
        return;
      }
      check_locked(ctl, now);
    }
    watch(ctl, now, poll);
    if (waiter.idle(now) == Waiter::Phase::kSleep) std::this_thread::sleep_for(kNap);
  }
}

void NcclComm::wait_stream(cudaStream_t stream, const WaitCtl& ctl) {
  wait_until(
      [&] {
        cudaError_t q = cudaStreamQuery(stream);
        if (q == cudaSuccess) return true;
        if (q == cudaErrorNotReady) return false;
        cudaGetLastError();
        throw Error(ErrorCode::kSystemError,
                    fmt::format("{}: cudaStreamQuery: {} ({})", ctl.what, cudaGetErrorName(q), cudaGetErrorString(q)));
      },
      ctl);
}

void NcclComm::issue(const std::function<ncclResult_t(ncclComm_t)>& calls, const WaitCtl& ctl) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!comm_) throw Error(ErrorCode::kRemoteError, fmt::format("{}: the NCCL communicator was aborted: {}", ctl.what, failure_));
  ncclResult_t r = calls(comm_);
  if (r == ncclInvalidArgument || r == ncclInvalidUsage) {
    // Rejected before anything was enqueued: the communicator stays usable.
    throw Error(error_code_of(r), fmt::format("{}: NCCL rejected the call: {}", ctl.what, describe(r)));
  }
  if (r != ncclSuccess && r != ncclInProgress) fail_locked(error_code_of(r), fmt::format("{}: {}", ctl.what, describe(r)));
}

void NcclComm::group(const std::function<ncclResult_t(ncclComm_t)>& calls, const WaitCtl& ctl) {
  cuda_check(cudaSetDevice(device_), "cudaSetDevice");
  issue(
      [&](ncclComm_t c) {
        ncclResult_t r = ncclGroupStart();
        if (r != ncclSuccess) return r;
        r = calls(c);
        ncclResult_t end = ncclGroupEnd();  // always closes the group, even after an error
        return r != ncclSuccess && r != ncclInProgress ? r : end;
      },
      ctl);
  settle(ctl);
}

void NcclComm::run(const CollectiveArgs& a, const void* send, void* recv, void* user_stream, const WaitCtl& ctl) {
  cuda_check(cudaSetDevice(device_), "cudaSetDevice");
  cudaStream_t s = user_stream ? static_cast<cudaStream_t>(user_stream) : stream_;
  ncclDataType_t dt = to_nccl(a.dtype);
  ncclRedOp_t op = to_nccl(a.op);
  issue(
      [&](ncclComm_t c) -> ncclResult_t {
        switch (a.kind) {
          case CollectiveKind::kAllReduce: return ncclAllReduce(send, recv, a.count, dt, op, c, s);
          case CollectiveKind::kReduceScatter: return ncclReduceScatter(send, recv, a.count, dt, op, c, s);
          case CollectiveKind::kAllGather: return ncclAllGather(send, recv, a.count, dt, c, s);
          case CollectiveKind::kBroadcast: return ncclBroadcast(send, recv, a.count, dt, a.root, c, s);
          case CollectiveKind::kReduce: return ncclReduce(send, recv, a.count, dt, op, a.root, c, s);
          default:
            throw Error(ErrorCode::kInvalidUsage, fmt::format("{}: not available for device buffers (NCCL path: all-reduce, "
                                                              "reduce-scatter, all-gather, broadcast, reduce)", ctl.what));
        }
      },
      ctl);
  settle(ctl);
  if (!user_stream) wait_stream(stream_, ctl);
}

std::unique_ptr<NcclComm> NcclComm::split(int color, int key, int new_rank, int new_size, const WaitCtl& ctl) {
  cuda_check(cudaSetDevice(device_), "cudaSetDevice");
  std::unique_ptr<NcclComm> child(color < 0 ? nullptr : new NcclComm(new_rank, new_size, device_));
  ncclComm_t handle = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!comm_) throw Error(ErrorCode::kRemoteError, fmt::format("{}: the NCCL communicator was aborted: {}", ctl.what, failure_));
    ncclConfig_t config = nonblocking_config();
    ncclResult_t r = ncclCommSplit(comm_, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &handle, &config);
    if (r != ncclSuccess && r != ncclInProgress) fail_locked(error_code_of(r), fmt::format("{}: ncclCommSplit: {}", ctl.what, describe(r)));
  }
  settle(ctl);
  if (!child) return nullptr;
  if (!handle) fail(ErrorCode::kInternalError, "{}: ncclCommSplit gave no communicator for color {}", ctl.what, color);
  child->comm_ = handle;
  child->settle(ctl);
  child->init_stream();
  return child;
}

}  // namespace weft::nccl
