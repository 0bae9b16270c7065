// Internals of the host reduction kernels: the per-ISA kernel tables and a way to call a given
// variant directly (the tests compare every variant the CPU supports against the reference).
#pragma once
#include <cstddef>

#include "collectives/datatype.h"

namespace weft::kern {

// Ordered from least to most capable.
enum class Isa : int { kScalar = 0, kSse2 = 1, kAvx2 = 2, kAvx512 = 3 };
inline constexpr int kNumIsas = 4;

// dst[i] = a[i] OP b[i]; dst may be exactly a or b (no partial overlap).
using ReduceFn = void (*)(void* dst, const void* a, const void* b, size_t n);
using AvgFn = void (*)(void* buf, size_t n, int nranks);
// dst[i] = (a[i] + b[i]) / nranks in one pass: the last step of kAvg (same aliasing as ReduceFn).
using SumAvgFn = void (*)(void* dst, const void* a, const void* b, size_t n, int nranks);

struct KernelTable {
  ReduceFn reduce[kNumDataTypes][kNumRedOps];
  AvgFn finish_avg[kNumDataTypes];
  // Only where fusing gives the same bits as reduce then finish_avg (float32 and float64: the sum
  // is rounded to the type either way); null elsewhere, and the two passes run.
  SumAvgFn sum_avg[kNumDataTypes];
};

// One per variant, each compiled in its own translation unit with its own -m flags. The AVX
// variants exist only in x86-64 builds (WEFT_REDUCE_X86 defined).
void fill_table_scalar(KernelTable* t);
void fill_table_sse2(KernelTable* t);
void fill_table_avx2(KernelTable* t);
void fill_table_avx512(KernelTable* t);

const char* isa_name(Isa isa);
bool parse_isa(const char* name, Isa* out);
// Whether this build has the variant and the running CPU (and OS) can execute it.
bool isa_supported(Isa isa);
// The best supported variant.
Isa best_isa();
// The variant in use: best_isa(), or WEFT_REDUCE_ISA when set (clamped to what is supported).
Isa active_isa();
const KernelTable& table(Isa isa);

}  // namespace weft::kern
