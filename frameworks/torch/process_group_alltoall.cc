// The backend's all-to-all, as gloo's: all_to_all_single (one tensor each way, split along the
// first dimension by input/output_split_sizes; weft's all-to-all when neither is given, else its
// alltoallv) and all_to_all (a list of tensors each way, of any sizes: weft's alltoallv).
#include "frameworks/torch/process_group.h"
#include "frameworks/torch/tensors.h"

namespace weft::torch_backend {

using c10d::OpType;
using WorkPtr = c10::intrusive_ptr<c10d::Work>;

namespace {

// The rows each rank's part of t has along dimension 0: split_sizes as given (one per rank,
// adding up to t's rows), or t's rows in equal parts when none are given (as gloo).
std::vector<int64_t> rows_per_rank(const at::Tensor& t, const std::vector<int64_t>& split_sizes, int size, const char* which) {
  TORCH_CHECK(t.dim() >= 1, "weft: all_to_all_single with split sizes needs tensors of at least one dimension (the ", which,
              " has none)");
  const int64_t rows = t.size(0);
  if (split_sizes.empty()) {
    TORCH_CHECK(rows % size == 0, "weft: all_to_all_single: the ", which, "'s ", rows, " rows do not split equally between ", size,
                " ranks; pass ", which, "_split_sizes");
    return std::vector<int64_t>(static_cast<size_t>(size), rows / size);
  }
  TORCH_CHECK(static_cast<int>(split_sizes.size()) == size, "weft: all_to_all_single: ", which, "_split_sizes has ",
              split_sizes.size(), " entries; the group has ", size, " ranks");
  int64_t sum = 0;
  for (int64_t s : split_sizes) {
    TORCH_CHECK(s >= 0, "weft: all_to_all_single: ", which, "_split_sizes=", c10::IntArrayRef(split_sizes), " has a negative size");
    sum += s;
  }
  TORCH_CHECK(sum == rows, "weft: all_to_all_single: ", which, "_split_sizes=", c10::IntArrayRef(split_sizes), " adds up to ", sum,
              " rows; the ", which, " has ", rows);
  return split_sizes;
}

// Counts in elements (rows times the elements of a row) and their displacements, end to end.
void counts_and_displs(const std::vector<int64_t>& rows, int64_t row_elems, std::vector<uint64_t>& counts,
                       std::vector<uint64_t>& displs) {
  uint64_t at = 0;
  for (int64_t r : rows) {
    counts.push_back(static_cast<uint64_t>(r * row_elems));
    displs.push_back(at);
    at += counts.back();
  }
}

CollectiveArgs alltoallv_args(const at::Tensor& like, std::shared_ptr<AllToAllvSplits> splits) {
  CollectiveArgs a = make_args(CollectiveKind::kAllToAllv, like, splits->sent());
  a.splits = std::move(splits);
  return a;
}

}  // namespace

WorkPtr ProcessGroupWeft::alltoall_base(at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_splits,
                                        std::vector<int64_t>& input_splits, const c10d::AllToAllOptions&) {
  check_tensor(input, "all_to_all_single");
  auto w = c10::make_intrusive<WorkWeft>(rank_, OpType::ALLTOALL_BASE, std::vector<at::Tensor>{output});
  if (input_splits.empty() && output_splits.empty()) {
    check_like(output, input, input.numel(), "all_to_all_single", "the output");
    TORCH_CHECK(input.numel() % size_ == 0, "weft: all_to_all_single: ", input.numel(),
                " elements do not split equally between ", size_, " ranks");
    at::Tensor src = w->stage(input, false);
    at::Tensor dst = w->stage(output, true);
    return enqueue(w, make_args(CollectiveKind::kAllToAll, input, input.numel() / size_), src.data_ptr(), dst.data_ptr());
  }
  // Unequal splits: rows of the first dimension to and from each rank.
  check_like(output, input, output.numel(), "all_to_all_single", "the output");
  const std::vector<int64_t> in_rows = rows_per_rank(input, input_splits, size_, "input");
  const std::vector<int64_t> out_rows = rows_per_rank(output, output_splits, size_, "output");
  const int64_t in_row = input.size(0) ? input.numel() / input.size(0) : 0;
  const int64_t out_row = output.size(0) ? output.numel() / output.size(0) : 0;
  auto splits = std::make_shared<AllToAllvSplits>();
  counts_and_displs(in_rows, in_row, splits->send_counts, splits->send_displs);
  counts_and_displs(out_rows, out_row, splits->recv_counts, splits->recv_displs);
  at::Tensor src = w->stage(input, false);
  at::Tensor dst = w->stage(output, true);
  return enqueue(w, alltoallv_args(input, std::move(splits)), src.data_ptr(), dst.data_ptr());
}

WorkPtr ProcessGroupWeft::alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                   const c10d::AllToAllOptions&) {
  TORCH_CHECK(static_cast<int>(inputs.size()) == size_ && static_cast<int>(outputs.size()) == size_,
              "weft: all_to_all takes ", size_, " input and output tensors (got ", inputs.size(), " and ", outputs.size(), ")");
  check_tensor(inputs[0], "all_to_all");
  for (auto& t : inputs) check_like(t, inputs[0], t.numel(), "all_to_all", "an input tensor");
  for (auto& t : outputs) check_like(t, inputs[0], t.numel(), "all_to_all", "an output tensor");
  auto w = c10::make_intrusive<WorkWeft>(rank_, OpType::ALLTOALL, outputs);
  // inputs[p] goes to rank p, outputs[p] comes from rank p: laid end to end each way, as weft's
  // alltoallv always (tensors of one size here may meet other sizes on another rank: every rank
  // must make the same call).
  auto splits = std::make_shared<AllToAllvSplits>();
  std::vector<at::Tensor> flat_in;
  for (int p = 0; p < size_; ++p) {
    splits->send_displs.push_back(splits->sent());
    splits->send_counts.push_back(static_cast<uint64_t>(inputs[p].numel()));
    splits->recv_displs.push_back(splits->received());
    splits->recv_counts.push_back(static_cast<uint64_t>(outputs[p].numel()));
    flat_in.push_back(inputs[p].reshape({-1}));
  }
  auto opt = inputs[0].options().memory_format(at::MemoryFormat::Contiguous);
  at::Tensor fin = at::cat(flat_in);
  at::Tensor fout = at::empty({static_cast<int64_t>(splits->received())}, opt);
  w->keep(fin);
  w->keep(fout);
  std::vector<at::Tensor> outs = outputs;
  std::vector<uint64_t> displs = splits->recv_displs;
  w->then([outs, fout, displs]() mutable {
    for (size_t i = 0; i < outs.size(); ++i)
      outs[i].copy_(fout.narrow(0, static_cast<int64_t>(displs[i]), outs[i].numel()).view(outs[i].sizes()));
  });
  return enqueue(w, alltoallv_args(inputs[0], std::move(splits)), fin.data_ptr(), fout.data_ptr());
}

}  // namespace weft::torch_backend
