// The AVX-512 variant (compiled with -mavx512f -mavx512bw -mavx512vl -mf16c -O3 and 512-bit
// vectors preferred; selected only when the CPU has AVX512F/BW/VL and F16C). Like the AVX2
// variant: generic loops auto-vectorised; float16 (VCVTPH2PS/VCVTPS2PH) and bfloat16 (unpack /
// integer rounding / pack) hand-written, 16 lanes of float32, with masked tails.
// GCC 12's AVX-512 headers build "undefined" vectors as self-initialised variables, which trips
// -Wmaybe-uninitialized at every intrinsic (GCC PR 105593, fixed in GCC 13). This file only.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include "collectives/reduce_kernels_impl.h"

namespace weft::kern {
namespace {

// The same semantics as OpSum/OpProd/OpMin/OpMax in reduce_kernels_impl.h.
struct VSum { __m512 operator()(__m512 a, __m512 b) const { return _mm512_add_ps(a, b); } };
struct VProd { __m512 operator()(__m512 a, __m512 b) const { return _mm512_mul_ps(a, b); } };
struct VMin {  // MINPS(b, a) = b < a ? b : a; then a NaN b wins
  __m512 operator()(__m512 a, __m512 b) const {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(b, b, _CMP_UNORD_Q), _mm512_min_ps(b, a), b);
  }
};
struct VMax {
  __m512 operator()(__m512 a, __m512 b) const {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(b, b, _CMP_UNORD_Q), _mm512_max_ps(b, a), b);
  }
};

// Block policies as in reduce_kernels_avx2.cc, twice as wide. Tails use masked loads/stores:
// lanes past the end are neither read nor written.
struct F16 {  // VCVTPH2PS / VCVTPS2PH, round to nearest even
  static constexpr size_t kBlock = 16;
  template <typename Op>
  static void step(const uint16_t* x, const uint16_t* y, uint16_t* d, const Op& op, __mmask32 m) {
    const __m512 a = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(static_cast<__mmask16>(m), x));
    const __m512 b = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(static_cast<__mmask16>(m), y));
    _mm256_mask_storeu_epi16(d, static_cast<__mmask16>(m), _mm512_cvtps_ph(op(a, b), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
};

struct BF16 {
  static constexpr size_t kBlock = 32;
  // Interleaving with zeros widens (the bfloat16 lands in the high half of each 32-bit lane);
  // VPACKUSDW of the two halves' results restores the order (both work within 128-bit lanes).
  static __m512 lo(__m512i v) { return _mm512_castsi512_ps(_mm512_unpacklo_epi16(_mm512_setzero_si512(), v)); }
  static __m512 hi(__m512i v) { return _mm512_castsi512_ps(_mm512_unpackhi_epi16(_mm512_setzero_si512(), v)); }
  static __m512i round(__m512 f) {  // f2b() per lane, the result in the low 16 bits
    const __m512i x = _mm512_castps_si512(f);
    const __m512i top = _mm512_srli_epi32(x, 16);
    const __m512i lsb = _mm512_and_si512(top, _mm512_set1_epi32(1));
    const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(x, _mm512_set1_epi32(0x7fff)), lsb), 16);
    return _mm512_mask_or_epi32(rounded, _mm512_cmp_ps_mask(f, f, _CMP_UNORD_Q), top, _mm512_set1_epi32(0x40));
  }
  template <typename Op>
  static void step(const uint16_t* x, const uint16_t* y, uint16_t* d, const Op& op, __mmask32 m) {
    const __m512i a = _mm512_maskz_loadu_epi16(m, x);
    const __m512i b = _mm512_maskz_loadu_epi16(m, y);
    _mm512_mask_storeu_epi16(d, m, _mm512_packus_epi32(round(op(lo(a), lo(b))), round(op(hi(a), hi(b)))));
  }
};

template <typename C, typename Op>
void run16(void* dst, const void* a, const void* b, size_t n, const Op& op) {
  auto* d = static_cast<uint16_t*>(dst);
  auto* x = static_cast<const uint16_t*>(a);
  auto* y = static_cast<const uint16_t*>(b);
  constexpr __mmask32 kFull = C::kBlock == 32 ? ~__mmask32{0} : (__mmask32{1} << C::kBlock) - 1;
  size_t i = 0;
  for (; i + 2 * C::kBlock <= n; i += 2 * C::kBlock) {  // two independent blocks per iteration
    C::step(x + i, y + i, d + i, op, kFull);
    C::step(x + i + C::kBlock, y + i + C::kBlock, d + i + C::kBlock, op, kFull);
  }
  for (; i + C::kBlock <= n; i += C::kBlock) C::step(x + i, y + i, d + i, op, kFull);
  if (i < n) C::step(x + i, y + i, d + i, op, (__mmask32{1} << (n - i)) - 1);
}

template <typename C, typename Op>
void loop16(void* dst, const void* a, const void* b, size_t n) { run16<C>(dst, a, b, n, Op()); }

struct VDiv {  // for finish_avg: a / nranks (b is ignored)
  __m512 dn;
  __m512 operator()(__m512 a, __m512) const { return _mm512_div_ps(a, dn); }
};

template <typename C>
void avg16(void* buf, size_t n, int nranks) { run16<C>(buf, buf, buf, n, VDiv{_mm512_set1_ps(static_cast<float>(nranks))}); }

template <typename C>
void fill16(KernelTable* t, DataType type) {
  const int ti = static_cast<int>(type);
  t->reduce[ti][static_cast<int>(RedOp::kSum)] = &loop16<C, VSum>;
  t->reduce[ti][static_cast<int>(RedOp::kAvg)] = &loop16<C, VSum>;
  t->reduce[ti][static_cast<int>(RedOp::kProd)] = &loop16<C, VProd>;
  t->reduce[ti][static_cast<int>(RedOp::kMin)] = &loop16<C, VMin>;
  t->reduce[ti][static_cast<int>(RedOp::kMax)] = &loop16<C, VMax>;
  t->finish_avg[ti] = &avg16<C>;
}

}  // namespace

void fill_table_avx512(KernelTable* t) {
  fill_generic(t);
  fill16<F16>(t, DataType::kFloat16);
  fill16<BF16>(t, DataType::kBfloat16);
}

}  // namespace weft::kern
