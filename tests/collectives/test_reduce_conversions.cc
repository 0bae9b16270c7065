// float16 / bfloat16 conversions: the library's branch-free conversions against the reference
// (and against the F16C instructions where the CPU has them).
#include <gtest/gtest.h>
#include <immintrin.h>

#include <cmath>
#include <random>

#include "collectives/reduce_kernels.h"
#include "reduce_reference.h"

using namespace weft;
namespace ref = weft::testref;

namespace {

bool half_is_nan(uint16_t h) { return (h & 0x7fff) > 0x7c00; }
bool bf16_is_nan(uint16_t h) { return (h & 0x7fff) > 0x7f80; }

// A sweep of float bit patterns: every 1021st pattern plus everything near the half range edges.
std::vector<uint32_t> float_sample() {
  std::vector<uint32_t> v;
  for (uint64_t x = 0; x <= 0xffffffffu; x += 1021) v.push_back(static_cast<uint32_t>(x));
  for (uint32_t x = 0x33000000u - 4096; x < 0x33000000u + 4096; ++x) v.push_back(x);  // half underflow
  for (uint32_t x = 0x387fe000u; x < 0x38802000u; ++x) v.push_back(x);             // subnormal/normal edge
  for (uint32_t x = 0x477fe000u; x < 0x47802000u; ++x) v.push_back(x);             // overflow edge
  for (uint32_t x = 0x7f7f0000u; x <= 0x7f800010u; ++x) v.push_back(x);             // bf16 overflow, NaNs
  const size_t n = v.size();
  for (size_t i = 0; i < n; ++i) v.push_back(v[i] | 0x80000000u);
  return v;
}

#if defined(__x86_64__)
__attribute__((target("f16c"))) uint16_t hw_f2h(float f) { return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT); }
__attribute__((target("f16c"))) float hw_h2f(uint16_t h) { return _cvtsh_ss(h); }
bool have_f16c() { return __builtin_cpu_supports("f16c"); }
#endif

}  // namespace

TEST(HalfConversion, AllPatternsWidenExactlyAndRoundTrip) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const uint16_t x = static_cast<uint16_t>(h);
    const float f = half_to_float(x);
    ASSERT_EQ(ref::bits_of(f), ref::bits_of(ref::half_to_float(x))) << std::hex << h;
    // Finite values and infinities round-trip exactly; NaNs come back quiet with sign and payload.
    const uint16_t back = float_to_half(f);
    ASSERT_EQ(back, half_is_nan(x) ? (x | 0x200) : x) << std::hex << h;
  }
}

TEST(HalfConversion, NarrowingMatchesReference) {
  for (uint32_t u : float_sample()) {
    const float f = ref::float_of(u);
    ASSERT_EQ(float_to_half(f), ref::float_to_half(f)) << std::hex << u;
  }
}

TEST(HalfConversion, MidpointsRoundToEven) {
  // Between every pair of adjacent finite positive halves: the midpoint goes to the even one, one
  // float ulp either side goes to the nearer one.
  for (uint16_t h = 0; h < 0x7bff; ++h) {
    const float lo = half_to_float(h), hi = half_to_float(static_cast<uint16_t>(h + 1));
    const float mid = (lo + hi) / 2;  // exact: needs 12 significant bits
    const uint16_t even = (h & 1) ? static_cast<uint16_t>(h + 1) : h;
    ASSERT_EQ(float_to_half(mid), even) << std::hex << h;
    ASSERT_EQ(float_to_half(std::nextafter(mid, 0.0f)), h) << std::hex << h;
    ASSERT_EQ(float_to_half(std::nextafter(mid, INFINITY)), h + 1) << std::hex << h;
    ASSERT_EQ(float_to_half(-mid), static_cast<uint16_t>(even | 0x8000)) << std::hex << h;
  }
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half(65519.996f), 0x7bff);
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);  // midpoint to the (even) next exponent: Inf
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -25)), 0x0000);          // half of the least subnormal: even (0)
  EXPECT_EQ(float_to_half(std::ldexp(3.0f, -25)), 0x0002);          // 1.5 ulp: even (2)
  EXPECT_EQ(float_to_half(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(float_to_half(-0.0f), 0x8000);
  EXPECT_EQ(float_to_half(1e-45f), 0x0000);                          // float subnormal -> 0
  EXPECT_EQ(float_to_half(INFINITY), 0x7c00);
  EXPECT_EQ(float_to_half(-INFINITY), 0xfc00);
  EXPECT_EQ(float_to_half(ref::float_of(0x7f800001u)), 0x7e00);      // sNaN -> quiet NaN
  EXPECT_EQ(float_to_half(ref::float_of(0xffc02000u)), 0xfe01);      // payload's top bits kept
  EXPECT_EQ(ref::bits_of(half_to_float(0x0001)), ref::bits_of(std::ldexp(1.0f, -24)));
  EXPECT_EQ(ref::bits_of(half_to_float(0x7d00)), 0x7fe00000u);       // sNaN widened quiet
}

#if defined(__x86_64__)
TEST(HalfConversion, SoftwareAgreesWithF16c) {
  if (!have_f16c()) GTEST_SKIP() << "no F16C";
  for (uint32_t h = 0; h <= 0xffff; ++h)
    ASSERT_EQ(ref::bits_of(half_to_float(static_cast<uint16_t>(h))), ref::bits_of(hw_h2f(static_cast<uint16_t>(h)))) << std::hex << h;
  for (uint32_t u : float_sample()) ASSERT_EQ(float_to_half(ref::float_of(u)), hw_f2h(ref::float_of(u))) << std::hex << u;
}
#endif

TEST(Bf16Conversion, AllPatternsRoundTrip) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const uint16_t x = static_cast<uint16_t>(b);
    const float f = bf16_to_float(x);
    ASSERT_EQ(ref::bits_of(f), static_cast<uint32_t>(x) << 16) << std::hex << b;  // widening is a shift
    ASSERT_EQ(float_to_bf16(f), bf16_is_nan(x) ? (x | 0x40) : x) << std::hex << b;
  }
}

TEST(Bf16Conversion, NarrowingMatchesReference) {
  for (uint32_t u : float_sample()) {
    const float f = ref::float_of(u);
    ASSERT_EQ(float_to_bf16(f), ref::float_to_bf16(f)) << std::hex << u;
  }
  EXPECT_EQ(float_to_bf16(ref::float_of(0x3f808000u)), 0x3f80);  // midpoint, even below
  EXPECT_EQ(float_to_bf16(ref::float_of(0x3f818000u)), 0x3f82);  // midpoint, even above
  EXPECT_EQ(float_to_bf16(ref::float_of(0x3f808001u)), 0x3f81);
  EXPECT_EQ(float_to_bf16(ref::float_of(0x7f7fffffu)), 0x7f80);  // rounds up to Inf
  EXPECT_EQ(float_to_bf16(ref::float_of(0x00000001u)), 0x0000);  // float subnormals round too
  EXPECT_EQ(float_to_bf16(ref::float_of(0x7f800001u)), 0x7fc0);  // sNaN -> quiet NaN
}
