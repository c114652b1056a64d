#include "platform/http_server.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>

#include "common/log.h"
#include "platform/symbols.h"

#if ORBITE_WITH_METRICS
#include <civetweb.h>
#endif

namespace orbite::platform {

#if ORBITE_WITH_METRICS
namespace {

constexpr const char* kLibrary = "libcivetweb.so.1";

// The entry points the server uses, from the library loaded once (never closed: its threads
// may outlive any one server).
struct CivetApi {
  unsigned (*init_library)(unsigned) = nullptr;
  mg_context* (*start2)(mg_init_data*, mg_error_data*) = nullptr;
  void (*stop)(mg_context*) = nullptr;
  void (*set_request_handler)(mg_context*, const char*, mg_request_handler, void*) = nullptr;
  int (*get_server_ports)(const mg_context*, int, mg_server_port*) = nullptr;
  const mg_request_info* (*get_request_info)(const mg_connection*) = nullptr;
  int (*send_http_ok)(mg_connection*, const char*, long long) = nullptr;
  int (*send_http_error)(mg_connection*, int, const char*, ...) = nullptr;
  int (*write)(mg_connection*, const void*, size_t) = nullptr;
};

Result<const CivetApi*> load_api() {
  static std::once_flag once;
  static CivetApi api;
  static Status failure;
  std::call_once(once, [] {
    void* handle = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* err = dlerror();
      failure = Status::error(Errc::Unavailable,
                              std::string(kLibrary) + " (Debian's libcivetweb1) could not be " +
                                  "loaded: " + (err != nullptr ? err : "unknown error"));
      return;
    }
    struct Entry {
      const char* name;
      bool ok;
    };
    const Entry entries[] = {
        {"mg_init_library", resolve_symbol(handle, "mg_init_library", api.init_library)},
        {"mg_start2", resolve_symbol(handle, "mg_start2", api.start2)},
        {"mg_stop", resolve_symbol(handle, "mg_stop", api.stop)},
        {"mg_set_request_handler",
         resolve_symbol(handle, "mg_set_request_handler", api.set_request_handler)},
        {"mg_get_server_ports",
         resolve_symbol(handle, "mg_get_server_ports", api.get_server_ports)},
        {"mg_get_request_info",
         resolve_symbol(handle, "mg_get_request_info", api.get_request_info)},
        {"mg_send_http_ok", resolve_symbol(handle, "mg_send_http_ok", api.send_http_ok)},
        {"mg_send_http_error", resolve_symbol(handle, "mg_send_http_error", api.send_http_error)},
        {"mg_write", resolve_symbol(handle, "mg_write", api.write)},
    };
    for (const Entry& e : entries) {
      if (!e.ok) {
        failure =
            Status::error(Errc::Unavailable, std::string(kLibrary) + " lacks the export " + e.name);
        return;
      }
    }
    // Once per process, before any server; never undone (a server may start again later).
    api.init_library(0);
  });
  if (!failure.ok()) return failure;
  return &api;
}

// Where a client reaches the server: its address, or loopback for a wildcard one.
bool wake_address(const std::string& host, std::uint16_t port, sockaddr_storage& to,
                  socklen_t& len) {
  if (host.find(':') != std::string::npos) {
    auto& a = reinterpret_cast<sockaddr_in6&>(to);
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(port);
    if (::inet_pton(AF_INET6, host.c_str(), &a.sin6_addr) != 1) return false;
    if (IN6_IS_ADDR_UNSPECIFIED(&a.sin6_addr)) a.sin6_addr = in6addr_loopback;
    len = sizeof a;
    return true;
  }
  auto& a = reinterpret_cast<sockaddr_in&>(to);
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  if (::inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1) return false;
  if (a.sin_addr.s_addr == htonl(INADDR_ANY)) a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  len = sizeof a;
  return true;
}

int log_message(const mg_connection*, const char* message) {
  ORBITE_LOG(Warn, Proxy) << "metrics HTTP server: " << (message != nullptr ? message : "");
  return 1;  // handled: civetweb writes nothing to stderr itself
}

}  // namespace

struct HttpServer::Impl {
  const CivetApi* api = nullptr;
  mg_context* ctx = nullptr;
  // civetweb's listening thread sets SIGPIPE to ignored (so that a client hanging up cannot end
  // the process); the disposition from before the start comes back when the server stops.
  struct sigaction sigpipe_before {};
  bool sigpipe_saved = false;
  std::string path;
  Handler handler;
  mg_callbacks callbacks{};

  static int on_request(mg_connection* conn, void* data) {
    auto* self = static_cast<Impl*>(data);
    const mg_request_info* info = self->api->get_request_info(conn);
    const char* method = info != nullptr ? info->request_method : nullptr;
    const bool head = method != nullptr && std::strcmp(method, "HEAD") == 0;
    if (method == nullptr || (!head && std::strcmp(method, "GET") != 0)) {
      self->api->send_http_error(conn, 405, "%s", "only GET and HEAD are served here\n");
      return 405;
    }
    // The handler matches the path's prefix; only the path itself is ours.
    const char* uri = info->local_uri;
    if (uri == nullptr || self->path != uri) {
      self->api->send_http_error(conn, 404, "%s",
                                 "not found (metrics are at the exporter's path)\n");
      return 404;
    }
    const HttpBody body = self->handler();
    self->api->send_http_ok(conn, body.content_type.c_str(),
                            static_cast<long long>(body.text.size()));
    if (!head) self->api->write(conn, body.text.data(), body.text.size());
    return 200;
  }
};

Result<std::unique_ptr<HttpServer>> HttpServer::start(const std::string& host, std::uint16_t port,
                                                      std::string path, Handler handler) {
  ORBITE_ASSIGN_OR_RETURN(const CivetApi* api, load_api());
  const bool v6 = host.find(':') != std::string::npos;
  const std::string bracketed = v6 ? "[" + host + "]" : host;
  // civetweb's listening_ports: "addr:port", an IPv6 address in brackets with a '+' to accept
  // IPv6 only.
  const std::string listen = bracketed + ":" + std::to_string(port);
  std::unique_ptr<HttpServer> server(new HttpServer());
  server->impl_ = std::make_unique<Impl>();
  Impl& impl = *server->impl_;
  impl.api = api;
  impl.path = std::move(path);
  impl.handler = std::move(handler);
  impl.callbacks.log_message = log_message;
  impl.sigpipe_saved = ::sigaction(SIGPIPE, nullptr, &impl.sigpipe_before) == 0;
  // Two workers: a scrape is short and Prometheus scrapes one target at a time. No keep-alive,
  // so that stopping never waits for an idle client's connection.
  const char* options[] = {
      "listening_ports",    listen.c_str(), "num_threads", "2", "enable_keep_alive", "no",
      "request_timeout_ms", "10000",        nullptr};
  char text[256] = {};
  unsigned code = 0;
  mg_error_data error{&code, text, sizeof text};
  mg_init_data init{&impl.callbacks, &impl, options};
  impl.ctx = api->start2(&init, &error);
  if (impl.ctx == nullptr) {
    return Status::error(Errc::Unavailable,
                         "the metrics HTTP server could not listen on " + listen +
                             " (civetweb: " + (text[0] != '\0' ? text : "no reason given") + ")");
  }
  api->set_request_handler(impl.ctx, impl.path.c_str(), &Impl::on_request, &impl);
  mg_server_port ports[4] = {};
  const int n = api->get_server_ports(impl.ctx, 4, ports);
  server->port_ = n > 0 ? static_cast<std::uint16_t>(ports[0].port) : port;
  if (server->port_ == 0) {
    return Status::error(Errc::Unavailable, "the metrics HTTP server on " + listen +
                                                " does not say which port it took");
  }
  server->address_ = bracketed + ":" + std::to_string(server->port_);
  server->host_ = host;
  return server;
}

HttpServer::~HttpServer() {
  if (!impl_ || impl_->ctx == nullptr) return;
  // mg_stop raises civetweb's stop flag and joins its threads, but the listening thread sees the
  // flag only when its poll returns: after up to two seconds idle. Connections while it stops
  // end that poll at once (each is accepted and dropped).
  std::atomic<bool> stopped{false};
  std::thread stopper([this, &stopped] {
    impl_->api->stop(impl_->ctx);
    stopped.store(true, std::memory_order_release);
  });
  sockaddr_storage to{};
  socklen_t len = 0;
  if (wake_address(host_, port_, to, len)) {
    for (int i = 0; i < 400 && !stopped.load(std::memory_order_acquire); ++i) {
      const int fd = ::socket(to.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd < 0) break;
      // A refused or failed connect is fine: the flag is what matters, the poll ends anyway.
      [[maybe_unused]] const int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&to), len);
      ::close(fd);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  stopper.join();
  if (impl_->sigpipe_saved && ::sigaction(SIGPIPE, &impl_->sigpipe_before, nullptr) != 0) {
    ORBITE_LOG(Warn, Proxy) << "restoring SIGPIPE's disposition after the metrics server failed: "
                            << std::strerror(errno);
  }
}

std::string http_server_unavailable_reason() {
  auto api = load_api();
  return api.ok() ? std::string() : api.status().message();
}

#else  // !ORBITE_WITH_METRICS

struct HttpServer::Impl {};

Result<std::unique_ptr<HttpServer>> HttpServer::start(const std::string&, std::uint16_t,
                                                      std::string, Handler) {
  return Status::error(Errc::Unavailable, http_server_unavailable_reason());
}

HttpServer::~HttpServer() = default;

std::string http_server_unavailable_reason() {
  return "this build of OrbiTE has no metrics exporter (civetweb.h was not found at build time; "
         "install libcivetweb-dev and rebuild)";
}

#endif

}  // namespace orbite::platform
