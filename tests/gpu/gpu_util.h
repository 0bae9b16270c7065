// Helpers shared by test_gpu and weft-gpu-check: device presence (safe without a driver), typed
// test data and a comparison that tolerates 16-bit float rounding.
#pragma once
#include <cuda_runtime_api.h>
#include <weft/weft.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace weft::test {

// The number of CUDA devices, or 0 with the reason in *why (no driver, no device).
inline int gpu_count(std::string* why) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    if (why) *why = std::string("cudaGetDeviceCount: ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
    return 0;
  }
  if (n == 0 && why) *why = "cudaGetDeviceCount: 0 devices";
  return n;
}

inline size_t type_size(weftDataType_t t) {
  switch (t) {
    case weftInt8: case weftUint8: return 1;
    case weftFloat16: case weftBfloat16: return 2;
    case weftInt32: case weftFloat32: return 4;
    default: return 8;
  }
}
inline const char* type_name(weftDataType_t t) {
  static const char* names[] = {"int8", "uint8", "int32", "int64", "float16", "bfloat16", "float32", "float64"};
  return names[t];
}
inline const char* op_name(weftRedOp_t o) {
  static const char* names[] = {"sum", "prod", "min", "max", "avg"};
  return names[o];
}

inline uint16_t to_half(float f) {  // round to nearest of small exact values only (test data)
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  int exp = static_cast<int>((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = (x >> 13) & 0x3ffu;
  if ((x & 0x7fffffffu) == 0) return static_cast<uint16_t>(sign);
  return static_cast<uint16_t>(sign | (static_cast<uint32_t>(exp) << 10) | mant);
}
inline float from_half(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ffu;
  uint32_t x = (h & 0x7fffu) == 0 ? sign : sign | ((exp - 15 + 127) << 23) | (mant << 13);
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}
inline uint16_t to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  return static_cast<uint16_t>(x >> 16);
}
inline float from_bf16(uint16_t h) {
  uint32_t x = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

// Small integers 1..7 (exact in every type, products stay small for one rank).
inline std::vector<uint8_t> make_data(weftDataType_t t, size_t count, int seed) {
  std::vector<uint8_t> b(count * type_size(t));
  for (size_t i = 0; i < count; ++i) {
    int v = 1 + static_cast<int>((i * 31 + static_cast<size_t>(seed) * 7) % 7);
    switch (t) {
      case weftInt8: { int8_t x = static_cast<int8_t>(v); std::memcpy(&b[i], &x, 1); break; }
      case weftUint8: b[i] = static_cast<uint8_t>(v); break;
      case weftInt32: { int32_t x = v; std::memcpy(&b[i * 4], &x, 4); break; }
      case weftInt64: { int64_t x = v; std::memcpy(&b[i * 8], &x, 8); break; }
      case weftFloat16: { uint16_t x = to_half(static_cast<float>(v)); std::memcpy(&b[i * 2], &x, 2); break; }
      case weftBfloat16: { uint16_t x = to_bf16(static_cast<float>(v)); std::memcpy(&b[i * 2], &x, 2); break; }
      case weftFloat32: { float x = static_cast<float>(v); std::memcpy(&b[i * 4], &x, 4); break; }
      default: { double x = v; std::memcpy(&b[i * 8], &x, 8); break; }
    }
  }
  return b;
}

inline double value_at(weftDataType_t t, const std::vector<uint8_t>& b, size_t i) {
  switch (t) {
    case weftInt8: { int8_t x; std::memcpy(&x, &b[i], 1); return x; }
    case weftUint8: return b[i];
    case weftInt32: { int32_t x; std::memcpy(&x, &b[i * 4], 4); return x; }
    case weftInt64: { int64_t x; std::memcpy(&x, &b[i * 8], 8); return static_cast<double>(x); }
    case weftFloat16: { uint16_t x; std::memcpy(&x, &b[i * 2], 2); return from_half(x); }
    case weftBfloat16: { uint16_t x; std::memcpy(&x, &b[i * 2], 2); return from_bf16(x); }
    case weftFloat32: { float x; std::memcpy(&x, &b[i * 4], 4); return x; }
    default: { double x; std::memcpy(&x, &b[i * 8], 8); return x; }
  }
}

// The number of elements that differ beyond the type's tolerance.
inline size_t count_wrong(weftDataType_t t, const std::vector<uint8_t>& got, const std::vector<uint8_t>& want, size_t count) {
  double tol = (t == weftFloat16 || t == weftBfloat16) ? 1e-2 : 1e-9;
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    double g = value_at(t, got, i), w = value_at(t, want, i);
    if (!(std::fabs(g - w) <= tol * std::fmax(1.0, std::fabs(w)))) wrong++;
  }
  return wrong;
}

}  // namespace weft::test
