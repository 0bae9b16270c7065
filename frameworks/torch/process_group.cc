#include "frameworks/torch/process_group.h"

#include <Python.h>
#include <ATen/ATen.h>

#include <algorithm>
#include <cstdlib>

#include "frameworks/torch/store_adapter.h"
#include "frameworks/torch/tensors.h"
#include "runtime/base/error.h"
#include "runtime/base/log.h"
#include "runtime/bootstrap/job_env.h"
#include "runtime/store/tcp_store.h"

namespace weft::torch_backend {
namespace {
using c10d::OpType;
using WorkPtr = c10::intrusive_ptr<c10d::Work>;

// The completion queues of the live groups, for drain_all().
std::mutex g_live_mu;
std::vector<std::weak_ptr<void>> g_live;

// The job's own store when a launcher serves it outside the ranks (weftrun: WEFT_STORE_EXTERNAL=1
// with WEFT_MASTER_ADDR, WEFT_MASTER_PORT, WEFT_JOB_SECRET), one connection per process shared by
// every group; nullptr otherwise (the group then meets in torch's store).
std::shared_ptr<weft::Store> job_store_from_env() {
  static std::mutex mu;
  static std::shared_ptr<weft::Store> store;
  std::lock_guard<std::mutex> lock(mu);
  if (store) return store;
  const char* external = std::getenv("WEFT_STORE_EXTERNAL");
  if (!external || std::string(external) != "1") return nullptr;
  const weft::JobInfo job = weft::detect_job(weft::process_env());
  if (job.master_addr.empty() || job.secret.empty()) return nullptr;
  store = std::make_shared<weft::TcpStore>(job.master_addr, job.master_port, job.secret, weft::CommConfig::from_env(weft::process_env()).timeout);
  return store;
}
}  // namespace

// ---- WorkWeft -------------------------------------------------------------------------------

WorkWeft::WorkWeft(int rank, c10d::OpType type, std::vector<at::Tensor> outputs)
    : c10d::Work(rank, type),
      outputs_(std::move(outputs)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {}

void WorkWeft::then(std::function<void()> f) {
  if (!after_) {
    after_ = std::move(f);
  } else {
    after_ = [prev = std::move(after_), f = std::move(f)] { prev(); f(); };
  }
}

at::Tensor WorkWeft::stage(const at::Tensor& t, bool copy_back) {
  keep_.push_back(t);
  if (t.is_contiguous()) return t;
  at::Tensor c = t.contiguous();
  keep_.push_back(c);
  if (copy_back) then([t, c]() mutable { t.copy_(c); });
  return c;
}

int WorkWeft::sourceRank() const {
  TORCH_CHECK(source_ >= 0, "weft: sourceRank() is known for a completed receive only");
  return source_;
}

void WorkWeft::complete(std::exception_ptr error) {
  if (!error && after_) {
    try {
      after_();
    } catch (...) {
      error = std::current_exception();
    }
  }
  after_ = nullptr;
  keep_.clear();
  finish(error);
  if (error) {
    future_->setError(error);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
}

// ---- ProcessGroupWeft -----------------------------------------------------------------------

ProcessGroupWeft::ProcessGroupWeft(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                   std::chrono::milliseconds timeout)
    : c10d::ProcessGroup(rank, size) {
  try {
    CommInit init;
    init.config = CommConfig::from_env(process_env());
    // torch's timeout (init_process_group(timeout=...)) unless WEFT_TIMEOUT_MS says otherwise.
    const char* env_timeout = std::getenv("WEFT_TIMEOUT_MS");
    if ((!env_timeout || !*env_timeout) && timeout.count() > 0) init.config.timeout = timeout;
    // torch hands every group a store under the group's own prefix; "weft" keeps Weft's keys apart
    // from torch's own and from another backend's on the same group.
    auto torch_store = std::make_shared<PrefixStore>(std::make_shared<TorchStoreAdapter>(store), "weft");
    // Ranks reach the creator seconds apart (imports, data loading): wait for all of them with the
    // group's timeout, so that a short WEFT_TIMEOUT_MS only bounds Weft's own exchanges after.
    auto join_timeout = timeout.count() > 0 ? timeout : init.config.timeout;
    if (torch_store->add("join", 1) == size) torch_store->set("joined", to_bytes("1"));
    torch_store->wait({"joined"}, std::max(join_timeout, init.config.timeout));
    init.store = torch_store;
    // Under weftrun the job's store lives outside the ranks (torch's TCPStore dies with rank 0):
    // the communicator meets there instead, under a prefix of its own that the group's rank 0
    // draws and hands out through torch's store. Deaths are then seen at once (disconnect
    // notices), and a shrink works whichever rank died (docs/PYTORCH.md, "Surviving a failure").
    if (auto job = job_store_from_env()) {
      if (rank == 0) torch_store->set("job_group", to_bytes(std::to_string(job->add("torch/groups", 1))));
      const std::string id = to_string(torch_store->get("job_group", std::max(join_timeout, init.config.timeout)));
      init.store = std::make_shared<PrefixStore>(job, "torch/g" + id);
    }
    init.rank = rank;
    init.size = size;
    init.transport = TransportKind::kUcx;
    if (const char* node = std::getenv("WEFT_NODE_ID")) init.node_id = node;  // "" = the hostname
    // The flight recorder and metrics name it "torch"; a group of every rank names the dumps.
    init.name = "torch";
    const char* world = std::getenv("WORLD_SIZE");
    init.job_ranks = world && std::atoi(world) == size;
    comm_ = Communicator::create(std::move(init));
  } catch (const std::exception& e) {
    TORCH_CHECK(false, "weft: could not create the process group (rank ", rank, " of ", size, "): ", e.what());
  }
  start_completions();
  init();
}

ProcessGroupWeft::ProcessGroupWeft(std::shared_ptr<weft::Communicator> comm)
    : c10d::ProcessGroup(comm->rank(), comm->size()), comm_(std::move(comm)) {
  start_completions();
  init();
}

void ProcessGroupWeft::start_completions() {
  completer_ = std::thread([c = completions_, r = rank_] { completion_loop(c, r); });
  std::lock_guard<std::mutex> lock(g_live_mu);
  std::erase_if(g_live, [](const std::weak_ptr<void>& w) { return w.expired(); });
  g_live.push_back(completions_);
}

std::pair<c10::intrusive_ptr<c10d::ProcessGroup>, std::vector<int>> ProcessGroupWeft::shrink(
    const c10::intrusive_ptr<c10d::ProcessGroup>& group, const std::optional<std::vector<int>>& exclude) {
  auto* self = dynamic_cast<ProcessGroupWeft*>(group.get());
  TORCH_CHECK(self, "weft: shrink_group takes a group of the weft backend (got ", group ? group->getBackendName() : "None", ")");
  std::shared_ptr<weft::Communicator> child;
  try {
    child = self->comm_->shrink(exclude);
  } catch (const std::exception& e) {
    TORCH_CHECK(false, "weft: ", e.what());
  }
  std::vector<int> members = child->shrunk_from();
  return {c10::make_intrusive<ProcessGroupWeft>(std::move(child)), std::move(members)};
}

ProcessGroupWeft::~ProcessGroupWeft() {
  // Python drops the last reference with the GIL held; the completion thread may need it to run a
  // Future callback (a Python comm hook) of a Work still pending, so let go of it while waiting.
  PyThreadState* saved = Py_IsInitialized() && PyGILState_Check() ? PyEval_SaveThread() : nullptr;
  {
    std::lock_guard<std::mutex> lock(completions_->mu);
    completions_->stop = true;
  }
  completions_->cv.notify_all();
  if (completer_.joinable()) {
    if (completer_.get_id() == std::this_thread::get_id()) {
      completer_.detach();  // it ends after the callback returns, touching only its Completions
    } else {
      completer_.join();
    }
  }
  try {
    comm_->destroy();
  } catch (const std::exception& e) {
    WEFT_LOG_WARN("torch process group teardown: {}", e.what());
  }
  if (saved) PyEval_RestoreThread(saved);
}

c10::intrusive_ptr<c10d::ProcessGroup> ProcessGroupWeft::create(const c10::intrusive_ptr<c10d::Store>& store,
                                                                int rank, int size,
                                                                const std::chrono::duration<float>& timeout) {
  return c10::make_intrusive<ProcessGroupWeft>(store, rank, size,
                                               std::chrono::duration_cast<std::chrono::milliseconds>(timeout));
}

void ProcessGroupWeft::submit(WorkWeft& work, const CollectiveArgs& args, const void* send, void* recv) {
  // Nothing to move (every rank has empty tensors): Weft is not asked. Not so with unequal splits:
  // a rank that sends nothing may still receive, and every rank takes part.
  if (args.count == 0 && args.kind != CollectiveKind::kBarrier && args.kind != CollectiveKind::kAllToAllv) return;
  try {
    work.requests_.push_back(comm_->submit(args, send, recv, SubmitMode::kAsync));
  } catch (const std::exception& e) {
    // Operations already submitted for this Work use its buffers: let them end before it goes.
    for (auto& r : work.requests_) {
      try {
        while (!r->wait(std::chrono::milliseconds(1000))) {
        }
      } catch (const std::exception&) {
      }
    }
    TORCH_CHECK(false, "weft: ", e.what());
  }
}

WorkPtr ProcessGroupWeft::enqueue(c10::intrusive_ptr<WorkWeft> work) {
  {
    std::lock_guard<std::mutex> lock(completions_->mu);
    completions_->pending.push_back(work);
    completions_->inflight++;
  }
  completions_->cv.notify_one();
  return work;
}

void ProcessGroupWeft::completion_loop(const std::shared_ptr<Completions>& c, int rank) {
  set_log_rank(rank);
  for (;;) {
    c10::intrusive_ptr<WorkWeft> w;
    {
      std::unique_lock<std::mutex> lock(c->mu);
      c->cv.wait(lock, [&] { return c->stop || !c->pending.empty(); });
      if (c->pending.empty()) return;
      w = c->pending.front();
      c->pending.pop_front();
    }
    std::exception_ptr error;
    for (auto& request : w->requests_) {
      try {
        // Weft ends every operation by WEFT_TIMEOUT_MS (or the group's timeout) at the latest.
        while (!request->wait(std::chrono::milliseconds(1000))) {
        }
      } catch (const std::exception& e) {
        if (!error) error = std::make_exception_ptr(std::runtime_error(std::string("weft: ") + e.what()));
      }
    }
    if (w->requests_.size() == 1 && w->requests_[0]->args().kind == CollectiveKind::kRecv)
      w->source_ = w->requests_[0]->args().root;
    w->requests_.clear();
    w->complete(error);
    w.reset();
    {
      std::lock_guard<std::mutex> lock(c->mu);
      c->inflight--;
    }
    c->cv.notify_all();
  }
}

void ProcessGroupWeft::drain_all() {
  std::vector<std::shared_ptr<void>> live;
  {
    std::lock_guard<std::mutex> lock(g_live_mu);
    for (auto& w : g_live)
      if (auto p = w.lock()) live.push_back(std::move(p));
  }
  for (auto& p : live) {
    auto* c = static_cast<Completions*>(p.get());
    std::unique_lock<std::mutex> lock(c->mu);
    c->cv.wait(lock, [&] { return c->inflight == 0 || c->stop; });
  }
}


WorkPtr ProcessGroupWeft::allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  TORCH_CHECK(!tensors.empty(), "weft: all_reduce: no tensor");
  const at::Tensor& t = tensors[0];
  if (t.defined() && t.is_sparse()) return allreduce_sparse(tensors, opts);
  check_tensor(t, "all_reduce");
  auto a = make_args(CollectiveKind::kAllReduce, t, t.numel());
  a.op = weft_op(opts.reduceOp, "all_reduce");
  auto w = c10::make_intrusive<WorkWeft>(rank_, OpType::ALLREDUCE, tensors);
  if (tensors.size() == 1) {
    at::Tensor buf = w->stage(t, true);
    return enqueue(w, a, buf.data_ptr(), buf.data_ptr());
  }
  // Several tensors per process (gloo's semantics): they are reduced together, across the list
  // and the ranks, and every tensor gets the result. Combined locally first, then one all-reduce.
  for (auto& x : tensors) check_like(x, t, t.numel(), "all_reduce", "every tensor of the list");
  TORCH_CHECK(a.op != RedOp::kAvg, "weft: all_reduce of a tensor list: AVG is not defined for several tensors per process");
  at::Tensor acc = t.contiguous().clone();
  for (size_t i = 1; i < tensors.size(); ++i) {
    const at::Tensor& x = tensors[i];
    switch (a.op) {
      case RedOp::kSum: acc.add_(x); break;
      case RedOp::kProd: acc.mul_(x); break;
      case RedOp::kMin: acc = at::minimum(acc, x); break;
      case RedOp::kMax: acc = at::maximum(acc, x); break;
      default: TORCH_CHECK(false, "weft: all_reduce of a tensor list: unsupported op");
    }
  }
  w->keep(acc);
  w->then([tensors, acc]() mutable {
    for (auto& x : tensors) x.copy_(acc.view(x.sizes()));
  });
  return enqueue(w, a, acc.data_ptr(), acc.data_ptr());
}

WorkPtr ProcessGroupWeft::allreduce_coalesced(std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK(!tensors.empty(), "weft: all_reduce_coalesced: no tensor");
  const RedOp op = weft_op(opts.reduceOp, "all_reduce_coalesced");
  for (auto& t : tensors) {
    check_tensor(t, "all_reduce_coalesced");
    TORCH_CHECK(t.scalar_type() == tensors[0].scalar_type(), "weft: all_reduce_coalesced: the tensors must have one type (",
                tensors[0].scalar_type(), " and ", t.scalar_type(), ")");
  }
  // One all-reduce over the tensors laid end to end (as gloo), copied back on completion.
  auto w = c10::make_intrusive<WorkWeft>(rank_, OpType::ALLREDUCE_COALESCED, tensors);
  std::vector<at::Tensor> flat_parts;
  for (auto& t : tensors) flat_parts.push_back(t.reshape({-1}));
  at::Tensor flat = at::cat(flat_parts);
  w->keep(flat);
  w->then([tensors, flat]() mutable {
    int64_t off = 0;
    for (auto& t : tensors) {
      t.copy_(flat.narrow(0, off, t.numel()).view(t.sizes()));
      off += t.numel();
    }
  });
  auto a = make_args(CollectiveKind::kAllReduce, flat, flat.numel());
  a.op = op;
  return enqueue(w, a, flat.data_ptr(), flat.data_ptr());
}

WorkPtr ProcessGroupWeft::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                              const c10d::AllgatherOptions&) {
  // outputs[r][i]: rank r's input i (torch's layout: one list per rank).
  TORCH_CHECK(!inputs.empty(), "weft: all_gather_coalesced: no input");
  TORCH_CHECK(static_cast<int>(outputs.size()) == size_, "weft: all_gather_coalesced: ", outputs.size(),
              " output lists; the group has ", size_, " ranks");
  std::vector<at::Tensor> flat_in, all_outs;
  int64_t total = 0;
  for (auto& in : inputs) {
    check_tensor(in, "all_gather_coalesced");
    TORCH_CHECK(in.scalar_type() == inputs[0].scalar_type(), "weft: all_gather_coalesced: the inputs must have one type");
    flat_in.push_back(in.reshape({-1}));
    total += in.numel();
  }
  for (int r = 0; r < size_; ++r) {
    TORCH_CHECK(outputs[r].size() == inputs.size(), "weft: all_gather_coalesced: output list ", r, " has ", outputs[r].size(),
                " tensors for ", inputs.size(), " inputs");
    for (size_t i = 0; i < inputs.size(); ++i) {
      check_like(outputs[r][i], inputs[i], inputs[i].numel(), "all_gather_coalesced", "an output tensor");
      all_outs.push_back(outputs[r][i]);
    }
  }
  // One all-gather of every input laid end to end: rank r's block holds its inputs in order.
  auto w = c10::make_intrusive<WorkWeft>(rank_, OpType::ALLGATHER_COALESCED, all_outs);
  at::Tensor src = at::cat(flat_in);
  at::Tensor dst = at::empty({size_ * total}, src.options());
  w->keep(src);
  w->keep(dst);
  w->then([outputs, dst, total]() mutable {
    for (size_t r = 0; r < outputs.size(); ++r) {
      int64_t off = static_cast<int64_t>(r) * total;
      for (auto& o : outputs[r]) {
        o.copy_(dst.narrow(0, off, o.numel()).view(o.sizes()));
        off += o.numel();
      }
    }
  });
  return enqueue(w, make_args(CollectiveKind::kAllGather, src, total), src.data_ptr(), dst.data_ptr());
}

// A sparse COO tensor (gloo: SUM only): every rank's indices and values are gathered, then
// summed locally into a coalesced sparse tensor, the same on every rank.
WorkPtr ProcessGroupWeft::allreduce_sparse(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  TORCH_CHECK(tensors.size() == 1, "weft: all_reduce of sparse tensors takes one tensor per process");
  TORCH_CHECK(opts.reduceOp == c10d::ReduceOp::SUM, "weft: all_reduce of a sparse tensor supports SUM only (as gloo)");
  at::Tensor t = tensors[0].coalesce();
  at::Tensor idx = t._indices().contiguous(), val = t._values().contiguous();
  // Sizes first (one all-gather of each rank's nnz), then indices and values padded to the largest.
  at::Tensor nnz = at::full({1}, idx.size(1), at::kLong);
  at::Tensor nnzs = at::empty({size_}, at::kLong);
  comm_->run(make_args(CollectiveKind::kAllGather, nnz, 1), nnz.data_ptr(), nnzs.data_ptr());
  const int64_t most = nnzs.max().item<int64_t>();
  const int64_t dims = idx.size(0);
  std::vector<int64_t> vshape = val.sizes().vec();
  vshape[0] = most;
  at::Tensor pidx = at::zeros({dims, most}, at::kLong), pval = at::zeros(vshape, val.options());
  pidx.narrow(1, 0, idx.size(1)).copy_(idx);
  pval.narrow(0, 0, val.size(0)).copy_(val);
  pidx = pidx.t().contiguous();  // row r: one index tuple
  at::Tensor gidx = at::empty({size_ * most, dims}, at::kLong);
  std::vector<int64_t> gshape = vshape;
  gshape[0] = size_ * most;
  at::Tensor gval = at::empty(gshape, val.options());
  comm_->run(make_args(CollectiveKind::kAllGather, pidx, pidx.numel()), pidx.data_ptr(), gidx.data_ptr());
  comm_->run(make_args(CollectiveKind::kAllGather, pval, pval.numel()), pval.data_ptr(), gval.data_ptr());
  std::vector<at::Tensor> is, vs;
  for (int r = 0; r < size_; ++r) {
    const int64_t k = nnzs[r].item<int64_t>();
    is.push_back(gidx.narrow(0, r * most, k));
    vs.push_back(gval.narrow(0, r * most, k));
  }
  at::Tensor sum = at::sparse_coo_tensor(at::cat(is).t(), at::cat(vs), t.sizes(), t.options()).coalesce();
  tensors[0].copy_(sum);
  auto w = c10::make_intrusive<WorkWeft>(rank_, OpType::ALLREDUCE, tensors);
  return enqueue(w);
}

WorkPtr ProcessGroupWeft::broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) {
  const at::Tensor& t = single(tensors, "broadcast");
  TORCH_CHECK(opts.rootTensor == 0, "weft: broadcast: rootTensor must be 0 (one tensor per process)");
  auto a = make_args(CollectiveKind::kBroadcast, t, t.numel());
  a.root = static_cast<int>(opts.rootRank);
  auto w = c10::make_intrusive<WorkWeft>(rank_, OpType::BROADCAST, tensors);
  at::Tensor buf = w->stage(t, true);
  return enqueue(w, a, buf.data_ptr(), buf.data_ptr());
}

WorkPtr ProcessGroupWeft::reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
  const at::Tensor& t = single(tensors, "reduce");
  TORCH_CHECK(opts.rootTensor == 0, "weft: reduce: rootTensor must be 0 (one tensor per process)");
  auto a = make_args(CollectiveKind::kReduce, t, t.numel());
  a.op = weft_op(opts.reduceOp, "reduce");
  a.root = static_cast<int>(opts.rootRank);
  auto w = c10::make_intrusive<WorkWeft>(rank_, OpType::REDUCE, tensors);
  at::Tensor buf = w->stage(t, true);
  return enqueue(w, a, buf.data_ptr(), buf.data_ptr());
}

WorkPtr ProcessGroupWeft::allgather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                    const c10d::AllgatherOptions&) {
  const at::Tensor& in = single(inputs, "all_gather");
  TORCH_CHECK(outputs.size() == 1, "weft: all_gather takes one output list per process (got ", outputs.size(), ")");
  std::vector<at::Tensor> outs = outputs[0];
  TORCH_CHECK(static_cast<int>(outs.size()) == size_, "weft: all_gather: the output list has ", outs.size(),
              " tensors; the group has ", size_, " ranks");
  const int64_t n = in.numel();
  for (auto& o : outs) check_like(o, in, n, "all_gather", "an output tensor");
  auto w = c10::make_intrusive<WorkWeft>(rank_, OpType::ALLGATHER, outs);
  at::Tensor src = w->stage(in, false);
  at::Tensor flat = at::empty({size_ * n}, in.options().memory_format(at::MemoryFormat::Contiguous));
  w->keep(flat);
  w->then([outs, flat, n]() mutable {
    for (size_t i = 0; i < outs.size(); ++i) outs[i].copy_(flat.narrow(0, static_cast<int64_t>(i) * n, n).view(outs[i].sizes()));
  });
  return enqueue(w, make_args(CollectiveKind::kAllGather, in, n), src.data_ptr(), flat.data_ptr());
}

WorkPtr ProcessGroupWeft::_allgather_base(at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions&) {
  check_tensor(input, "all_gather_into_tensor");
  check_like(output, input, input.numel() * size_, "all_gather_into_tensor", "the output");
  auto w = c10::make_intrusive<WorkWeft>(rank_, OpType::_ALLGATHER_BASE, std::vector<at::Tensor>{output});
  at::Tensor src = w->stage(input, false);
  at::Tensor dst = w->stage(output, true);
  return enqueue(w, make_args(CollectiveKind::kAllGather, input, input.numel()), src.data_ptr(), dst.data_ptr());
}

WorkPtr ProcessGroupWeft::reduce_scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ReduceScatterOptions& opts) {
  const at::Tensor& out = single(outputs, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1, "weft: reduce_scatter takes one input list per process (got ", inputs.size(), ")");
  const auto& ins = inputs[0];
  TORCH_CHECK(static_cast<int>(ins.size()) == size_, "weft: reduce_scatter: the input list has ", ins.size(),
              " tensors; the group has ", size_, " ranks");
  const int64_t n = out.numel();
  for (auto& i : ins) check_like(i, out, n, "reduce_scatter", "an input tensor");
  auto a = make_args(CollectiveKind::kReduceScatter, out, n);
  a.op = weft_op(opts.reduceOp, "reduce_scatter");
  auto w = c10::make_intrusive<WorkWeft>(rank_, OpType::REDUCE_SCATTER, outputs);
  at::Tensor flat = at::empty({size_ * n}, out.options().memory_format(at::MemoryFormat::Contiguous));
  for (int r = 0; r < size_; ++r) flat.narrow(0, r * n, n).copy_(ins[r].reshape({-1}));
  w->keep(flat);
  at::Tensor dst = w->stage(out, true);
  return enqueue(w, a, flat.data_ptr(), dst.data_ptr());
}

WorkPtr ProcessGroupWeft::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                               const c10d::ReduceScatterOptions& opts) {
  check_tensor(output, "reduce_scatter_tensor");
  check_like(input, output, output.numel() * size_, "reduce_scatter_tensor", "the input");
  auto a = make_args(CollectiveKind::kReduceScatter, output, output.numel());
  a.op = weft_op(opts.reduceOp, "reduce_scatter_tensor");
  auto w = c10::make_intrusive<WorkWeft>(rank_, OpType::_REDUCE_SCATTER_BASE, std::vector<at::Tensor>{output});
  at::Tensor src = w->stage(input, false);
  at::Tensor dst = w->stage(output, true);
  return enqueue(w, a, src.data_ptr(), dst.data_ptr());
}

WorkPtr ProcessGroupWeft::barrier(const c10d::BarrierOptions&) {
  auto w = c10::make_intrusive<WorkWeft>(rank_, OpType::BARRIER, std::vector<at::Tensor>{});
  CollectiveArgs a;
  a.kind = CollectiveKind::kBarrier;
  return enqueue(w, a, nullptr, nullptr);
}

}  // namespace weft::torch_backend
