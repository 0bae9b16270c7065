#include "check.h"

#include <cmath>
#include <cstring>

namespace wperf {

const std::vector<TypeInfo>& all_types() {
  static const std::vector<TypeInfo> t = {
      {"int8", "int8", weftInt8, 1, false, true},          {"uint8", "uint8", weftUint8, 1, false, false},
      {"int32", "int32", weftInt32, 4, false, true},       {"int64", "int64", weftInt64, 8, false, true},
      {"half", "float16", weftFloat16, 2, true, true},     {"bfloat16", "bf16", weftBfloat16, 2, true, true},
      {"float", "float32", weftFloat32, 4, true, true},    {"double", "float64", weftFloat64, 8, true, true},
  };
  return t;
}

const TypeInfo* find_type(const std::string& name) {
  for (auto& t : all_types())
    if (name == t.name || name == t.alias) return &t;
  return nullptr;
}

static const char* const kOps[] = {"sum", "prod", "min", "max", "avg"};
const char* op_name(weftRedOp_t op) { return kOps[op]; }
bool parse_op(const std::string& name, weftRedOp_t* op) {
  for (int i = 0; i < 5; ++i)
    if (name == kOps[i]) return *op = static_cast<weftRedOp_t>(i), true;
  return false;
}

static const char* const kColls[] = {"allreduce", "reducescatter", "allgather", "broadcast",
                                     "reduce",    "alltoall",      "sendrecv"};
const char* coll_name(Coll c) { return kColls[static_cast<int>(c)]; }
bool parse_coll(const std::string& name, Coll* c) {
  for (int i = 0; i < 7; ++i)
    if (name == kColls[i]) return *c = static_cast<Coll>(i), true;
  return false;
}
bool coll_reduces(Coll c) { return c == Coll::kAllReduce || c == Coll::kReduceScatter || c == Coll::kReduce; }
bool coll_rooted(Coll c) { return c == Coll::kBroadcast || c == Coll::kReduce; }

double bus_factor(Coll c, int n) {
  switch (c) {
    case Coll::kAllReduce: return 2.0 * (n - 1) / n;
    case Coll::kReduceScatter: case Coll::kAllGather: case Coll::kAllToAll: return double(n - 1) / n;
    default: return 1.0;
  }
}

Shape make_shape(Coll c, size_t total, int n, int rank) {
  Shape s;
  const size_t un = static_cast<size_t>(n), ur = static_cast<size_t>(rank);
  switch (c) {
    case Coll::kReduceScatter:
      s.count = total / un, s.send_elems = s.count * un, s.recv_elems = s.count, s.total = s.send_elems;
      s.inplace_recv_off = ur * s.count;
      break;
    case Coll::kAllGather:
      s.count = total / un, s.send_elems = s.count, s.recv_elems = s.count * un, s.total = s.recv_elems;
      s.inplace_send_off = ur * s.count;
      break;
    case Coll::kAllToAll:
      s.count = total / un, s.send_elems = s.recv_elems = s.total = s.count * un;
      break;
    default: s.count = s.send_elems = s.recv_elems = s.total = total;
  }
  return s;
}

// ---- float16 / bfloat16, written here rather than taken from the library -----------------
static uint16_t f32_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u, e = (x >> 23) & 0xffu, m = x & 0x7fffffu;
  if (e == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (m ? 0x200u : 0));
  int ne = static_cast<int>(e) - 127 + 15;
  if (ne >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  if (ne <= 0) {  // subnormal or zero
    if (ne < -10) return static_cast<uint16_t>(sign);
    m |= 0x800000u;
    uint32_t shift = static_cast<uint32_t>(14 - ne), h = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = (static_cast<uint32_t>(ne) << 10) | (m >> 13), rem = m & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) ++h;
  return static_cast<uint16_t>(sign | h);
}
static float f16_to_f32(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  float v;
  if (e == 0) v = std::ldexp(static_cast<float>(m), -24);
  else if (e == 31) v = m ? NAN : INFINITY;
  else v = std::ldexp(static_cast<float>(m | 0x400u), static_cast<int>(e) - 25);
  return sign ? -v : v;
}
static uint16_t f32_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40);
  x += 0x7fffu + ((x >> 16) & 1);
  return static_cast<uint16_t>(x >> 16);
}
static float bf16_to_f32(uint16_t b) {
  uint32_t x = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

void store_value(const TypeInfo& t, void* buf, size_t i, double v) {
  switch (t.dt) {
    case weftInt8: static_cast<int8_t*>(buf)[i] = static_cast<int8_t>(static_cast<int64_t>(v)); break;
    case weftUint8: static_cast<uint8_t*>(buf)[i] = static_cast<uint8_t>(static_cast<int64_t>(v)); break;
    case weftInt32: static_cast<int32_t*>(buf)[i] = static_cast<int32_t>(static_cast<int64_t>(v)); break;
    case weftInt64: static_cast<int64_t*>(buf)[i] = static_cast<int64_t>(v); break;
    case weftFloat16: static_cast<uint16_t*>(buf)[i] = f32_to_f16(static_cast<float>(v)); break;
    case weftBfloat16: static_cast<uint16_t*>(buf)[i] = f32_to_bf16(static_cast<float>(v)); break;
    case weftFloat32: static_cast<float*>(buf)[i] = static_cast<float>(v); break;
    default: static_cast<double*>(buf)[i] = v; break;
  }
}

double load_value(const TypeInfo& t, const void* buf, size_t i) {
  switch (t.dt) {
    case weftInt8: return static_cast<const int8_t*>(buf)[i];
    case weftUint8: return static_cast<const uint8_t*>(buf)[i];
    case weftInt32: return static_cast<const int32_t*>(buf)[i];
    case weftInt64: return static_cast<double>(static_cast<const int64_t*>(buf)[i]);
    case weftFloat16: return f16_to_f32(static_cast<const uint16_t*>(buf)[i]);
    case weftBfloat16: return bf16_to_f32(static_cast<const uint16_t*>(buf)[i]);
    case weftFloat32: return static_cast<const float*>(buf)[i];
    default: return static_cast<const double*>(buf)[i];
  }
}

// Small integers, exact in every type (bfloat16 holds integers up to 256 exactly). Reductions get
// a narrow range so that sums over many ranks stay exact; products get factors 1, 2 and -1.
double input_value(Coll c, weftRedOp_t op, const TypeInfo& t, int rank, size_t i) {
  const size_t r = static_cast<size_t>(rank);
  if (!coll_reduces(c)) {
    double v = static_cast<double>((i * 7 + r * 13) % 251);
    return t.is_signed ? v - 125 : v;
  }
  if (op == weftProd) {
    if ((i * 3 + r) % 4 == 0) return 2;
    return t.is_signed && (i + r) % 5 == 0 ? -1 : 1;
  }
  double v = static_cast<double>((i * 7 + r * 13) % 11);
  return t.is_signed ? v - 5 : v;
}

void fill_input(Coll c, weftRedOp_t op, const TypeInfo& t, int rank, void* buf, size_t elems) {
  for (size_t i = 0; i < elems; ++i) store_value(t, buf, i, input_value(c, op, t, rank, i));
}

// Integers wrap in their width, as two's-complement hardware (and Weft's kernels) do.
static int64_t wrap(const TypeInfo& t, int64_t v) {
  switch (t.dt) {
    case weftInt8: return static_cast<int8_t>(v);
    case weftUint8: return static_cast<uint8_t>(v);
    case weftInt32: return static_cast<int32_t>(v);
    default: return v;
  }
}

static double reduce_expected(Coll c, weftRedOp_t op, const TypeInfo& t, int nranks, size_t i) {
  double acc = input_value(c, op, t, 0, i);
  int64_t iacc = static_cast<int64_t>(acc);
  for (int r = 1; r < nranks; ++r) {
    double v = input_value(c, op, t, r, i);
    int64_t iv = static_cast<int64_t>(v);
    switch (op) {
      case weftProd: acc *= v, iacc = wrap(t, static_cast<int64_t>(static_cast<uint64_t>(iacc) * static_cast<uint64_t>(iv))); break;
      case weftMin: acc = std::min(acc, v), iacc = std::min(iacc, iv); break;
      case weftMax: acc = std::max(acc, v), iacc = std::max(iacc, iv); break;
      default: acc += v, iacc = wrap(t, iacc + iv); break;
    }
  }
  if (t.is_float) return op == weftAvg ? acc / nranks : acc;
  return static_cast<double>(op == weftAvg ? iacc / nranks : iacc);
}

static bool close(const TypeInfo& t, double got, double want) {
  if (!t.is_float) return got == want;
  double tol = t.dt == weftFloat16 ? 5e-3 : t.dt == weftBfloat16 ? 2e-2 : t.dt == weftFloat32 ? 1e-6 : 1e-12;
  return std::fabs(got - want) <= tol * std::max(1.0, std::fabs(want));  // NaN counts as wrong
}

size_t count_wrong(Coll c, weftRedOp_t op, const TypeInfo& t, int rank, int n, int root, const void* recv,
                   const Shape& s) {
  if (c == Coll::kReduce && rank != root) return 0;
  size_t wrong = 0;
  const size_t cnt = s.count;
  for (size_t j = 0; j < s.recv_elems; ++j) {
    double want;
    switch (c) {
      case Coll::kAllReduce: case Coll::kReduce: want = reduce_expected(c, op, t, n, j); break;
      case Coll::kReduceScatter: want = reduce_expected(c, op, t, n, static_cast<size_t>(rank) * cnt + j); break;
      case Coll::kAllGather: want = input_value(c, op, t, static_cast<int>(j / cnt), j % cnt); break;
      case Coll::kBroadcast: want = input_value(c, op, t, root, j); break;
      case Coll::kAllToAll:
        want = input_value(c, op, t, static_cast<int>(j / cnt), static_cast<size_t>(rank) * cnt + j % cnt);
        break;
      default: want = input_value(c, op, t, (rank - 1 + n) % n, j); break;
    }
    if (!close(t, load_value(t, recv, j), want)) ++wrong;
  }
  return wrong;
}

}  // namespace wperf
