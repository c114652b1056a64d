// orbite._core: TransferEngine, MemoryRegion and RemoteRegion: registered memory and one-sided
// put/get. A MemoryRegion keeps the memory it registered (its buffer view) and its engine alive
// while registered; a put/get Request keeps its MemoryRegion alive until done.
#include <orbite/orbite.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bindings.h"
#include "buffers.h"
#include "errors.h"
#include "request.h"

namespace orbite::python {
namespace py = pybind11;

namespace {

// A registration and what it borrows. Lifetimes: `view` (the memory) and `engine` outlive
// `region`; both are dropped only once the registration is gone, never while it may be in use.
struct PyRegion {
  std::shared_ptr<TransferEngine> engine;
  std::unique_ptr<View> view;
  MemoryRegion region;

  PyRegion() = default;
  PyRegion(const PyRegion&) = delete;
  PyRegion& operator=(const PyRegion&) = delete;
  ~PyRegion() {
    if (region.valid()) {
      Status st;
      {
        py::gil_scoped_release nogil;
        st = region.unregister();
      }
      // Retained (Unquiesced): the memory must stay valid, so its view is never released.
      if (!st.ok()) (void)view.release();
    }
  }
};

Access access_of(const std::string& rights) {
  if (rights == "rw" || rights == "wr") return Access{true, true};
  if (rights == "r") return Access{true, false};
  if (rights == "w") return Access{false, true};
  raise(
      Status::error(Errc::InvalidArgument, "access '" + rights +
                                               "' is none of 'rw', 'r' (peers may get), 'w' (peers "
                                               "may put)"));
}

std::string rights_of(Access a) {
  return std::string(a.read ? "r" : "") + (a.write ? "w" : "");
}

std::string transport_name(Transport t) {
  return std::string(to_string(t));
}

// Ranges of a batch: an (N, 3) buffer of 8-byte integers (a numpy array), or any iterable of
// (local_offset, remote_offset, length) triples.
std::vector<TransferRange> ranges_of(py::handle ranges) {
  std::vector<TransferRange> out;
  if (PyObject_CheckBuffer(ranges.ptr()) != 0) {
    View v(ranges, false, "ranges");
    const auto type = v.element_type();
    if (type != DataType::Int64 && type != DataType::Uint64) {
      raise(Status::error(
          Errc::InvalidArgument,
          "ranges: an array of ranges must hold int64 or uint64, not '" + v.format() + "'"));
    }
    if (v.count() % 3 != 0) {
      raise(Status::error(Errc::InvalidArgument, "ranges: " + std::to_string(v.count()) +
                                                     " integers are not (N, 3) triples"));
    }
    const auto* x = static_cast<const std::int64_t*>(v.data());
    for (std::uint64_t i = 0; i < v.count(); i += 3) {
      if (type == DataType::Int64 && (x[i] < 0 || x[i + 1] < 0 || x[i + 2] < 0)) {
        raise(Status::error(Errc::InvalidArgument,
                            "ranges: row " + std::to_string(i / 3) + " has a negative value"));
      }
      out.push_back({static_cast<std::uint64_t>(x[i]), static_cast<std::uint64_t>(x[i + 1]),
                     static_cast<std::uint64_t>(x[i + 2])});
    }
    return out;
  }
  std::size_t row = 0;
  for (py::handle item : ranges) {
    try {
      auto t = item.cast<std::tuple<std::uint64_t, std::uint64_t, std::uint64_t>>();
      out.push_back({std::get<0>(t), std::get<1>(t), std::get<2>(t)});
    } catch (const py::cast_error&) {
      raise(Status::error(Errc::InvalidArgument,
                          "ranges: item " + std::to_string(row) +
                              " is not a (local_offset, remote_offset, length) triple of "
                              "integers >= 0"));
    }
    ++row;
  }
  return out;
}

py::dict stats_of(const EngineStats& s) {
  py::dict d;
  d["requests_submitted"] = s.requests_submitted;
  d["ranges_merged"] = s.ranges_merged;
  d["notifications_received"] = s.notifications_received;
  d["notifications_refused"] = s.notifications_refused;
  d["notifications_pending"] = s.notifications_pending;
  d["requests_completed"] = s.requests_completed;
  d["requests_failed"] = s.requests_failed;
  py::dict by_code;
  for (std::size_t i = 1; i < kErrcCount; ++i) {
    if (s.failures_by_code[i] != 0) {
      by_code[py::str(std::string(errc_name(static_cast<Errc>(i))))] = s.failures_by_code[i];
    }
  }
  d["failures_by_code"] = by_code;
  d["bytes_sent"] = s.bytes_sent;
  d["bytes_received"] = s.bytes_received;
  d["eager_messages"] = s.eager_messages;
  d["rendezvous_messages"] = s.rendezvous_messages;
  d["single_copy_bytes"] = s.single_copy_bytes;
  d["peers_connected"] = s.peers_connected;
  d["peers_lost"] = s.peers_lost;
  d["protocol_errors"] = s.protocol_errors;
  d["regions_registered"] = s.regions_registered;
  d["staging_loans"] = s.staging_loans;
  py::dict transports;
  for (Transport t : {Transport::Tcp, Transport::Shm, Transport::Rdma, Transport::Nvlink}) {
    const TransportStats& ts = s.of(t);
    py::dict e;
    e["bytes_sent"] = ts.bytes_sent;
    e["bytes_received"] = ts.bytes_received;
    e["frames_sent"] = ts.frames_sent;
    e["frames_received"] = ts.frames_received;
    transports[py::str(transport_name(t))] = e;
  }
  d["transports"] = transports;
  return d;
}

py::object register_one(const std::shared_ptr<TransferEngine>& engine, py::handle memory,
                        const std::string& access) {
  const Access rights = access_of(access);
  auto r = std::make_unique<PyRegion>();
  r->engine = engine;
  r->view = std::make_unique<View>(memory, rights.write, "register_memory memory");
  void* data = r->view->data();
  const std::uint64_t length = r->view->bytes();
  Result<MemoryRegion> got = Status::error(Errc::Internal, "unset");
  {
    py::gil_scoped_release nogil;
    got = engine->register_memory(data, length, r->view->kind(), rights);
  }
  r->region = value_or_raise(std::move(got));
  return py::cast(std::move(r));
}

// All or nothing: on any error no range stays registered.
py::list register_many(const std::shared_ptr<TransferEngine>& engine, const py::list& memories,
                       const std::string& access) {
  const Access rights = access_of(access);
  std::vector<std::unique_ptr<PyRegion>> made;
  std::vector<RegistrationRequest> requests;
  for (std::size_t i = 0; i < memories.size(); ++i) {
    auto r = std::make_unique<PyRegion>();
    r->engine = engine;
    r->view = std::make_unique<View>(memories[i], rights.write,
                                     "register_memory memory[" + std::to_string(i) + "]");
    requests.push_back({r->view->data(), r->view->bytes(), r->view->kind(), rights});
    made.push_back(std::move(r));
  }
  Result<std::vector<MemoryRegion>> got = Status::error(Errc::Internal, "unset");
  {
    py::gil_scoped_release nogil;
    got = engine->register_memory(requests);
  }
  std::vector<MemoryRegion> regions = value_or_raise(std::move(got));
  py::list out;
  for (std::size_t i = 0; i < made.size(); ++i) {
    made[i]->region = std::move(regions[i]);
    out.append(py::cast(std::move(made[i])));
  }
  return out;
}

using OneSided = Result<Request> (TransferEngine::*)(const MemoryRegion&, std::uint64_t,
                                                     const RemoteRegion&, std::uint64_t,
                                                     std::uint64_t, const TransferOptions&);
using Batched = Result<Request> (TransferEngine::*)(const MemoryRegion&, const RemoteRegion&,
                                                    std::span<const TransferRange>,
                                                    const TransferOptions&);

const PyRegion& region_of(py::handle local) {
  if (!py::isinstance<PyRegion>(local)) {
    raise(Status::error(Errc::InvalidArgument,
                        "local: expected an orbite.MemoryRegion (from register_memory), got " +
                            std::string(py::str(py::type::handle_of(local).attr("__name__")))));
  }
  return local.cast<const PyRegion&>();
}

// The local region of a put (read) or a get (written: never memory its exporter said is
// read-only, whatever rights peers have).
const PyRegion& local_of(py::handle local, bool written) {
  const PyRegion& l = region_of(local);
  if (written && l.view && l.view->readonly()) {
    raise(Status::error(Errc::InvalidArgument,
                        "local: a get writes into this region, whose memory is read-only (" +
                            l.view->format() + " from a read-only buffer)"));
  }
  return l;
}

// A notification argument: None (none), bytes, or str (sent as UTF-8).
std::optional<std::string> notification_of(const py::object& n) {
  if (n.is_none()) return std::nullopt;
  if (py::isinstance<py::bytes>(n)) return n.cast<std::string>();
  if (py::isinstance<py::str>(n)) return n.cast<std::string>();
  raise(Status::error(Errc::InvalidArgument,
                      "notification: expected bytes, str or None, got " +
                          std::string(py::str(py::type::handle_of(n).attr("__name__")))));
}

// put or get of one range; the Request keeps `local` (and so its memory) alive until done.
std::unique_ptr<PyRequest> one_sided(TransferEngine& e, OneSided op, bool writes_local,
                                     py::object local, std::uint64_t local_offset,
                                     const RemoteRegion& remote, std::uint64_t remote_offset,
                                     std::uint64_t length, const TransferOptions& o) {
  const PyRegion& l = local_of(local, writes_local);
  auto r = (e.*op)(l.region, local_offset, remote, remote_offset, length, o);
  std::vector<py::object> owners{std::move(local)};
  return wrap(std::move(r), Views{}, std::move(owners));
}

std::unique_ptr<PyRequest> batched(TransferEngine& e, Batched op, bool writes_local,
                                   py::object local, const RemoteRegion& remote, py::handle ranges,
                                   const TransferOptions& o) {
  const std::vector<TransferRange> rs = ranges_of(ranges);
  const PyRegion& l = local_of(local, writes_local);
  auto r = (e.*op)(l.region, remote, rs, o);
  std::vector<py::object> owners{std::move(local)};
  return wrap(std::move(r), Views{}, std::move(owners));
}

void add_regions(py::module_& m) {
  py::class_<RemoteRegion>(m, "RemoteRegion",
                           "A peer's registered memory, from the bytes its owner exported.")
      .def(py::init([](const py::bytes& descriptor) {
             const std::string b = descriptor;
             return value_or_raise(RemoteRegion::from_bytes(std::string_view(b)));
           }),
           py::arg("descriptor"),
           "Checks the descriptor (version, lengths, checksum); a forged or truncated one "
           "raises InvalidArgumentError.")
      .def("bytes", [](const RemoteRegion& r) { return py::bytes(r.bytes()); })
      .def_property_readonly("length", &RemoteRegion::length)
      .def_property_readonly("region_id", &RemoteRegion::region_id)
      .def_property_readonly("generation", &RemoteRegion::generation)
      .def_property_readonly("access", [](const RemoteRegion& r) { return rights_of(r.access()); })
      .def_property_readonly("owner_id", &RemoteRegion::owner_id)
      .def_property_readonly("owner_address", &RemoteRegion::owner_address)
      .def_property_readonly("transports",
                             [](const RemoteRegion& r) {
                               std::vector<std::string> names;
                               for (Transport t : r.transports()) {
                                 names.push_back(transport_name(t));
                               }
                               return names;
                             })
      .def("__repr__", [](const RemoteRegion& r) {
        return "<orbite.RemoteRegion " + std::to_string(r.region_id()) + " of " + r.owner_id() +
               ", " + std::to_string(r.length()) + " bytes, '" + rights_of(r.access()) + "'>";
      });

  py::class_<PyRegion>(m, "MemoryRegion",
                       "Memory registered with an engine; peers reach it through descriptor().")
      .def_property_readonly(
          "address",
          [](const PyRegion& r) { return reinterpret_cast<std::uintptr_t>(r.region.data()); })
      .def_property_readonly("length", [](const PyRegion& r) { return r.region.length(); })
      .def_property_readonly("access",
                             [](const PyRegion& r) { return rights_of(r.region.access()); })
      .def_property_readonly("registered", [](const PyRegion& r) { return r.region.valid(); })
      .def(
          "descriptor",
          [](const PyRegion& r) {
            if (!r.region.valid()) {
              raise(Status::error(Errc::InvalidArgument,
                                  "descriptor: the region is no longer registered"));
            }
            return py::bytes(r.region.export_descriptor().bytes());
          },
          "The bytes a peer turns into a RemoteRegion.")
      .def(
          "unregister",
          [](PyRegion& r, std::optional<double> timeout) {
            if (!r.region.valid()) return;
            const Duration bound = timeout_of(timeout, "MemoryRegion.unregister");
            Status st;
            {
              py::gil_scoped_release nogil;
              st = r.region.unregister(bound);
            }
            check(st);  // Unquiesced: still registered, and the memory stays borrowed
            r.region = MemoryRegion();
            r.view.reset();
          },
          py::arg("timeout") = 30.0,
          "Waits for this process's transfers on it, fails peers' unfinished ones, then lets "
          "the memory go.");
}

// close_source / close_requester: one role's close with the GIL released, raising on failure.
void close_role(TransferEngine& e, Status (TransferEngine::*close)(Duration),
                std::optional<double> timeout, const char* what) {
  const Duration bound = timeout_of(timeout, what);
  Status st;
  {
    py::gil_scoped_release nogil;
    st = (e.*close)(bound);
  }
  check(st);
}

}  // namespace

std::optional<EngineConfig> config_of(py::handle config) {
  std::string json;
  if (py::isinstance<py::dict>(config)) {
    json = py::module_::import("json").attr("dumps")(config).cast<std::string>();
  } else if (py::isinstance<py::str>(config)) {
    json = config.cast<std::string>();
  } else if (config.is_none()) {
    return std::nullopt;
  } else {
    raise(Status::error(Errc::InvalidArgument,
                        "config: expected a dict or a JSON string, got " +
                            std::string(py::str(py::type::handle_of(config).attr("__name__")))));
  }
  auto cfg = EngineConfig::from_json(json);
  if (!cfg.ok()) raise(cfg.status().with_context("config"));
  return std::move(cfg).value();
}

void add_engine(py::module_& m) {
  add_regions(m);
  py::class_<TransferEngine, std::shared_ptr<TransferEngine>>(
      m, "TransferEngine",
      "Registered memory and one-sided put/get. comm.engine is a communicator's; "
      "TransferEngine(config) makes one for processes that exchange descriptors themselves.")
      .def(py::init([](py::object config) {
             std::optional<EngineConfig> cfg = config_of(config);
             Result<std::shared_ptr<TransferEngine>> e = Status::error(Errc::Internal, "unset");
             {
               py::gil_scoped_release nogil;
               if (!cfg) {
                 auto loaded = EngineConfig::load();
                 if (!loaded.ok()) {
                   e = loaded.status();
                 } else {
                   cfg = std::move(loaded).value();
                 }
               }
               if (cfg) e = TransferEngine::create(*cfg);
             }
             return value_or_raise(std::move(e));
           }),
           py::arg("config") = py::none())
      .def_property_readonly("id", &TransferEngine::id)
      .def_property_readonly("control_address", &TransferEngine::control_address)
      .def(
          "register_memory",
          [](const std::shared_ptr<TransferEngine>& e, py::handle memory,
             const std::string& access) -> py::object {
            if (py::isinstance<py::list>(memory)) {
              return register_many(e, py::reinterpret_borrow<py::list>(memory), access);
            }
            return register_one(e, memory, access);
          },
          py::arg("memory"), py::arg("access") = "rw",
          "memory: a buffer (numpy, bytearray, memoryview), an (address, length) pair, an "
          "object with __dlpack__, or a list of them (all registered, or none). access: what "
          "peers may do: 'rw', 'r' (get) or 'w' (put).")
      .def(
          "put",
          [](TransferEngine& e, py::object local, std::uint64_t local_offset,
             const RemoteRegion& remote, std::uint64_t remote_offset, std::uint64_t length,
             const std::string& transport, const std::string& priority,
             std::optional<double> deadline, const py::object& notification) {
            TransferOptions o = options_of(transport, priority, deadline);
            o.notification = notification_of(notification);
            return one_sided(e, &TransferEngine::put, false, std::move(local), local_offset, remote,
                             remote_offset, length, o);
          },
          py::arg("local"), py::arg("local_offset"), py::arg("remote"), py::arg("remote_offset"),
          py::arg("length"), py::arg("transport") = "unspec", py::arg("priority") = "high",
          py::arg("deadline") = py::none(), py::arg("notification") = py::none(),
          "Writes local[local_offset:+length] to remote[remote_offset:+length]. notification: "
          "bytes or str (at most 4096 bytes) the owner's notifications() returns once the bytes "
          "are there; the request then completes when the owner holds it.")
      .def(
          "get",
          [](TransferEngine& e, py::object local, std::uint64_t local_offset,
             const RemoteRegion& remote, std::uint64_t remote_offset, std::uint64_t length,
             const std::string& transport, const std::string& priority,
             std::optional<double> deadline, const py::object& notification) {
            TransferOptions o = options_of(transport, priority, deadline);
            o.notification = notification_of(notification);
            return one_sided(e, &TransferEngine::get, true, std::move(local), local_offset, remote,
                             remote_offset, length, o);
          },
          py::arg("local"), py::arg("local_offset"), py::arg("remote"), py::arg("remote_offset"),
          py::arg("length"), py::arg("transport") = "unspec", py::arg("priority") = "high",
          py::arg("deadline") = py::none(), py::arg("notification") = py::none(),
          "Reads remote[remote_offset:+length] into local[local_offset:+length]. notification: as "
          "put's, delivered once the bytes were read.")
      .def(
          "put_batch",
          [](TransferEngine& e, py::object local, const RemoteRegion& remote, py::handle ranges,
             const std::string& transport, const std::string& priority,
             std::optional<double> deadline, const py::object& notification) {
            TransferOptions o = options_of(transport, priority, deadline);
            o.notification = notification_of(notification);
            return batched(e, &TransferEngine::put, false, std::move(local), remote, ranges, o);
          },
          py::arg("local"), py::arg("remote"), py::arg("ranges"), py::arg("transport") = "unspec",
          py::arg("priority") = "high", py::arg("deadline") = py::none(),
          py::arg("notification") = py::none(),
          "Many (local_offset, remote_offset, length) ranges, one Request; every range is "
          "checked before any is issued. A notification goes once, after every range.")
      .def(
          "get_batch",
          [](TransferEngine& e, py::object local, const RemoteRegion& remote, py::handle ranges,
             const std::string& transport, const std::string& priority,
             std::optional<double> deadline, const py::object& notification) {
            TransferOptions o = options_of(transport, priority, deadline);
            o.notification = notification_of(notification);
            return batched(e, &TransferEngine::get, true, std::move(local), remote, ranges, o);
          },
          py::arg("local"), py::arg("remote"), py::arg("ranges"), py::arg("transport") = "unspec",
          py::arg("priority") = "high", py::arg("deadline") = py::none(),
          py::arg("notification") = py::none())
      .def(
          "notify",
          [](TransferEngine& e, const RemoteRegion& remote, const py::object& message,
             const std::string& transport, const std::string& priority) {
            std::optional<std::string> text = notification_of(message);
            if (!text) raise(Status::error(Errc::InvalidArgument, "notify: message is None"));
            auto r = e.notify(remote, std::move(*text), options_of(transport, priority));
            return wrap(std::move(r), Views{});
          },
          py::arg("remote"), py::arg("message"), py::arg("transport") = "unspec",
          py::arg("priority") = "high",
          "Sends message (bytes or str, at most 4096 bytes) to the engine that owns remote, "
          "after this engine's put/get requests to it that completed before; the Request "
          "completes once that engine holds it.")
      .def(
          "notifications",
          [](TransferEngine& e, std::optional<double> timeout) {
            const Duration wait = timeout_of(timeout, "TransferEngine.notifications");
            std::vector<Notification> got;
            {
              py::gil_scoped_release nogil;
              got = e.notifications(wait);
            }
            py::list out;
            for (auto& n : got) out.append(py::make_tuple(n.peer, py::bytes(n.message)));
            return out;
          },
          py::arg("timeout") = 0.0,
          "The notifications peers delivered, oldest first, as (sender engine id, bytes) "
          "tuples, each returned once; waits up to timeout seconds (None: no bound) for the "
          "first when none is there.")
      .def(
          "stats", [](const TransferEngine& e) { return stats_of(e.stats()); },
          "Counters, with the bytes and frames each transport carried under 'transports'.")
      .def("metrics", &TransferEngine::metrics, py::call_guard<py::gil_scoped_release>(),
           "This engine's counters in the Prometheus text format (docs/metrics.md).")
      .def_property_readonly(
          "metrics_endpoint", &TransferEngine::metrics_endpoint,
          "host:port of this process's metrics exporter (metrics.listen, offset by the local "
          "rank), '' when none runs.")
      .def("state_report", &TransferEngine::state_report, py::call_guard<py::gil_scoped_release>(),
           "What the engine holds outstanding now, as text (docs/hangs.md): links, posted "
           "receives with their age, unexpected messages, requests in flight and their transport, "
           "RDMA parents, grants and QPs, and each communicator's collectives with their step.")
      .def(
          "close",
          [](TransferEngine& e, std::optional<double> timeout, bool cancel) {
            const Duration bound = timeout_of(timeout, "TransferEngine.close");
            Status st;
            {
              py::gil_scoped_release nogil;
              st = e.close(bound, cancel ? CloseTimeout::Cancel : CloseTimeout::KeepWaiting);
            }
            check(st);
          },
          py::arg("timeout") = 30.0, py::arg("cancel") = true,
          "Fences admission, waits for accepted work, retires connections and registrations. "
          "Work still running at the timeout is cancelled (UnquiescedError), or with "
          "cancel=False left running, fenced, for a later close() to keep waiting for.")
      .def(
          "close_source",
          [](TransferEngine& e, std::optional<double> timeout) {
            close_role(e, &TransferEngine::close_source, timeout, "TransferEngine.close_source");
          },
          py::arg("timeout") = 30.0,
          "Refuses peers' put/get on this engine's registered memory from now on and waits for "
          "those already started (UnquiescedError at the timeout; call again to keep waiting).")
      .def(
          "close_requester",
          [](TransferEngine& e, std::optional<double> timeout) {
            close_role(e, &TransferEngine::close_requester, timeout,
                       "TransferEngine.close_requester");
          },
          py::arg("timeout") = 30.0,
          "Refuses this engine's new put/get and waits for those accepted (UnquiescedError at "
          "the timeout; call again to keep waiting).");

  // The reference of the binding-overhead benchmark (perf_tests/python): `iterations` puts of
  // `length` bytes, each waited for, timed in C++ with the GIL released. Returns seconds.
  m.def(
      "_timed_put_loop",
      [](TransferEngine& e, const PyRegion& local, const RemoteRegion& remote, std::uint64_t length,
         int iterations) {
        Status st;
        std::chrono::duration<double> took{};
        {
          py::gil_scoped_release nogil;
          const auto start = std::chrono::steady_clock::now();
          for (int i = 0; i < iterations && st.ok(); ++i) {
            auto r = e.put(local.region, 0, remote, 0, length);
            st = r.ok() ? r->wait(std::chrono::seconds(60)) : r.status();
          }
          took = std::chrono::steady_clock::now() - start;
        }
        check(st);
        return took.count();
      },
      py::arg("engine"), py::arg("local"), py::arg("remote"), py::arg("length"),
      py::arg("iterations"));
}

}  // namespace orbite::python
