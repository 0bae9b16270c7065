// Element types and reduction operations. Values equal the C API's weftDataType_t / weftRedOp_t.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace weft {

enum class DataType : uint8_t {
  kInt8 = 0, kUint8 = 1, kInt32 = 2, kInt64 = 3,
  kFloat16 = 4, kBfloat16 = 5, kFloat32 = 6, kFloat64 = 7,
};
inline constexpr int kNumDataTypes = 8;

enum class RedOp : uint8_t { kSum = 0, kProd = 1, kMin = 2, kMax = 3, kAvg = 4 };
inline constexpr int kNumRedOps = 5;

constexpr size_t dtype_size(DataType t) {
  switch (t) {
    case DataType::kInt8: case DataType::kUint8: return 1;
    case DataType::kFloat16: case DataType::kBfloat16: return 2;
    case DataType::kInt32: case DataType::kFloat32: return 4;
    case DataType::kInt64: case DataType::kFloat64: return 8;
  }
  return 0;
}
inline bool dtype_valid(int t) { return t >= 0 && t < kNumDataTypes; }
inline bool redop_valid(int op) { return op >= 0 && op < kNumRedOps; }
std::string_view dtype_name(DataType t);   // "float32", ...
std::string_view redop_name(RedOp op);     // "sum", ...
bool parse_dtype(std::string_view name, DataType* out);
bool parse_redop(std::string_view name, RedOp* out);

}  // namespace weft
