// weft::Error: the one error type inside Weft. It carries a code (mapped 1:1 to weftResult_t at
// the C boundary) and a message that names the problem.
#pragma once
#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace weft {

enum class ErrorCode : int {
  kSuccess = 0,
  kInvalidArgument = 1,
  kInvalidUsage = 2,
  kSystemError = 3,
  kRemoteError = 4,
  kTimeout = 5,
  kInternalError = 6,
};

const char* error_code_name(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, std::string message) : std::runtime_error(std::move(message)), code_(code) {}
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

template <typename... Args>
[[noreturn]] void fail(ErrorCode code, fmt::format_string<Args...> f, Args&&... args) {
  throw Error(code, fmt::format(f, std::forward<Args>(args)...));
}

// Throws kInvalidArgument with the message when cond is false.
template <typename... Args>
void require(bool cond, fmt::format_string<Args...> f, Args&&... args) {
  if (!cond) throw Error(ErrorCode::kInvalidArgument, fmt::format(f, std::forward<Args>(args)...));
}

// Throws kSystemError naming the failing call and errno's text.
[[noreturn]] void fail_errno(const char* what);

}  // namespace weft
