// The AVX2 variant (compiled with -mavx2 -mf16c -O3; selected only when the CPU has AVX2 and
// F16C). Integer, float32/64 and bfloat16 loops are the generic ones, auto-vectorised for AVX2;
// float16 converts with F16C (VCVTPH2PS / VCVTPS2PH, round to nearest even) around the same
// float32 operations as every other variant.
#include <immintrin.h>

#include <cstring>

#include "collectives/reduce_kernels_impl.h"

namespace weft::kern {
namespace {

// The same semantics as OpSum/OpProd/OpMin/OpMax in reduce_kernels_impl.h, 8 lanes at a time.
struct VSum { static __m256 f(__m256 a, __m256 b) { return _mm256_add_ps(a, b); } };
struct VProd { static __m256 f(__m256 a, __m256 b) { return _mm256_mul_ps(a, b); } };
struct VMin {
  static __m256 f(__m256 a, __m256 b) {
    __m256 take_b = _mm256_or_ps(_mm256_cmp_ps(b, a, _CMP_LT_OQ),
                                 _mm256_and_ps(_mm256_cmp_ps(b, b, _CMP_UNORD_Q), _mm256_cmp_ps(a, a, _CMP_ORD_Q)));
    return _mm256_blendv_ps(a, b, take_b);
  }
};
struct VMax {
  static __m256 f(__m256 a, __m256 b) {
    __m256 take_b = _mm256_or_ps(_mm256_cmp_ps(b, a, _CMP_GT_OQ),
                                 _mm256_and_ps(_mm256_cmp_ps(b, b, _CMP_UNORD_Q), _mm256_cmp_ps(a, a, _CMP_ORD_Q)));
    return _mm256_blendv_ps(a, b, take_b);
  }
};

constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

template <typename Op>
inline __m128i half8(__m128i a, __m128i b) {
  return _mm256_cvtps_ph(Op::f(_mm256_cvtph_ps(a), _mm256_cvtph_ps(b)), kRound);
}

template <typename Op>
void half_loop(void* dst, const void* a, const void* b, size_t n) {
  auto* d = static_cast<unsigned char*>(dst);
  auto* x = static_cast<const unsigned char*>(a);
  auto* y = static_cast<const unsigned char*>(b);
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {  // 64 bytes per operand per iteration
    __m128i r[4];
    for (int k = 0; k < 4; ++k) {
      r[k] = half8<Op>(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + 2 * (i + 8 * k))),
                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(y + 2 * (i + 8 * k))));
    }
    for (int k = 0; k < 4; ++k) _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 2 * (i + 8 * k)), r[k]);
  }
  for (; i + 8 <= n; i += 8) {
    __m128i r = half8<Op>(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + 2 * i)),
                          _mm_loadu_si128(reinterpret_cast<const __m128i*>(y + 2 * i)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 2 * i), r);
  }
  if (i < n) {  // tail through a zero-padded block, so that it uses the very same instructions
    const size_t bytes = 2 * (n - i);
    alignas(16) unsigned char ta[16] = {}, tb[16] = {}, td[16];
    std::memcpy(ta, x + 2 * i, bytes);
    std::memcpy(tb, y + 2 * i, bytes);
    _mm_store_si128(reinterpret_cast<__m128i*>(td),
                    half8<Op>(_mm_load_si128(reinterpret_cast<const __m128i*>(ta)),
                              _mm_load_si128(reinterpret_cast<const __m128i*>(tb))));
    std::memcpy(d + 2 * i, td, bytes);
  }
}

void half_avg(void* buf, size_t n, int nranks) {
  auto* p = static_cast<unsigned char*>(buf);
  const __m256 dn = _mm256_set1_ps(static_cast<float>(nranks));
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i* q = reinterpret_cast<__m128i*>(p + 2 * i);
    _mm_storeu_si128(q, _mm256_cvtps_ph(_mm256_div_ps(_mm256_cvtph_ps(_mm_loadu_si128(q)), dn), kRound));
  }
  if (i < n) {
    const size_t bytes = 2 * (n - i);
    alignas(16) unsigned char t[16] = {};
    std::memcpy(t, p + 2 * i, bytes);
    __m128i* q = reinterpret_cast<__m128i*>(t);
    _mm_store_si128(q, _mm256_cvtps_ph(_mm256_div_ps(_mm256_cvtph_ps(_mm_load_si128(q)), dn), kRound));
    std::memcpy(p + 2 * i, t, bytes);
  }
}

}  // namespace

void fill_table_avx2(KernelTable* t) {
  fill_generic(t);
  const int h = static_cast<int>(DataType::kFloat16);
  t->reduce[h][static_cast<int>(RedOp::kSum)] = &half_loop<VSum>;
  t->reduce[h][static_cast<int>(RedOp::kAvg)] = &half_loop<VSum>;
  t->reduce[h][static_cast<int>(RedOp::kProd)] = &half_loop<VProd>;
  t->reduce[h][static_cast<int>(RedOp::kMin)] = &half_loop<VMin>;
  t->reduce[h][static_cast<int>(RedOp::kMax)] = &half_loop<VMax>;
  t->finish_avg[h] = &half_avg;
}

}  // namespace weft::kern
