// The hierarchical device all-reduce (docs/GPU.md), for nodes whose network carries no GPU
// traffic: NCCL reduce-scatter inside the node, the rank's block staged to pinned host memory in
// chunks, Weft's host all-reduce of each chunk across nodes on the rank's rail (one host
// communicator per local rank), the chunks copied back, NCCL all-gather inside the node. The host
// all-reduce of chunk k overlaps the device -> host copies of the chunks after it and the
// host -> device copies of those before it. The orchestration's arithmetic is in hier_plan.h.
#pragma once
#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <vector>

#include "runtime/transport/nccl/hier_plan.h"
#include "runtime/transport/nccl/nccl_comm.h"

namespace weft::nccl {

// The inter-node step of the hierarchical all-reduce: host all-reduces along this rank's rail.
// The layer above provides it (the communicator's rail communicator, communicator_device.cc), so
// that this transport-level code never calls back up into the communicator.
class Rail {
 public:
  virtual ~Rail() = default;
  // Starts an in-place host all-reduce of args.count elements at buf; returns its handle.
  virtual size_t start(const CollectiveArgs& args, void* buf) = 0;
  // True once handle `id` ended successfully, false while it runs; throws weft::Error when it failed.
  virtual bool done(size_t id) = 0;
  virtual void release(size_t id) = 0;
  // From any thread: fails what is in flight (weftCommAbort on the rail).
  virtual void abort(const std::string& why) = 0;
  // Waits for what is queued, then releases the rail's transport.
  virtual void destroy() = 0;
};

class Hierarchical {
 public:
  // node: the NCCL communicator of this node's ranks (local_size ranks, this one at local_rank);
  // rail: the host communicator of the ranks with this local rank (one per node, at its node
  // index). Both already created (collectively) by the caller.
  Hierarchical(std::unique_ptr<NcclComm> node, std::unique_ptr<Rail> rail, HierLayout layout, uint64_t chunk_bytes);
  ~Hierarchical();
  Hierarchical(const Hierarchical&) = delete;
  Hierarchical& operator=(const Hierarchical&) = delete;

  int device() const { return node_->device(); }
  // a.kind must be all-reduce. user_stream non-null: the device work is enqueued on it and this
  // returns once the host phase is done (the copies back and the all-gather are left in the
  // stream). Null: on the node communicator's stream, waited for. avg: sum everywhere, then one
  // division by the number of ranks on the host, before the copy back.
  void all_reduce(const CollectiveArgs& a, const void* send, void* recv, void* user_stream, const WaitCtl& ctl);
  // From any thread: ncclCommAbort on the node communicator, weftCommAbort on the rail.
  void abort(const std::string& why);

 private:
  void reserve(uint64_t bytes, size_t chunks, const WaitCtl& ctl);
  // Stages the chunks through the host and all-reduces them on the rail; returns once every
  // chunk's copy back is enqueued on s.
  void host_phase(const CollectiveArgs& a, char* dev, const std::vector<Range>& chunks, Range block, cudaStream_t s,
                  const WaitCtl& ctl);

  std::unique_ptr<NcclComm> node_;
  std::unique_ptr<Rail> rail_;
  HierLayout layout_;
  uint64_t chunk_bytes_;
  void* host_ = nullptr;  // pinned staging buffer (cudaHostAlloc), grows to the largest block
  uint64_t host_bytes_ = 0;
  std::vector<cudaEvent_t> staged_;  // per chunk: its device -> host copy is done
  cudaEvent_t host_free_ = nullptr;  // the last call's copies out of host_ are done
  bool host_free_recorded_ = false;
};

}  // namespace weft::nccl
