// Host reduction kernels. Vectorised; the best variant for the running CPU is chosen at run time
// (the installed library runs on any x86-64).
#pragma once
#include <cstddef>
#include <cstdint>

#include "collectives/datatype.h"

namespace weft {

// dst[i] = dst[i] OP src[i] for i < count. For kAvg this is a sum (the division comes from
// finish_avg). float16/bfloat16 are widened to float32, combined, and rounded back (nearest even).
// Integer sum/prod wrap (two's complement). Float min/max propagate NaN: a NaN src wins, else a
// NaN dst stays; equal values (+0/-0 too) keep dst. Pointers must be aligned to the element size;
// buffers must not partially overlap. See docs/KERNELS.md.
void reduce_inplace(DataType type, RedOp op, void* dst, const void* src, size_t count);

// dst[i] = a[i] OP b[i] (dst may alias a or b exactly). For min/max, a takes the role of dst above.
void reduce_into(DataType type, RedOp op, void* dst, const void* a, const void* b, size_t count);

// The last step of kAvg over nranks contributions: buf[i] = buf[i] / nranks. Integers divide
// with truncation toward zero (C semantics) after an exact integer sum.
void finish_avg(DataType type, void* buf, size_t count, int nranks);

// The last step of kAvg over nranks contributions: dst[i] = (a[i] + b[i]) / nranks, the same
// bits as reduce_into(kAvg) then finish_avg, in one pass where the type allows (float32/64;
// others take the two). dst may alias a or b exactly.
void sum_avg_into(DataType type, void* dst, const void* a, const void* b, size_t count, int nranks);

// IEEE binary16 / bfloat16 conversions (round to nearest even, NaN preserved).
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
float bf16_to_float(uint16_t b);
uint16_t float_to_bf16(float f);

// The name of the kernel variant in use ("avx512", "avx2", "sse2", "scalar"), for benchmarks.
const char* reduce_kernel_isa();

}  // namespace weft
