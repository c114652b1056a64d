// orbite._core.cuda: device and pinned host memory without torch (OrbiTE's own allocations), so
// that Python code and tests can hand device memory to the engine on any driver, softcuda
// included. A DeviceBuffer offers __cuda_array_interface__ (what every consumer of device memory
// reads) and copies to and from host buffers; a PinnedBuffer offers the buffer protocol.
#include <orbite/cuda.h>
#include <pybind11/pybind11.h>

#include <string>

#include "bindings.h"
#include "buffers.h"
#include "errors.h"

namespace orbite::python {

namespace py = pybind11;

namespace {

struct DeviceBuffer {
  cuda::CudaMemory memory;
};

struct PinnedBuffer {
  cuda::HostMemory memory;
};

// [offset, offset + length) of a buffer of `size` bytes; length -1: to the end.
std::uint64_t checked_range(const char* what, std::uint64_t size, std::uint64_t offset,
                            std::int64_t length) {
  if (offset > size) {
    raise(Status::error(Errc::InvalidArgument, std::string(what) + ": offset " +
                                                   std::to_string(offset) + " is past the " +
                                                   std::to_string(size) + "-byte buffer"));
  }
  const std::uint64_t n = length < 0 ? size - offset : static_cast<std::uint64_t>(length);
  if (n > size - offset) {
    raise(Status::error(Errc::InvalidArgument, std::string(what) + ": " + std::to_string(n) +
                                                   " bytes at offset " + std::to_string(offset) +
                                                   " exceed the " + std::to_string(size) +
                                                   "-byte buffer"));
  }
  return n;
}

}  // namespace

void add_cuda(py::module_& parent) {
  py::module_ m = parent.def_submodule(
      "cuda", "Device and pinned host memory OrbiTE allocates, usable without torch.");
  m.def(
      "device_count",
      [] {
        auto d = cuda::devices();
        return d.ok() ? static_cast<int>(d->size()) : 0;
      },
      "The CUDA devices of this process (0 without a driver).");

  py::class_<DeviceBuffer>(m, "DeviceBuffer",
                           "Device memory: never touched by the CPU; __cuda_array_interface__ "
                           "(uint8) makes it usable wherever device memory is taken.")
      .def(py::init([](std::uint64_t nbytes, int device) {
             if (nbytes == 0) {
               raise(Status::error(Errc::InvalidArgument, "DeviceBuffer: nbytes is 0"));
             }
             Result<cuda::CudaMemory> made = Status::error(Errc::Internal, "unset");
             {
               py::gil_scoped_release nogil;
               made = cuda::CudaMemory::allocate(device, nbytes);
             }
             return DeviceBuffer{value_or_raise(std::move(made))};
           }),
           py::arg("nbytes"), py::arg("device") = 0)
      .def_property_readonly(
          "ptr",
          [](const DeviceBuffer& b) { return reinterpret_cast<std::uintptr_t>(b.memory.data()); })
      .def_property_readonly("nbytes", [](const DeviceBuffer& b) { return b.memory.size(); })
      .def_property_readonly("device", [](const DeviceBuffer& b) { return b.memory.ordinal(); })
      .def_property_readonly("__cuda_array_interface__",
                             [](const DeviceBuffer& b) {
                               py::dict d;
                               d["shape"] = py::make_tuple(b.memory.size());
                               d["typestr"] = "|u1";
                               d["data"] = py::make_tuple(
                                   reinterpret_cast<std::uintptr_t>(b.memory.data()), false);
                               d["version"] = 3;
                               d["strides"] = py::none();
                               return d;
                             })
      .def(
          "copy_from_host",
          [](DeviceBuffer& b, py::handle src, std::uint64_t offset) {
            View v(src, false, "copy_from_host source");
            if (v.kind() != MemoryKind::Host) {
              raise(Status::error(Errc::InvalidArgument,
                                  "copy_from_host source: device memory (pass host memory)"));
            }
            checked_range("copy_from_host", b.memory.size(), offset,
                          static_cast<std::int64_t>(v.bytes()));
            Status st;
            {
              py::gil_scoped_release nogil;
              st = b.memory.copy_from_host(offset, v.data(), v.bytes());
            }
            check(st);
          },
          py::arg("src"), py::arg("offset") = 0,
          "Copies a host buffer (bytes, numpy array...) into the buffer at `offset`.")
      .def(
          "copy_to_host",
          [](const DeviceBuffer& b, std::uint64_t offset, std::int64_t nbytes) {
            const std::uint64_t n = checked_range("copy_to_host", b.memory.size(), offset, nbytes);
            std::string out(n, '\0');
            Status st;
            {
              py::gil_scoped_release nogil;
              st = b.memory.copy_to_host(offset, out.data(), n);
            }
            check(st);
            return py::bytes(out);
          },
          py::arg("offset") = 0, py::arg("nbytes") = -1,
          "The bytes [offset, offset + nbytes) as a bytes object (nbytes -1: to the end).")
      .def(
          "fill",
          [](DeviceBuffer& b, std::uint8_t value, std::uint64_t offset, std::int64_t nbytes) {
            const std::uint64_t n = checked_range("fill", b.memory.size(), offset, nbytes);
            Status st;
            {
              py::gil_scoped_release nogil;
              st = b.memory.fill(offset, n, value);
            }
            check(st);
          },
          py::arg("value"), py::arg("offset") = 0, py::arg("nbytes") = -1);

  py::class_<PinnedBuffer>(m, "PinnedBuffer", py::buffer_protocol(),
                           "Pinned host memory (cuMemHostAlloc): a writable buffer of uint8.")
      .def(py::init([](std::uint64_t nbytes, int device) {
             if (nbytes == 0) {
               raise(Status::error(Errc::InvalidArgument, "PinnedBuffer: nbytes is 0"));
             }
             return PinnedBuffer{value_or_raise(cuda::allocate_pinned_host(nbytes, device))};
           }),
           py::arg("nbytes"), py::arg("device") = 0)
      .def_property_readonly("nbytes", [](const PinnedBuffer& b) { return b.memory.size(); })
      .def_buffer([](PinnedBuffer& b) {
        return py::buffer_info(b.memory.data(), 1, "B", static_cast<py::ssize_t>(b.memory.size()));
      });
}

}  // namespace orbite::python
