#include "proxy/metrics_exporter.h"

#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <vector>

#include "common/log.h"
#include "common/metrics.h"
#include "common/net.h"
#include "common/strings.h"
#include "platform/http_server.h"
#include "proxy/engine_core.h"

#include <orbite/bootstrap.h>

namespace orbite::detail::metrics_export {

namespace {

// Lock order: g_server_mu (held across the server's start and stop, and while the users are
// counted) before g_mu (the engines, which every scrape reads under it). A scrape takes only
// g_mu, so stopping the server, which waits for a scrape in progress, never holds it; and an
// engine leaves g_engines under g_mu, so a scrape never reads one that is being torn down.
std::mutex g_server_mu;
std::unique_ptr<platform::HttpServer> g_server;  // under g_server_mu
std::string g_listen;                            // metrics.listen it was started for
std::size_t g_users = 0;                         // enrolled engines that set metrics.listen

std::mutex g_mu;
std::vector<EngineCore*> g_engines;  // in enrollment order
std::uint64_t g_next_index = 0;
std::string g_endpoint;  // the server's address, "" when none runs

// metrics.listen's host as civetweb takes it: a numeric address (names are resolved once here).
Result<std::string> numeric_host(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (rc != 0 || found == nullptr) {
    return Status::error(Errc::Configuration, "metrics.listen: host " + quote(host) +
                                                  " does not resolve (" + ::gai_strerror(rc) + ")");
  }
  char text[NI_MAXHOST] = {};
  const int n = ::getnameinfo(found->ai_addr, found->ai_addrlen, text, sizeof text, nullptr, 0,
                              NI_NUMERICHOST);
  ::freeaddrinfo(found);
  if (n != 0) {
    return Status::error(
        Errc::Configuration,
        "metrics.listen: host " + quote(host) + " has no numeric form (" + ::gai_strerror(n) + ")");
  }
  return std::string(text);
}

// The launcher's local rank offsets the port, so that the ranks of one host each get one.
Result<std::unique_ptr<platform::HttpServer>> start_server(const std::string& listen,
                                                           int local_rank) {
  auto hp = net::parse_host_port(listen);
  if (!hp.ok())
    return Status::error(Errc::Configuration, "metrics.listen: " + hp.status().message());
  std::uint32_t port = hp->port;
  if (port != 0) port += static_cast<std::uint32_t>(local_rank);
  if (port > 65535) {
    return Status::error(Errc::Configuration, "metrics.listen " + quote(listen) + ": port " +
                                                  std::to_string(hp->port) + " + local rank " +
                                                  std::to_string(local_rank) + " is above 65535");
  }
  ORBITE_ASSIGN_OR_RETURN(std::string host, numeric_host(hp->host));
  auto server = platform::HttpServer::start(host, static_cast<std::uint16_t>(port), "/metrics", [] {
    return platform::HttpBody{std::string(Exposition::kContentType), process_metrics()};
  });
  if (!server.ok()) return server.status().with_context("metrics.listen " + quote(listen));
  return server;
}

}  // namespace

Status enroll(EngineCore& core) {
  // The launcher's view, read once: the rank label until a communicator sets its own, and the
  // local rank that offsets the port.
  int local_rank = 0;
  if (auto env = detect_launch_environment(core.config.bootstrap); env.ok()) {
    local_rank = env->local_rank.value_or(0);
    if (env->source != "none") core.metrics_rank.store(env->rank, std::memory_order_relaxed);
  }
  std::lock_guard server_lock(g_server_mu);
  const std::string& listen = core.config.metrics.listen;
  if (!listen.empty()) {
    if (!g_server) {
      ORBITE_ASSIGN_OR_RETURN(g_server, start_server(listen, local_rank));
      g_listen = listen;
      {
        std::lock_guard lock(g_mu);
        g_endpoint = g_server->address();
      }
      ORBITE_LOG(Info, Proxy) << "metrics exporter at http://" << g_server->address() << "/metrics";
    } else if (listen != g_listen) {
      return Status::error(Errc::Configuration,
                           "metrics.listen " + quote(listen) +
                               ": this process serves its metrics "
                               "at " +
                               g_server->address() + " already (metrics.listen " + quote(g_listen) +
                               " of an earlier engine); one endpoint per process "
                               "serves every engine");
    }
    ++g_users;
  }
  std::lock_guard lock(g_mu);
  core.metrics_index = g_next_index++;
  g_engines.push_back(&core);
  return {};
}

void withdraw(EngineCore& core) {
  std::lock_guard server_lock(g_server_mu);
  {
    std::lock_guard lock(g_mu);
    auto it = std::find(g_engines.begin(), g_engines.end(), &core);
    if (it == g_engines.end()) return;
    g_engines.erase(it);
  }
  if (core.config.metrics.listen.empty() || --g_users > 0) return;
  {
    std::lock_guard lock(g_mu);
    g_endpoint.clear();
  }
  // Joins the server's threads; a scrape still running finishes first (it takes only g_mu).
  g_server.reset();
  g_listen.clear();
}

std::string endpoint() {
  std::lock_guard lock(g_mu);
  return g_endpoint;
}

std::string process_metrics() {
  Exposition out;
  {
    std::lock_guard lock(g_mu);
    for (EngineCore* e : g_engines) e->append_metrics(out);
  }
  return out.render();
}

}  // namespace orbite::detail::metrics_export
