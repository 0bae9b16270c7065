// A per-communicator scratch buffer: grown on demand, never shrunk, pre-faulted when mapped so that
// the hot path neither allocates nor pays first-touch page faults (about 11 us per 4 KiB page on
// these hypervisors), with transparent huge pages requested.
#pragma once
#include <cstddef>

namespace weft {

class ScratchPool {
 public:
  ScratchPool() = default;
  ~ScratchPool();
  ScratchPool(const ScratchPool&) = delete;
  ScratchPool& operator=(const ScratchPool&) = delete;
  void* get(size_t bytes);  // valid until the next get() with a larger size
  size_t capacity() const { return size_; }

 private:
  void* base_ = nullptr;
  size_t size_ = 0;
};

}  // namespace weft
