// Host buffers from Python objects: the buffer protocol (numpy arrays, bytearray, memoryview,
// bytes for sending), C-contiguous only, writable where OrbiTE writes into it, and the element
// type read from the format. A View holds the exporter's Py_buffer (and so the object) until it
// is released, with the GIL held.
#pragma once

#include <orbite/collectives.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace orbite::python {

class View {
 public:
  // Raises InvalidArgumentError naming `what` for an object without the buffer protocol, a
  // non-contiguous or read-only (when `writable`) one.
  View(pybind11::handle object, bool writable, const std::string& what);
  ~View();
  View(const View&) = delete;
  View& operator=(const View&) = delete;

  [[nodiscard]] void* data() const { return view_.buf; }
  [[nodiscard]] std::uint64_t bytes() const { return static_cast<std::uint64_t>(view_.len); }
  [[nodiscard]] std::uint64_t itemsize() const {
    return static_cast<std::uint64_t>(view_.itemsize);
  }
  [[nodiscard]] std::string format() const { return view_.format != nullptr ? view_.format : "B"; }
  // The element type of the format, or nullopt (e.g. a struct, or a non-native byte order).
  [[nodiscard]] std::optional<DataType> element_type() const;
  // element_type(), or InvalidArgumentError naming `what` and the format.
  [[nodiscard]] DataType element_type_or_raise(const std::string& what) const;
  [[nodiscard]] std::uint64_t count() const { return bytes() / itemsize(); }

 private:
  Py_buffer view_{};
  bool held_ = false;
};

}  // namespace orbite::python
