#include "collectives/reduce_kernels.h"

#include <algorithm>
#include <cstring>
#include <limits>

namespace weft {

float half_to_float(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ffu, bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while (!(mant & 0x400u)) { mant <<= 1; --exp; }
      bits = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0));
  if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (absx < 0x38800000u) {  // subnormal or zero in half
    if (absx < 0x33000000u) return static_cast<uint16_t>(sign);
    uint32_t e = absx >> 23, m = (absx & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - e;  // 14 - (e-127) + 13 ... = 113 - e + 13
    shift = 113 - e + 13;
    uint32_t r = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1))) ++r;
    return static_cast<uint16_t>(sign | r);
  }
  uint32_t r = ((absx - 0x38000000u) >> 13);
  uint32_t rem = absx & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1))) ++r;
  return static_cast<uint16_t>(sign | r);
}

float bf16_to_float(uint16_t b) {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t float_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

namespace {

template <typename T>
struct Plain {
  using V = T;
  static V load(T x) { return x; }
  static T store(V v) { return v; }
};
struct Half {
  using V = float;
  static V load(uint16_t x) { return half_to_float(x); }
  static uint16_t store(V v) { return float_to_half(v); }
};
struct Bf16 {
  using V = float;
  static V load(uint16_t x) { return bf16_to_float(x); }
  static uint16_t store(V v) { return float_to_bf16(v); }
};

template <typename V>
inline V apply(RedOp op, V a, V b) {
  switch (op) {
    case RedOp::kSum: case RedOp::kAvg: return static_cast<V>(a + b);
    case RedOp::kProd: return static_cast<V>(a * b);
    case RedOp::kMin: return b < a ? b : a;
    case RedOp::kMax: return b > a ? b : a;
  }
  return a;
}

template <typename T, typename C, RedOp Op>
void loop(T* __restrict dst, const T* a, const T* b, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = C::store(apply<typename C::V>(Op, C::load(a[i]), C::load(b[i])));
}

template <typename T, typename C>
void dispatch_op(RedOp op, T* dst, const T* a, const T* b, size_t n) {
  switch (op) {
    case RedOp::kSum: case RedOp::kAvg: return loop<T, C, RedOp::kSum>(dst, a, b, n);
    case RedOp::kProd: return loop<T, C, RedOp::kProd>(dst, a, b, n);
    case RedOp::kMin: return loop<T, C, RedOp::kMin>(dst, a, b, n);
    case RedOp::kMax: return loop<T, C, RedOp::kMax>(dst, a, b, n);
  }
}

}  // namespace

void reduce_into(DataType type, RedOp op, void* dst, const void* a, const void* b, size_t count) {
  switch (type) {
#define WEFT_CASE(E, T, C) \
  case DataType::E: return dispatch_op<T, C>(op, static_cast<T*>(dst), static_cast<const T*>(a), static_cast<const T*>(b), count);
    WEFT_CASE(kInt8, int8_t, Plain<int8_t>)
    WEFT_CASE(kUint8, uint8_t, Plain<uint8_t>)
    WEFT_CASE(kInt32, int32_t, Plain<int32_t>)
    WEFT_CASE(kInt64, int64_t, Plain<int64_t>)
    WEFT_CASE(kFloat16, uint16_t, Half)
    WEFT_CASE(kBfloat16, uint16_t, Bf16)
    WEFT_CASE(kFloat32, float, Plain<float>)
    WEFT_CASE(kFloat64, double, Plain<double>)
#undef WEFT_CASE
  }
}

void reduce_inplace(DataType type, RedOp op, void* dst, const void* src, size_t count) {
  reduce_into(type, op, dst, dst, src, count);
}

void finish_avg(DataType type, void* buf, size_t count, int nranks) {
  switch (type) {
    case DataType::kInt8: { auto* p = static_cast<int8_t*>(buf); for (size_t i = 0; i < count; ++i) p[i] = static_cast<int8_t>(p[i] / nranks); break; }
    case DataType::kUint8: { auto* p = static_cast<uint8_t*>(buf); for (size_t i = 0; i < count; ++i) p[i] = static_cast<uint8_t>(p[i] / nranks); break; }
    case DataType::kInt32: { auto* p = static_cast<int32_t*>(buf); for (size_t i = 0; i < count; ++i) p[i] /= nranks; break; }
    case DataType::kInt64: { auto* p = static_cast<int64_t*>(buf); for (size_t i = 0; i < count; ++i) p[i] /= nranks; break; }
    case DataType::kFloat16: { auto* p = static_cast<uint16_t*>(buf); for (size_t i = 0; i < count; ++i) p[i] = float_to_half(half_to_float(p[i]) / static_cast<float>(nranks)); break; }
    case DataType::kBfloat16: { auto* p = static_cast<uint16_t*>(buf); for (size_t i = 0; i < count; ++i) p[i] = float_to_bf16(bf16_to_float(p[i]) / static_cast<float>(nranks)); break; }
    case DataType::kFloat32: { auto* p = static_cast<float*>(buf); for (size_t i = 0; i < count; ++i) p[i] /= static_cast<float>(nranks); break; }
    case DataType::kFloat64: { auto* p = static_cast<double*>(buf); for (size_t i = 0; i < count; ++i) p[i] /= nranks; break; }
  }
}

const char* reduce_kernel_isa() { return "scalar"; }

}  // namespace weft
