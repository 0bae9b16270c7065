// Store: the key-value rendezvous that ranks use to agree on anything at start-up
// (UCX worker addresses, split colours, topology summaries). Every wait has a timeout.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/base/bytes.h"

namespace weft {

class Store {
 public:
  virtual ~Store() = default;
  virtual void set(const std::string& key, const Bytes& value) = 0;
  // Blocks until key exists (or timeout: Error kTimeout naming the key), then returns its value.
  virtual Bytes get(const std::string& key, Millis timeout) = 0;
  // Blocks until every key exists.
  virtual void wait(const std::vector<std::string>& keys, Millis timeout) = 0;
  // Atomically adds delta to the integer stored at key (absent = 0) and returns the new value.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  // True when key exists now (no waiting).
  virtual bool check(const std::string& key) = 0;
  // Removes key if present.
  virtual void erase(const std::string& key) = 0;
  // Atomically sets key = value unless key exists; returns the value key holds afterwards (value
  // when this call set it, else the earlier one). The first writer wins: ranks that race to
  // decide something (weftCommShrink's group) all adopt the one decision that landed first.
  virtual Bytes set_if_absent(const std::string& key, const Bytes& value) = 0;
  // Asks the store to set key = value if this client vanishes without cancelling (a crashed rank
  // announces its own death this way) and key is not set yet. Stores whose clients cannot vanish
  // alone ignore it.
  virtual void set_on_disconnect(const std::string& /*key*/, const Bytes& /*value*/) {}
  virtual void cancel_on_disconnect(const std::string& /*key*/) {}
};

// A view of a store under a key prefix ("prefix/key"), so that sub-communicators and layers do not
// collide.
class PrefixStore : public Store {
 public:
  PrefixStore(std::shared_ptr<Store> base, std::string prefix)
      : base_(std::move(base)), prefix_(std::move(prefix) + "/") {}
  void set(const std::string& key, const Bytes& value) override { base_->set(prefix_ + key, value); }
  Bytes get(const std::string& key, Millis timeout) override { return base_->get(prefix_ + key, timeout); }
  void wait(const std::vector<std::string>& keys, Millis timeout) override {
    std::vector<std::string> full;
    full.reserve(keys.size());
    for (auto& k : keys) full.push_back(prefix_ + k);
    base_->wait(full, timeout);
  }
  int64_t add(const std::string& key, int64_t delta) override { return base_->add(prefix_ + key, delta); }
  bool check(const std::string& key) override { return base_->check(prefix_ + key); }
  void erase(const std::string& key) override { base_->erase(prefix_ + key); }
  Bytes set_if_absent(const std::string& key, const Bytes& value) override { return base_->set_if_absent(prefix_ + key, value); }
  void set_on_disconnect(const std::string& key, const Bytes& value) override {
    base_->set_on_disconnect(prefix_ + key, value);
  }
  void cancel_on_disconnect(const std::string& key) override { base_->cancel_on_disconnect(prefix_ + key); }
  const std::shared_ptr<Store>& base() const { return base_; }
  const std::string& prefix() const { return prefix_; }  // with its trailing '/'

 private:
  std::shared_ptr<Store> base_;
  std::string prefix_;
};

// All ranks contribute one value under `key`; returns every rank's value in rank order.
std::vector<Bytes> store_all_gather(Store& store, const std::string& key, int rank, int size,
                                    const Bytes& mine, Millis timeout);

}  // namespace weft
