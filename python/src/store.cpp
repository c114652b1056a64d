// orbite._core: the bootstrap key-value stores and Bootstrap. Keys are str, values bytes; every
// call that may wait releases the GIL and takes a bound in seconds.
#include <orbite/bootstrap.h>
#include <orbite/store.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bindings.h"
#include "errors.h"
#include "request.h"

namespace orbite::python {
namespace py = pybind11;

namespace {

// Runs `call` with the GIL released and raises its error.
template <typename F>
auto unlocked(F&& call) {
  auto r = [&] {
    py::gil_scoped_release nogil;
    return call();
  }();
  if constexpr (std::is_same_v<decltype(r), Status>) {
    check(r);
  } else {
    return value_or_raise(std::move(r));
  }
}

Duration bound_of(std::optional<double> seconds, const char* what) {
  return timeout_of(seconds, what);
}

}  // namespace

Bootstrap default_bootstrap() {
  static std::optional<Bootstrap> made;  // guarded by the GIL
  if (!made) made = unlocked([] { return Bootstrap::from_env(); });
  return *made;
}

void add_store(py::module_& m) {
  py::class_<Store, std::shared_ptr<Store>>(
      m, "Store",
      "A bootstrap key-value store (str keys, bytes values). Waits take a bound in seconds.")
      .def(
          "set",
          [](Store& s, const std::string& key, const py::bytes& value) {
            std::string v = value;
            unlocked([&] { return s.set(key, v); });
          },
          py::arg("key"), py::arg("value"))
      .def(
          "get",
          [](Store& s, const std::string& key, std::optional<double> timeout) {
            const Duration bound = bound_of(timeout, "Store.get");
            return py::bytes(unlocked([&] { return s.get(key, bound); }));
          },
          py::arg("key"), py::arg("timeout") = 60.0,
          "Waits up to timeout seconds for the key, then returns its value.")
      .def(
          "wait",
          [](Store& s, const std::vector<std::string>& keys, std::optional<double> timeout) {
            const Duration bound = bound_of(timeout, "Store.wait");
            unlocked([&] { return s.wait(keys, bound); });
          },
          py::arg("keys"), py::arg("timeout") = 60.0)
      .def(
          "check",
          [](Store& s, const std::vector<std::string>& keys) {
            return unlocked([&] { return s.check(keys); });
          },
          py::arg("keys"), "Whether each key exists now.")
      .def(
          "add",
          [](Store& s, const std::string& key, std::int64_t delta) {
            return unlocked([&] { return s.add(key, delta); });
          },
          py::arg("key"), py::arg("delta") = 1,
          "Adds delta to the decimal counter at key (absent: 0); returns the new value.")
      .def(
          "compare_set",
          [](Store& s, const std::string& key, const py::bytes& expected,
             const py::bytes& desired) {
            std::string e = expected;
            std::string d = desired;
            return py::bytes(unlocked([&] { return s.compare_set(key, e, d); }));
          },
          py::arg("key"), py::arg("expected"), py::arg("desired"),
          "Sets desired if the key holds expected (absent matches b''); returns the value held.")
      .def(
          "erase",
          [](Store& s, const std::string& key) { return unlocked([&] { return s.erase(key); }); },
          py::arg("key"))
      .def(
          "barrier",
          [](Store& s, const std::string& tag, int rank, int world_size,
             std::optional<double> timeout) {
            const Duration bound = bound_of(timeout, "Store.barrier");
            unlocked([&] { return s.barrier(tag, rank, world_size, bound); });
          },
          py::arg("tag"), py::arg("rank"), py::arg("world_size"), py::arg("timeout") = 60.0,
          "All world_size ranks calling it with the same tag (used once) return together.");

  py::class_<InProcessStore, Store, std::shared_ptr<InProcessStore>>(
      m, "InProcessStore", "A store inside this process (for ranks that are threads).")
      .def(py::init([] { return std::make_shared<InProcessStore>(); }));

  py::class_<TcpStoreClient, Store, std::shared_ptr<TcpStoreClient>>(
      m, "TcpStore", "A client of a TcpStoreServer (orbite-store, orbite-run's embedded store).")
      .def(py::init([](const std::string& address, const std::string& token,
                       std::optional<double> connect_timeout) {
             TcpStoreClientOptions o;
             o.address = address;
             o.token = token;
             o.connect_timeout = bound_of(connect_timeout, "TcpStore connect_timeout");
             return unlocked([&] { return TcpStoreClient::connect(o); });
           }),
           py::arg("address"), py::arg("token") = "", py::arg("connect_timeout") = 60.0,
           "Connects to host:port, retrying until connect_timeout seconds.")
      .def_property_readonly("address", &TcpStoreClient::address);

  py::class_<TcpStoreServer>(m, "TcpStoreServer", "A store server on a thread of this process.")
      .def(py::init([](const std::string& listen, const std::string& token) {
             TcpStoreServerOptions o;
             o.listen = listen;
             o.token = token;
             return unlocked([&] { return TcpStoreServer::start(o); });
           }),
           py::arg("listen") = "127.0.0.1:0", py::arg("token") = "")
      .def_property_readonly("address", &TcpStoreServer::address)
      .def_property_readonly("port", &TcpStoreServer::port)
      .def("stop", [](TcpStoreServer& s) {
        py::gil_scoped_release nogil;
        s.stop();
      });

  py::class_<Bootstrap>(m, "Bootstrap", "How the ranks of a job find each other.")
      .def_static("default", &default_bootstrap,
                  "The process's bootstrap from the environment (made at first use, shared).")
      .def_static(
          "from_env", [] { return unlocked([] { return Bootstrap::from_env(); }); },
          "From the launcher's environment (orbite-run, mpirun, Slurm, torchrun).")
      .def_static(
          "from_store",
          [](std::shared_ptr<Store> store, int rank, int world_size, std::optional<int> local_rank,
             std::optional<double> timeout) {
            if (!store) {
              raise(Status::error(Errc::InvalidArgument, "Bootstrap.from_store: store is None"));
            }
            BootstrapConfig config;
            if (timeout) config.timeout = bound_of(timeout, "Bootstrap.from_store");
            return unlocked([&] {
              return Bootstrap::from_store(std::move(store), rank, world_size, local_rank, config);
            });
          },
          py::arg("store"), py::arg("rank"), py::arg("world_size"),
          py::arg("local_rank") = py::none(), py::arg("timeout") = py::none(),
          "From a store the caller already has (every rank passes one reaching the same keys); "
          "timeout bounds every bootstrap wait (default 300 s).")
      .def_property_readonly("rank", &Bootstrap::rank)
      .def_property_readonly("world_size", &Bootstrap::world_size)
      .def_property_readonly("local_rank", &Bootstrap::local_rank)
      .def_property_readonly("source", &Bootstrap::source)
      .def_property_readonly("store_address", &Bootstrap::store_address)
      .def_property_readonly("hosts_store", &Bootstrap::hosts_store)
      .def_property_readonly("store", &Bootstrap::store,
                             "The store every rank of the job reaches (for a caller's own keys: "
                             "OrbiTE's own start with 'comm/' and 'barrier/').");
}

}  // namespace orbite::python
