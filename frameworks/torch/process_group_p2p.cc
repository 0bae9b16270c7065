// The backend's point-to-point operations, and gather/scatter built from them.
#include "frameworks/torch/process_group.h"
#include "frameworks/torch/tensors.h"

namespace weft::torch_backend {

using c10d::OpType;
using WorkPtr = c10::intrusive_ptr<c10d::Work>;

WorkPtr ProcessGroupWeft::send(std::vector<at::Tensor>& tensors, int dst, int /*tag*/) {
  const at::Tensor& t = single(tensors, "send");
  auto a = make_args(CollectiveKind::kSend, t, t.numel());
  a.root = dst;
  auto w = c10::make_intrusive<WorkWeft>(rank_, OpType::SEND, std::vector<at::Tensor>{});
  at::Tensor buf = w->stage(t, false);
  return enqueue(w, a, buf.data_ptr(), nullptr);
}

WorkPtr ProcessGroupWeft::recv(std::vector<at::Tensor>& tensors, int src, int /*tag*/) {
  const at::Tensor& t = single(tensors, "recv");
  auto a = make_args(CollectiveKind::kRecv, t, t.numel());
  a.root = src;
  auto w = c10::make_intrusive<WorkWeft>(rank_, OpType::RECV, tensors);
  at::Tensor buf = w->stage(t, true);
  return enqueue(w, a, nullptr, buf.data_ptr());
}

// gather and scatter: point-to-point operations between the root and every other rank, queued in
// rank order (Weft has no gather/scatter schedule; the root's link carries everything anyway).
WorkPtr ProcessGroupWeft::gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                 const c10d::GatherOptions& opts) {
  const at::Tensor& in = single(inputs, "gather");
  const int root = static_cast<int>(opts.rootRank);
  TORCH_CHECK(root >= 0 && root < size_, "weft: gather: root ", root, " is outside the group (0..", size_ - 1, ")");
  const int64_t n = in.numel();
  if (rank_ != root) {
    TORCH_CHECK(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
                "weft: gather: only the root (rank ", root, ") passes output tensors");
    auto w = c10::make_intrusive<WorkWeft>(rank_, OpType::GATHER, std::vector<at::Tensor>{});
    at::Tensor src = w->stage(in, false);
    auto a = make_args(CollectiveKind::kSend, in, n);
    a.root = root;
    return enqueue(w, a, src.data_ptr(), nullptr);
  }
  TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == size_, "weft: gather: the root passes one list of ",
              size_, " output tensors");
  std::vector<at::Tensor> outs = outputs[0];
  for (auto& o : outs) check_like(o, in, n, "gather", "an output tensor");
  auto w = c10::make_intrusive<WorkWeft>(rank_, OpType::GATHER, outs);
  w->keep(in);
  outs[root].copy_(in.reshape(outs[root].sizes()));
  for (int r = 0; r < size_; ++r) {
    if (r == root) continue;
    at::Tensor dst = w->stage(outs[r], true);
    auto a = make_args(CollectiveKind::kRecv, in, n);
    a.root = r;
    submit(*w, a, nullptr, dst.data_ptr());
  }
  return enqueue(w);
}

WorkPtr ProcessGroupWeft::scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                  const c10d::ScatterOptions& opts) {
  const at::Tensor& out = single(outputs, "scatter");
  const int root = static_cast<int>(opts.rootRank);
  TORCH_CHECK(root >= 0 && root < size_, "weft: scatter: root ", root, " is outside the group (0..", size_ - 1, ")");
  const int64_t n = out.numel();
  auto w = c10::make_intrusive<WorkWeft>(rank_, OpType::SCATTER, outputs);
  if (rank_ != root) {
    TORCH_CHECK(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
                "weft: scatter: only the root (rank ", root, ") passes input tensors");
    at::Tensor dst = w->stage(out, true);
    auto a = make_args(CollectiveKind::kRecv, out, n);
    a.root = root;
    return enqueue(w, a, nullptr, dst.data_ptr());
  }
  TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_, "weft: scatter: the root passes one list of ",
              size_, " input tensors");
  const auto& ins = inputs[0];
  for (auto& i : ins) check_like(i, out, n, "scatter", "an input tensor");
  for (int r = 0; r < size_; ++r) {
    if (r == root) continue;
    at::Tensor src = w->stage(ins[r], false);
    auto a = make_args(CollectiveKind::kSend, out, n);
    a.root = r;
    submit(*w, a, src.data_ptr(), nullptr);
  }
  out.copy_(ins[root].reshape(out.sizes()));
  return enqueue(w);
}

// A receive from whichever rank's message arrives first (Weft matches it when one does); the
// Work's sourceRank() is that rank, as gloo's.
WorkPtr ProcessGroupWeft::recvAnysource(std::vector<at::Tensor>& tensors, int /*tag*/) {
  const at::Tensor& t = single(tensors, "recv");
  auto a = make_args(CollectiveKind::kRecv, t, t.numel());
  a.root = kAnySource;
  auto w = c10::make_intrusive<WorkWeft>(rank_, OpType::RECVANYSOURCE, tensors);
  at::Tensor buf = w->stage(t, true);
  return enqueue(w, a, nullptr, buf.data_ptr());
}

}  // namespace weft::torch_backend
