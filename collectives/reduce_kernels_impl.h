// Element-wise building blocks shared by every kernel variant. Each variant's translation unit
// (reduce_kernels_<isa>.cc) includes this file and is compiled with its own -m flags, so
// everything here lives in an anonymous namespace: the code gets internal linkage and a copy
// compiled for AVX-512 can never be merged by the linker into code that runs on other CPUs.
// (For the same reason the variant files call no out-of-line inline functions from other headers.)
//
// The conversions are branch-free so that the compiler can vectorise them; they agree bit for bit
// with the F16C instructions (NaNs are quieted and keep their upper payload bits).
#pragma once
#include <cstddef>
#include <cstdint>

#include "collectives/reduce_kernels_internal.h"

namespace weft::kern {
namespace {

inline uint32_t f2u(float f) { return __builtin_bit_cast(uint32_t, f); }
inline float u2f(uint32_t u) { return __builtin_bit_cast(float, u); }

// binary16 -> binary32 (exact; NaNs quieted like VCVTPH2PS).
inline float h2f(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t em = h & 0x7fffu;
  uint32_t o = em << 13;
  uint32_t exp = o & 0x0f800000u;
  uint32_t normal = o + (112u << 23);                                // rebias 15 -> 127
  uint32_t infnan = (o + (224u << 23)) | (em > 0x7c00u ? 0x00400000u : 0u);
  // Zero / subnormal: 2^-14 * (1 + m/1024) - 2^-14 = m * 2^-24, exact in float.
  uint32_t sub = f2u(u2f(o + (113u << 23)) - u2f(113u << 23));
  uint32_t r = exp == 0x0f800000u ? infnan : (exp == 0 ? sub : normal);
  return u2f(r | sign);
}

// binary32 -> binary16, round to nearest even; overflow -> Inf; NaN -> quiet NaN with the top
// 10 payload bits (like VCVTPS2PH with _MM_FROUND_TO_NEAREST_INT). Assumes the default
// round-to-nearest floating-point environment (the subnormal path rounds with a float add).
inline uint16_t f2h(float f) {
  uint32_t x = f2u(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t a = x & 0x7fffffffu;
  uint32_t big = a > 0x7f800000u ? (0x7e00u | ((a >> 13) & 0x3ffu)) : 0x7c00u;
  uint32_t normal = (a - (112u << 23) + 0xfffu + ((a >> 13) & 1u)) >> 13;  // may carry into Inf
  uint32_t sub = f2u(u2f(a) + 0.5f) - 0x3f000000u;  // the FPU rounds onto the 2^-24 grid
  uint32_t r = a >= (143u << 23) ? big : (a < (113u << 23) ? sub : normal);
  return static_cast<uint16_t>(r | sign);
}

inline float b2f(uint16_t b) { return u2f(static_cast<uint32_t>(b) << 16); }

// binary32 -> bfloat16, round to nearest even; NaN -> quiet NaN keeping the top payload bits.
inline uint16_t f2b(float f) {
  uint32_t x = f2u(f);
  uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  uint32_t nan = (x >> 16) | 0x40u;
  return static_cast<uint16_t>((x & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

// Load/store adaptors: V is the type the operation is carried out in.
template <typename T>
struct Plain {
  using V = T;
  static V load(T x) { return x; }
  static T store(V v) { return v; }
};
struct Half {
  using V = float;
  static V load(uint16_t x) { return h2f(x); }
  static uint16_t store(V v) { return f2h(v); }
};
struct Bf16 {
  using V = float;
  static V load(uint16_t x) { return b2f(x); }
  static uint16_t store(V v) { return f2b(v); }
};

template <typename T> struct Unsigned { using type = T; };
template <> struct Unsigned<int8_t> { using type = uint8_t; };
template <> struct Unsigned<int32_t> { using type = uint32_t; };
template <> struct Unsigned<int64_t> { using type = uint64_t; };

template <typename V>
inline constexpr bool kIsFloat = static_cast<V>(0.5) != 0;

// Integer sum/prod wrap (computed in the unsigned type: no UB). Float min/max propagate NaN:
// a NaN b gives b, else a NaN a gives a; for equal values (also +0 vs -0) a is returned. That is
// MINPS(b, a) (= b < a ? b : a, which already yields a when either is NaN) plus one fix-up for a
// NaN b: one compare and one blend in the SIMD variants.
struct OpSum {
  template <typename V> static V f(V a, V b) {
    if constexpr (kIsFloat<V>) {
      return a + b;
    } else {
      using U = typename Unsigned<V>::type;
      return static_cast<V>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
    }
  }
};
struct OpProd {
  template <typename V> static V f(V a, V b) {
    if constexpr (kIsFloat<V>) {
      return a * b;
    } else {
      using U = typename Unsigned<V>::type;
      return static_cast<V>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
    }
  }
};
struct OpMin {
  template <typename V> static V f(V a, V b) {
    if constexpr (kIsFloat<V>) {
      return ((b < a) | (b != b)) ? b : a;
    } else {
      return b < a ? b : a;
    }
  }
};
struct OpMax {
  template <typename V> static V f(V a, V b) {
    if constexpr (kIsFloat<V>) {
      return ((b > a) | (b != b)) ? b : a;
    } else {
      return b > a ? b : a;
    }
  }
};

// dst may be exactly a or b: every element is read before it is written and no element depends
// on another, so there is no loop-carried dependence (hence ivdep rather than __restrict).
template <typename T, typename C, typename Op>
void reduce_loop(void* dst, const void* a, const void* b, size_t n) {
  T* d = static_cast<T*>(dst);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
#pragma GCC ivdep
  for (size_t i = 0; i < n; ++i) d[i] = C::store(Op::f(C::load(x[i]), C::load(y[i])));
}

// Integer avg: truncating division. For 8/32-bit ints the division is done in double, which is
// exact here: |x| < 2^53, so the rounding error of x/n is far below the distance 1/n from a
// non-integer quotient to the next integer; int64 divides as integers.
template <typename T, typename C>
void avg_loop(void* buf, size_t n, int nranks) {
  T* p = static_cast<T*>(buf);
  if constexpr (sizeof(T) == 8 && !kIsFloat<T>) {
    const int64_t dn = nranks;
    for (size_t i = 0; i < n; ++i) p[i] = p[i] / dn;
  } else if constexpr (kIsFloat<typename C::V>) {
    using V = typename C::V;
    const V dn = static_cast<V>(nranks);
    for (size_t i = 0; i < n; ++i) p[i] = C::store(C::load(p[i]) / dn);
  } else {
    const double dn = static_cast<double>(nranks);
    for (size_t i = 0; i < n; ++i) p[i] = static_cast<T>(static_cast<int32_t>(static_cast<double>(p[i]) / dn));
  }
}

// The last step of a float average, fused: (x + y) rounded to T, then divided (the same two
// roundings as reduce_loop then avg_loop; -ffp-contract=off keeps them two).
template <typename T>
void sum_avg_loop(void* dst, const void* a, const void* b, size_t n, int nranks) {
  T* d = static_cast<T*>(dst);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  const T dn = static_cast<T>(nranks);
#pragma GCC ivdep
  for (size_t i = 0; i < n; ++i) d[i] = (x[i] + y[i]) / dn;
}

template <typename T, typename C>
void fill_type(KernelTable* t, DataType type) {
  const int ti = static_cast<int>(type);
  t->reduce[ti][static_cast<int>(RedOp::kSum)] = &reduce_loop<T, C, OpSum>;
  t->reduce[ti][static_cast<int>(RedOp::kAvg)] = &reduce_loop<T, C, OpSum>;
  t->reduce[ti][static_cast<int>(RedOp::kProd)] = &reduce_loop<T, C, OpProd>;
  t->reduce[ti][static_cast<int>(RedOp::kMin)] = &reduce_loop<T, C, OpMin>;
  t->reduce[ti][static_cast<int>(RedOp::kMax)] = &reduce_loop<T, C, OpMax>;
  t->finish_avg[ti] = &avg_loop<T, C>;
}

// The whole table from the generic loops; the SIMD variants then override what they hand-write.
inline void fill_generic(KernelTable* t) {
  fill_type<int8_t, Plain<int8_t>>(t, DataType::kInt8);
  fill_type<uint8_t, Plain<uint8_t>>(t, DataType::kUint8);
  fill_type<int32_t, Plain<int32_t>>(t, DataType::kInt32);
  fill_type<int64_t, Plain<int64_t>>(t, DataType::kInt64);
  fill_type<uint16_t, Half>(t, DataType::kFloat16);
  fill_type<uint16_t, Bf16>(t, DataType::kBfloat16);
  fill_type<float, Plain<float>>(t, DataType::kFloat32);
  fill_type<double, Plain<double>>(t, DataType::kFloat64);
  for (auto& f : t->sum_avg) f = nullptr;
  t->sum_avg[static_cast<int>(DataType::kFloat32)] = &sum_avg_loop<float>;
  t->sum_avg[static_cast<int>(DataType::kFloat64)] = &sum_avg_loop<double>;
}

}  // namespace
}  // namespace weft::kern
