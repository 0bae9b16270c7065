// The in-process transport: ranks are threads of one process sharing an InprocFabric. Used by the
// test suite to run 1-16 ranks in one binary; it obeys the same matching rules as UCX.
#pragma once
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/transport/transport.h"

namespace weft {

class InprocFabric {
 public:
  explicit InprocFabric(int size);
  int size() const { return static_cast<int>(boxes_.size()); }

  struct Posted {
    int src;
    uint64_t tag, mask;
    void* buf;
    size_t len;
    TransportOp* op;
  };
  struct Message {
    int src;
    uint64_t tag;
    std::vector<uint8_t> data;
  };
  struct Mailbox {
    std::mutex mu;
    std::condition_variable cv;
    uint64_t events = 0;
    bool interrupted = false;
    std::deque<Posted> posted;
    std::deque<Message> unexpected;
  };
  Mailbox& box(int r) { return *boxes_[r]; }

 private:
  std::vector<std::unique_ptr<Mailbox>> boxes_;
};

class InprocTransport : public Transport {
 public:
  InprocTransport(std::shared_ptr<InprocFabric> fabric, int rank);
  ~InprocTransport() override;
  int rank() const override { return rank_; }
  int size() const override { return fabric_->size(); }
  const char* name() const override { return "inproc"; }
  void post_send(int peer, uint64_t tag, const void* buf, size_t len, TransportOp* op) override;
  void post_recv(int peer, uint64_t tag, uint64_t mask, void* buf, size_t len, TransportOp* op) override;
  bool probe(int peer, uint64_t tag, uint64_t mask) override;
  bool progress() override;
  void wait_for_event(std::chrono::steady_clock::time_point deadline) override;
  void interrupt() override;
  void shutdown(const std::string& why) override;
  std::string peer_failure(int) const override { return {}; }

 private:
  std::shared_ptr<InprocFabric> fabric_;
  int rank_;
  uint64_t seen_events_ = 0;
  bool shut_ = false;
};

}  // namespace weft

namespace weft {
class Store;
// The fabric of a group of thread-ranks: rank 0 creates and registers it, the others find it
// through the store (a process-wide registry; ranks must share one process).
std::shared_ptr<InprocFabric> inproc_fabric_for(Store& store, int rank, int size, std::chrono::milliseconds timeout);
}  // namespace weft
