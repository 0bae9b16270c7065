// A shared-memory segment mapped by a group of processes that meet through the store: the
// creator makes it (a random name under /dev/shm), publishes the name, every participant maps it,
// and once all have mapped it (counted in the store) the creator removes the name, so nothing
// survives a crash. A failure on the way (a participant that died while a shrink built the
// transport, a timeout) leaves no name, descriptor or mapping behind.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "runtime/base/bytes.h"

namespace weft {

class Store;

struct ShmSegmentSpec {
  std::string what;         // "shm transport": names the caller in errors
  std::string name_prefix;  // "/weft-": the /dev/shm name's prefix
  std::string name_key;     // the store key of the name
  std::string mapped_key;   // the store counter of the participants that mapped it
  bool creator = false;
  int participants = 1;
  size_t bytes = 0;
  Millis timeout{0};
  bool reserve = false;  // the creator allocates every page now (posix_fallocate): a full /dev/shm fails here, not with SIGBUS later
  std::function<void(void*)> init;  // run by the creator on the fresh (zero) mapping, before the others may use it
};

// The futex system call on a 32-bit word of a shared mapping (the transports' and the direct
// path's sleeping and waking).
long shm_futex(std::atomic<uint32_t>* addr, int op, uint32_t val, const struct timespec* ts);

// Returns the mapping (munmap(base, spec.bytes) releases it). Throws weft::Error.
void* map_shared_segment(Store& store, const ShmSegmentSpec& spec);

}  // namespace weft
