// Inputs, guarded buffers and an independent serial reference for every collective, shared by the
// schedule-simulator tests and the communicator tests.
//
// Inputs are chosen so that the reference is exact:
//  - integers: the reference is computed in 64-bit two's complement and truncated to the type
//    (sum and prod wrap exactly like the kernels: modular arithmetic does not depend on order);
//    avg inputs are small (|x| <= 7, uint8 <= 15) so the exact sum of 16 ranks fits the type.
//  - floating point: small integers (|x| <= 8 for sum/avg, |x| <= 100 for min/max) and, for prod,
//    values in {1, -1, 2} with a 2 on at most one rank in five, so every partial result of up to
//    16 ranks is an integer below 2^8 (sum) or a power of two below 2^4 (prod) and therefore
//    exact even in bfloat16 (8 significant bits) and float16 (11): the result is bitwise equal
//    to the double reference whatever the order. avg divides once at the end: the result is the
//    exact quotient rounded (up to twice: float then 16-bit) to the type, so it must lie within
//    one unit in the last place of the type (2^-10 relative for float16, 2^-7 for bfloat16,
//    2^-23 for float32, 2^-52 for float64) of the double reference.
#pragma once
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "collectives/collective.h"
#include "collectives/reduce_kernels.h"

namespace weft::test {

struct CollCase {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  DataType dt = DataType::kFloat32;
  RedOp op = RedOp::kSum;
  uint64_t count = 0;
  int n = 1;
  int root = 0;
  bool in_place = false;
  std::string label() const {
    return fmt::format("{} {} {} count={} n={} root={} {}", collective_name(kind), dtype_name(dt), redop_name(op),
                       count, n, root, in_place ? "in-place" : "out-of-place");
  }
};

inline bool is_float(DataType t) { return t >= DataType::kFloat16; }

// Input element i of rank q's send buffer.
inline double input_value(const CollCase& c, int q, uint64_t i) {
  uint64_t h = (i * 2654435761u + static_cast<uint64_t>(q) * 40503u + 17) % 1000003;
  if (c.op == RedOp::kProd) return (i + q) % 5 == 0 ? 2.0 : ((i * 3 + q) % 2 ? 1.0 : -1.0);
  if (c.op == RedOp::kAvg) {
    if (c.dt == DataType::kUint8) return static_cast<double>(h % 16);
    return c.dt == DataType::kInt8 ? static_cast<double>(h % 15) - 7 : static_cast<double>(h % 17) - 8;
  }
  if (is_float(c.dt)) return c.op == RedOp::kSum ? static_cast<double>(h % 17) - 8 : static_cast<double>(h % 201) - 100;
  switch (c.dt) {
    case DataType::kInt8: return static_cast<double>(h % 256) - 128;
    case DataType::kUint8: return static_cast<double>(h % 256);
    case DataType::kInt32: return static_cast<double>(static_cast<int64_t>(h * 4099) - (int64_t{1} << 31));
    default: return static_cast<double>(static_cast<int64_t>(h * 9007199254740881ull % (uint64_t{1} << 53)) - (int64_t{1} << 52));
  }
}

inline void store_value(DataType t, void* base, uint64_t i, double v) {
  auto* p = static_cast<uint8_t*>(base);
  switch (t) {
    case DataType::kInt8: { int8_t x = static_cast<int8_t>(static_cast<int64_t>(v)); std::memcpy(p + i, &x, 1); break; }
    case DataType::kUint8: { uint8_t x = static_cast<uint8_t>(static_cast<int64_t>(v)); std::memcpy(p + i, &x, 1); break; }
    case DataType::kInt32: { int32_t x = static_cast<int32_t>(static_cast<int64_t>(v)); std::memcpy(p + 4 * i, &x, 4); break; }
    case DataType::kInt64: { int64_t x = static_cast<int64_t>(v); std::memcpy(p + 8 * i, &x, 8); break; }
    case DataType::kFloat16: { uint16_t x = float_to_half(static_cast<float>(v)); std::memcpy(p + 2 * i, &x, 2); break; }
    case DataType::kBfloat16: { uint16_t x = float_to_bf16(static_cast<float>(v)); std::memcpy(p + 2 * i, &x, 2); break; }
    case DataType::kFloat32: { float x = static_cast<float>(v); std::memcpy(p + 4 * i, &x, 4); break; }
    case DataType::kFloat64: std::memcpy(p + 8 * i, &v, 8); break;
  }
}

inline double load_value(DataType t, const void* base, uint64_t i) {
  auto* p = static_cast<const uint8_t*>(base);
  switch (t) {
    case DataType::kInt8: { int8_t x; std::memcpy(&x, p + i, 1); return x; }
    case DataType::kUint8: { uint8_t x; std::memcpy(&x, p + i, 1); return x; }
    case DataType::kInt32: { int32_t x; std::memcpy(&x, p + 4 * i, 4); return x; }
    case DataType::kInt64: { int64_t x; std::memcpy(&x, p + 8 * i, 8); return static_cast<double>(x); }
    case DataType::kFloat16: { uint16_t x; std::memcpy(&x, p + 2 * i, 2); return half_to_float(x); }
    case DataType::kBfloat16: { uint16_t x; std::memcpy(&x, p + 2 * i, 2); return bf16_to_float(x); }
    case DataType::kFloat32: { float x; std::memcpy(&x, p + 4 * i, 4); return x; }
    case DataType::kFloat64: { double x; std::memcpy(&x, p + 8 * i, 8); return x; }
  }
  return 0;
}

// int64 inputs are not all exact in double: recompute them as integers.
inline int64_t input_int(const CollCase& c, int q, uint64_t i) {
  uint64_t h = (i * 2654435761u + static_cast<uint64_t>(q) * 40503u + 17) % 1000003;
  if (c.dt == DataType::kInt64 && c.op != RedOp::kProd && c.op != RedOp::kAvg)
    return static_cast<int64_t>(h * 9007199254740881ull % (uint64_t{1} << 53)) - (int64_t{1} << 52);
  return static_cast<int64_t>(input_value(c, q, i));
}

// Truncates a 64-bit two's complement value to the integer type (as the kernels wrap).
inline int64_t wrap_to(DataType t, uint64_t v) {
  switch (t) {
    case DataType::kInt8: return static_cast<int8_t>(v);
    case DataType::kUint8: return static_cast<uint8_t>(v);
    case DataType::kInt32: return static_cast<int32_t>(v);
    default: return static_cast<int64_t>(v);
  }
}

// The reduction of input element i over ranks 0..n-1, as an exact value of the type.
inline double reduce_ref(const CollCase& c, uint64_t i) {
  if (!is_float(c.dt)) {
    uint64_t acc = static_cast<uint64_t>(input_int(c, 0, i));
    int64_t mn = input_int(c, 0, i), mx = mn;
    for (int q = 1; q < c.n; ++q) {
      int64_t x = input_int(c, q, i);
      if (c.op == RedOp::kProd) acc *= static_cast<uint64_t>(x);
      else acc += static_cast<uint64_t>(x);
      mn = std::min(mn, x);
      mx = std::max(mx, x);
    }
    if (c.op == RedOp::kMin) return static_cast<double>(mn);
    if (c.op == RedOp::kMax) return static_cast<double>(mx);
    int64_t v = wrap_to(c.dt, acc);
    return static_cast<double>(c.op == RedOp::kAvg ? v / c.n : v);
  }
  double acc = input_value(c, 0, i);
  for (int q = 1; q < c.n; ++q) {
    double x = input_value(c, q, i);
    switch (c.op) {
      case RedOp::kProd: acc *= x; break;
      case RedOp::kMin: acc = std::min(acc, x); break;
      case RedOp::kMax: acc = std::max(acc, x); break;
      default: acc += x;
    }
  }
  return c.op == RedOp::kAvg ? acc / c.n : acc;
}

// Element i of rank r's expected result (the result range is [0, recv elements)).
inline double expected(const CollCase& c, int r, uint64_t i) {
  switch (c.kind) {
    case CollectiveKind::kAllReduce: case CollectiveKind::kReduce: return reduce_ref(c, i);
    case CollectiveKind::kReduceScatter: return reduce_ref(c, r * c.count + i);
    case CollectiveKind::kAllGather: return input_value(c, static_cast<int>(i / c.count), i % c.count);
    case CollectiveKind::kBroadcast: return input_value(c, c.root, i);
    case CollectiveKind::kAllToAll: return input_value(c, static_cast<int>(i / c.count), r * c.count + i % c.count);
    default: return 0;
  }
}

// One rank's buffers, each framed by guard bytes; send/recv point into them as the case's
// placement requires.
struct RankBuffers {
  static constexpr size_t kGuard = 64;
  std::vector<uint8_t> s, r;  // s unused in place
  const void* send = nullptr;
  void* recv = nullptr;
  std::vector<uint8_t> s0, r0;  // images before the call
  uint64_t res_off = 0, res_bytes = 0;  // the result range within r (after the guard)
};

inline RankBuffers make_buffers(const CollCase& c, int rank) {
  CollectiveArgs a{c.kind, c.count, c.dt, c.op, c.root, c.in_place};
  const uint64_t es = dtype_size(c.dt), sb = send_bytes(a, rank, c.n), rb = recv_bytes(a, rank, c.n);
  uint64_t in_el = sb / es;
  RankBuffers b;
  const size_t G = RankBuffers::kGuard;
  auto fill_guard = [](std::vector<uint8_t>& v, size_t seed) {
    for (size_t k = 0; k < v.size(); ++k) v[k] = static_cast<uint8_t>(0xA5 ^ (k * 31 + seed));
  };
  if (!c.in_place) {
    b.s.resize(sb + 2 * G);
    b.r.resize(rb + 2 * G);
    fill_guard(b.s, 1);
    fill_guard(b.r, 2);
    for (uint64_t i = 0; i < in_el; ++i) store_value(c.dt, b.s.data() + G, i, input_value(c, rank, i));
    b.send = b.s.data() + G;
    b.recv = b.r.data() + G;
    b.res_off = 0;
    b.res_bytes = rb;
  } else {
    uint64_t bytes = std::max(sb, rb), send_off = 0, recv_off = 0;
    if (c.kind == CollectiveKind::kAllGather) send_off = rank * c.count * es;
    if (c.kind == CollectiveKind::kReduceScatter) recv_off = rank * c.count * es;
    if (c.kind == CollectiveKind::kBroadcast || c.kind == CollectiveKind::kReduce) bytes = c.count * es;
    b.r.resize(bytes + 2 * G);
    fill_guard(b.r, 3);
    if (c.kind == CollectiveKind::kBroadcast && rank != c.root) in_el = 0;
    for (uint64_t i = 0; i < in_el; ++i) store_value(c.dt, b.r.data() + G + send_off, i, input_value(c, rank, i));
    b.send = b.r.data() + G + send_off;
    b.recv = b.r.data() + G + recv_off;
    b.res_off = recv_off;
    b.res_bytes = rb;
  }
  b.s0 = b.s;
  b.r0 = b.r;
  return b;
}

// "" when rank's buffers hold exactly the expected result and nothing else changed.
inline std::string check_buffers(const CollCase& c, int rank, const RankBuffers& b) {
  const size_t G = RankBuffers::kGuard;
  const uint64_t es = dtype_size(c.dt);
  if (b.s != b.s0) return fmt::format("rank {}: the send buffer (or its guard) was modified", rank);
  for (size_t k = 0; k < b.r.size(); ++k) {
    bool in_result = k >= G + b.res_off && k < G + b.res_off + b.res_bytes;
    if (!in_result && b.r[k] != b.r0[k])
      return fmt::format("rank {}: byte {} outside the result range [{}, {}) was written", rank,
                         static_cast<int64_t>(k) - static_cast<int64_t>(G), b.res_off, b.res_off + b.res_bytes);
  }
  const uint8_t* res = b.r.data() + G + b.res_off;
  for (uint64_t i = 0; i < b.res_bytes / es; ++i) {
    double got = load_value(c.dt, res, i);
    if (c.dt == DataType::kInt64) {
      int64_t g;
      std::memcpy(&g, res + 8 * i, 8);
      int64_t want;
      bool moved = c.kind == CollectiveKind::kAllGather || c.kind == CollectiveKind::kBroadcast ||
                   c.kind == CollectiveKind::kAllToAll;
      if (moved) {
        int q = c.kind == CollectiveKind::kBroadcast ? c.root : static_cast<int>(i / c.count);
        uint64_t e = c.kind == CollectiveKind::kBroadcast ? i
                     : c.kind == CollectiveKind::kAllGather ? i % c.count : rank * c.count + i % c.count;
        want = input_int(c, q, e);
      } else {
        // Recompute exactly in integers (the double reference may round).
        CollCase cc = c;
        uint64_t e = c.kind == CollectiveKind::kReduceScatter ? rank * c.count + i : i;
        uint64_t acc = static_cast<uint64_t>(input_int(cc, 0, e));
        int64_t mn = input_int(cc, 0, e), mx = mn;
        for (int q = 1; q < c.n; ++q) {
          int64_t x = input_int(cc, q, e);
          acc = c.op == RedOp::kProd ? acc * static_cast<uint64_t>(x) : acc + static_cast<uint64_t>(x);
          mn = std::min(mn, x);
          mx = std::max(mx, x);
        }
        want = c.op == RedOp::kMin ? mn : c.op == RedOp::kMax ? mx : static_cast<int64_t>(acc);
        if (c.op == RedOp::kAvg) want /= c.n;
      }
      if (g != want) return fmt::format("rank {} element {}: got {}, expected {}", rank, i, g, want);
      continue;
    }
    double want = expected(c, rank, i);
    if (is_float(c.dt)) {
      // Round the reference to the type first (exact cases compare equal).
      uint8_t tmp[8];
      store_value(c.dt, tmp, 0, want);
      double rounded = load_value(c.dt, tmp, 0);
      int p = c.dt == DataType::kFloat16 ? 10 : c.dt == DataType::kBfloat16 ? 7 : c.dt == DataType::kFloat32 ? 23 : 52;
      double tol = c.op == RedOp::kAvg && (c.kind == CollectiveKind::kAllReduce || c.kind == CollectiveKind::kReduce ||
                                           c.kind == CollectiveKind::kReduceScatter)
                       ? std::ldexp(std::fabs(want), -p)
                       : 0.0;
      if (!(std::fabs(got - rounded) <= tol))
        return fmt::format("rank {} element {}: got {}, expected {}", rank, i, got, rounded);
    } else if (got != want) {
      return fmt::format("rank {} element {}: got {}, expected {}", rank, i, got, want);
    }
  }
  return {};
}

}  // namespace weft::test
