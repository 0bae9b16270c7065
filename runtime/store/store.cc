#include "runtime/store/store.h"

#include <condition_variable>
#include <map>
#include <mutex>

#include "runtime/base/error.h"
#include "runtime/store/memory_store.h"

namespace weft {

std::vector<Bytes> store_all_gather(Store& store, const std::string& key, int rank, int size,
                                    const Bytes& mine, Millis timeout) {
  store.set(fmt::format("{}/{}", key, rank), mine);
  std::vector<Bytes> all(size);
  for (int r = 0; r < size; ++r) {
    all[r] = r == rank ? mine : store.get(fmt::format("{}/{}", key, r), timeout);
  }
  return all;
}

void MemoryStore::set(const std::string& key, const Bytes& value) {
  std::lock_guard<std::mutex> lock(mu_);
  data_[key] = value;
  cv_.notify_all();
}

Bytes MemoryStore::get(const std::string& key, Millis timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto it = data_.find(key);
    if (it != data_.end()) return it->second;
    if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && !data_.count(key)) {
      fail(ErrorCode::kTimeout, "store: timed out after {} ms waiting for key '{}'", timeout.count(), key);
    }
  }
}

void MemoryStore::wait(const std::vector<std::string>& keys, Millis timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (auto& k : keys) {
    auto left = std::chrono::duration_cast<Millis>(deadline - std::chrono::steady_clock::now());
    get(k, std::max(left, Millis(0)));
  }
}

int64_t MemoryStore::add(const std::string& key, int64_t delta) {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t value = 0;
  auto it = data_.find(key);
  if (it != data_.end()) value = std::stoll(to_string(it->second));
  value += delta;
  data_[key] = to_bytes(std::to_string(value));
  cv_.notify_all();
  return value;
}

bool MemoryStore::check(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  return data_.count(key) != 0;
}

Bytes MemoryStore::set_if_absent(const std::string& key, const Bytes& value) {
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, inserted] = data_.emplace(key, value);
  if (inserted) cv_.notify_all();
  return it->second;
}

void MemoryStore::erase(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  data_.erase(key);
}

}  // namespace weft
