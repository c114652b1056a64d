// orbite._core: the pybind11 module over OrbiTE's public API (no torch). Each part is bound by its
// own file: errors.cpp, request.cpp, store.cpp (stores and Bootstrap), communicator.cpp and
// engine.cpp (TransferEngine and registered memory), cuda.cpp (device and pinned memory).
#include <orbite/orbite.h>
#include <pybind11/pybind11.h>

#include "bindings.h"
#include "errors.h"
#include "request.h"

PYBIND11_MODULE(_core, m) {
  namespace py = pybind11;
  using namespace orbite::python;
  m.doc() = "OrbiTE's C++ core: communicators, collectives, registered memory and put/get.";
  add_errors(m);
  m.attr("version") = ORBITE_VERSION_STRING;
  m.attr("UNDEFINED") = orbite::kUndefinedColor;
  m.attr("ANY_SOURCE") = orbite::kAnySource;
  m.attr("ANY_TAG") = orbite::kAnyTag;
  m.attr("HAS_DLPACK") = py::bool_(ORBITE_PY_HAVE_DLPACK != 0);
  add_request(m);
  add_store(m);
  add_communicator(m);
  add_engine(m);
  add_cuda(m);
}
