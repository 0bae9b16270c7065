// Operation: one submitted collective or point-to-point call, and its handle (the C++ API's
// weft::Work and the C API's weftRequest_t wrap it). wait(timeout) / test(); the error, if any,
// is rethrown by wait() as weft::Error.
#pragma once
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>

#include "collectives/collective.h"
#include "runtime/base/error.h"

namespace weft {

class Communicator;
class OperationQueue;

class Operation {
 public:
  // Waits up to timeout. Returns true when finished successfully, false when still running at the
  // timeout; throws weft::Error when the operation failed.
  bool wait(std::chrono::milliseconds timeout);
  // True when finished (successfully or not); never blocks.
  bool test();
  bool failed();
  ErrorCode error_code();
  std::string error_message();
  double elapsed_us() const { return elapsed_us_; }
  // When the operation began executing and when it finished (steady clock; valid once test()).
  std::chrono::steady_clock::time_point started_at() const { return started_at_; }
  std::chrono::steady_clock::time_point finished_at() const { return finished_at_; }
  const CollectiveArgs& args() const { return args_; }

 private:
  friend class Communicator;
  friend class OperationQueue;
  // `end`: the time the caller read already (default: now).
  void finish(ErrorCode code, std::string message, std::chrono::steady_clock::time_point end = {});
  // Back to the state of a new Operation (only while nothing else holds it).
  void reset();
  // Waits up to timeout for the end, successful or not; true when it ended.
  bool wait_done(std::chrono::milliseconds timeout);

  CollectiveArgs args_;
  const Algorithm* forced_ = nullptr;  // the row WEFT_ALGO / weftCommSetAlgorithm forced when submitted (nullptr: automatic)
  const void* send_ = nullptr;
  void* recv_ = nullptr;
  uint64_t seq_ = 0;
  uint64_t record_ = 0;     // the flight recorder's number: every call of the communicator, in submission order
  uint16_t tag_seq_ = 0;
  int device_ = -1;         // >= 0: device buffers on this CUDA device (the NCCL path)
  void* stream_ = nullptr;  // with on_stream_: the caller's cudaStream_t
  bool on_stream_ = false;  // a ...Stream call: enqueue on stream_ and return
  uint32_t windows_ = 0;    // windows allocated when submitted (ShmDirect::windows_allocated)
  bool queued_ = false;     // handed to the progress thread (the flight recorder has its slot already)
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  ErrorCode code_ = ErrorCode::kSuccess;
  std::string message_;
  double elapsed_us_ = 0;
  std::chrono::steady_clock::time_point started_at_{}, finished_at_{};
};

}  // namespace weft
