// _weft_torch: the Python extension behind weft_torch. It exposes the backend's creator
// (torch.distributed.Backend.register_backend("weft", create_process_group) is done by
// weft_torch/__init__.py) and a few facts about the build.
#include <pybind11/chrono.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include "frameworks/torch/process_group.h"
#include "weft/config.h"

namespace py = pybind11;

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
  m.attr("__version__") = WEFT_VERSION_STRING;
  m.attr("gpu_path_built") = false;
}
