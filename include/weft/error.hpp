// weft::Error: the one error type of Weft's C++ faces (the library inside and weft.hpp outside).
// Its code has the values of weftResult_t.
#ifndef WEFT_ERROR_HPP
#define WEFT_ERROR_HPP

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

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

}  // namespace weft

#endif
