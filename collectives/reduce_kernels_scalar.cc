// The scalar variant: the generic loops compiled with vectorisation switched off (see
// collectives/CMakeLists.txt). It is the reference the other variants are tested against.
#include "collectives/reduce_kernels_impl.h"

namespace weft::kern {
void fill_table_scalar(KernelTable* t) { fill_generic(t); }
}  // namespace weft::kern
