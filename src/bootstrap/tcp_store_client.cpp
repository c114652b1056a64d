// TCP store client: one connection, one request in flight at a time (serialized by a mutex).
// After any I/O failure the reply stream can no longer be trusted, so the connection is dropped;
// the next call makes one fresh connection attempt (a dead server then reports ConnectionLost).
#include <mutex>

#include <orbite/store.h>

#include "bootstrap/store_protocol.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/net.h"
#include "common/strings.h"
#include "common/wire.h"

namespace orbite {

namespace sp = store_protocol;

namespace {
// Bound on the reply to a request that does not wait for keys.
constexpr Duration kImmediateReplyTimeout = std::chrono::seconds(30);

std::uint64_t timeout_to_ms(Duration d) {
  if (d <= Duration::zero()) return 0;
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
}
}  // namespace

struct TcpStoreClient::Impl {
  TcpStoreClientOptions options;
  net::HostPort where;
  std::mutex mu;
  net::Fd fd;  // invalid after a failure until the next call reconnects
  std::uint32_t next_id = 1;
  std::string send_buffer;  // reused: large values then cost no fresh pages per request

  std::string what() const { return "store at " + options.address; }

  // Opens a connection and authenticates. `retry` keeps trying refused connections until the
  // connect timeout (used once at start-up, when the server may not be listening yet).
  Status open(bool retry) {
    Deadline deadline = Deadline::after(options.connect_timeout);
    auto connected = retry ? net::connect_tcp_retry(where, deadline)
                           : net::connect_tcp(where, Deadline::after(std::chrono::seconds(5)));
    if (!connected.ok()) {
      Errc code = retry ? connected.status().code() : Errc::ConnectionLost;
      return Status::error(code,
                           "cannot reach the " + what() + ": " + connected.status().message());
    }
    fd = std::move(*connected);
    sp::Request hello;
    hello.op = sp::Op::Hello;
    hello.value = options.token;
    auto reply = exchange(hello, kImmediateReplyTimeout);
    if (!reply.ok()) {
      fd.reset();
      return reply.status();
    }
    return {};
  }

  // Sends one request and returns the reply's result bytes (after the status byte).
  Result<std::string> exchange(const sp::Request& req, Duration reply_timeout) {
    std::uint32_t rid = next_id++;
    sp::encode_request_into(send_buffer, rid, req);
    Deadline write_deadline = Deadline::after(kImmediateReplyTimeout);
    Status s =
        net::write_all(fd.get(), std::as_bytes(std::span(send_buffer)), write_deadline, what());
    if (!s.ok()) return fail(s);
    Deadline read_deadline = Deadline::after(reply_timeout);
    std::string header_bytes(sp::kHeaderBytes, '\0');
    s = net::read_exact(fd.get(), std::as_writable_bytes(std::span(header_bytes)), read_deadline,
                        what());
    if (!s.ok()) return fail(s);
    auto header = sp::decode_header(header_bytes, options.max_value_bytes + sp::kFrameOverhead);
    if (!header.ok()) return fail(header.status().with_context(what() + " sent a bad reply"));
    std::uint8_t expected_op = static_cast<std::uint8_t>(req.op) | sp::kReplyBit;
    if (header->op != expected_op || header->request_id != rid) {
      return fail(Status::error(Errc::Protocol,
                                what() + " answered op " + std::to_string(header->op) + " id " +
                                    std::to_string(header->request_id) + " to op " +
                                    std::to_string(expected_op) + " id " + std::to_string(rid)));
    }
    std::string payload(header->payload_len, '\0');
    s = net::read_exact(fd.get(), std::as_writable_bytes(std::span(payload)), read_deadline,
                        what());
    if (!s.ok()) return fail(s);
    wire::Reader r(payload);
    auto status = r.get<std::uint8_t>();
    if (!r.ok()) return fail(Status::error(Errc::Protocol, what() + " sent an empty reply"));
    if (status != 0) {
      std::string message(r.get_bytes(payload.size()));
      if (!r.done() || status > static_cast<std::uint8_t>(Errc::Internal)) {
        return fail(Status::error(Errc::Protocol, what() + " sent a malformed error reply"));
      }
      auto code = static_cast<Errc>(status);
      if (code == Errc::PermissionDenied) fd.reset();  // the server closes refused clients
      return Status::error(code, message);
    }
    return payload.substr(1);
  }

  Status fail(const Status& s) {
    fd.reset();
    if (s.code() == Errc::ConnectionLost) {
      return Status::error(Errc::ConnectionLost,
                           s.message() + " (the store server is gone or closed the connection)");
    }
    return s;
  }

  Result<std::string> call(const sp::Request& req, Duration wait_timeout) {
    std::lock_guard<std::mutex> lock(mu);
    if (!fd.valid()) ORBITE_RETURN_IF_ERROR(open(/*retry=*/false));
    Duration reply_timeout = kImmediateReplyTimeout;
    if (wait_timeout > Duration::zero()) {
      reply_timeout = wait_timeout >= Duration::max() / 2 ? Duration::max()
                                                          : wait_timeout + options.reply_grace;
    }
    return exchange(req, reply_timeout);
  }

  Status check_key(std::string_view key) const {
    if (key.size() > sp::kMaxKeyBytes) {
      return Status::error(Errc::InvalidArgument, "store key of " + std::to_string(key.size()) +
                                                      " bytes exceeds " +
                                                      std::to_string(sp::kMaxKeyBytes));
    }
    return {};
  }
  Status check_value(std::string_view key, std::string_view value) const {
    if (value.size() > options.max_value_bytes) {
      return Status::error(Errc::InvalidArgument, "store value for key " + quote(key) + " is " +
                                                      std::to_string(value.size()) +
                                                      " bytes; the limit is " +
                                                      std::to_string(options.max_value_bytes));
    }
    return check_key(key);
  }
  Status check_keys(std::span<const std::string> keys) const {
    if (keys.size() > sp::kMaxKeysPerRequest) {
      return Status::error(Errc::InvalidArgument, std::to_string(keys.size()) +
                                                      " keys in one store request exceed " +
                                                      std::to_string(sp::kMaxKeysPerRequest));
    }
    for (const auto& k : keys) ORBITE_RETURN_IF_ERROR(check_key(k));
    return {};
  }
};

TcpStoreClient::TcpStoreClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TcpStoreClient::~TcpStoreClient() = default;

Result<std::shared_ptr<TcpStoreClient>> TcpStoreClient::connect(
    const TcpStoreClientOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  ORBITE_ASSIGN_OR_RETURN(impl->where, net::parse_host_port(options.address));
  {
    std::lock_guard<std::mutex> lock(impl->mu);
    ORBITE_RETURN_IF_ERROR(impl->open(/*retry=*/true));
  }
  ORBITE_LOG(Debug, Bootstrap) << "connected to the " << impl->what();
  return std::shared_ptr<TcpStoreClient>(new TcpStoreClient(std::move(impl)));
}

const std::string& TcpStoreClient::address() const {
  return impl_->options.address;
}

Status TcpStoreClient::set(std::string_view key, std::string_view value) {
  ORBITE_RETURN_IF_ERROR(impl_->check_value(key, value));
  sp::Request req;
  req.op = sp::Op::Set;
  req.key = key;
  req.value = value;
  auto r = impl_->call(req, Duration::zero());
  return r.ok() ? Status() : r.status();
}

Result<std::string> TcpStoreClient::get(std::string_view key, Duration timeout) {
  ORBITE_RETURN_IF_ERROR(impl_->check_key(key));
  sp::Request req;
  req.op = sp::Op::Get;
  req.key = key;
  req.timeout_ms = timeout_to_ms(timeout);
  ORBITE_ASSIGN_OR_RETURN(std::string result, impl_->call(req, timeout));
  wire::Reader r(result);
  std::string value(r.get_bytes(result.size()));
  if (!r.done())
    return Status::error(Errc::Protocol, impl_->what() + " sent a malformed get reply");
  return value;
}

Status TcpStoreClient::wait(std::span<const std::string> keys, Duration timeout) {
  ORBITE_RETURN_IF_ERROR(impl_->check_keys(keys));
  sp::Request req;
  req.op = sp::Op::Wait;
  req.keys.assign(keys.begin(), keys.end());
  req.timeout_ms = timeout_to_ms(timeout);
  auto r = impl_->call(req, timeout);
  return r.ok() ? Status() : r.status();
}

Result<std::vector<bool>> TcpStoreClient::check(std::span<const std::string> keys) {
  ORBITE_RETURN_IF_ERROR(impl_->check_keys(keys));
  sp::Request req;
  req.op = sp::Op::Check;
  req.keys.assign(keys.begin(), keys.end());
  ORBITE_ASSIGN_OR_RETURN(std::string result, impl_->call(req, Duration::zero()));
  wire::Reader r(result);
  auto n = r.get<std::uint32_t>();
  std::vector<bool> out;
  for (std::uint32_t i = 0; i < n && r.ok(); ++i) out.push_back(r.get<std::uint8_t>() != 0);
  if (!r.done() || out.size() != keys.size()) {
    return Status::error(Errc::Protocol, impl_->what() + " sent a malformed check reply");
  }
  return out;
}

Result<std::int64_t> TcpStoreClient::add(std::string_view key, std::int64_t delta) {
  ORBITE_RETURN_IF_ERROR(impl_->check_key(key));
  sp::Request req;
  req.op = sp::Op::Add;
  req.key = key;
  req.delta = delta;
  ORBITE_ASSIGN_OR_RETURN(std::string result, impl_->call(req, Duration::zero()));
  wire::Reader r(result);
  auto value = r.get<std::int64_t>();
  if (!r.done())
    return Status::error(Errc::Protocol, impl_->what() + " sent a malformed add reply");
  return value;
}

Result<std::string> TcpStoreClient::compare_set(std::string_view key, std::string_view expected,
                                                std::string_view desired) {
  ORBITE_RETURN_IF_ERROR(impl_->check_value(key, expected));
  ORBITE_RETURN_IF_ERROR(impl_->check_value(key, desired));
  sp::Request req;
  req.op = sp::Op::CompareSet;
  req.key = key;
  req.value = expected;
  req.desired = desired;
  ORBITE_ASSIGN_OR_RETURN(std::string result, impl_->call(req, Duration::zero()));
  wire::Reader r(result);
  std::string value(r.get_bytes(result.size()));
  if (!r.done()) {
    return Status::error(Errc::Protocol, impl_->what() + " sent a malformed compare_set reply");
  }
  return value;
}

Result<bool> TcpStoreClient::erase(std::string_view key) {
  ORBITE_RETURN_IF_ERROR(impl_->check_key(key));
  sp::Request req;
  req.op = sp::Op::Erase;
  req.key = key;
  ORBITE_ASSIGN_OR_RETURN(std::string result, impl_->call(req, Duration::zero()));
  wire::Reader r(result);
  auto existed = r.get<std::uint8_t>();
  if (!r.done())
    return Status::error(Errc::Protocol, impl_->what() + " sent a malformed erase reply");
  return existed != 0;
}

}  // namespace orbite
