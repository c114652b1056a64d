#include "buffers.h"

#include "errors.h"

namespace orbite::python {
namespace py = pybind11;

View::View(py::handle object, bool writable, const std::string& what) {
  const int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
  if (PyObject_GetBuffer(object.ptr(), &view_, flags) != 0) {
    // Replace Python's own BufferError with ours, naming the argument.
    const bool has_protocol = PyObject_CheckBuffer(object.ptr()) != 0;
    PyErr_Clear();
    const std::string type = py::str(py::type::handle_of(object).attr("__name__"));
    raise(Status::error(
        Errc::InvalidArgument,
        what + ": " +
            (!has_protocol ? "a " + type +
                                 " has no buffer protocol (pass a numpy array, "
                                 "bytearray or memoryview)"
             : writable ? "the " + type +
                              " must be a writable, C-contiguous buffer (OrbiTE writes into it)"
                        : "the " + type + " must be a C-contiguous buffer")));
  }
  held_ = true;
  if (view_.itemsize <= 0) view_.itemsize = 1;
}

View::~View() {
  if (held_) PyBuffer_Release(&view_);
}

std::optional<DataType> View::element_type() const {
  std::string f = format();
  // Native or little-endian standard sizes only ('@', '=', '<' prefixes; this is x86-64).
  if (!f.empty() && (f[0] == '@' || f[0] == '=' || f[0] == '<')) f.erase(0, 1);
  if (f.size() != 1) return std::nullopt;
  const auto size = view_.itemsize;
  switch (f[0]) {
    case 'b': return DataType::Int8;
    case 'B': return DataType::Uint8;
    case 'e': return DataType::Float16;
    case 'f': return DataType::Float32;
    case 'd': return DataType::Float64;
    case 'i':
    case 'l':
    case 'q':
      if (size == 4) return DataType::Int32;
      if (size == 8) return DataType::Int64;
      return std::nullopt;
    case 'I':
    case 'L':
    case 'Q':
      if (size == 4) return DataType::Uint32;
      if (size == 8) return DataType::Uint64;
      return std::nullopt;
    default: return std::nullopt;
  }
}

DataType View::element_type_or_raise(const std::string& what) const {
  if (auto t = element_type()) return *t;
  raise(Status::error(Errc::InvalidArgument,
                      what + ": element format '" + format() + "' (" +
                          std::to_string(view_.itemsize) +
                          " bytes) is none of int8, uint8, int32, uint32, int64, uint64, "
                          "float16, float32, float64"));
}

}  // namespace orbite::python
