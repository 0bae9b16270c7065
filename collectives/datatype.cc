#include "collectives/datatype.h"

namespace weft {
namespace {
constexpr std::string_view kTypeNames[kNumDataTypes] = {"int8",    "uint8",    "int32",   "int64",
                                                        "float16", "bfloat16", "float32", "float64"};
constexpr std::string_view kOpNames[kNumRedOps] = {"sum", "prod", "min", "max", "avg"};
}  // namespace

std::string_view dtype_name(DataType t) {
  int i = static_cast<int>(t);
  return dtype_valid(i) ? kTypeNames[i] : "invalid-type";
}
std::string_view redop_name(RedOp op) {
  int i = static_cast<int>(op);
  return redop_valid(i) ? kOpNames[i] : "invalid-op";
}
bool parse_dtype(std::string_view name, DataType* out) {
  for (int i = 0; i < kNumDataTypes; ++i) {
    if (kTypeNames[i] == name) { *out = static_cast<DataType>(i); return true; }
  }
  if (name == "half" || name == "fp16") { *out = DataType::kFloat16; return true; }
  if (name == "bf16") { *out = DataType::kBfloat16; return true; }
  if (name == "float" || name == "fp32") { *out = DataType::kFloat32; return true; }
  if (name == "double" || name == "fp64") { *out = DataType::kFloat64; return true; }
  return false;
}
bool parse_redop(std::string_view name, RedOp* out) {
  for (int i = 0; i < kNumRedOps; ++i) {
    if (kOpNames[i] == name) { *out = static_cast<RedOp>(i); return true; }
  }
  return false;
}

}  // namespace weft
