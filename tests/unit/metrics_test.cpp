// The metrics (docs/metrics.md): the exposition format as Prometheus parses it (families grouped,
// HELP and TYPE once, label values escaped), an engine's counters as metrics equal to its stats
// after traffic and failures, and the process's exporter over HTTP: one endpoint shared by the
// engines that ask for the same address, a different address refused, a port in use
// Unavailable, 404 and 405 for what is not a scrape, and the endpoint gone with its last engine.
// The real Prometheus server scrapes a 2-rank job in tests/integration/prometheus_test.py.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <regex>
#include <string>

#include <orbite/transfer.h>

#include "../support/config_test_helpers.h"
#include "common/metrics.h"
#include "common/net.h"
#include "engine_test_support.h"

namespace orbite {
namespace {

using detail::Exposition;
using testing::Guarded;
using testing::import;
using testing::kWait;
using testing::make_engine;
using testing::must_register;

TEST(Exposition, GroupsEachFamilyUnderOneHelpAndType) {
  Exposition e;
  e.counter("orbite_x_total", "Xs.", {{"engine", "0"}}, 3);
  e.gauge("orbite_y", "Y now.", {}, 1.5);
  e.counter("orbite_x_total", "ignored: the first help stays", {{"engine", "1"}}, 4);
  EXPECT_EQ(e.render(),
            "# HELP orbite_x_total Xs.\n"
            "# TYPE orbite_x_total counter\n"
            "orbite_x_total{engine=\"0\"} 3\n"
            "orbite_x_total{engine=\"1\"} 4\n"
            "# HELP orbite_y Y now.\n"
            "# TYPE orbite_y gauge\n"
            "orbite_y 1.5\n");
}

TEST(Exposition, EscapesLabelValuesAndHelp) {
  Exposition e;
  e.gauge("orbite_z", "a \\ and a\nnewline", {{"host", "a\"b\\c\nd"}}, 18446744073709551615.0);
  const std::string text = e.render();
  EXPECT_NE(text.find("# HELP orbite_z a \\\\ and a\\nnewline\n"), std::string::npos) << text;
  EXPECT_NE(text.find("orbite_z{host=\"a\\\"b\\\\c\\nd\"} 1.8446744073709552e+19\n"),
            std::string::npos)
      << text;
}

TEST(Exposition, ABadNameIsReportedNotRendered) {
  Exposition e;
  e.counter("9orbite", "bad", {}, 1);
  e.counter("orbite_ok_total", "ok", {{"__reserved", "x"}}, 1);
  e.counter("orbite_ok_total", "ok", {{"bad-label", "x"}}, 1);
  e.gauge("orbite_twice", "first a gauge", {}, 1);
  e.counter("orbite_twice", "then a counter", {}, 1);
  const std::string text = e.render();
  EXPECT_EQ(text.find("9orbite 1"), std::string::npos) << text;
  EXPECT_NE(text.find("# orbite metrics error: invalid metric name 9orbite"), std::string::npos);
  EXPECT_NE(text.find("# orbite metrics error: invalid label name __reserved"), std::string::npos);
  EXPECT_NE(text.find("# orbite metrics error: invalid label name bad-label"), std::string::npos);
  EXPECT_NE(text.find("added as both counter and gauge"), std::string::npos);
}

// The value of the one sample of `name` whose labels include every `labels` pair.
std::optional<double> sample(const std::string& text, const std::string& name,
                             const std::vector<std::string>& labels) {
  std::size_t pos = 0;
  std::optional<double> found;
  while ((pos = text.find("\n" + name + "{", pos)) != std::string::npos) {
    const std::size_t end = text.find('\n', pos + 1);
    const std::string line = text.substr(pos + 1, end - pos - 1);
    pos = end;
    bool all = true;
    for (const std::string& l : labels) all = all && line.find(l) != std::string::npos;
    if (!all) continue;
    if (found) return std::nullopt;  // ambiguous
    found = std::stod(line.substr(line.rfind(' ') + 1));
  }
  return found;
}

// A GET (or `method`) of `path` at host:port, bounded by kWait; the whole response.
std::string http(const std::string& address, const std::string& path,
                 const std::string& method = "GET") {
  auto hp = net::parse_host_port(address);
  EXPECT_TRUE(hp.ok()) << address;
  if (!hp.ok()) return {};
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  EXPECT_GE(fd, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(hp->port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string out;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    ::close(fd);
    return "connect failed: " + std::string(std::strerror(errno));
  }
  const std::string req =
      method + " " + path + " HTTP/1.1\r\nHost: " + address + "\r\nConnection: close\r\n\r\n";
  EXPECT_EQ(::send(fd, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
  const auto until = std::chrono::steady_clock::now() + kWait;
  char buf[65536];
  while (std::chrono::steady_clock::now() < until) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 1000) <= 0) continue;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

EngineConfig with_listen(const std::string& listen) {
  EngineConfig c = testing::loopback_config({});
  c.metrics.listen = listen;
  return c;
}

TEST(EngineMetrics, CountersEqualTheEngineStatsAfterTrafficAndFailures) {
  auto a = make_engine(testing::loopback_config({}));
  auto b = make_engine(testing::loopback_config({}));
  ASSERT_TRUE(a && b);
  {
    Guarded src(8192), dst(8192);
    src.fill(1);
    MemoryRegion src_r = must_register(*a, src.data(), 8192);
    MemoryRegion dst_r = must_register(*b, dst.data(), 8192);
    TransferOptions tcp;
    tcp.transport = Transport::Tcp;
    auto put = a->put(src_r, 0, import(dst_r), 0, 8192, tcp);
    ASSERT_TRUE(put.ok());
    ASSERT_TRUE(put->wait(kWait).ok());
    TransferOptions late = tcp;
    late.deadline = Clock::now() - std::chrono::seconds(1);
    auto failed = a->put(src_r, 0, import(dst_r), 0, 8192, late);
    ASSERT_TRUE(failed.ok());
    EXPECT_EQ(failed->wait(kWait).code(), Errc::Timeout);
  }
  const EngineStats s = a->stats();
  const std::string text = a->metrics();
  EXPECT_EQ(text.find("# orbite metrics error"), std::string::npos) << text;
  EXPECT_GE(s.of(Transport::Tcp).bytes_sent, 8192U);
  EXPECT_EQ(sample(text, "orbite_transport_sent_bytes_total", {"transport=\"tcp\""}),
            static_cast<double>(s.of(Transport::Tcp).bytes_sent))
      << text;
  EXPECT_EQ(sample(text, "orbite_transport_sent_frames_total", {"transport=\"tcp\""}),
            static_cast<double>(s.of(Transport::Tcp).frames_sent));
  EXPECT_EQ(sample(text, "orbite_requests_submitted_total", {}), s.requests_submitted);
  EXPECT_EQ(sample(text, "orbite_requests_completed_total", {}), s.requests_completed);
  EXPECT_EQ(s.failures_by_code[static_cast<std::size_t>(Errc::Timeout)], 1U);
  EXPECT_EQ(sample(text, "orbite_requests_failed_total", {"code=\"Timeout\""}), 1.0) << text;
  EXPECT_EQ(sample(text, "orbite_requests_failed_total", {"code=\"Cancelled\""}), 0.0);
  EXPECT_EQ(sample(text, "orbite_registered_regions", {}), 0.0);
  // Every sample carries the host and the engine; the engines of one process differ.
  const std::string other = b->metrics();
  const std::regex engine_label("engine=\"([0-9]+)\"");
  std::smatch ma, mb;
  ASSERT_TRUE(std::regex_search(text, ma, engine_label));
  ASSERT_TRUE(std::regex_search(other, mb, engine_label));
  EXPECT_NE(ma[1].str(), mb[1].str());
  EXPECT_NE(text.find("host=\""), std::string::npos);
  EXPECT_NE(text.find("orbite_build_info{"), std::string::npos);
  EXPECT_TRUE(a->close(kWait).ok());
  EXPECT_TRUE(b->close(kWait).ok());
}

bool sigpipe_ignored() {
  struct sigaction now {};
  EXPECT_EQ(::sigaction(SIGPIPE, nullptr, &now), 0);
  return now.sa_handler == SIG_IGN;
}

TEST(MetricsExporter, ServesEveryEngineOfTheProcessAtOneEndpoint) {
  const bool sigpipe_before = sigpipe_ignored();
  auto a = make_engine(with_listen("127.0.0.1:0"));
  ASSERT_TRUE(a);
  const std::string endpoint = a->metrics_endpoint();
  ASSERT_FALSE(endpoint.empty());
  ASSERT_TRUE(endpoint.starts_with("127.0.0.1:")) << endpoint;
  // The same address: the same endpoint. None asked for: the engine is served there too.
  auto b = make_engine(with_listen("127.0.0.1:0"));
  auto c = make_engine(testing::loopback_config({}));
  ASSERT_TRUE(b && c);
  EXPECT_EQ(b->metrics_endpoint(), endpoint);
  EXPECT_EQ(c->metrics_endpoint(), endpoint);
  // Another address: refused, naming both.
  auto d = TransferEngine::create(with_listen("127.0.0.1:1"));
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), Errc::Configuration);
  EXPECT_NE(d.status().message().find("metrics.listen '127.0.0.1:1'"), std::string::npos)
      << d.status().to_string();
  EXPECT_NE(d.status().message().find(endpoint), std::string::npos);

  const std::string response = http(endpoint, "/metrics");
  ASSERT_TRUE(response.starts_with("HTTP/1.1 200")) << response.substr(0, 200);
  EXPECT_NE(response.find("Content-Type: text/plain; version=0.0.4"), std::string::npos);
  const std::string body = response.substr(response.find("\r\n\r\n") + 4);
  for (auto* e : {&a, &b, &c}) {
    std::smatch m;
    const std::string mine = (*e)->metrics();
    ASSERT_TRUE(std::regex_search(mine, m, std::regex("engine=\"[0-9]+\"")));
    EXPECT_NE(body.find(m[0].str()), std::string::npos) << m[0].str();
  }
  // One HELP per family although three engines report it.
  std::size_t helps = 0;
  for (std::size_t p = 0;
       (p = body.find("# HELP orbite_requests_submitted_total ", p)) != std::string::npos; ++p) {
    ++helps;
  }
  EXPECT_EQ(helps, 1U);
  EXPECT_TRUE(http(endpoint, "/").starts_with("HTTP/1.1 404")) << http(endpoint, "/");
  EXPECT_TRUE(http(endpoint, "/metrics", "POST").starts_with("HTTP/1.1 405"));
  const std::string head = http(endpoint, "/metrics", "HEAD");
  EXPECT_TRUE(head.starts_with("HTTP/1.1 200")) << head;
  EXPECT_EQ(head.find("# HELP"), std::string::npos);

  // The endpoint stays while an engine that asked for it is there, and goes with the last.
  EXPECT_TRUE(a->close(kWait).ok());
  EXPECT_TRUE(http(endpoint, "/metrics").starts_with("HTTP/1.1 200"));
  EXPECT_TRUE(b->close(kWait).ok());
  EXPECT_EQ(c->metrics_endpoint(), "");
  EXPECT_TRUE(http(endpoint, "/metrics").starts_with("connect failed"));
  // civetweb ignored SIGPIPE while it ran; the application's disposition is back.
  EXPECT_EQ(sigpipe_ignored(), sigpipe_before);
  EXPECT_TRUE(c->close(kWait).ok());
}

TEST(MetricsExporter, APortInUseIsUnavailableAndNamesTheAddress) {
  auto listener = net::listen_tcp(net::HostPort{"127.0.0.1", 0});
  ASSERT_TRUE(listener.ok()) << listener.status().to_string();
  auto bound = net::local_endpoint(listener->get());
  ASSERT_TRUE(bound.ok());
  const std::string taken = "127.0.0.1:" + std::to_string(bound->port);
  auto e = TransferEngine::create(with_listen(taken));
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), Errc::Unavailable);
  EXPECT_NE(e.status().message().find(taken), std::string::npos) << e.status().to_string();
  // Nothing was left behind: a later engine starts its own endpoint.
  auto f = make_engine(with_listen("127.0.0.1:0"));
  ASSERT_TRUE(f);
  EXPECT_FALSE(f->metrics_endpoint().empty());
  EXPECT_TRUE(f->close(kWait).ok());
}

TEST(MetricsExporter, ABadListenAddressIsAConfigurationError) {
  for (const char* bad : {"\"nohost\"", "\"127.0.0.1:70000\"", "\":9464\"", "7"}) {
    auto c = EngineConfig::from_json(std::string("{\"metrics\": {\"listen\": ") + bad + "}}");
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_EQ(c.status().code(), Errc::Configuration);
    EXPECT_NE(c.status().message().find("metrics.listen"), std::string::npos)
        << c.status().to_string();
  }
  auto unresolved = TransferEngine::create(with_listen("no-such-host.invalid:9464"));
  ASSERT_FALSE(unresolved.ok());
  EXPECT_EQ(unresolved.status().code(), Errc::Configuration);
  EXPECT_NE(unresolved.status().message().find("no-such-host.invalid"), std::string::npos);
}

}  // namespace
}  // namespace orbite
