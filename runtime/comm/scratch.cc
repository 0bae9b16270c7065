#include "runtime/comm/scratch.h"

#include <sys/mman.h>

#include "runtime/base/error.h"

namespace weft {

ScratchPool::~ScratchPool() {
  if (base_) munmap(base_, size_);
}

void* ScratchPool::get(size_t bytes) {
  if (bytes <= size_) return base_;
  size_t want = std::max(bytes, size_ * 2);
  want = (want + (2u << 20) - 1) & ~size_t((2u << 20) - 1);
  void* p = mmap(nullptr, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) fail(ErrorCode::kSystemError, "scratch: cannot map {} bytes", want);
  madvise(p, want, MADV_HUGEPAGE);
  // Touch every page now, once, instead of on the hot path.
  for (size_t off = 0; off < want; off += 4096) static_cast<volatile char*>(p)[off] = 0;
  if (base_) munmap(base_, size_);
  base_ = p;
  size_ = want;
  return base_;
}

}  // namespace weft
