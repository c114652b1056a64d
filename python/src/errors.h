// orbite._core's exceptions: one class per Errc under orbite.Error, carrying OrbiTE's message
// unchanged and the code's name in `.code`.
#pragma once

#include <orbite/status.h>
#include <pybind11/pybind11.h>

namespace orbite::python {

// Creates the classes in `m` (Error, InvalidArgumentError, ..., TimeoutError, ...).
void add_errors(pybind11::module_& m);

// Sets the Python exception of st's code (st must be an error) and throws
// pybind11::error_already_set. The GIL must be held.
[[noreturn]] void raise(const Status& st);

inline void check(const Status& st) {
  if (!st.ok()) raise(st);
}

template <typename T>
T value_or_raise(Result<T>&& r) {
  if (!r.ok()) raise(r.status());
  return std::move(r).value();
}

}  // namespace orbite::python
