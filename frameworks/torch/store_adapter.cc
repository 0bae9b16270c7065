#include "frameworks/torch/store_adapter.h"

#include <string_view>

#include "runtime/base/error.h"

namespace weft::torch_backend {
namespace {

// c10d reports a wait that ran out as c10::Error (or a DistStoreError subclass in later
// versions) whose message says "timeout"/"Timeout"/"timed out".
bool looks_like_timeout(std::string_view msg) {
  return msg.find("imeout") != std::string_view::npos || msg.find("timed out") != std::string_view::npos;
}

// The first line of a c10::Error's message (the rest is a C++ backtrace).
std::string first_line(const char* what) {
  std::string s(what);
  if (auto nl = s.find('\n'); nl != std::string::npos) s.resize(nl);
  return s;
}

template <typename F>
auto guarded(const char* op, const std::string& key, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const weft::Error&) {
    throw;
  } catch (const std::exception& e) {
    std::string msg = first_line(e.what());
    if (looks_like_timeout(msg)) {
      fail(ErrorCode::kTimeout, "torch store: {} '{}' timed out: {}", op, key, msg);
    }
    fail(ErrorCode::kSystemError, "torch store: {} '{}' failed (is rank 0, which serves the store, alive?): {}", op,
         key, msg);
  }
}

}  // namespace

void TorchStoreAdapter::set(const std::string& key, const Bytes& value) {
  guarded("set", key, [&] { store_->set(key, value); });
}

Bytes TorchStoreAdapter::get(const std::string& key, Millis timeout) {
  return guarded("get", key, [&] {
    store_->wait({key}, timeout);
    return store_->get(key);
  });
}

void TorchStoreAdapter::wait(const std::vector<std::string>& keys, Millis timeout) {
  guarded("wait", keys.empty() ? std::string() : keys.front(), [&] { store_->wait(keys, timeout); });
}

int64_t TorchStoreAdapter::add(const std::string& key, int64_t delta) {
  return guarded("add", key, [&] { return store_->add(key, delta); });
}

bool TorchStoreAdapter::check(const std::string& key) {
  return guarded("check", key, [&] { return store_->check({key}); });
}

Bytes TorchStoreAdapter::set_if_absent(const std::string& key, const Bytes& value) {
  return guarded("compareSet", key, [&] { return store_->compareSet(key, {}, value); });
}

void TorchStoreAdapter::erase(const std::string& key) {
  guarded("erase", key, [&] { store_->deleteKey(key); });
}

}  // namespace weft::torch_backend
