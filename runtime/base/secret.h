// Random identifiers: the job secret of the store, names of shared-memory segments.
#pragma once
#include <string>

namespace weft {

// 32 random bytes as hex, from /dev/urandom.
std::string random_secret();

}  // namespace weft
