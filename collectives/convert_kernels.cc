// Conversion kernels (convert_kernels.h). Built with -O3 -ffp-contract=off like the reduction
// kernels; float16 uses F16C (target attribute, chosen at run time) where the CPU has it, else the
// branch-free software conversions, which give the same bits (ConvertKernels.AgreeWithTheScalarConversions).
#include "collectives/convert_kernels.h"

#include <cstdint>

#include "collectives/reduce_kernels_impl.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace weft {
namespace {

using kern::b2f;
using kern::f2b;
using kern::f2h;
using kern::h2f;

#if defined(__x86_64__)
bool have_f16c() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  return yes;
}

__attribute__((target("avx2,f16c"))) size_t half_widen_f16c(float* dst, const uint16_t* s, size_t n, bool add) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i)));
    if (add) v = _mm256_add_ps(_mm256_loadu_ps(dst + i), v);
    _mm256_storeu_ps(dst + i, v);
  }
  return i;
}

__attribute__((target("avx2,f16c"))) size_t half_narrow_f16c(uint16_t* d, const float* s, size_t n, float div) {
  size_t i = 0;
  const __m256 dv = _mm256_set1_ps(div);
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_loadu_ps(s + i);
    if (div != 1.0f) v = _mm256_div_ps(v, dv);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  return i;
}
#else
bool have_f16c() { return false; }
size_t half_widen_f16c(float*, const uint16_t*, size_t, bool) { return 0; }
size_t half_narrow_f16c(uint16_t*, const float*, size_t, float) { return 0; }
#endif

}  // namespace

void widen_to_f32(DataType wire, float* dst, const void* src, size_t n) {
  const auto* s = static_cast<const uint16_t*>(src);
  size_t i = 0;
  if (wire == DataType::kBfloat16) {
    for (; i < n; ++i) dst[i] = b2f(s[i]);
    return;
  }
  if (have_f16c()) i = half_widen_f16c(dst, s, n, false);
  for (; i < n; ++i) dst[i] = h2f(s[i]);
}

void widen_add_f32(DataType wire, float* dst, const void* src, size_t n) {
  const auto* s = static_cast<const uint16_t*>(src);
  size_t i = 0;
  if (wire == DataType::kBfloat16) {
    for (; i < n; ++i) dst[i] += b2f(s[i]);
    return;
  }
  if (have_f16c()) i = half_widen_f16c(dst, s, n, true);
  for (; i < n; ++i) dst[i] += h2f(s[i]);
}

void narrow_from_f32(DataType wire, void* dst, const float* src, size_t n, int divisor) {
  auto* d = static_cast<uint16_t*>(dst);
  const float div = divisor > 1 ? static_cast<float>(divisor) : 1.0f;
  size_t i = 0;
  if (wire == DataType::kBfloat16) {
    if (div == 1.0f)
      for (; i < n; ++i) d[i] = f2b(src[i]);
    else
      for (; i < n; ++i) d[i] = f2b(src[i] / div);
    return;
  }
  if (have_f16c()) i = half_narrow_f16c(d, src, n, div);
  if (div == 1.0f)
    for (; i < n; ++i) d[i] = f2h(src[i]);
  else
    for (; i < n; ++i) d[i] = f2h(src[i] / div);
}

void add_f32(float* acc, const float* src, size_t n) {
  for (size_t i = 0; i < n; ++i) acc[i] += src[i];
}

}  // namespace weft
