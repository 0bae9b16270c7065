// weft::Error: the one error type inside Weft. It carries a code (mapped 1:1 to weftResult_t at
// the C boundary) and a message that names the problem.
#pragma once
#include <fmt/format.h>
#include <weft/error.hpp>

#include <string>

namespace weft {

const char* error_code_name(ErrorCode code);

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
