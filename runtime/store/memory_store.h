// An in-memory Store shared by ranks that run as threads of one process (tests).
#pragma once
#include <condition_variable>
#include <map>
#include <mutex>

#include "runtime/store/store.h"

namespace weft {

class MemoryStore : public Store {
 public:
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key, Millis timeout) override;
  void wait(const std::vector<std::string>& keys, Millis timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  bool check(const std::string& key) override;
  void erase(const std::string& key) override;
  Bytes set_if_absent(const std::string& key, const Bytes& value) override;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Bytes> data_;
};

}  // namespace weft
