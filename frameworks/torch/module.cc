// _weft_torch: the Python extension behind weft_torch. It exposes the backend's creator
// (torch.distributed.Backend.register_backend("weft", create_process_group) is done by
// weft_torch/__init__.py) and a few facts about the build.
#include <pybind11/chrono.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include <chrono>
#include <mutex>

#include "frameworks/torch/process_group.h"
#include "frameworks/torch/tensors.h"
#include "runtime/comm/shards.h"
#include "runtime/trace/metrics.h"
#include "runtime/trace/trace_registry.h"
#include "weft/config.h"

namespace py = pybind11;

namespace {

// weft_torch.dump(): the flight recorder of every weft group of this process; its path.
std::string dump() { return weft::TraceRegistry::instance().dump("weft_torch.dump()"); }

// weft_torch.step_end(): a training step ended (call it after optimizer.step()). Its time is the
// time since the previous call; its exposed sync time runs from the last operation the default
// group launched in the step (DDP's last bucket, launched when the backward ends) to the last one
// that finished, read from the flight recorder. Both go to the metrics (weft_step_*{source="torch"}).
// Returns (step seconds, exposed sync seconds); (0, 0) for the first call, which starts the count.
std::pair<double, double> step_end() {
  static std::mutex mu;
  static std::chrono::steady_clock::time_point last{};
  static uint64_t next = 0;
  std::lock_guard<std::mutex> lock(mu);
  const auto now = std::chrono::steady_clock::now();
  const auto w = weft::TraceRegistry::instance().window("torch", next);
  next = w.next;
  if (last == std::chrono::steady_clock::time_point{}) {
    last = now;
    return {0.0, 0.0};
  }
  const double step = std::chrono::duration<double>(now - last).count();
  last = now;
  const double exposed = w.last_finish_ns > w.last_launch_ns && w.last_launch_ns > 0
                             ? static_cast<double>(w.last_finish_ns - w.last_launch_ns) * 1e-9 : 0.0;
  if (weft::MetricsRegistry::enabled()) weft::MetricsRegistry::instance().record_step("torch", step, exposed);
  return {step, exposed};
}

// weft_torch.empty_window(group, numel, dtype) (through _empty_window): weftMemAlloc on a weft group, as a 1-D CPU tensor
// of zeros; the memory goes back (weftMemFree) when the last tensor viewing it dies.
at::Tensor empty_window(const c10::intrusive_ptr<c10d::ProcessGroup>& group, int64_t numel, const at::Tensor& like) {
  const at::ScalarType dtype = like.scalar_type();
  auto* pg = dynamic_cast<weft::torch_backend::ProcessGroupWeft*>(group.get());
  TORCH_CHECK(pg, "weft: empty_window takes a group of the weft backend (got ", group ? group->getBackendName() : "None", ")");
  TORCH_CHECK(numel > 0, "weft: empty_window: numel must be positive (got ", numel, ")");
  std::shared_ptr<weft::Communicator> comm = pg->communicator();
  void* p = nullptr;
  try {
    p = comm->mem_alloc(static_cast<uint64_t>(numel) * c10::elementSize(dtype));
  } catch (const std::exception& e) {
    TORCH_CHECK(false, "weft: ", e.what());
  }
  return at::from_blob(
      p, {numel},
      [comm](void* q) {
        try {
          comm->mem_free(q);
        } catch (const std::exception&) {  // the communicator was destroyed: its windows went with it
        }
      },
      at::TensorOptions().dtype(dtype).device(at::kCPU));
}

weft::torch_backend::ProcessGroupWeft& weft_group(const c10::intrusive_ptr<c10d::ProcessGroup>& group, const char* fn) {
  auto* pg = dynamic_cast<weft::torch_backend::ProcessGroupWeft*>(group.get());
  TORCH_CHECK(pg, "weft: ", fn, " takes a group of the weft backend (got ", group ? group->getBackendName() : "None", ")");
  return *pg;
}

// weft_torch.set_deterministic(group, on): weftCommSetDeterministic on the group's communicator.
void set_deterministic(const c10::intrusive_ptr<c10d::ProcessGroup>& group, bool on) {
  try {
    weft_group(group, "set_deterministic").communicator()->set_deterministic(on);
  } catch (const weft::Error& e) {
    TORCH_CHECK(false, "weft: ", e.what());
  }
}

bool deterministic(const c10::intrusive_ptr<c10d::ProcessGroup>& group) {
  return weft_group(group, "deterministic").communicator()->deterministic();
}

// weft_torch.all_reduce_shards (through _all_reduce_shards): weftAllReduceShards over `shards`
// virtual shards; `local` holds this rank's, stacked on its first dimension. Returns the result
// (local.shape[1:]).
at::Tensor all_reduce_shards(const c10::intrusive_ptr<c10d::ProcessGroup>& group, const at::Tensor& local, int64_t shards,
                             bool average) {
  auto comm = weft_group(group, "all_reduce_shards").communicator();
  weft::torch_backend::check_tensor(local, "all_reduce_shards");
  TORCH_CHECK(local.dim() >= 1 && shards >= 1 && local.size(0) * comm->size() == shards, "weft: all_reduce_shards: ",
              "the tensor's first dimension must be this rank's share of the ", shards, " shards (", shards, " / ",
              comm->size(), " ranks), got shape ", local.sizes());
  const at::Tensor in = local.contiguous();
  at::Tensor out = at::empty(in.sizes().slice(1), in.options());
  try {
    weft::all_reduce_shards(*comm, in.data_ptr(), out.data_ptr(), static_cast<uint64_t>(out.numel()), static_cast<int>(shards),
                            weft::torch_backend::weft_dtype(in, "all_reduce_shards"), average ? weft::RedOp::kAvg : weft::RedOp::kSum);
  } catch (const weft::Error& e) {
    TORCH_CHECK(false, "weft: ", e.what());
  }
  return out;
}

}  // namespace

PYBIND11_MODULE(_weft_torch, m) {
  m.doc() = "Weft as a torch.distributed backend (import weft_torch, then init_process_group('weft'))";
  m.def("create_process_group", &weft::torch_backend::ProcessGroupWeft::create, py::arg("store"), py::arg("rank"),
        py::arg("world_size"), py::arg("timeout"), py::call_guard<py::gil_scoped_release>(),
        "Creates the weft process group of this rank (collective over the group, through its store).");
  m.def("drain", &weft::torch_backend::ProcessGroupWeft::drain_all, py::call_guard<py::gil_scoped_release>(),
        "Waits until every operation of every weft group has completed (called at exit).");
  m.def("shrink", &weft::torch_backend::ProcessGroupWeft::shrink, py::arg("group"), py::arg("exclude") = py::none(),
        py::call_guard<py::gil_scoped_release>(),
        "weftCommShrink on a weft group (collective over the survivors): returns the new group and the group rank of each "
        "of its ranks in the old one. exclude: group ranks to leave out, or None for the ranks that failed, agreed.");
  m.def("dump", &dump, py::call_guard<py::gil_scoped_release>(),
        "Writes the flight recorder of every weft group of this process (WEFT_DUMP_DIR/rank<R>.json); returns the path "
        "('' when WEFT_TRACE_BUFFER=0 or it could not be written).");
  m.def("step_end", &step_end, py::call_guard<py::gil_scoped_release>(),
        "Marks the end of a training step: returns (step seconds, exposed sync seconds) and feeds the metrics.");
  m.def("_empty_window", &empty_window, py::arg("group"), py::arg("numel"), py::arg("like"),
        py::call_guard<py::gil_scoped_release>(),
        "weftMemAlloc on a weft group (collective: every rank, same numel and dtype, that of `like`): a 1-D tensor of zeros "
        "in memory every rank of the node maps; all-reduces whose tensors are such on every rank run without copies.");
  m.def("set_deterministic", &set_deterministic, py::arg("group"), py::arg("on") = true,
        py::call_guard<py::gil_scoped_release>(),
        "weftCommSetDeterministic on a weft group: its all-reduces combine every element in rank order, the same bits on "
        "every run (docs/DETERMINISM.md). Waits for the group's operations in flight.");
  m.def("deterministic", &deterministic, py::arg("group"), "Whether a weft group is in deterministic mode.");
  m.def("_all_reduce_shards", &all_reduce_shards, py::arg("group"), py::arg("local"), py::arg("shards"), py::arg("average"),
        py::call_guard<py::gil_scoped_release>(), "weftAllReduceShards (see weft_torch.all_reduce_shards).");
  m.def("_shard_layout_problem", &weft::shard_layout_problem, py::arg("shards"), py::arg("ranks"),
        "Why `ranks` ranks cannot hold `shards` virtual shards as aligned subtrees ('' when they can).");
  m.attr("__version__") = WEFT_VERSION_STRING;
  m.attr("gpu_path_built") = false;
}
