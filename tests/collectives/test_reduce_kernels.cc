// Every kernel variant the CPU supports, for every type x op, against an independent reference
// (tests/collectives/reduce_reference.h) and against the scalar variant, bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "collectives/reduce_kernels.h"
#include "collectives/reduce_kernels_internal.h"
#include "reduce_reference.h"

using namespace weft;
namespace ref = weft::testref;
using kern::Isa;

namespace {

const size_t kSizes[] = {0, 1, 2, 7, 13, 1009, (size_t{1} << 20) + 3};
const DataType kTypes[] = {DataType::kInt8,    DataType::kUint8,    DataType::kInt32,   DataType::kInt64,
                           DataType::kFloat16, DataType::kBfloat16, DataType::kFloat32, DataType::kFloat64};
const RedOp kOps[] = {RedOp::kSum, RedOp::kProd, RedOp::kMin, RedOp::kMax, RedOp::kAvg};

std::vector<Isa> supported_isas() {
  std::vector<Isa> v;
  for (int i = 0; i < kern::kNumIsas; ++i)
    if (kern::isa_supported(static_cast<Isa>(i))) v.push_back(static_cast<Isa>(i));
  return v;
}

bool is_float(DataType t) { return t >= DataType::kFloat16; }

bool is_nan(DataType t, const unsigned char* p) {
  switch (t) {
    case DataType::kFloat16: { uint16_t h; std::memcpy(&h, p, 2); return (h & 0x7fff) > 0x7c00; }
    case DataType::kBfloat16: { uint16_t h; std::memcpy(&h, p, 2); return (h & 0x7fff) > 0x7f80; }
    case DataType::kFloat32: { float f; std::memcpy(&f, p, 4); return std::isnan(f); }
    case DataType::kFloat64: { double f; std::memcpy(&f, p, 8); return std::isnan(f); }
    default: return false;
  }
}

// A buffer whose data starts `offset_elems` elements past a 64-byte boundary, with guard bytes
// on both sides to catch writes out of bounds.
struct Buf {
  static constexpr size_t kGuard = 64;
  std::vector<unsigned char> mem;
  unsigned char* p = nullptr;
  size_t bytes = 0;
  Buf(size_t n, size_t esize, size_t offset_elems) : bytes(n * esize) {
    mem.assign(bytes + 3 * kGuard + 64, 0xA5);
    auto base = reinterpret_cast<uintptr_t>(mem.data()) + kGuard;
    base = (base + 63) & ~uintptr_t{63};
    p = reinterpret_cast<unsigned char*>(base) + offset_elems * esize;
  }
  bool guards_intact() const {
    for (size_t i = 1; i <= 16; ++i)
      if (p[-static_cast<ptrdiff_t>(i)] != 0xA5 || p[bytes + i - 1] != 0xA5) return false;
    return true;
  }
};

template <typename T>
T rnd_bits(std::mt19937_64& rng) { return static_cast<T>(rng()); }

void fill_random(DataType t, unsigned char* p, size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> nice(-8.0, 8.0);
  static const float kF32Special[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, ref::float_of(0x7f800001u),
                                      ref::float_of(0xffc01234u), 1e-45f, 3.4028235e38f, 1.0f, -1.0f};
  static const uint16_t kF16Special[] = {0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0x7d00, 0x0001, 0x03ff, 0x0400, 0x7bff, 0xfbff};
  static const uint16_t kBf16Special[] = {0x0000, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0x7f81, 0x0001, 0x007f, 0x0080, 0x7f7f, 0x3f80};
  for (size_t i = 0; i < n; ++i) {
    const unsigned kind = static_cast<unsigned>(rng() % 16);  // 0: special, 1-3: raw bits, else "nice"
    switch (t) {
      case DataType::kInt8: case DataType::kUint8: p[i] = rnd_bits<uint8_t>(rng); break;
      case DataType::kInt32: { uint32_t v = rnd_bits<uint32_t>(rng); std::memcpy(p + 4 * i, &v, 4); break; }
      case DataType::kInt64: { uint64_t v = rng(); std::memcpy(p + 8 * i, &v, 8); break; }
      case DataType::kFloat16: case DataType::kBfloat16: {
        const bool half = t == DataType::kFloat16;
        uint16_t v = kind == 0 ? (half ? kF16Special[rng() % 11] : kBf16Special[rng() % 11])
                   : kind <= 3 ? rnd_bits<uint16_t>(rng)
                   : (half ? ref::float_to_half(static_cast<float>(nice(rng))) : ref::float_to_bf16(static_cast<float>(nice(rng))));
        std::memcpy(p + 2 * i, &v, 2);
        break;
      }
      case DataType::kFloat32: {
        float v = kind == 0 ? kF32Special[rng() % 11] : kind <= 3 ? ref::float_of(rnd_bits<uint32_t>(rng)) : static_cast<float>(nice(rng));
        std::memcpy(p + 4 * i, &v, 4);
        break;
      }
      case DataType::kFloat64: {
        double v = kind == 0 ? static_cast<double>(kF32Special[rng() % 11]) : nice(rng);
        if (kind >= 1 && kind <= 3) { uint64_t b = rng(); std::memcpy(&v, &b, 8); }
        std::memcpy(p + 8 * i, &v, 8);
        break;
      }
    }
  }
}

template <typename T>
T load(const unsigned char* p) { T v; std::memcpy(&v, p, sizeof(T)); return v; }
template <typename T>
void store(unsigned char* p, T v) { std::memcpy(p, &v, sizeof(T)); }

// Exact integer math in a wider type, wrapped to the width of T.
template <typename T>
T int_ref(RedOp op, T a, T b) {
  const __int128 x = a, y = b;
  __int128 r = 0;
  switch (op) {
    case RedOp::kSum: case RedOp::kAvg: r = x + y; break;
    case RedOp::kProd: r = x * y; break;
    case RedOp::kMin: r = y < x ? y : x; break;
    case RedOp::kMax: r = y > x ? y : x; break;
  }
  return static_cast<T>(static_cast<unsigned __int128>(r));  // modular (two's complement)
}

// float32 op for (at most float-precision) operands: exact in double, rounded once to float.
float f32_ref(RedOp op, float a, float b) {
  switch (op) {
    case RedOp::kSum: case RedOp::kAvg: return static_cast<float>(static_cast<double>(a) + static_cast<double>(b));
    case RedOp::kProd: return static_cast<float>(static_cast<double>(a) * static_cast<double>(b));
    case RedOp::kMin: return ref::fmin_ref(a, b);
    case RedOp::kMax: return ref::fmax_ref(a, b);
  }
  return 0;
}

double f64_ref(RedOp op, double a, double b) {
  switch (op) {
    case RedOp::kSum: case RedOp::kAvg: return a + b;
    case RedOp::kProd: return a * b;
    case RedOp::kMin: return ref::fmin_ref(a, b);
    case RedOp::kMax: return ref::fmax_ref(a, b);
  }
  return 0;
}

// ref::half_to_float for all 65536 patterns, computed once.
float half_ref(uint16_t h) {
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    for (uint32_t i = 0; i < 65536; ++i) t[i] = ref::half_to_float(static_cast<uint16_t>(i));
    return t;
  }();
  return table[h];
}

void ref_elem(DataType t, RedOp op, const unsigned char* a, const unsigned char* b, unsigned char* out) {
  switch (t) {
    case DataType::kInt8: store(out, int_ref(op, load<int8_t>(a), load<int8_t>(b))); break;
    case DataType::kUint8: store(out, int_ref(op, load<uint8_t>(a), load<uint8_t>(b))); break;
    case DataType::kInt32: store(out, int_ref(op, load<int32_t>(a), load<int32_t>(b))); break;
    case DataType::kInt64: store(out, int_ref(op, load<int64_t>(a), load<int64_t>(b))); break;
    case DataType::kFloat16:
      store(out, ref::float_to_half(f32_ref(op, half_ref(load<uint16_t>(a)), half_ref(load<uint16_t>(b)))));
      break;
    case DataType::kBfloat16:
      store(out, ref::float_to_bf16(f32_ref(op, ref::bf16_to_float(load<uint16_t>(a)), ref::bf16_to_float(load<uint16_t>(b)))));
      break;
    case DataType::kFloat32: store(out, f32_ref(op, load<float>(a), load<float>(b))); break;
    case DataType::kFloat64: store(out, f64_ref(op, load<double>(a), load<double>(b))); break;
  }
}

// Bitwise, except: when both operands of an arithmetic op are NaN, which payload survives is
// unspecified (documented), so any NaN is accepted.
::testing::AssertionResult check(DataType t, RedOp op, const unsigned char* got, const unsigned char* want,
                                 const unsigned char* a, const unsigned char* b, size_t n, const std::string& what) {
  const size_t es = dtype_size(t);
  for (size_t i = 0; i < n; ++i) {
    const size_t o = i * es;
    if (std::memcmp(got + o, want + o, es) == 0) continue;
    if (is_float(t) && op != RedOp::kMin && op != RedOp::kMax && is_nan(t, a + o) && is_nan(t, b + o) && is_nan(t, got + o))
      continue;
    auto hex = [es](const unsigned char* p) {
      uint64_t v = 0;
      std::memcpy(&v, p, es);
      char buf[32];
      std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
      return std::string(buf);
    };
    return ::testing::AssertionFailure() << what << " " << dtype_name(t) << " " << redop_name(op) << " n=" << n
                                         << " element " << i << ": a=" << hex(a + o) << " b=" << hex(b + o)
                                         << " got " << hex(got + o) << " want " << hex(want + o);
  }
  return ::testing::AssertionSuccess();
}

}  // namespace

TEST(ReduceKernels, EveryVariantMatchesReference) {
  const auto isas = supported_isas();
  std::mt19937_64 rng(12345);
  for (DataType t : kTypes) {
    const size_t es = dtype_size(t);
    for (size_t n : kSizes) {
      Buf a(n, es, 1), b(n, es, 3);
      fill_random(t, a.p, n, rng);
      fill_random(t, b.p, n, rng);
      Buf d(n, es, 2), d2(n, es, 1);
      std::vector<unsigned char> want(n * es + 1), scalar(n * es + 1);
      for (RedOp op : kOps) {
        for (size_t i = 0; i < n; ++i) ref_elem(t, op, a.p + i * es, b.p + i * es, want.data() + i * es);
        for (Isa isa : isas) {
          const auto fn = kern::table(isa).reduce[static_cast<int>(t)][static_cast<int>(op)];
          const std::string name = kern::isa_name(isa);
          // Out of place, then dst == a, then dst == b.
          fn(d.p, a.p, b.p, n);
          ASSERT_TRUE(check(t, op, d.p, want.data(), a.p, b.p, n, name));
          ASSERT_TRUE(d.guards_intact()) << name << " wrote out of bounds, n=" << n;
          if (isa == Isa::kScalar) {
            std::memcpy(scalar.data(), d.p, n * es);
          } else {
            ASSERT_TRUE(check(t, op, d.p, scalar.data(), a.p, b.p, n, name + " vs scalar"));
          }
          std::memcpy(d2.p, a.p, n * es);
          fn(d2.p, d2.p, b.p, n);
          ASSERT_TRUE(check(t, op, d2.p, want.data(), a.p, b.p, n, name + " dst==a"));
          std::memcpy(d2.p, b.p, n * es);
          fn(d2.p, a.p, d2.p, n);
          ASSERT_TRUE(check(t, op, d2.p, want.data(), a.p, b.p, n, name + " dst==b"));
          ASSERT_TRUE(d2.guards_intact());
        }
      }
    }
  }
}

TEST(ReduceKernels, FinishAvgEveryVariant) {
  std::mt19937_64 rng(7);
  for (DataType t : kTypes) {
    const size_t es = dtype_size(t);
    for (size_t n : {size_t{1}, size_t{13}, size_t{1009}}) {
      Buf src(n, es, 1);
      fill_random(t, src.p, n, rng);
      for (int nranks : {2, 3, 7, 8, 64}) {
        std::vector<unsigned char> want(n * es);
        for (size_t i = 0; i < n; ++i) {
          const unsigned char* x = src.p + i * es;
          unsigned char* w = want.data() + i * es;
          switch (t) {
            case DataType::kInt8: store<int8_t>(w, static_cast<int8_t>(load<int8_t>(x) / nranks)); break;
            case DataType::kUint8: store<uint8_t>(w, static_cast<uint8_t>(load<uint8_t>(x) / nranks)); break;
            case DataType::kInt32: store<int32_t>(w, load<int32_t>(x) / nranks); break;
            case DataType::kInt64: store<int64_t>(w, load<int64_t>(x) / nranks); break;
            case DataType::kFloat16:
              store(w, ref::float_to_half(static_cast<float>(ref::half_to_float(load<uint16_t>(x)) / static_cast<double>(nranks))));
              break;
            case DataType::kBfloat16:
              store(w, ref::float_to_bf16(static_cast<float>(ref::bf16_to_float(load<uint16_t>(x)) / static_cast<double>(nranks))));
              break;
            case DataType::kFloat32: store(w, static_cast<float>(load<float>(x) / static_cast<double>(nranks))); break;
            case DataType::kFloat64: store(w, load<double>(x) / nranks); break;
          }
        }
        for (Isa isa : supported_isas()) {
          Buf d(n, es, 3);
          std::memcpy(d.p, src.p, n * es);
          kern::table(isa).finish_avg[static_cast<int>(t)](d.p, n, nranks);
          ASSERT_TRUE(check(t, RedOp::kMin, d.p, want.data(), src.p, src.p, n,
                            std::string(kern::isa_name(isa)) + " finish_avg/" + std::to_string(nranks)));
          ASSERT_TRUE(d.guards_intact());
        }
      }
    }
  }
}

// The fused last step of an average (float32/64) gives the bits of the sum then the division, in
// every variant, in place and out of place; the public call gives them for every type.
TEST(ReduceKernels, SumAvgIsTheSumThenTheDivision) {
  std::mt19937_64 rng(11);
  for (DataType t : kTypes) {
    const size_t es = dtype_size(t);
    for (size_t n : {size_t{1}, size_t{13}, size_t{1009}}) {
      Buf x(n, es, 1), y(n, es, 2);
      fill_random(t, x.p, n, rng);
      fill_random(t, y.p, n, rng);
      for (int nranks : {2, 3, 7}) {
        for (Isa isa : supported_isas()) {
          const std::string what = std::string(kern::isa_name(isa)) + " type " + std::to_string(static_cast<int>(t)) +
                                   " n " + std::to_string(n) + " nranks " + std::to_string(nranks);
          Buf want(n, es, 3);
          kern::table(isa).reduce[static_cast<int>(t)][static_cast<int>(RedOp::kAvg)](want.p, x.p, y.p, n);
          kern::table(isa).finish_avg[static_cast<int>(t)](want.p, n, nranks);
          const kern::SumAvgFn fused = kern::table(isa).sum_avg[static_cast<int>(t)];
          EXPECT_EQ(fused != nullptr, t == DataType::kFloat32 || t == DataType::kFloat64) << what;
          if (fused == nullptr) continue;
          Buf out(n, es, 3);
          fused(out.p, x.p, y.p, n, nranks);
          EXPECT_EQ(std::memcmp(out.p, want.p, n * es), 0) << what << " out of place";
          ASSERT_TRUE(out.guards_intact()) << what;
          Buf in(n, es, 1);  // dst is a
          std::memcpy(in.p, x.p, n * es);
          fused(in.p, in.p, y.p, n, nranks);
          EXPECT_EQ(std::memcmp(in.p, want.p, n * es), 0) << what << " in place";
          ASSERT_TRUE(in.guards_intact()) << what;
        }
        Buf want(n, es, 3), got(n, es, 3);
        reduce_into(t, RedOp::kAvg, want.p, x.p, y.p, n);
        finish_avg(t, want.p, n, nranks);
        sum_avg_into(t, got.p, x.p, y.p, n, nranks);
        EXPECT_EQ(std::memcmp(got.p, want.p, n * es), 0) << "sum_avg_into type " << static_cast<int>(t) << " n " << n;
        ASSERT_TRUE(got.guards_intact());
      }
    }
  }
}

TEST(ReduceKernels, ActiveVariantAndPublicApi) {
  const char* env = std::getenv("WEFT_REDUCE_ISA");
  Isa want = kern::best_isa();
  Isa forced;
  if (env != nullptr && kern::parse_isa(env, &forced) && kern::isa_supported(forced)) want = forced;
  EXPECT_STREQ(reduce_kernel_isa(), kern::isa_name(want));
  std::printf("reduction kernels in use: %s (best supported: %s)\n", reduce_kernel_isa(), kern::isa_name(kern::best_isa()));

  float a[5] = {1, 2, 3, 4, NAN}, b[5] = {10, 20, 30, 40, 1};
  reduce_inplace(DataType::kFloat32, RedOp::kSum, a, b, 4);
  EXPECT_EQ(a[3], 44.0f);
  reduce_into(DataType::kFloat32, RedOp::kMax, a, a, b, 5);
  EXPECT_TRUE(std::isnan(a[4]));
  int32_t s[3] = {7, -7, 9};
  finish_avg(DataType::kInt32, s, 3, 2);
  EXPECT_EQ(s[0], 3);
  EXPECT_EQ(s[1], -3);  // truncation toward zero
  int8_t w[1] = {127}, one[1] = {1};
  reduce_inplace(DataType::kInt8, RedOp::kSum, w, one, 1);
  EXPECT_EQ(w[0], -128);  // wraps
}

// Building the tables must not run a variant's code on a CPU without its ISA: the AVX-512 fill
// function stored its pointers with AVX-512 instructions and killed every process (SIGILL) on the
// first reduction on an AVX2-only CPU. A variant the CPU lacks gets the best lower table instead.
TEST(ReduceKernels, VariantsTheCpuLacksFallBackToALowerOne) {
  for (int i = kern::kNumIsas - 1; i > 0; --i) {
    const Isa isa = static_cast<Isa>(i);
    if (kern::isa_supported(isa)) continue;
    int lower = i - 1;
    while (lower > 0 && !kern::isa_supported(static_cast<Isa>(lower))) --lower;
    for (int t = 0; t < kNumDataTypes; ++t) {
      for (int op = 0; op < kNumRedOps; ++op)
        EXPECT_EQ(kern::table(isa).reduce[t][op], kern::table(static_cast<Isa>(lower)).reduce[t][op])
            << kern::isa_name(isa) << " type " << t << " op " << op;
      EXPECT_EQ(kern::table(isa).finish_avg[t], kern::table(static_cast<Isa>(lower)).finish_avg[t]);
      EXPECT_EQ(kern::table(isa).sum_avg[t], kern::table(static_cast<Isa>(lower)).sum_avg[t]);
    }
  }
  // And the dispatch itself runs on this CPU (the table is built on the first call).
  float a[3] = {1, 2, 3}, b[3] = {4, 5, 6}, d[3];
  reduce_into(DataType::kFloat32, RedOp::kSum, d, a, b, 3);
  EXPECT_EQ(d[2], 9.0f);
}
