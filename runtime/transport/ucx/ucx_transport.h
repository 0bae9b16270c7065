// UCX (UCP tag API) transport for host memory: one context and worker per communicator, worker
// addresses exchanged through the store, one endpoint per peer. UCX picks shared memory (posix,
// sysv, cma) between processes of one node and TCP or RDMA between nodes; UCX_TLS and the other
// UCX_* variables are honoured.
//
// Peer failures: UCX 1.13 excludes its shared-memory transports from endpoints created with
// UCP_ERR_HANDLING_MODE_PEER (they become "unreachable" and TCP is used instead, 3-5x slower), so
// by default endpoints use MODE_NONE and a dead peer is detected by the communicator's watchdog
// (the store notices the dead rank's connection closing). WEFT_UCX_ERR_MODE=peer asks UCX too.
#pragma once
#include <ucp/api/ucp.h>

#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/store/store.h"
#include "runtime/transport/transport.h"

namespace weft {

class UcxTransport : public Transport {
 public:
  // remote_only: this transport carries only traffic between nodes (shared memory has the rest);
  // then, on a TCP-only network, every message goes eagerly (see eager_over_tcp()).
  UcxTransport(std::shared_ptr<Store> store, int rank, int size, Millis timeout, bool peer_err_mode,
               bool remote_only = false);
  // Whether a remote-only transport sends every message eagerly (no rendezvous): on a TCP-only
  // network unless UCX_RNDV_THRESH is set; WEFT_UCX_EAGER=0/1 decides instead.
  static bool eager_over_tcp();
  ~UcxTransport() override;
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* name() const override { return "ucx"; }
  void post_send(int peer, uint64_t tag, const void* buf, size_t len, TransportOp* op) override;
  void post_recv(int peer, uint64_t tag, uint64_t mask, void* buf, size_t len, TransportOp* op) override;
  bool probe(int peer, uint64_t tag, uint64_t mask) override;
  bool progress() override;
  void wait_for_event(std::chrono::steady_clock::time_point deadline) override;
  void interrupt() override;
  void shutdown(const std::string& why) override;
  std::string peer_failure(int peer) const override;

  void on_peer_error(int peer, ucs_status_t status);

  // A request's callback reaches its TransportOp through a Link the transport owns: shutdown cuts
  // the links of the requests UCX still holds (a rendezvous send to a dead peer may never end), so
  // that a late callback cannot write into an operation its owner has freed meanwhile.
  struct Link {
    TransportOp* op = nullptr;
  };

 private:
  Link* link(TransportOp* op);
  void track(void* request, bool is_recv, Link* l);
  void sweep();
  void close_endpoints(bool force);

  int rank_, size_;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int efd_ = -1;
  std::vector<ucp_ep_h> eps_;
  struct EpErrorArg {
    UcxTransport* self;
    int peer;
  };
  std::vector<std::unique_ptr<EpErrorArg>> ep_args_;
  struct Outstanding {
    void* req;
    bool is_recv;
    Link* link;
  };
  std::deque<Link> links_;
  std::vector<Link*> free_links_;
  std::vector<Outstanding> outstanding_;  // UCX requests not yet freed
  bool shut_ = false;
  mutable std::mutex failure_mu_;
  std::vector<std::string> failures_;
};

}  // namespace weft
