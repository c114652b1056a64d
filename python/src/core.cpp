// orbite._core: the pybind11 module over OrbiTE's public API (no torch). This file: Request,
// Bootstrap, configuration and Communicator (point-to-point and collectives). Every wait and
// blocking call releases the GIL; a Request holds the Py_buffer views of its buffers (and so
// their owners) until the operation is done.
#include <orbite/orbite.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "buffers.h"
#include "errors.h"

namespace orbite::python {
namespace py = pybind11;

namespace {

// None: no bound. Negative or not finite is a caller's mistake.
Duration timeout_of(const std::optional<double>& seconds, const char* what) {
  if (!seconds) return Duration::max();
  if (!(*seconds >= 0) || *seconds > 1e9) {
    raise(Status::error(Errc::InvalidArgument, std::string(what) + ": timeout " +
                                                   std::to_string(*seconds) +
                                                   " s is not a number of seconds >= 0"));
  }
  return std::chrono::duration_cast<Duration>(std::chrono::duration<double>(*seconds));
}

// How long a Request dropped while running waits for its operation before letting it go.
constexpr std::chrono::seconds kDropWait{10};

// An operation in flight and the buffers it reads or writes. Destroyed (GIL held) while still
// running, it waits for the operation (GIL released) up to kDropWait; an operation still running
// then keeps its buffers' views, and so their owners, for the life of the process, since OrbiTE
// may still write into them. Nothing waits without bound.
class PyRequest {
 public:
  PyRequest(Request r, std::vector<std::unique_ptr<View>> views)
      : req_(std::move(r)), views_(std::move(views)) {}
  PyRequest(const PyRequest&) = delete;
  PyRequest& operator=(const PyRequest&) = delete;
  ~PyRequest() {
    if (req_.done()) return;
    {
      py::gil_scoped_release nogil;
      (void)req_.wait(kDropWait);
    }
    if (!req_.done()) {
      for (auto& v : views_) (void)v.release();  // deliberately kept: the memory stays valid
    }
  }

  bool test() {
    bool done = false;
    {
      py::gil_scoped_release nogil;
      done = req_.test();
    }
    if (done) views_.clear();
    return done;
  }
  void wait(std::optional<double> timeout) {
    const Duration bound = timeout_of(timeout, "Request.wait");
    Status st;
    {
      py::gil_scoped_release nogil;
      st = req_.wait(bound);
    }
    if (st.code() == Errc::Timeout && !req_.done()) raise(st);  // still running: keep the views
    views_.clear();
    check(st);
  }
  [[nodiscard]] bool done() const { return req_.done(); }
  [[nodiscard]] std::uint64_t bytes() const { return req_.bytes(); }
  // None while running; else (code name, message), code "OK" on success.
  [[nodiscard]] py::object status() const {
    const std::optional<Status> st = req_.status();
    if (!st) return py::none();
    return py::make_tuple(std::string(errc_name(st->code())), st->message());
  }

 private:
  Request req_;
  std::vector<std::unique_ptr<View>> views_;
};

using Views = std::vector<std::unique_ptr<View>>;

std::unique_ptr<PyRequest> wrap(Result<Request> r, Views views) {
  return std::make_unique<PyRequest>(value_or_raise(std::move(r)), std::move(views));
}

// An operation on one buffer.
std::unique_ptr<PyRequest> wrap(Result<Request> r, std::unique_ptr<View> view) {
  Views views;
  views.push_back(std::move(view));
  return wrap(std::move(r), std::move(views));
}

// "unspec" (the selection table's choice), "tcp", "shm", "rdma"; "high", "medium", "low".
TransferOptions options_of(const std::string& transport, const std::string& priority) {
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
  return o;
}

ReduceOp op_of(const std::string& name) {
  return value_or_raise(parse_reduce_op(name));
}

// The collectives' pair of buffers: same element type, and counts the caller states.
struct Pair {
  Views views;
  const void* send = nullptr;
  void* recv = nullptr;
  DataType type = DataType::Uint8;
};

Pair pair_of(py::handle send, py::handle recv, const char* what) {
  Pair p;
  auto out = std::make_unique<View>(recv, true, std::string(what) + " recv");
  p.type = out->element_type_or_raise(std::string(what) + " recv");
  p.recv = out->data();
  if (send.is(recv)) {
    p.send = p.recv;  // in place
  } else {
    auto in = std::make_unique<View>(send, false, std::string(what) + " send");
    if (in->element_type() != p.type) {
      raise(Status::error(Errc::InvalidArgument, std::string(what) + ": send format '" +
                                                     in->format() + "' differs from recv's '" +
                                                     out->format() + "'"));
    }
    p.send = in->data();
    p.views.push_back(std::move(in));
  }
  p.views.push_back(std::move(out));
  return p;
}

// count elements of the view, or InvalidArgumentError when `need` exceeds them.
void need(const View& v, std::uint64_t elements, const std::string& what) {
  if (v.count() < elements) {
    raise(Status::error(Errc::InvalidArgument, what + ": " + std::to_string(v.count()) +
                                                   " elements, " + std::to_string(elements) +
                                                   " needed"));
  }
}

// The process's bootstrap from the environment, made once: every communicator made without one
// shares it, so that their setups are numbered in one sequence (as the ranks make them).
Bootstrap default_bootstrap() {
  static std::optional<Bootstrap> made;  // guarded by the GIL
  if (!made) {
    Result<Bootstrap> b = Status::error(Errc::Internal, "unset");
    {
      py::gil_scoped_release nogil;
      b = Bootstrap::from_env();
    }
    made = value_or_raise(std::move(b));
  }
  return *made;
}

// Waits for a blocking call's request (GIL released) up to `bound`. Still running then, the
// operation stays queued and the view is kept for the life of the process (OrbiTE may still
// read or write the buffer), and TimeoutError is raised. Returns the bytes moved.
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

// The block of each of `ranks` in a buffer split evenly among them.
std::uint64_t blocks_of(const View& v, int ranks, const std::string& what) {
  const auto n = static_cast<std::uint64_t>(ranks);
  if (v.count() % n != 0) {
    raise(Status::error(Errc::InvalidArgument, what + ": " + std::to_string(v.count()) +
                                                   " elements are not a multiple of the size " +
                                                   std::to_string(n)));
  }
  return v.count() / n;
}

void add_communicator(py::module_& m) {
  py::class_<Communicator, std::shared_ptr<Communicator>>(
      m, "Communicator", "A group of ranks with point-to-point messages and collectives.")
      .def(py::init([](py::object bootstrap, py::object config) {
             // config: None (the environment's), a dict or a JSON string of OrbiTE's file format.
             std::optional<std::string> json;
             if (py::isinstance<py::dict>(config)) {
               json = py::module_::import("json").attr("dumps")(config).cast<std::string>();
             } else if (py::isinstance<py::str>(config)) {
               json = config.cast<std::string>();
             } else if (!config.is_none()) {
               raise(Status::error(
                   Errc::InvalidArgument,
                   "config: expected a dict or a JSON string, got " +
                       std::string(py::str(py::type::handle_of(config).attr("__name__")))));
             }
             std::optional<Bootstrap> boot;
             if (!bootstrap.is_none()) {
               boot = bootstrap.cast<Bootstrap>();
             } else {
               boot = default_bootstrap();
             }
             Result<Communicator> c = Status::error(Errc::Internal, "unset");
             {
               py::gil_scoped_release nogil;  // collective over the ranks: it waits for them
               {
                 if (json) {
                   auto cfg = EngineConfig::from_json(*json);
                   c = cfg.ok() ? Communicator::create(*boot, *cfg)
                                : Result<Communicator>(cfg.status().with_context("config"));
                 } else {
                   c = Communicator::create(*boot);
                 }
               }
             }
             return std::make_shared<Communicator>(value_or_raise(std::move(c)));
           }),
           py::arg("bootstrap") = py::none(), py::arg("config") = py::none(),
           "Collective over the launcher's ranks (bootstrap None: the process's bootstrap from "
           "the environment, made once and shared).")
      .def_property_readonly("rank", &Communicator::rank)
      .def_property_readonly("size", &Communicator::size)
      .def_property_readonly("local_rank", &Communicator::local_rank)
      .def_property_readonly("local_size", &Communicator::local_size)
      .def(
          "isend",
          [](Communicator& c, py::handle data, int peer, int tag, const std::string& transport,
             const std::string& priority) {
            const TransferOptions o = options_of(transport, priority);
            auto v = std::make_unique<View>(data, false, "isend data");
            auto r = c.isend(v->data(), v->bytes(), peer, tag, o);
            return wrap(std::move(r), std::move(v));
          },
          py::arg("data"), py::arg("peer"), py::arg("tag") = 0, py::arg("transport") = "unspec",
          py::arg("priority") = "high")
      .def(
          "irecv",
          [](Communicator& c, py::handle data, int peer, int tag, const std::string& transport,
             const std::string& priority) {
            const TransferOptions o = options_of(transport, priority);
            auto v = std::make_unique<View>(data, true, "irecv data");
            auto r = c.irecv(v->data(), v->bytes(), peer, tag, o);
            return wrap(std::move(r), std::move(v));
          },
          py::arg("data"), py::arg("peer"), py::arg("tag") = 0, py::arg("transport") = "unspec",
          py::arg("priority") = "high")
      .def(
          "send",
          [](Communicator& c, py::handle data, int peer, int tag, std::optional<double> timeout,
             const std::string& transport) {
            const TransferOptions o = options_of(transport, "high");
            auto v = std::make_unique<View>(data, false, "send data");
            auto r = c.isend(v->data(), v->bytes(), peer, tag, o);  // before v is moved
            blocking(std::move(r), std::move(v), timeout_of(timeout, "send"));
          },
          py::arg("data"), py::arg("peer"), py::arg("tag") = 0, py::arg("timeout") = py::none(),
          py::arg("transport") = "unspec",
          "Blocking isend + wait. On TimeoutError the send stays queued and keeps its buffer.")
      .def(
          "recv",
          [](Communicator& c, py::handle data, int peer, int tag, std::optional<double> timeout,
             const std::string& transport) {
            const TransferOptions o = options_of(transport, "high");
            auto v = std::make_unique<View>(data, true, "recv data");
            auto r = c.irecv(v->data(), v->bytes(), peer, tag, o);  // before v is moved
            return blocking(std::move(r), std::move(v), timeout_of(timeout, "recv"));
          },
          py::arg("data"), py::arg("peer"), py::arg("tag") = 0, py::arg("timeout") = py::none(),
          py::arg("transport") = "unspec",
          "Blocking irecv + wait; returns the received size. On TimeoutError the receive stays "
          "posted and keeps its buffer.")
      .def(
          "all_reduce",
          [](Communicator& c, py::handle send, py::handle recv, const std::string& op) {
            Pair p = pair_of(send, recv, "all_reduce");
            const View& out = *p.views.back();
            if (p.views.size() == 2) need(*p.views.front(), out.count(), "all_reduce send");
            auto r = c.all_reduce(p.send, p.recv, out.count(), p.type, op_of(op));
            return wrap(std::move(r), std::move(p.views));
          },
          py::arg("send"), py::arg("recv"), py::arg("op") = "sum")
      .def(
          "broadcast",
          [](Communicator& c, py::handle data, int root) {
            auto v = std::make_unique<View>(data, true, "broadcast data");
            const DataType t = v->element_type_or_raise("broadcast data");
            auto r = c.broadcast(v->data(), v->data(), v->count(), t, root);
            return wrap(std::move(r), std::move(v));
          },
          py::arg("data"), py::arg("root") = 0)
      .def(
          "all_gather",
          [](Communicator& c, py::handle send, py::handle recv) {
            Pair p = pair_of(send, recv, "all_gather");
            const View& out = *p.views.back();
            const std::uint64_t block = blocks_of(out, c.size(), "all_gather recv");
            if (p.views.size() == 2) need(*p.views.front(), block, "all_gather send");
            auto r = c.all_gather(p.send, p.recv, block, p.type);
            return wrap(std::move(r), std::move(p.views));
          },
          py::arg("send"), py::arg("recv"))
      .def(
          "reduce",
          [](Communicator& c, py::handle send, py::handle recv, const std::string& op, int root) {
            Pair p = pair_of(send, recv, "reduce");
            const View& out = *p.views.back();
            if (p.views.size() == 2) need(*p.views.front(), out.count(), "reduce send");
            auto r = c.reduce(p.send, p.recv, out.count(), p.type, op_of(op), root);
            return wrap(std::move(r), std::move(p.views));
          },
          py::arg("send"), py::arg("recv"), py::arg("op") = "sum", py::arg("root") = 0,
          "recv receives the reduction at root (every rank passes a buffer of the same shape).")
      .def(
          "reduce_scatter",
          [](Communicator& c, py::handle send, py::handle recv, const std::string& op) {
            Pair p = pair_of(send, recv, "reduce_scatter");
            const View& out = *p.views.back();
            const auto n = static_cast<std::uint64_t>(c.size());
            if (p.views.size() == 2) need(*p.views.front(), out.count() * n, "reduce_scatter send");
            auto r = c.reduce_scatter(p.send, p.recv, out.count(), p.type, op_of(op));
            return wrap(std::move(r), std::move(p.views));
          },
          py::arg("send"), py::arg("recv"), py::arg("op") = "sum",
          "send holds size blocks of len(recv) elements; rank r receives block r reduced.")
      .def(
          "all_to_all",
          [](Communicator& c, py::handle send, py::handle recv) {
            Pair p = pair_of(send, recv, "all_to_all");
            const View& out = *p.views.back();
            const std::uint64_t block = blocks_of(out, c.size(), "all_to_all recv");
            if (p.views.size() == 2) need(*p.views.front(), out.count(), "all_to_all send");
            auto r = c.all_to_all(p.send, p.recv, block, p.type);
            return wrap(std::move(r), std::move(p.views));
          },
          py::arg("send"), py::arg("recv"))
      .def(
          "gather",
          [](Communicator& c, py::handle send, py::handle recv, int root) {
            Pair p = pair_of(send, recv, "gather");
            const View& out = *p.views.back();
            const std::uint64_t block = blocks_of(out, c.size(), "gather recv");
            if (p.views.size() == 2) need(*p.views.front(), block, "gather send");
            auto r = c.gather(p.send, p.recv, block, p.type, root);
            return wrap(std::move(r), std::move(p.views));
          },
          py::arg("send"), py::arg("recv"), py::arg("root") = 0,
          "recv (size blocks of len(send)) is filled at root; every rank passes one.")
      .def(
          "scatter",
          [](Communicator& c, py::handle send, py::handle recv, int root) {
            Pair p = pair_of(send, recv, "scatter");
            const View& out = *p.views.back();
            const auto n = static_cast<std::uint64_t>(c.size());
            if (p.views.size() == 2) need(*p.views.front(), out.count() * n, "scatter send");
            auto r = c.scatter(p.send, p.recv, out.count(), p.type, root);
            return wrap(std::move(r), std::move(p.views));
          },
          py::arg("send"), py::arg("recv"), py::arg("root") = 0,
          "root's send holds size blocks of len(recv) elements; every rank passes one.")
      .def("barrier", [](Communicator& c) { return wrap(c.barrier(), Views{}); })
      .def(
          "split",
          [](Communicator& c, int color, int key) -> py::object {
            Result<std::optional<Communicator>> r = Status::error(Errc::Internal, "unset");
            {
              py::gil_scoped_release nogil;
              r = c.split(color, key);
            }
            std::optional<Communicator> got = value_or_raise(std::move(r));
            if (!got) return py::none();
            return py::cast(std::make_shared<Communicator>(std::move(*got)));
          },
          py::arg("color"), py::arg("key") = 0,
          "Ranks of one colour form a communicator ordered by (key, rank); colour UNDEFINED (-1) "
          "joins none and gets None. Collective.")
      .def("dup",
           [](Communicator& c) {
             Result<Communicator> r = Status::error(Errc::Internal, "unset");
             {
               py::gil_scoped_release nogil;
               r = c.dup();
             }
             return std::make_shared<Communicator>(value_or_raise(std::move(r)));
           })
      .def("describe", &Communicator::describe);
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "OrbiTE's C++ core: communicators, collectives and requests.";
  add_errors(m);
  m.attr("version") = ORBITE_VERSION_STRING;
  m.attr("UNDEFINED") = kUndefinedColor;

  py::class_<PyRequest>(m, "Request", "An operation in flight; wait() raises its error.")
      .def("test", &PyRequest::test, "Progress, then whether the operation finished.")
      .def("wait", &PyRequest::wait, py::arg("timeout") = py::none(),
           "Waits (the GIL released) up to timeout seconds (None: no bound); raises the "
           "operation's error, or TimeoutError while it still runs.")
      .def_property_readonly("done", &PyRequest::done)
      .def_property_readonly("bytes", &PyRequest::bytes)
      .def("status", &PyRequest::status);

  py::class_<Bootstrap>(m, "Bootstrap", "How the ranks of a job find each other.")
      .def_static("default", &default_bootstrap,
                  "The process's bootstrap from the environment (made at first use, shared).")
      .def_static(
          "from_env",
          [] {
            Result<Bootstrap> b = Status::error(Errc::Internal, "unset");
            {
              py::gil_scoped_release nogil;
              b = Bootstrap::from_env();
            }
            return value_or_raise(std::move(b));
          },
          "From the launcher's environment (orbite-run, mpirun, torchrun).")
      .def_property_readonly("rank", &Bootstrap::rank)
      .def_property_readonly("world_size", &Bootstrap::world_size)
      .def_property_readonly("source", &Bootstrap::source);

  add_communicator(m);
}

}  // namespace orbite::python
