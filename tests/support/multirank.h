// Runs N ranks as threads of this test, each with its own Communicator over a shared in-memory
// store and either the in-process transport or UCX. The first failure on any rank is rethrown.
#pragma once
#include <gtest/gtest.h>

#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/comm/communicator.h"
#include "runtime/transport/inproc/inproc_transport.h"
#include "runtime/store/memory_store.h"

namespace weft::test {

inline const char* transport_label(TransportKind k) {
  return k == TransportKind::kUcx ? "ucx" : k == TransportKind::kShm ? "shm" : "inproc";
}

inline CommConfig test_config() {
  CommConfig c;
  c.timeout = std::chrono::milliseconds(60000);
  c.spin = std::chrono::microseconds(20);
  return c;
}

inline void run_ranks(int n, TransportKind kind, const std::function<void(Communicator&)>& fn,
                      CommConfig config = test_config(), const std::vector<std::string>& node_ids = {}) {
  auto store = std::make_shared<MemoryStore>();
  auto fabric = std::make_shared<InprocFabric>(n);
  std::mutex mu;
  std::exception_ptr first;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        CommInit init;
        init.store = std::make_shared<PrefixStore>(store, "world");
        init.rank = r;
        init.size = n;
        init.transport = kind;
        init.fabric = fabric;
        init.node_id = node_ids.empty() ? "node0" : node_ids.at(r);
        init.config = config;
        if (kind == TransportKind::kUcx) init.config.transport = "ucx";  // "ucx" in a test name means UCX
        auto comm = Communicator::create(init);
        fn(*comm);
        comm->destroy();
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!first) first = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

}  // namespace weft::test
