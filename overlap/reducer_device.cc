#include "overlap/reducer_device.h"

#include <thread>

#include "runtime/base/error.h"
#include "weft/config.h"
#if WEFT_HAVE_NCCL
#include <cuda_runtime_api.h>

#include "runtime/transport/nccl/device.h"
#endif

namespace weft::overlap {

#if WEFT_HAVE_NCCL
using nccl::cuda_check;

namespace {
cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }
cudaEvent_t as_event(void* e) { return static_cast<cudaEvent_t>(e); }

// The reducer's device is current for the scope; the caller's current device comes back after
// (mark_ready runs on the framework's threads).
class OnDevice {
 public:
  explicit OnDevice(int device) {
    if (cudaGetDevice(&prev_) != cudaSuccess) {
      cudaGetLastError();
      prev_ = -1;
    }
    if (prev_ != device) cuda_check(cudaSetDevice(device), "cudaSetDevice");
    else prev_ = -1;
  }
  ~OnDevice() {
    if (prev_ >= 0 && cudaSetDevice(prev_) != cudaSuccess) cudaGetLastError();
  }
  OnDevice(const OnDevice&) = delete;
  OnDevice& operator=(const OnDevice&) = delete;

 private:
  int prev_ = -1;
};
}  // namespace

int DeviceSide::device_of(const void* p) {
  nccl::BufferPlace b = nccl::classify(p);
  return b.device ? b.ordinal : -1;
}

DeviceSide::DeviceSide(int device) : device_(device) {
  OnDevice on(device_);
  cudaStream_t s = nullptr;
  cudaEvent_t a = nullptr, b = nullptr;
  // Non-blocking: the legacy default stream does not serialise with it; ordering is by events.
  cuda_check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  stream_ = s;
  cuda_check(cudaEventCreateWithFlags(&a, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  produced_ = a;
  cuda_check(cudaEventCreateWithFlags(&b, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  done_ = b;
}

DeviceSide::~DeviceSide() {
  OnDevice on(device_);
  // The reducer's destructor drained the stream (or aborted the communicator, which ends NCCL's
  // kernels); what is left are copies.
  if (stream_ && cudaStreamSynchronize(as_stream(stream_)) != cudaSuccess) cudaGetLastError();
  if (produced_) cudaEventDestroy(as_event(produced_));
  if (done_) cudaEventDestroy(as_event(done_));
  if (stream_) cudaStreamDestroy(as_stream(stream_));
}

std::shared_ptr<void> DeviceSide::alloc(uint64_t bytes) {
  OnDevice on(device_);
  void* p = nullptr;
  cuda_check(cudaMalloc(&p, bytes ? bytes : 1), "cudaMalloc (reducer bucket)");
  std::shared_ptr<void> owned(p, [](void* q) {
    if (cudaFree(q) != cudaSuccess) cudaGetLastError();
  });
  cuda_check(cudaMemsetAsync(p, 0, bytes, as_stream(stream_)), "cudaMemsetAsync");
  return owned;
}

void DeviceSide::after(void* producer) {
  OnDevice on(device_);
  // Re-recording the one event is safe: cudaStreamWaitEvent waits for the record made before it.
  cuda_check(cudaEventRecord(as_event(produced_), as_stream(producer)), "cudaEventRecord (producer stream)");
  cuda_check(cudaStreamWaitEvent(as_stream(stream_), as_event(produced_), 0), "cudaStreamWaitEvent");
}

void DeviceSide::copy(void* dst, const void* src, uint64_t bytes) {
  OnDevice on(device_);
  cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, as_stream(stream_)), "cudaMemcpyAsync (device to device)");
}

void DeviceSide::zero(void* dst, uint64_t bytes) {
  OnDevice on(device_);
  cuda_check(cudaMemsetAsync(dst, 0, bytes, as_stream(stream_)), "cudaMemsetAsync");
}

void DeviceSide::release_to(void* consumer) {
  OnDevice on(device_);
  cuda_check(cudaEventRecord(as_event(done_), as_stream(stream_)), "cudaEventRecord (communication stream)");
  cuda_check(cudaStreamWaitEvent(as_stream(consumer), as_event(done_), 0), "cudaStreamWaitEvent");
}

void DeviceSide::synchronize(std::chrono::milliseconds timeout) {
  OnDevice on(device_);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    cudaError_t q = cudaStreamQuery(as_stream(stream_));
    if (q == cudaSuccess) return;
    if (q != cudaErrorNotReady) cuda_check(q, "cudaStreamQuery (reducer communication stream)");
    if (std::chrono::steady_clock::now() > deadline) {
      fail(ErrorCode::kTimeout, "reducer: the communication stream did not drain within {} ms", timeout.count());
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

#else  // without NCCL: no device gradients

namespace {
[[noreturn]] void no_device() { fail(ErrorCode::kInvalidUsage, "reducer: device gradients need NCCL: Weft was built without it"); }
}  // namespace

int DeviceSide::device_of(const void*) { return -1; }
DeviceSide::DeviceSide(int device) : device_(device) { no_device(); }
DeviceSide::~DeviceSide() = default;
std::shared_ptr<void> DeviceSide::alloc(uint64_t) { no_device(); }
void DeviceSide::after(void*) { no_device(); }
void DeviceSide::copy(void*, const void*, uint64_t) { no_device(); }
void DeviceSide::zero(void*, uint64_t) { no_device(); }
void DeviceSide::release_to(void*) { no_device(); }
void DeviceSide::synchronize(std::chrono::milliseconds) { no_device(); }

#endif

}  // namespace weft::overlap
