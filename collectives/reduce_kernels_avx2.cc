// The AVX2 variant (compiled with -mavx2 -mf16c -O3; selected only when the CPU has AVX2 and
// F16C). Integer and float32/64 loops are the generic ones, auto-vectorised for AVX2. The 16-bit
// float types are hand-written, 8 lanes of float32 at a time: float16 converts with F16C
// (VCVTPH2PS / VCVTPS2PH, round to nearest even), bfloat16 widens by a shift and narrows with
// the same integer rounding as f2b() in reduce_kernels_impl.h.
#include <immintrin.h>

#include <cstring>

#include "collectives/reduce_kernels_impl.h"

namespace weft::kern {
namespace {

// The same semantics as OpSum/OpProd/OpMin/OpMax in reduce_kernels_impl.h.
struct VSum { __m256 operator()(__m256 a, __m256 b) const { return _mm256_add_ps(a, b); } };
struct VProd { __m256 operator()(__m256 a, __m256 b) const { return _mm256_mul_ps(a, b); } };
struct VMin {  // MINPS(b, a) = b < a ? b : a; then a NaN b wins
  __m256 operator()(__m256 a, __m256 b) const {
    return _mm256_blendv_ps(_mm256_min_ps(b, a), b, _mm256_cmp_ps(b, b, _CMP_UNORD_Q));
  }
};
struct VMax {
  __m256 operator()(__m256 a, __m256 b) const {
    return _mm256_blendv_ps(_mm256_max_ps(b, a), b, _mm256_cmp_ps(b, b, _CMP_UNORD_Q));
  }
};

// A "block" policy converts kBlock 16-bit elements of a and b to float32, applies op and writes
// kBlock results; all loads of a block precede its stores (dst may be exactly a or b).
struct F16 {  // F16C: VCVTPH2PS / VCVTPS2PH, round to nearest even
  static constexpr size_t kBlock = 8;
  template <typename Op>
  static void step(const unsigned char* x, const unsigned char* y, unsigned char* d, const Op& op) {
    const __m256 a = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x)));
    const __m256 b = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(y)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d), _mm256_cvtps_ph(op(a, b), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
};

struct BF16 {
  static constexpr size_t kBlock = 16;
  // Interleaving with zeros puts each bfloat16 in the high half of a 32-bit lane: the widening
  // shift for free. The lanes come out as {0-3, 8-11} and {4-7, 12-15}; PACKUSDW of the two
  // results puts them back in order (both work within 128-bit lanes).
  static __m256 lo(__m256i v) { return _mm256_castsi256_ps(_mm256_unpacklo_epi16(_mm256_setzero_si256(), v)); }
  static __m256 hi(__m256i v) { return _mm256_castsi256_ps(_mm256_unpackhi_epi16(_mm256_setzero_si256(), v)); }
  // f2b() of reduce_kernels_impl.h per lane, the result in the low 16 bits.
  static __m256i round(__m256 f) {
    const __m256i x = _mm256_castps_si256(f);
    const __m256i top = _mm256_srli_epi32(x, 16);
    const __m256i lsb = _mm256_and_si256(top, _mm256_set1_epi32(1));
    const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7fff)), lsb), 16);
    const __m256i nan = _mm256_or_si256(top, _mm256_set1_epi32(0x40));
    return _mm256_blendv_epi8(rounded, nan, _mm256_castps_si256(_mm256_cmp_ps(f, f, _CMP_UNORD_Q)));
  }
  template <typename Op>
  static void step(const unsigned char* x, const unsigned char* y, unsigned char* d, const Op& op) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y));
    const __m256i r = _mm256_packus_epi32(round(op(lo(a), lo(b))), round(op(hi(a), hi(b))));  // values < 2^16: exact
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d), r);
  }
};

template <typename C, typename Op>
void run16(void* dst, const void* a, const void* b, size_t n, const Op& op) {
  auto* d = static_cast<unsigned char*>(dst);
  auto* x = static_cast<const unsigned char*>(a);
  auto* y = static_cast<const unsigned char*>(b);
  constexpr size_t kBytes = 2 * C::kBlock;
  size_t i = 0;
  for (; i + 2 * C::kBlock <= n; i += 2 * C::kBlock) {  // two independent blocks per iteration
    C::step(x + 2 * i, y + 2 * i, d + 2 * i, op);
    C::step(x + 2 * (i + C::kBlock), y + 2 * (i + C::kBlock), d + 2 * (i + C::kBlock), op);
  }
  for (; i + C::kBlock <= n; i += C::kBlock) C::step(x + 2 * i, y + 2 * i, d + 2 * i, op);
  if (i < n) {  // the tail through a zero-padded block, so that it uses the very same instructions
    const size_t bytes = 2 * (n - i);
    alignas(32) unsigned char ta[kBytes] = {}, tb[kBytes] = {}, td[kBytes];
    std::memcpy(ta, x + 2 * i, bytes);
    std::memcpy(tb, y + 2 * i, bytes);
    C::step(ta, tb, td, op);
    std::memcpy(d + 2 * i, td, bytes);
  }
}

template <typename C, typename Op>
void loop16(void* dst, const void* a, const void* b, size_t n) { run16<C>(dst, a, b, n, Op()); }

struct VDiv {  // for finish_avg: a / nranks (b is ignored)
  __m256 dn;
  __m256 operator()(__m256 a, __m256) const { return _mm256_div_ps(a, dn); }
};

template <typename C>
void avg16(void* buf, size_t n, int nranks) { run16<C>(buf, buf, buf, n, VDiv{_mm256_set1_ps(static_cast<float>(nranks))}); }

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

void fill_table_avx2(KernelTable* t) {
  fill_generic(t);
  fill16<F16>(t, DataType::kFloat16);
  fill16<BF16>(t, DataType::kBfloat16);
}

}  // namespace weft::kern
