// orbite._torch: the "orbite" torch.distributed backend's process group as a Python class
// deriving from torch's ProcessGroup. orbite/torch.py registers it with
// torch.distributed.Backend.register_backend; torch then calls it with (store, rank, size,
// timeout) for the default group and for each new_group.
#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>
#include <torch/csrc/utils/pybind.h>

#include "process_group.h"

namespace py = pybind11;
using orbite::torch_backend::ProcessGroupOrbite;

PYBIND11_MODULE(_torch, m) {
  m.doc() = "OrbiTE's torch.distributed backend (torch 1.13's c10d::ProcessGroup).";
  // torch's c10d classes (ProcessGroup, Store, Work) must be registered before ours derive.
  py::module_::import("torch.distributed");
  py::class_<ProcessGroupOrbite, c10d::ProcessGroup, c10::intrusive_ptr<ProcessGroupOrbite>>(
      m, "ProcessGroupOrbite",
      "A torch process group over an OrbiTE communicator (one TransferEngine per process).")
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                       std::chrono::milliseconds timeout) {
             return c10::make_intrusive<ProcessGroupOrbite>(store, rank, size, timeout);
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
           py::call_guard<py::gil_scoped_release>(),
           "Collective over the group's ranks: bootstraps through the c10d store.")
      .def("describe", &ProcessGroupOrbite::describe)
      .def(
          "transport_bytes",
          [](const ProcessGroupOrbite& pg) {
            // Which transports carried this process's bytes (the engine is shared by groups).
            const orbite::EngineStats s = pg.communicator().engine().stats();
            py::dict d;
            for (orbite::Transport t : {orbite::Transport::Tcp, orbite::Transport::Shm,
                                        orbite::Transport::Rdma, orbite::Transport::Nvlink}) {
              d[py::str(std::string(orbite::to_string(t)))] =
                  s.of(t).bytes_sent + s.of(t).bytes_received;
            }
            return d;
          },
          "Payload bytes sent and received per transport by this process's engine (shared by "
          "its groups); a byte copied by one side alone counts on that side.");
}
