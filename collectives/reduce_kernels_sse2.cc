// The baseline x86-64 (SSE2) variant, or the baseline of whatever the target is: the generic
// loops auto-vectorised at -O3 with no extra -m flags. float16 uses the branch-free software
// conversion, vectorised as integer and float operations.
#include "collectives/reduce_kernels_impl.h"

namespace weft::kern {
void fill_table_sse2(KernelTable* t) { fill_generic(t); }
}  // namespace weft::kern
