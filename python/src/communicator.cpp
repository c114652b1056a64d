// orbite._core: Communicator (point-to-point and collectives). Counts come from the buffers;
// every operation returns a Request that borrows its buffers until done.
#include <orbite/orbite.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bindings.h"
#include "buffers.h"
#include "displacements.h"
#include "errors.h"
#include "request.h"

namespace orbite::python {
namespace py = pybind11;

namespace {

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

// The elements a buffer needs for blocks at `displs` of `counts` (lengths are the engine's to
// check; a short vector contributes what it has).
std::uint64_t extent_of(const std::vector<std::uint64_t>& counts,
                        const std::vector<std::uint64_t>& displs) {
  std::uint64_t end = 0;
  for (std::size_t i = 0; i < counts.size() && i < displs.size(); ++i) {
    if (counts[i] == 0) continue;
    const std::uint64_t e = displs[i] > UINT64_MAX - counts[i] ? UINT64_MAX : displs[i] + counts[i];
    if (e > end) end = e;
  }
  return end;
}

}  // namespace

void add_communicator(py::module_& m) {
  py::class_<Communicator, std::shared_ptr<Communicator>>(
      m, "Communicator", "A group of ranks with point-to-point messages and collectives.")
      .def(py::init([](py::object bootstrap, py::object config) {
             const std::optional<EngineConfig> cfg = config_of(config);
             const Bootstrap boot =
                 bootstrap.is_none() ? default_bootstrap() : bootstrap.cast<Bootstrap>();
             Result<Communicator> c = Status::error(Errc::Internal, "unset");
             {
               py::gil_scoped_release nogil;  // collective over the ranks: it waits for them
               c = cfg ? Communicator::create(boot, *cfg) : Communicator::create(boot);
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
      .def_property_readonly("engine", &Communicator::shared_engine,
                             "The TransferEngine carrying this communicator's data (shared by "
                             "its split and dup communicators): register memory, put and get.")
      .def(
          "isend",
          [](Communicator& c, py::handle data, int peer, int tag, const std::string& transport,
             const std::string& priority, std::optional<double> deadline) {
            const TransferOptions o = options_of(transport, priority, deadline);
            auto v = std::make_unique<View>(data, false, "isend data");
            auto r = c.isend(v->data(), v->bytes(), peer, tag, o);
            return wrap(std::move(r), std::move(v));
          },
          py::arg("data"), py::arg("peer"), py::arg("tag") = 0, py::arg("transport") = "unspec",
          py::arg("priority") = "high", py::arg("deadline") = py::none())
      .def(
          "irecv",
          [](Communicator& c, py::handle data, int peer, int tag, const std::string& transport,
             const std::string& priority, std::optional<double> deadline) {
            const TransferOptions o = options_of(transport, priority, deadline);
            auto v = std::make_unique<View>(data, true, "irecv data");
            auto r = c.irecv(v->data(), v->bytes(), peer, tag, o);
            return wrap(std::move(r), std::move(v));
          },
          py::arg("data"), py::arg("peer"), py::arg("tag") = 0, py::arg("transport") = "unspec",
          py::arg("priority") = "high", py::arg("deadline") = py::none())
      .def(
          "iprobe",
          [](Communicator& c, int source, int tag) -> py::object {
            auto hit = value_or_raise(c.iprobe(source, tag));
            if (!hit) return py::none();
            return py::make_tuple(hit->source, hit->tag, hit->bytes);
          },
          py::arg("source") = kAnySource, py::arg("tag") = kAnyTag,
          "A message waiting for its receive, as (source, tag, bytes), or None; nothing is "
          "received (MPI_Iprobe).")
      .def(
          "probe",
          [](Communicator& c, int source, int tag, std::optional<double> timeout) {
            Result<MessageInfo> hit = Status::error(Errc::Internal, "unset");
            {
              py::gil_scoped_release nogil;
              hit = c.probe(source, tag, timeout_of(timeout, "probe"));
            }
            const MessageInfo info = value_or_raise(std::move(hit));
            return py::make_tuple(info.source, info.tag, info.bytes);
          },
          py::arg("source") = kAnySource, py::arg("tag") = kAnyTag, py::arg("timeout") = py::none(),
          "Waits for a message (MPI_Probe) and returns (source, tag, bytes); TimeoutError after "
          "timeout seconds.")
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
      .def(
          "all_to_allv",
          [](Communicator& c, py::handle send, const std::vector<std::uint64_t>& send_counts,
             py::handle recv, const std::vector<std::uint64_t>& recv_counts,
             std::optional<std::vector<std::uint64_t>> send_displs,
             std::optional<std::vector<std::uint64_t>> recv_displs) {
            Pair p = pair_of(send, recv, "all_to_allv");
            const std::vector<std::uint64_t> sd =
                send_displs ? *send_displs : displacements_of(send_counts);
            const std::vector<std::uint64_t> rd =
                recv_displs ? *recv_displs : displacements_of(recv_counts);
            // The ranges themselves (lengths, bounds, overlap) are checked by the engine; here
            // only that they fit the buffers Python handed over.
            need(*p.views.back(), extent_of(recv_counts, rd), "all_to_allv recv");
            if (p.views.size() == 2) {
              need(*p.views.front(), extent_of(send_counts, sd), "all_to_allv send");
            }
            auto r = c.all_to_allv(p.send, send_counts, sd, p.recv, recv_counts, rd, p.type);
            return wrap(std::move(r), std::move(p.views));
          },
          py::arg("send"), py::arg("send_counts"), py::arg("recv"), py::arg("recv_counts"),
          py::arg("send_displs") = py::none(), py::arg("recv_displs") = py::none(),
          "As MPI_Alltoallv: counts and displacements in elements, one per rank; displacements "
          "default to the counts' prefix sums.")
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

}  // namespace orbite::python
