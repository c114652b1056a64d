// orbite._core's Request and what every binding that starts an operation shares: bounds in
// seconds, transfer options by name, and the rule that an operation keeps its buffers (their
// Py_buffer views, DLPack capsules and owning Python objects) until it is done.
#pragma once

#include <orbite/transfer.h>
#include <pybind11/pybind11.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "buffers.h"

namespace orbite::python {

using Views = std::vector<std::unique_ptr<View>>;

// None: no bound. Negative or not finite is InvalidArgumentError naming `what`.
Duration timeout_of(const std::optional<double>& seconds, const char* what);

// transport: "unspec" (the selection table's choice), "tcp", "shm", "rdma"; priority: "high",
// "medium", "low"; deadline: seconds from now within which the payload must start moving
// (None: none), else the request fails with TimeoutError having moved nothing.
TransferOptions options_of(const std::string& transport, const std::string& priority,
                           const std::optional<double>& deadline = std::nullopt);

// An operation in flight and what it borrows: buffer views, and Python objects that must outlive
// it (a MemoryRegion, say). Destroyed (GIL held) while still running, it waits for the operation
// (GIL released) up to kDropWait; an operation still running then keeps everything it borrows
// for the life of the process, since OrbiTE may still read or write that memory. Nothing waits
// without bound.
class PyRequest {
 public:
  static constexpr std::chrono::seconds kDropWait{10};

  PyRequest(Request r, Views views, std::vector<pybind11::object> owners = {})
      : req_(std::move(r)), views_(std::move(views)), owners_(std::move(owners)) {}
  PyRequest(const PyRequest&) = delete;
  PyRequest& operator=(const PyRequest&) = delete;
  ~PyRequest();

  bool test();
  void wait(std::optional<double> timeout);
  [[nodiscard]] bool done() const { return req_.done(); }
  [[nodiscard]] std::uint64_t bytes() const { return req_.bytes(); }
  // A finished receive's sender rank and tag (-1 otherwise).
  [[nodiscard]] int source() const { return req_.source(); }
  [[nodiscard]] int tag() const { return req_.tag(); }
  // None while running; else (code name, message), code "OK" on success.
  [[nodiscard]] pybind11::object status() const;

 private:
  // With the GIL held, once the operation is done.
  void release_borrowed();
  // With the GIL held, for an operation that may still touch the memory: never released.
  void keep_borrowed_forever();

  Request req_;
  Views views_;
  std::vector<pybind11::object> owners_;
};

std::unique_ptr<PyRequest> wrap(Result<Request> r, Views views,
                                std::vector<pybind11::object> owners = {});
// An operation on one buffer.
std::unique_ptr<PyRequest> wrap(Result<Request> r, std::unique_ptr<View> view);

// Waits for a blocking call's request (GIL released) up to `bound`. Still running then, the
// operation stays queued and the view is kept for the life of the process (OrbiTE may still
// read or write the buffer), and TimeoutError is raised. Returns the bytes moved.
std::uint64_t blocking(Result<Request> r, std::unique_ptr<View> view, Duration bound);

void add_request(pybind11::module_& m);

}  // namespace orbite::python
