// Conversions between the 16-bit float types and float32 for sums accumulated in float32
// (the f32acc all-reduce, the shared-memory paths' 16-bit sums, the float32 wire type): widen
// (exact), widen-and-add (one float32 addition per element), narrow (rounded once, to nearest
// even; NaN kept quiet). Every variant gives the same bits (F16C where the CPU has it for float16;
// the branch-free conversions of reduce_kernels_impl.h elsewhere). docs/KERNELS.md.
#pragma once
#include <cstddef>

#include "collectives/datatype.h"

namespace weft {

// dst[i] = (float)src[i]; wire is kFloat16 or kBfloat16.
void widen_to_f32(DataType wire, float* dst, const void* src, size_t count);
// dst[i] += (float)src[i].
void widen_add_f32(DataType wire, float* dst, const void* src, size_t count);
// dst[i] = round(src[i] / divisor) (divisor 1: no division), in the 16-bit type. dst may not
// overlap src.
void narrow_from_f32(DataType wire, void* dst, const float* src, size_t count, int divisor = 1);
// acc[i] += src[i] for float32 (in rank order: the same bits on every rank).
void add_f32(float* acc, const float* src, size_t count);

// Whether a sum or average of `type` accumulates in float32 and rounds once (float16, bfloat16).
inline bool sums_in_f32(DataType type, RedOp op) {
  return (type == DataType::kFloat16 || type == DataType::kBfloat16) && (op == RedOp::kSum || op == RedOp::kAvg);
}

}  // namespace weft
