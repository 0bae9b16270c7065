#include "overlap/compression.h"

#include <immintrin.h>

#include <cstring>

#include "collectives/reduce_kernels.h"

namespace weft::overlap {

std::string_view compression_name(Compression c) {
  switch (c) {
    case Compression::kNone: return "none";
    case Compression::kFloat16: return "fp16";
    case Compression::kBfloat16: return "bf16";
  }
  return "?";
}

bool parse_compression(std::string_view t, Compression* out) {
  if (t == "none") *out = Compression::kNone;
  else if (t == "fp16" || t == "float16") *out = Compression::kFloat16;
  else if (t == "bf16" || t == "bfloat16") *out = Compression::kBfloat16;
  else return false;
  return true;
}

namespace {

bool have_f16c() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  return yes;
}

// bfloat16 by integer rounding (nearest even); NaN stays a quiet NaN. Written so that it
// vectorises.
inline uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  bool nan = (u & 0x7fffffffu) > 0x7f800000u;
  return static_cast<uint16_t>(nan ? ((u >> 16) | 0x40u) : rounded);
}
inline float from_bf16(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

__attribute__((target("avx2,f16c"))) void f16_out_f16c(const float* in, uint16_t* out, uint64_t n, float scale) {
  uint64_t i = 0;
  __m256 s = _mm256_set1_ps(scale);
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_mul_ps(_mm256_loadu_ps(in + i), s);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  for (; i < n; ++i) out[i] = float_to_half(in[i] * scale);
}

__attribute__((target("avx2,f16c"))) void f16_in_f16c(const uint16_t* in, float* out, uint64_t n) {
  uint64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) out[i] = half_to_float(in[i]);
}

__attribute__((target("avx2"))) void bf16_out_avx2(const float* in, uint16_t* out, uint64_t n, float scale) {
  for (uint64_t i = 0; i < n; ++i) out[i] = to_bf16(in[i] * scale);
}
__attribute__((target("avx2"))) void bf16_in_avx2(const uint16_t* in, float* out, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) out[i] = from_bf16(in[i]);
}

}  // namespace

void compress(Compression c, const float* in, uint16_t* out, uint64_t n, float scale) {
  if (c == Compression::kFloat16) {
    if (have_f16c()) return f16_out_f16c(in, out, n, scale);
    for (uint64_t i = 0; i < n; ++i) out[i] = float_to_half(in[i] * scale);
  } else if (c == Compression::kBfloat16) {
    if (have_f16c()) return bf16_out_avx2(in, out, n, scale);
    for (uint64_t i = 0; i < n; ++i) out[i] = to_bf16(in[i] * scale);
  }
}

void decompress(Compression c, const uint16_t* in, float* out, uint64_t n) {
  if (c == Compression::kFloat16) {
    if (have_f16c()) return f16_in_f16c(in, out, n);
    for (uint64_t i = 0; i < n; ++i) out[i] = half_to_float(in[i]);
  } else if (c == Compression::kBfloat16) {
    if (have_f16c()) return bf16_in_avx2(in, out, n);
    for (uint64_t i = 0; i < n; ++i) out[i] = from_bf16(in[i]);
  }
}

}  // namespace weft::overlap
