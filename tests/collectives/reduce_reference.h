// Independent reference implementations for the reduction kernel tests: conversions computed
// from the definition of the formats with exact double arithmetic (no bit tricks shared with the
// library), exact integer math, and float ops rounded once from the exact double result.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

namespace weft::testref {

inline uint32_t bits_of(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
inline float float_of(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
inline uint64_t bits_of(double f) { uint64_t u; std::memcpy(&u, &f, 8); return u; }

// binary16 -> float; NaNs are quieted (quiet bit set), payload and sign kept.
inline float half_to_float(uint16_t h) {
  const int exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (exp == 31) {
    if (mant == 0) return static_cast<float>(sign * INFINITY);
    return float_of((static_cast<uint32_t>(h & 0x8000) << 16) | 0x7fc00000u | (static_cast<uint32_t>(mant) << 13));
  }
  if (exp == 0) return static_cast<float>(sign * std::ldexp(mant, -24));
  return static_cast<float>(sign * std::ldexp(1024 + mant, exp - 25));
}

// Round |f| to a grid of p-bit significands with minimum normal exponent emin (round half to even
// via nearbyint in the default rounding mode). Returns the rounded magnitude (exact in double).
inline double round_to_format(double a, int p, int emin) {
  int e;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  int exp = e - 1;    // a in [2^exp, 2^(exp+1))
  if (exp < emin) exp = emin;
  const double ulp = std::ldexp(1.0, exp - (p - 1));
  return std::nearbyint(a / ulp) * ulp;
}

inline uint16_t float_to_half(float f) {
  const uint32_t x = bits_of(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  if (std::isnan(f)) return static_cast<uint16_t>(sign | 0x7e00 | ((x >> 13) & 0x3ff));
  const double a = std::fabs(static_cast<double>(f));
  if (a == 0) return sign;
  const double r = round_to_format(a, 11, -14);
  if (r >= 65536.0) return static_cast<uint16_t>(sign | 0x7c00);  // also catches Inf
  if (r < std::ldexp(1.0, -14)) return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::ldexp(r, 24)));
  int e;
  const double m = std::frexp(r, &e);  // r = m * 2^e
  const int mant = static_cast<int>(std::ldexp(m, 11)) - 1024;
  return static_cast<uint16_t>(sign | ((e - 1 + 15) << 10) | mant);
}

inline float bf16_to_float(uint16_t b) {
  if ((b & 0x7fff) > 0x7f80) return float_of((static_cast<uint32_t>(b) << 16) | 0x00400000u);
  return float_of(static_cast<uint32_t>(b) << 16);
}

inline uint16_t float_to_bf16(float f) {
  const uint32_t x = bits_of(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  if (std::isnan(f)) return static_cast<uint16_t>((x >> 16) | 0x40);
  const double a = std::fabs(static_cast<double>(f));
  if (a == 0) return sign;
  const double r = round_to_format(a, 8, -126);
  const float rf = static_cast<float>(r);  // exact, or Inf when r = 2^128
  return static_cast<uint16_t>(sign | (bits_of(rf) >> 16));
}

// Float min/max as documented: a NaN b wins, then a NaN a; for equal values (+0/-0 too) a.
template <typename F>
F fmin_ref(F a, F b) {
  if (std::isnan(b)) return b;
  if (std::isnan(a)) return a;
  if (a == b) return a;
  return std::fmin(a, b);
}
template <typename F>
F fmax_ref(F a, F b) {
  if (std::isnan(b)) return b;
  if (std::isnan(a)) return a;
  if (a == b) return a;
  return std::fmax(a, b);
}

}  // namespace weft::testref
