// Gradient compression on the wire: a float32 bucket is converted to a 16-bit buffer (float16 or
// bfloat16, round to nearest even), all-reduced, and converted back.
#pragma once
#include <cstdint>
#include <string_view>

namespace weft::overlap {

enum class Compression : uint8_t { kNone = 0, kFloat16 = 1, kBfloat16 = 2 };

std::string_view compression_name(Compression c);  // "none", "fp16", "bf16"
bool parse_compression(std::string_view text, Compression* out);

// out[i] = to16(in[i] * scale).
void compress(Compression c, const float* in, uint16_t* out, uint64_t n, float scale);
// out[i] = to32(in[i]).
void decompress(Compression c, const uint16_t* in, float* out, uint64_t n);

}  // namespace weft::overlap
