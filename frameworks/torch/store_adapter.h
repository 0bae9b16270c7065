// TorchStoreAdapter: Weft's rendezvous store (weft::Store) over the c10d::Store that PyTorch hands
// a backend (a PrefixStore over the TCPStore of init_method env://, file://, tcp://). Weft's
// communicator exchanges node identities and UCX worker addresses through it and its watchdog
// polls it for "abort". Every c10d failure is rethrown as weft::Error (the executor's watchdog only
// understands those): a wait that runs out is kTimeout naming the key, anything else kSystemError.
#pragma once
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "runtime/store/store.h"

namespace weft::torch_backend {

class TorchStoreAdapter : public weft::Store {
 public:
  explicit TorchStoreAdapter(c10::intrusive_ptr<c10d::Store> store) : store_(std::move(store)) {}

  void set(const std::string& key, const Bytes& value) override;
  // c10d's get() waits with the store's own timeout; this waits with ours first (wait(keys,
  // timeout)), then gets.
  Bytes get(const std::string& key, Millis timeout) override;
  void wait(const std::vector<std::string>& keys, Millis timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  bool check(const std::string& key) override;
  void erase(const std::string& key) override;
  // c10d's compareSet(key, {}, value): sets key when absent and returns what it holds.
  Bytes set_if_absent(const std::string& key, const Bytes& value) override;
  // set_on_disconnect: c10d stores cannot announce a vanished client, so the default (ignore) is
  // kept; a dead peer is found by Weft's timeout (WEFT_TIMEOUT_MS) or by UCX (WEFT_UCX_ERR_MODE).

  const c10::intrusive_ptr<c10d::Store>& torch_store() const { return store_; }

 private:
  c10::intrusive_ptr<c10d::Store> store_;
};

}  // namespace weft::torch_backend
