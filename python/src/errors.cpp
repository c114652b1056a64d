#include "errors.h"

#include <array>
#include <string>

namespace orbite::python {
namespace py = pybind11;

namespace {

constexpr std::size_t kCodes = static_cast<std::size_t>(Errc::Internal) + 1;

// Borrowed from the module, which keeps them for the interpreter's life.
std::array<PyObject*, kCodes> g_classes{};
PyObject* g_base = nullptr;

// A Python builtin the class also derives from, so that `except ValueError` and friends work.
PyObject* builtin_of(Errc code) {
  switch (code) {
    case Errc::InvalidArgument: return PyExc_ValueError;
    case Errc::Timeout: return PyExc_TimeoutError;
    case Errc::ConnectionLost: return PyExc_ConnectionError;
    case Errc::NotFound: return PyExc_LookupError;
    case Errc::PermissionDenied: return PyExc_PermissionError;
    default: return nullptr;
  }
}

}  // namespace

void add_errors(py::module_& m) {
  g_base = PyErr_NewExceptionWithDoc(
      "orbite._core.Error",
      "An OrbiTE error; .code names its class (InvalidArgument, Timeout, ...).", PyExc_RuntimeError,
      nullptr);
  if (g_base == nullptr) throw py::error_already_set();
  m.add_object("Error", py::handle(g_base));
  for (std::size_t i = 1; i < kCodes; ++i) {
    const auto code = static_cast<Errc>(i);
    // "InvalidArgumentError", ..., "TimeoutError" (it shadows the builtin, which it derives from).
    const std::string name = std::string(errc_name(code)) + "Error";
    const std::string qualified = "orbite._core." + name;
    PyObject* bases = builtin_of(code) != nullptr ? PyTuple_Pack(2, g_base, builtin_of(code))
                                                  : PyTuple_Pack(1, g_base);
    if (bases == nullptr) throw py::error_already_set();
    PyObject* cls = PyErr_NewException(qualified.c_str(), bases, nullptr);
    Py_DECREF(bases);
    if (cls == nullptr) throw py::error_already_set();
    g_classes[i] = cls;
    m.add_object(name.c_str(), py::handle(cls));
  }
}

void raise(const Status& st) {
  const auto i = static_cast<std::size_t>(st.code());
  PyObject* cls = i < kCodes && g_classes[i] != nullptr ? g_classes[i] : g_base;
  py::object error =
      py::reinterpret_steal<py::object>(PyObject_CallFunction(cls, "s", st.message().c_str()));
  if (!error) throw py::error_already_set();
  error.attr("code") = py::str(std::string(errc_name(st.code())));
  PyErr_SetObject(cls, error.ptr());
  throw py::error_already_set();
}

}  // namespace orbite::python
