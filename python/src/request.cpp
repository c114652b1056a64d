#include "request.h"

#include <pybind11/stl.h>

#include <chrono>
#include <cmath>
#include <string>
#include <utility>

#include "errors.h"

namespace orbite::python {
namespace py = pybind11;

namespace {

// `seconds` as a Duration; negative, not finite or beyond 1e9 s is InvalidArgumentError whose
// message starts with `what`.
Duration seconds_of(double seconds, const std::string& what) {
  if (!(seconds >= 0) || seconds > 1e9) {
    raise(Status::error(Errc::InvalidArgument, what + " " + std::to_string(seconds) +
                                                   " s is not a number of seconds >= 0"));
  }
  return std::chrono::duration_cast<Duration>(std::chrono::duration<double>(seconds));
}

}  // namespace

Duration timeout_of(const std::optional<double>& seconds, const char* what) {
  if (!seconds) return Duration::max();
  return seconds_of(*seconds, std::string(what) + ": timeout");
}

TransferOptions options_of(const std::string& transport, const std::string& priority,
                           const std::optional<double>& deadline) {
  TransferOptions o;
  if (transport == "unspec") {
    o.transport = Transport::Unspec;
  } else if (transport == "tcp") {
    o.transport = Transport::Tcp;
  } else if (transport == "shm") {
    o.transport = Transport::Shm;
  } else if (transport == "rdma") {
    o.transport = Transport::Rdma;
  } else {
    raise(Status::error(Errc::InvalidArgument,
                        "transport '" + transport + "' is none of unspec, tcp, shm, rdma"));
  }
  if (priority == "high") {
    o.priority = Priority::High;
  } else if (priority == "medium") {
    o.priority = Priority::Medium;
  } else if (priority == "low") {
    o.priority = Priority::Low;
  } else {
    raise(Status::error(Errc::InvalidArgument,
                        "priority '" + priority + "' is none of high, medium, low"));
  }
  if (deadline) o.deadline = Clock::now() + seconds_of(*deadline, "deadline");
  return o;
}

PyRequest::~PyRequest() {
  if (!req_.done()) {
    py::gil_scoped_release nogil;
    (void)req_.wait(kDropWait);
  }
  if (!req_.done()) keep_borrowed_forever();
}

void PyRequest::release_borrowed() {
  views_.clear();
  owners_.clear();
}

void PyRequest::keep_borrowed_forever() {
  for (auto& v : views_) (void)v.release();   // deliberately kept: the memory stays valid
  for (auto& o : owners_) (void)o.release();  // and so do its owners
  views_.clear();
  owners_.clear();
}

bool PyRequest::test() {
  bool done = false;
  {
    py::gil_scoped_release nogil;
    done = req_.test();
  }
  if (done) release_borrowed();
  return done;
}

void PyRequest::wait(std::optional<double> timeout) {
  const Duration bound = timeout_of(timeout, "Request.wait");
  Status st;
  {
    py::gil_scoped_release nogil;
    st = req_.wait(bound);
  }
  if (st.code() == Errc::Timeout && !req_.done()) raise(st);  // still running: keep borrowing
  release_borrowed();
  check(st);
}

py::object PyRequest::status() const {
  const std::optional<Status> st = req_.status();
  if (!st) return py::none();
  return py::make_tuple(std::string(errc_name(st->code())), st->message());
}

std::unique_ptr<PyRequest> wrap(Result<Request> r, Views views, std::vector<py::object> owners) {
  return std::make_unique<PyRequest>(value_or_raise(std::move(r)), std::move(views),
                                     std::move(owners));
}

std::unique_ptr<PyRequest> wrap(Result<Request> r, std::unique_ptr<View> view) {
  Views views;
  views.push_back(std::move(view));
  return wrap(std::move(r), std::move(views));
}

std::uint64_t blocking(Result<Request> r, std::unique_ptr<View> view, Duration bound) {
  Request req = value_or_raise(std::move(r));
  Status st;
  {
    py::gil_scoped_release nogil;
    st = req.wait(bound);
  }
  if (!req.done()) (void)view.release();  // deliberately kept
  check(st);
  return req.bytes();
}

void add_request(py::module_& m) {
  py::class_<PyRequest>(m, "Request", "An operation in flight; wait() raises its error.")
      .def("test", &PyRequest::test, "Progress, then whether the operation finished.")
      .def("wait", &PyRequest::wait, py::arg("timeout") = py::none(),
           "Waits (the GIL released) up to timeout seconds (None: no bound); raises the "
           "operation's error, or TimeoutError while it still runs.")
      .def_property_readonly("done", &PyRequest::done)
      .def_property_readonly("bytes", &PyRequest::bytes)
      .def_property_readonly("source", &PyRequest::source,
                             "A finished receive's sender (its rank; how a receive from "
                             "ANY_SOURCE learns it), else -1.")
      .def_property_readonly("tag", &PyRequest::tag,
                             "A finished receive's message tag (for ANY_TAG), else -1.")
      .def("status", &PyRequest::status);
}

}  // namespace orbite::python
