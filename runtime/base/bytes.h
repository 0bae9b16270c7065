// Byte strings and the millisecond timeouts used with them (store values, wire records).
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace weft {

using Bytes = std::vector<uint8_t>;
using Millis = std::chrono::milliseconds;

inline Bytes to_bytes(const std::string& s) { return Bytes(s.begin(), s.end()); }
inline std::string to_string(const Bytes& b) { return std::string(b.begin(), b.end()); }

}  // namespace weft
