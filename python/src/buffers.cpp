#include "buffers.h"

#include <orbite/cuda.h>

#include <cstring>

#include "errors.h"

#if ORBITE_PY_HAVE_DLPACK
#include <dlpack/dlpack.h>
#endif

namespace orbite::python {
namespace py = pybind11;

namespace {

std::string type_name(py::handle object) {
  return py::str(py::type::handle_of(object).attr("__name__"));
}

[[noreturn]] void invalid(const std::string& what, const std::string& why) {
  raise(Status::error(Errc::InvalidArgument, what + ": " + why));
}

// The element type of a __cuda_array_interface__ typestr's kind ('i', 'u', 'f') and size.
std::optional<DataType> type_of_typestr(char kind, std::uint64_t itemsize) {
  switch (kind) {
    case 'i':
      if (itemsize == 1) return DataType::Int8;
      if (itemsize == 4) return DataType::Int32;
      if (itemsize == 8) return DataType::Int64;
      return std::nullopt;
    case 'u':
      if (itemsize == 1) return DataType::Uint8;
      if (itemsize == 4) return DataType::Uint32;
      if (itemsize == 8) return DataType::Uint64;
      return std::nullopt;
    case 'f':
      if (itemsize == 2) return DataType::Float16;
      if (itemsize == 4) return DataType::Float32;
      if (itemsize == 8) return DataType::Float64;
      return std::nullopt;
    default: return std::nullopt;
  }
}

// The element type of a buffer-protocol format of `itemsize` bytes.
std::optional<DataType> type_of_format(std::string f, Py_ssize_t itemsize) {
  // Native or little-endian standard sizes only ('@', '=', '<' prefixes; this is x86-64).
  if (!f.empty() && (f[0] == '@' || f[0] == '=' || f[0] == '<')) f.erase(0, 1);
  if (f.size() != 1) return std::nullopt;
  switch (f[0]) {
    case 'b': return DataType::Int8;
    case 'B': return DataType::Uint8;
    case 'e': return DataType::Float16;
    case 'f': return DataType::Float32;
    case 'd': return DataType::Float64;
    case 'i':
    case 'l':
    case 'q':
      if (itemsize == 4) return DataType::Int32;
      if (itemsize == 8) return DataType::Int64;
      return std::nullopt;
    case 'I':
    case 'L':
    case 'Q':
      if (itemsize == 4) return DataType::Uint32;
      if (itemsize == 8) return DataType::Uint64;
      return std::nullopt;
    default: return std::nullopt;
  }
}

}  // namespace

View::View(py::handle object, bool writable, const std::string& what) {
  if (PyObject_CheckBuffer(object.ptr()) != 0) {
    const int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(object.ptr(), &view_, flags) != 0) {
      PyErr_Clear();  // replaced by ours, which names the argument
      const std::string type = type_name(object);
      invalid(what, writable
                        ? "the " + type +
                              " must be a writable, C-contiguous buffer (OrbiTE writes into it)"
                        : "the " + type + " must be a C-contiguous buffer");
    }
    held_ = true;
    data_ = view_.buf;
    bytes_ = static_cast<std::uint64_t>(view_.len);
    itemsize_ = view_.itemsize > 0 ? static_cast<std::uint64_t>(view_.itemsize) : 1;
    format_ = view_.format != nullptr ? view_.format : "B";
    type_ = type_of_format(format_, view_.itemsize);
    return;
  }
  if (from_raw_pair(object, what)) return;
  // DLPack first: it names the element type of every dtype (bfloat16 too); objects that offer
  // only the CUDA array interface (numba, OrbiTE's own DeviceBuffer) come next.
  if (py::hasattr(object, "__dlpack__") &&
      (ORBITE_PY_HAVE_DLPACK != 0 || !py::hasattr(object, "__cuda_array_interface__"))) {
    // DLPack 0.6 cannot say read-only, so `writable` is not checked (torch tensors are writable).
    try {
      from_dlpack(object, what);
    } catch (...) {
      release();  // the destructor does not run for a View that failed to construct
      throw;
    }
    return;
  }
  if (py::hasattr(object, "__cuda_array_interface__")) {
    from_cuda_array_interface(object, writable, what);
    return;
  }
  invalid(what, "a " + type_name(object) +
                    " has no buffer protocol (pass a numpy array, bytearray, memoryview, an "
                    "(address, length) pair, or an object with __dlpack__ or "
                    "__cuda_array_interface__)");
}

void View::from_cuda_array_interface(py::handle object, bool writable, const std::string& what) {
  py::dict cai;
  try {
    cai = object.attr("__cuda_array_interface__").cast<py::dict>();
  } catch (py::error_already_set& e) {
    invalid(what, type_name(object) + ".__cuda_array_interface__ failed: " + e.what());
  } catch (const py::cast_error&) {
    invalid(what, type_name(object) + ".__cuda_array_interface__ is not a dict");
  }
  auto field = [&](const char* name) -> py::object {
    if (!cai.contains(name)) {
      invalid(what, std::string("__cuda_array_interface__ has no '") + name + "'");
    }
    return cai[name];
  };
  std::uint64_t address = 0;
  bool readonly = false;
  std::string typestr;
  std::uint64_t elements = 1;
  std::vector<std::int64_t> shape;
  try {
    const auto data = field("data").cast<py::tuple>();
    if (data.size() != 2)
      invalid(what, "__cuda_array_interface__ 'data' is not (pointer, readonly)");
    address = data[0].cast<std::uint64_t>();
    readonly = data[1].cast<bool>();
    typestr = field("typestr").cast<std::string>();
    for (py::handle d : field("shape").cast<py::tuple>()) shape.push_back(d.cast<std::int64_t>());
  } catch (const py::cast_error&) {
    invalid(what, "__cuda_array_interface__ has a field of the wrong type");
  }
  const int version = cai.contains("version") ? cai["version"].cast<int>() : 0;
  if (version < 2) {
    invalid(what, "__cuda_array_interface__ version " + std::to_string(version) +
                      " (2 or later is needed)");
  }
  if (writable && readonly) {
    invalid(what, "the " + type_name(object) + " is read-only (OrbiTE writes into it)");
  }
  // typestr: byte order, kind, size ("<f4", "|u1").
  if (typestr.size() < 3 || (typestr[0] != '<' && typestr[0] != '|' && typestr[0] != '=')) {
    invalid(what, "__cuda_array_interface__ typestr '" + typestr +
                      "' is not little-endian or byte-sized");
  }
  const std::uint64_t itemsize = std::strtoull(typestr.c_str() + 2, nullptr, 10);
  if (itemsize == 0) invalid(what, "__cuda_array_interface__ typestr '" + typestr + "'");
  std::int64_t expected = static_cast<std::int64_t>(itemsize);
  const bool has_strides = cai.contains("strides") && !cai["strides"].is_none();
  std::vector<std::int64_t> strides;
  if (has_strides) {
    for (py::handle d : cai["strides"].cast<py::tuple>()) strides.push_back(d.cast<std::int64_t>());
    if (strides.size() != shape.size())
      invalid(what, "__cuda_array_interface__ strides and shape differ in rank");
  }
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    if (shape[d] < 0) invalid(what, "__cuda_array_interface__ has a negative extent");
    if (has_strides && shape[d] > 1 && strides[d] != expected) {
      invalid(what, "the CUDA array must be C-contiguous (dimension " + std::to_string(d) +
                        " has stride " + std::to_string(strides[d]) + " bytes, " +
                        std::to_string(expected) + " expected)");
    }
    expected *= shape[d];
    elements *= static_cast<std::uint64_t>(shape[d]);
  }
  data_ = reinterpret_cast<void*>(static_cast<std::uintptr_t>(address));
  bytes_ = elements * itemsize;
  itemsize_ = itemsize;
  format_ = "cuda:" + typestr;
  keep_ = py::reinterpret_borrow<py::object>(object);
  type_ = type_of_typestr(typestr[1], itemsize);
  kind_ = MemoryKind::Cuda;
}

bool View::from_raw_pair(py::handle object, const std::string& what) {
  if (!py::isinstance<py::tuple>(object)) return false;
  auto pair = py::reinterpret_borrow<py::tuple>(object);
  if (pair.size() != 2 || !py::isinstance<py::int_>(pair[0]) ||
      !py::isinstance<py::int_>(pair[1])) {
    invalid(what, "a tuple must be (address, length), two integers");
  }
  std::uint64_t address = 0;
  std::uint64_t length = 0;
  try {
    address = pair[0].cast<std::uint64_t>();
    length = pair[1].cast<std::uint64_t>();
  } catch (const py::cast_error&) {
    invalid(what, "(address, length) must both be integers in 0..2^64-1");
  }
  if (address == 0 && length != 0) {
    invalid(what, "(address, length): address 0 with length " + std::to_string(length));
  }
  if (length > ~address) {
    invalid(what, "(address, length): " + std::to_string(address) + " + " + std::to_string(length) +
                      " overflows the address space");
  }
  data_ = reinterpret_cast<void*>(static_cast<std::uintptr_t>(address));
  bytes_ = length;
  format_ = "raw";
  // An address of device memory (a KV-cache layer's cudaMalloc'd pointer): no driver call when
  // this process never loaded one.
  if (length > 0 && cuda::is_device_pointer(data_)) kind_ = MemoryKind::Cuda;
  return true;
}

#if ORBITE_PY_HAVE_DLPACK

namespace {

std::optional<DataType> type_of_dlpack(const DLDataType& t) {
  if (t.lanes != 1) return std::nullopt;
  switch (t.code) {
    case kDLInt:
      if (t.bits == 8) return DataType::Int8;
      if (t.bits == 32) return DataType::Int32;
      if (t.bits == 64) return DataType::Int64;
      return std::nullopt;
    case kDLUInt:
      if (t.bits == 8) return DataType::Uint8;
      if (t.bits == 32) return DataType::Uint32;
      if (t.bits == 64) return DataType::Uint64;
      return std::nullopt;
    case kDLFloat:
      if (t.bits == 16) return DataType::Float16;
      if (t.bits == 32) return DataType::Float32;
      if (t.bits == 64) return DataType::Float64;
      return std::nullopt;
    case kDLBfloat: return t.bits == 16 ? std::optional(DataType::Bfloat16) : std::nullopt;
    default: return std::nullopt;
  }
}

}  // namespace

void View::from_dlpack(py::handle object, const std::string& what) {
  py::object capsule;
  try {
    capsule = object.attr("__dlpack__")();
  } catch (py::error_already_set& e) {
    invalid(what, type_name(object) + ".__dlpack__() failed: " + std::string(e.what()));
  }
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
  if (managed == nullptr) {
    PyErr_Clear();
    invalid(what, type_name(object) + ".__dlpack__() returned no unused 'dltensor' capsule");
  }
  // Consumed: the capsule no longer deletes the tensor; this View does (DLPack's protocol).
  if (PyCapsule_SetName(capsule.ptr(), "used_dltensor") != 0) throw py::error_already_set();
  managed_ = managed;
  const DLTensor& t = managed->dl_tensor;
  const std::string type =
      "code " + std::to_string(t.dtype.code) + " bits " + std::to_string(t.dtype.bits);
  type_ = type_of_dlpack(t.dtype);
  format_ = "dlpack:" + (type_ ? std::string(to_string(*type_)) : type);
  if (t.device.device_type == kDLCUDA) {
    kind_ = MemoryKind::Cuda;
    device_ = t.device.device_id;
  } else if (t.device.device_type != kDLCPU && t.device.device_type != kDLCUDAHost) {
    raise(Status::error(Errc::Unavailable,
                        what + ": DLPack memory on device type " +
                            std::to_string(t.device.device_type) +
                            " (CPU, CUDA host and CUDA device memory are supported)"));
  }
  if (t.dtype.lanes != 1 || t.dtype.bits == 0 || t.dtype.bits % 8 != 0) {
    invalid(what, "DLPack element type (" + type + " lanes " + std::to_string(t.dtype.lanes) +
                      ") is not a whole number of bytes");
  }
  itemsize_ = t.dtype.bits / 8;
  std::uint64_t elements = 1;
  std::int64_t expected_stride = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    const std::int64_t extent = t.shape[d];
    if (t.strides != nullptr && extent > 1 && t.strides[d] != expected_stride) {
      invalid(what, "the DLPack tensor must be C-contiguous (dimension " + std::to_string(d) +
                        " has stride " + std::to_string(t.strides[d]) + ", " +
                        std::to_string(expected_stride) + " expected)");
    }
    expected_stride *= extent;
    elements *= static_cast<std::uint64_t>(extent);
  }
  data_ = static_cast<char*>(t.data) + t.byte_offset;
  bytes_ = elements * itemsize_;
}

#else

void View::from_dlpack(py::handle object, const std::string& what) {
  raise(Status::error(Errc::Unavailable,
                      what + ": a " + type_name(object) +
                          " offers only DLPack, and this build has no DLPack support "
                          "(libdlpack-dev was not found)"));
}

#endif

View::~View() {
  release();
}

void View::release() {
  if (held_) PyBuffer_Release(&view_);
  held_ = false;
#if ORBITE_PY_HAVE_DLPACK
  if (managed_ != nullptr && managed_->deleter != nullptr) managed_->deleter(managed_);
#endif
  managed_ = nullptr;
  keep_ = py::object();
}

DataType View::element_type_or_raise(const std::string& what) const {
  if (type_) return *type_;
  if (format_ == "raw") {
    invalid(what, "a raw (address, length) buffer has no element type (pass an array)");
  }
  invalid(what, "element format '" + format_ + "' (" + std::to_string(itemsize_) +
                    " bytes) is none of int8, uint8, int32, uint32, int64, uint64, float16, "
                    "bfloat16, float32, float64");
}

}  // namespace orbite::python
