#include "runtime/transport/nccl/hierarchical.h"

#include "collectives/reduce_kernels.h"
#include "runtime/base/log.h"
#include "runtime/transport/nccl/device.h"
#include "runtime/transport/nccl/nccl_map.h"

namespace weft::nccl {

Hierarchical::Hierarchical(std::unique_ptr<NcclComm> node, std::unique_ptr<Rail> rail, HierLayout layout,
                           uint64_t chunk_bytes)
    : node_(std::move(node)), rail_(std::move(rail)), layout_(layout), chunk_bytes_(chunk_bytes) {
  cuda_check(cudaEventCreateWithFlags(&host_free_, cudaEventDisableTiming), "cudaEventCreateWithFlags");
}

Hierarchical::~Hierarchical() {
  if (cudaSetDevice(node_->device()) != cudaSuccess) cudaGetLastError();
  // The rail's progress thread may still touch host_ after a failure: it goes first.
  try {
    rail_->destroy();
  } catch (const std::exception& e) {
    WEFT_LOG_WARN("hierarchical all-reduce: rail teardown: {}", e.what());
  }
  rail_.reset();
  node_.reset();
  for (cudaEvent_t e : staged_) cudaEventDestroy(e);
  if (host_free_) cudaEventDestroy(host_free_);
  if (host_ && cudaFreeHost(host_) != cudaSuccess) cudaGetLastError();
}

void Hierarchical::abort(const std::string& why) {
  node_->abort(why);
  rail_->abort(why);
}

void Hierarchical::reserve(uint64_t bytes, size_t chunks, const WaitCtl& ctl) {
  if (bytes > host_bytes_) {
    if (host_) {
      // Earlier copies out of the old buffer must be done before it goes (a bounded wait).
      if (host_free_recorded_) {
        node_->wait_until(
            [&] {
              cudaError_t q = cudaEventQuery(host_free_);
              if (q != cudaErrorNotReady) cuda_check(q, "cudaEventQuery (staging buffer in use)");
              return q == cudaSuccess;
            },
            ctl);
      }
      cuda_check(cudaFreeHost(host_), "cudaFreeHost");
      host_ = nullptr;
      host_bytes_ = 0;
    }
    cuda_check(cudaHostAlloc(&host_, bytes, cudaHostAllocDefault), "cudaHostAlloc (hierarchical staging buffer)");
    host_bytes_ = bytes;
  }
  while (staged_.size() < chunks) {
    cudaEvent_t e = nullptr;
    cuda_check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    staged_.push_back(e);
  }
}

void Hierarchical::all_reduce(const CollectiveArgs& a, const void* send, void* recv, void* user_stream,
                              const WaitCtl& ctl) {
  if (a.kind != CollectiveKind::kAllReduce) fail(ErrorCode::kInternalError, "{}: the hierarchical path is all-reduce only", ctl.what);
  if (a.count == 0) return;
  cuda_check(cudaSetDevice(node_->device()), "cudaSetDevice");
  cudaStream_t s = user_stream ? static_cast<cudaStream_t>(user_stream) : node_->stream();
  const uint64_t es = dtype_size(a.dtype);
  const NodePhase phase = node_phase(a.count, layout_.local_size);
  const Range block = owned_block(phase, layout_.local_rank, layout_.local_size);
  const std::vector<Range> chunks = chunks_of(block, es, chunk_bytes_);
  const ncclDataType_t dt = to_nccl(a.dtype);
  const ncclRedOp_t op = to_nccl(a.op == RedOp::kAvg ? RedOp::kSum : a.op);  // avg: one division at the end
  const auto* in = static_cast<const char*>(send);
  auto* out = static_cast<char*>(recv);
  const uint64_t mine = static_cast<uint64_t>(layout_.local_rank) * phase.even * es;
  const uint64_t tail = phase.tail.offset * es;
  try {
    reserve(std::max<uint64_t>(block.count * es, 1), chunks.size(), ctl);
    // The previous call's copies out of the staging buffer come before this call's copies into it.
    if (host_free_recorded_) cuda_check(cudaStreamWaitEvent(s, host_free_, 0), "cudaStreamWaitEvent");
    // 1. Inside the node: reduce-scatter the even part, reduce the tail to the last local rank.
    node_->group(
        [&](ncclComm_t c) {
          ncclResult_t r = ncclSuccess;
          if (phase.even) r = ncclReduceScatter(in, out + mine, phase.even, dt, op, c, s);
          if (r == ncclSuccess && phase.tail.count) {
            r = ncclReduce(in + tail, out + tail, phase.tail.count, dt, op, phase.tail_root, c, s);
          }
          return r;
        },
        ctl);
    // 2-4. Through the host and across nodes, chunk by chunk.
    host_phase(a, out, chunks, block, s, ctl);
    cuda_check(cudaEventRecord(host_free_, s), "cudaEventRecord");
    host_free_recorded_ = true;
    // 5. Inside the node: all-gather the blocks, broadcast the tail.
    node_->group(
        [&](ncclComm_t c) {
          ncclResult_t r = ncclSuccess;
          if (phase.even) r = ncclAllGather(out + mine, out, phase.even, dt, c, s);
          if (r == ncclSuccess && phase.tail.count) {
            r = ncclBroadcast(out + tail, out + tail, phase.tail.count, dt, phase.tail_root, c, s);
          }
          return r;
        },
        ctl);
    if (!user_stream) node_->wait_stream(s, ctl);
  } catch (const std::exception& e) {
    rail_->abort(e.what());  // its progress thread stops touching the staging buffer
    throw;
  }
}

void Hierarchical::host_phase(const CollectiveArgs& a, char* dev, const std::vector<Range>& chunks, Range block,
                              cudaStream_t s, const WaitCtl& ctl) {
  const uint64_t es = dtype_size(a.dtype);
  auto* host = static_cast<char*>(host_);
  auto at_host = [&](const Range& c) { return host + (c.offset - block.offset) * es; };
  for (size_t k = 0; k < chunks.size(); ++k) {
    cuda_check(cudaMemcpyAsync(at_host(chunks[k]), dev + chunks[k].offset * es, chunks[k].count * es,
                               cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync (device to host)");
    cuda_check(cudaEventRecord(staged_[k], s), "cudaEventRecord");
  }
  CollectiveArgs ha;
  ha.kind = CollectiveKind::kAllReduce;
  ha.dtype = a.dtype;
  ha.op = a.op == RedOp::kAvg ? RedOp::kSum : a.op;
  const int ranks = layout_.nodes * layout_.local_size;
  std::vector<size_t> works(chunks.size());
  size_t submitted = 0, returned = 0;
  // One pass of the pipeline: start the host all-reduce of every chunk that reached the host, and
  // send back every chunk whose all-reduce finished, in order. True when all went back.
  auto advance = [&] {
    for (;;) {
      bool moved = false;
      if (submitted < chunks.size()) {
        cudaError_t q = cudaEventQuery(staged_[submitted]);
        if (q == cudaSuccess) {
          const Range& c = chunks[submitted];
          ha.count = c.count;
          works[submitted++] = rail_->start(ha, at_host(c));
          moved = true;
        } else if (q != cudaErrorNotReady) {
          cuda_check(q, "cudaEventQuery (staging copy)");
        }
      }
      bool finished = false;
      if (returned < submitted) {
        const Range& c = chunks[returned];
        try {
          finished = rail_->done(works[returned]);
        } catch (const Error& e) {
          throw Error(e.code(), fmt::format("{}: the inter-node all-reduce of elements [{}, {}) failed: {}", ctl.what, c.offset,
                                            c.offset + c.count, e.what()));
        }
      }
      if (finished) {
        const Range& c = chunks[returned];
        if (a.op == RedOp::kAvg) finish_avg(a.dtype, at_host(c), c.count, ranks);
        cuda_check(cudaMemcpyAsync(dev + c.offset * es, at_host(c), c.count * es, cudaMemcpyHostToDevice, s),
                   "cudaMemcpyAsync (host to device)");
        rail_->release(works[returned++]);
        moved = true;
      }
      if (returned == chunks.size()) return true;
      if (!moved) return false;
    }
  };
  node_->wait_until(advance, ctl);
}

}  // namespace weft::nccl
