// The reducer's device side (docs/OVERLAP.md, "Device gradients"): when the gradients are CUDA
// device memory (and Weft is built with NCCL), buckets live on the device and every copy, zero-fill
// and all-reduce of the reducer runs on one communication stream, ordered after the gradients'
// producer streams with CUDA events. Nothing here blocks the host except where said. Without NCCL
// device_of() is always -1 and the rest is never reached.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>

namespace weft::overlap {

class DeviceSide {
 public:
  // The CUDA device of p, or -1 for host memory, null, or a build without NCCL.
  static int device_of(const void* p);

  explicit DeviceSide(int device);  // creates the communication stream (non-blocking) and events
  ~DeviceSide();                    // waits for the stream, then frees
  DeviceSide(const DeviceSide&) = delete;
  DeviceSide& operator=(const DeviceSide&) = delete;

  int device() const { return device_; }
  void* stream() const { return stream_; }  // the communication stream (cudaStream_t)
  // A zeroed device buffer, freed (cudaFree) when the last reference goes.
  std::shared_ptr<void> alloc(uint64_t bytes);
  // The communication stream waits for what `producer` (a cudaStream_t; null = the legacy default
  // stream) has enqueued so far: an event recorded there, cudaStreamWaitEvent here. No host wait.
  void after(void* producer);
  // On the communication stream, asynchronous: a device-to-device copy; a zero-fill.
  void copy(void* dst, const void* src, uint64_t bytes);
  void zero(void* dst, uint64_t bytes);
  // `consumer` (null = legacy default stream) waits for everything enqueued on the communication
  // stream so far (an event; no host wait).
  void release_to(void* consumer);
  // Blocks the host until the communication stream is idle (bucket (re)builds and teardown only);
  // throws kTimeout after `timeout` (polls cudaStreamQuery).
  void synchronize(std::chrono::milliseconds timeout);

 private:
  int device_;
  void* stream_ = nullptr;  // cudaStream_t
  void* produced_ = nullptr;  // cudaEvent_t recorded on producer streams
  void* done_ = nullptr;      // cudaEvent_t recorded on the communication stream
};

}  // namespace weft::overlap
