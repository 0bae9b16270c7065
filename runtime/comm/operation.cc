#include "runtime/comm/operation.h"

namespace weft {

using Clock = std::chrono::steady_clock;

bool Operation::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, timeout, [&] { return done_; })) return false;
  if (code_ != ErrorCode::kSuccess) throw Error(code_, message_);
  return true;
}
bool Operation::test() {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}
bool Operation::failed() {
  std::lock_guard<std::mutex> lock(mu_);
  return done_ && code_ != ErrorCode::kSuccess;
}
ErrorCode Operation::error_code() {
  std::lock_guard<std::mutex> lock(mu_);
  return code_;
}
std::string Operation::error_message() {
  std::lock_guard<std::mutex> lock(mu_);
  return message_;
}
void Operation::reset() {
  args_ = CollectiveArgs{};
  forced_ = nullptr;
  send_ = nullptr;
  recv_ = nullptr;
  seq_ = 0;
  record_ = 0;
  tag_seq_ = 0;
  device_ = -1;
  stream_ = nullptr;
  on_stream_ = false;
  queued_ = false;
  done_ = false;
  code_ = ErrorCode::kSuccess;
  message_.clear();
  elapsed_us_ = 0;
  started_at_ = finished_at_ = {};
}

void Operation::finish(ErrorCode code, std::string message, Clock::time_point end) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    finished_at_ = end != Clock::time_point{} ? end : Clock::now();
    if (started_at_ != Clock::time_point{}) elapsed_us_ = std::chrono::duration<double, std::micro>(finished_at_ - started_at_).count();
    code_ = code;
    message_ = std::move(message);
    done_ = true;
  }
  cv_.notify_all();
}

bool Operation::wait_done(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return done_; });
}

}  // namespace weft
