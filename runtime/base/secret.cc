#include "runtime/base/secret.h"

#include <fstream>

#include "runtime/base/error.h"

namespace weft {

std::string random_secret() {
  std::ifstream in("/dev/urandom", std::ios::binary);
  unsigned char b[32];
  if (!in.read(reinterpret_cast<char*>(b), sizeof b)) fail(ErrorCode::kSystemError, "cannot read /dev/urandom");
  std::string out;
  for (unsigned char c : b) out += fmt::format("{:02x}", c);
  return out;
}

}  // namespace weft
