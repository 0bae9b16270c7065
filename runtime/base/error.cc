#include "runtime/base/error.h"

#include <cerrno>
#include <cstring>

namespace weft {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kSuccess: return "success";
    case ErrorCode::kInvalidArgument: return "invalid argument";
    case ErrorCode::kInvalidUsage: return "invalid usage";
    case ErrorCode::kSystemError: return "system error";
    case ErrorCode::kRemoteError: return "remote error";
    case ErrorCode::kTimeout: return "timeout";
    case ErrorCode::kInternalError: return "internal error";
  }
  return "unknown error";
}

void fail_errno(const char* what) {
  int e = errno;
  throw Error(ErrorCode::kSystemError, fmt::format("{} failed: {}", what, std::strerror(e)));
}

}  // namespace weft
