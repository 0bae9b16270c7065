// Weft's own intra-node transport: ranks of one node share a mapped segment holding, for every
// ordered pair of local ranks, a ring of message descriptors. Small messages travel inline in the
// descriptor (one copy in, one copy out); large ones are read by the receiver straight from the
// sender's memory with process_vm_readv (cross-memory attach: one copy, no staging), and the
// sender's send completes when the receiver acknowledges. Waiting sleeps on a futex in the
// segment. A sender out of descriptors or staging chunks is never left waiting on a receiver that
// has no receive for the messages holding them: an idle receiver takes those into its own memory
// (take_unexpected_messages). Peers on other nodes go through an inner transport (UCX).
//
// Why: UCX 1.13's shared-memory path moves 32 MiB at ~1.6 GB/s on these machines
// (ucx_perftest tag_bw), far below what one copy costs; see docs/PERFORMANCE.md.
#pragma once
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "runtime/store/store.h"
#include "runtime/transport/transport.h"

namespace weft {

class ShmTransport : public Transport {
 public:
  // node_of_rank: the node index of every rank; ranks on this rank's node use shared memory,
  // the others `remote` (which may be null when every rank is local).
  ShmTransport(std::shared_ptr<Store> store, int rank, int size, const std::vector<int>& node_of_rank,
               std::unique_ptr<Transport> remote, Millis timeout);
  ~ShmTransport() override;
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* name() const override { return remote_ ? "shm+ucx" : "shm"; }
  void post_send(int peer, uint64_t tag, const void* buf, size_t len, TransportOp* op) override;
  void post_recv(int peer, uint64_t tag, uint64_t mask, void* buf, size_t len, TransportOp* op) override;
  // Only when every rank is on this node (remote peers would need the executor's fallback).
  bool reduces_on_delivery() const override { return !remote_; }
  void post_recv_reduce(int peer, uint64_t tag, uint64_t mask, void* dst, const void* other, size_t len, DataType dtype,
                        RedOp op, TransportOp* top) override;
  bool probe(int peer, uint64_t tag, uint64_t mask) override;
  bool progress() override;
  void wait_for_event(std::chrono::steady_clock::time_point deadline) override;
  void interrupt() override;
  void shutdown(const std::string& why) override;
  std::string peer_failure(int peer) const override;

  // True when this process can read a sibling's memory with process_vm_readv (no Yama ptrace
  // restriction, and the call works).
  static bool usable();

 private:
  struct Segment;
  struct Slot;
  struct PostedRecv {
    uint64_t tag, mask;
    void* buf;
    size_t len;
    TransportOp* op;
    const void* other;  // non-null: buf = incoming OP other
    DataType dtype;
    RedOp redop;
  };
  struct PendingSend {
    uint64_t tag;
    const void* buf;
    size_t len;
    TransportOp* op;
  };
  struct AwaitAck {
    uint64_t seq;
    TransportOp* op;
  };
  // A message taken off the ring before its receive was posted (take_unexpected_messages): its bytes,
  // or why they could not be read.
  struct Unexpected {
    uint64_t tag;
    std::vector<uint8_t> bytes;
    std::string error;  // non-empty: reading the sender's memory failed
  };
  struct Peer {
    int local = -1;  // index among the node's ranks; -1: remote
    int pid = 0;
    std::vector<PostedRecv> posted;    // receives from this peer, in posting order
    std::vector<PendingSend> backlog;  // sends waiting for a free slot
    std::vector<AwaitAck> awaiting;    // rendezvous sends waiting for the peer's read
    std::vector<Unexpected> unexpected;  // messages from this peer that arrived before their receive
    uint64_t recv_scan = 0;            // receive side: lowest unconsumed sequence
  };

  Slot* slot(int src_local, int dst_local, uint64_t seq);
  bool try_send(int peer, const PendingSend& s);
  bool collect_acks(int peer);
  bool deliver(int src, Slot* sl, PostedRecv& r);
  bool read_rendezvous(int src, const Slot* sl, uint8_t* into, std::string& why);
  void release(int src, Slot* sl);
  bool stash_unexpected(int src, uint64_t tail, uint64_t head);
  bool take_unexpected(int src, PostedRecv& r);
  bool poll_incoming(int src, bool take_all = false);
  bool take_unexpected_messages();
  void ring_doorbell(int local);

  int rank_, size_;
  int my_local_ = 0, local_size_ = 1;
  std::vector<Peer> peers_;
  std::unique_ptr<Transport> remote_;
  void* base_ = nullptr;
  size_t bytes_ = 0;
  std::vector<uint8_t> bounce_;
  bool shut_ = false;
  std::string shut_why_;
};

}  // namespace weft
