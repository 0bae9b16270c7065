// The AVX-512 variant (compiled with -mavx512f -mavx512bw -mavx512vl -mf16c -O3 and 512-bit
// vectors preferred; selected only when the CPU has AVX512F/BW/VL and F16C). Like the AVX2
// variant: generic loops auto-vectorised, float16 through VCVTPH2PS/VCVTPS2PH, 16 lanes.
#include <immintrin.h>

#include "collectives/reduce_kernels_impl.h"

namespace weft::kern {
namespace {

struct VSum { static __m512 f(__m512 a, __m512 b) { return _mm512_add_ps(a, b); } };
struct VProd { static __m512 f(__m512 a, __m512 b) { return _mm512_mul_ps(a, b); } };
struct VMin {
  static __m512 f(__m512 a, __m512 b) {
    __mmask16 take_b = _mm512_cmp_ps_mask(b, a, _CMP_LT_OQ) |
                       (_mm512_cmp_ps_mask(b, b, _CMP_UNORD_Q) & _mm512_cmp_ps_mask(a, a, _CMP_ORD_Q));
    return _mm512_mask_blend_ps(take_b, a, b);
  }
};
struct VMax {
  static __m512 f(__m512 a, __m512 b) {
    __mmask16 take_b = _mm512_cmp_ps_mask(b, a, _CMP_GT_OQ) |
                       (_mm512_cmp_ps_mask(b, b, _CMP_UNORD_Q) & _mm512_cmp_ps_mask(a, a, _CMP_ORD_Q));
    return _mm512_mask_blend_ps(take_b, a, b);
  }
};

constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
constexpr __mmask16 kAll = 0xffff;

// The zero-masking forms: GCC 12's unmasked _mm512_cvtph_ps/_mm512_cvtps_ph start from an
// "undefined" vector and trip -Wmaybe-uninitialized; the code generated is the same.
inline __m512 cvtph(__m256i h) { return _mm512_maskz_cvtph_ps(kAll, h); }
inline __m256i cvtps(__m512 f) { return _mm512_maskz_cvtps_ph(kAll, f, kRound); }

template <typename Op>
inline __m256i half16(__m256i a, __m256i b) {
  return cvtps(Op::f(cvtph(a), cvtph(b)));
}

inline __mmask16 tail_mask(size_t left) { return static_cast<__mmask16>((1u << left) - 1u); }

template <typename Op>
void half_loop(void* dst, const void* a, const void* b, size_t n) {
  auto* d = static_cast<uint16_t*>(dst);
  auto* x = static_cast<const uint16_t*>(a);
  auto* y = static_cast<const uint16_t*>(b);
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256i r0 = half16<Op>(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)),
                            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y + i)));
    __m256i r1 = half16<Op>(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i + 16)),
                            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y + i + 16)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), r0);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i + 16), r1);
  }
  for (; i < n; i += 16) {  // masked: lanes past the end are neither read nor written
    const __mmask16 m = n - i >= 16 ? kAll : tail_mask(n - i);
    __m256i r = half16<Op>(_mm256_maskz_loadu_epi16(m, x + i), _mm256_maskz_loadu_epi16(m, y + i));
    _mm256_mask_storeu_epi16(d + i, m, r);
  }
}

void half_avg(void* buf, size_t n, int nranks) {
  auto* p = static_cast<uint16_t*>(buf);
  const __m512 dn = _mm512_set1_ps(static_cast<float>(nranks));
  for (size_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? kAll : tail_mask(n - i);
    __m256i v = _mm256_maskz_loadu_epi16(m, p + i);
    _mm256_mask_storeu_epi16(p + i, m, cvtps(_mm512_div_ps(cvtph(v), dn)));
  }
}

}  // namespace

void fill_table_avx512(KernelTable* t) {
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
