#include "runtime/transport/shm/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "runtime/base/error.h"
#include "runtime/base/secret.h"
#include "runtime/store/store.h"

namespace weft {

long shm_futex(std::atomic<uint32_t>* addr, int op, uint32_t val, const struct timespec* ts) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), op, val, ts, nullptr, 0);
}

void* map_shared_segment(Store& store, const ShmSegmentSpec& spec) {
  std::string name;  // set while this process owns the name (the creator, until every participant mapped it)
  int fd = -1;
  void* base = nullptr;
  bool published = false;
  try {
    if (spec.creator) {
      const std::string mine = spec.name_prefix + random_secret().substr(0, 24);
      fd = shm_open(mine.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
      if (fd < 0) fail(ErrorCode::kSystemError, "{}: shm_open({}, create): {}", spec.what, mine, std::strerror(errno));
      name = mine;
      if (ftruncate(fd, static_cast<off_t>(spec.bytes)) != 0)
        fail(ErrorCode::kSystemError, "{}: ftruncate({} bytes): {}", spec.what, spec.bytes, std::strerror(errno));
      if (spec.reserve)
        if (int e = posix_fallocate(fd, 0, static_cast<off_t>(spec.bytes)); e != 0)
          fail(ErrorCode::kSystemError, "{}: cannot reserve {} bytes of shared memory (/dev/shm): {}", spec.what, spec.bytes,
               std::strerror(e));
      store.set(spec.name_key, to_bytes(name));
      published = true;
    } else {
      const std::string theirs = to_string(store.get(spec.name_key, spec.timeout));
      if (!theirs.empty() && theirs[0] == '!') fail(ErrorCode::kRemoteError, "{}: the creating rank failed: {}", spec.what, theirs.substr(1));
      fd = shm_open(theirs.c_str(), O_RDWR, 0600);
      if (fd < 0) fail(ErrorCode::kSystemError, "{}: shm_open({}): {}", spec.what, theirs, std::strerror(errno));
    }
    base = mmap(nullptr, spec.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    fd = -1;
    if (base == MAP_FAILED) {
      base = nullptr;
      fail(ErrorCode::kSystemError, "{}: mmap({} bytes): {}", spec.what, spec.bytes, std::strerror(errno));
    }
    if (spec.creator && spec.init) spec.init(base);
    // Everyone maps it before the name goes away.
    store.add(spec.mapped_key, 1);
    const auto deadline = std::chrono::steady_clock::now() + spec.timeout;
    while (store.add(spec.mapped_key, 0) < spec.participants) {
      if (std::chrono::steady_clock::now() > deadline)
        fail(ErrorCode::kTimeout, "{}: the ranks did not all map the segment within {} ms", spec.what, spec.timeout.count());
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  } catch (const std::exception& e) {
    // The others wait for the name: tell them why there is none (rather than letting them time out).
    if (spec.creator && !published) {
      try {
        store.set(spec.name_key, to_bytes(std::string("!") + e.what()));
      } catch (...) {
      }
    }
    if (fd >= 0) close(fd);
    if (base) munmap(base, spec.bytes);
    if (!name.empty()) shm_unlink(name.c_str());
    throw;
  }
  if (!name.empty()) shm_unlink(name.c_str());
  return base;
}

}  // namespace weft
