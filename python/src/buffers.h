// Host buffers from Python objects, in this order of preference:
//  - the buffer protocol (numpy arrays, bytearray, memoryview, bytes for sending): C-contiguous
//    only, writable where OrbiTE writes into it, the element type read from the format;
//  - a raw (address, length) pair of integers, what KV-cache layers pass: no owner, no element
//    type, the caller guarantees the memory;
//  - DLPack (`__dlpack__`, e.g. torch tensors, bfloat16 included): compact row-major, the element
//    type from the DLPack dtype; CPU and pinned memory (host), or CUDA device memory (device);
//  - `__cuda_array_interface__` (version 2 or 3: cupy, numba, orbite.cuda.DeviceBuffer): CUDA
//    device memory, C-contiguous.
// A raw pair whose address is device memory of the CUDA driver this process uses is device
// memory too. Device memory is never read or written by the CPU here: its pointer goes to the
// engine, which moves it with the driver.
// A View holds what keeps the memory alive (the exporter's Py_buffer, or the consumed DLPack
// capsule's tensor) until it is destroyed, with the GIL held.
#pragma once

#include <orbite/collectives.h>
#include <orbite/transfer.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <optional>
#include <string>

struct DLManagedTensor;

namespace orbite::python {

class View {
 public:
  // Raises InvalidArgumentError naming `what` for an object that is none of the above, a
  // non-contiguous or read-only (when `writable`) one, or DLPack memory that is not on the CPU.
  View(pybind11::handle object, bool writable, const std::string& what);
  ~View();
  View(const View&) = delete;
  View& operator=(const View&) = delete;

  [[nodiscard]] void* data() const { return data_; }
  [[nodiscard]] std::uint64_t bytes() const { return bytes_; }
  [[nodiscard]] std::uint64_t itemsize() const { return itemsize_; }
  // The buffer protocol's format ("f", "<i8"...), "dlpack:<type>", or "raw".
  [[nodiscard]] const std::string& format() const { return format_; }
  // The element type, or nullopt (a struct format, a non-native byte order, a raw pair).
  [[nodiscard]] std::optional<DataType> element_type() const { return type_; }
  // element_type(), or InvalidArgumentError naming `what` and the format.
  [[nodiscard]] DataType element_type_or_raise(const std::string& what) const;
  [[nodiscard]] std::uint64_t count() const { return bytes_ / itemsize_; }
  // The exporter said the memory must not be written (a bytes object, a read-only array). Raw
  // pairs and DLPack tensors are taken as writable.
  [[nodiscard]] bool readonly() const { return held_ && view_.readonly != 0; }
  // Host memory, or CUDA device memory (then device() is its ordinal when the exporter said it,
  // else -1).
  [[nodiscard]] MemoryKind kind() const { return kind_; }
  [[nodiscard]] int device() const { return device_; }

 private:
  bool from_raw_pair(pybind11::handle object, const std::string& what);
  void from_dlpack(pybind11::handle object, const std::string& what);
  void from_cuda_array_interface(pybind11::handle object, bool writable, const std::string& what);
  void release();

  void* data_ = nullptr;
  std::uint64_t bytes_ = 0;
  std::uint64_t itemsize_ = 1;
  std::string format_ = "B";
  std::optional<DataType> type_;
  MemoryKind kind_ = MemoryKind::Host;
  int device_ = -1;
  Py_buffer view_{};
  bool held_ = false;                   // view_ is an exported buffer to release
  DLManagedTensor* managed_ = nullptr;  // a consumed DLPack tensor to delete
  pybind11::object keep_;               // a __cuda_array_interface__ exporter, kept alive
};

}  // namespace orbite::python
