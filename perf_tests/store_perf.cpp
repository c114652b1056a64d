// Bootstrap store latency against a raw TCP ping-pong of the same payload, in one run on
// loopback. The store's round trip should stay within a small factor of the raw socket's:
// everything above it is framing, the server's epoll loop and the key-value table.
//
//   store_perf [-n iterations] [-w warmup] [-b min_bytes] [-e max_bytes] [-f factor]
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <orbite/store.h>

#include "common/net.h"
#include "common/strings.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  int iterations = 2000;
  int warmup = 200;
  std::uint64_t min_bytes = 8;
  std::uint64_t max_bytes = 1 << 20;
  std::uint64_t factor = 8;
};

double median_us(std::vector<double>& samples) {
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

double p99_us(std::vector<double>& samples) {
  std::sort(samples.begin(), samples.end());
  return samples[std::min(samples.size() - 1, samples.size() * 99 / 100)];
}

// Echo server: reads `bytes` and writes them back, until the client closes.
void echo_server(int listen_fd, std::uint64_t bytes) {
  int fd = ::accept(listen_fd, nullptr, nullptr);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  std::string buf(bytes, '\0');
  while (true) {
    size_t got = 0;
    while (got < bytes) {
      ssize_t n = ::recv(fd, buf.data() + got, bytes - got, 0);
      if (n <= 0) {
        ::close(fd);
        return;
      }
      got += static_cast<size_t>(n);
    }
    size_t sent = 0;
    while (sent < bytes) {
      ssize_t n = ::send(fd, buf.data() + sent, bytes - sent, MSG_NOSIGNAL);
      if (n <= 0) {
        ::close(fd);
        return;
      }
      sent += static_cast<size_t>(n);
    }
  }
}

std::vector<double> raw_pingpong(const Options& o, std::uint64_t bytes) {
  auto listener = orbite::net::listen_tcp({"127.0.0.1", 0});
  auto bound = orbite::net::local_endpoint(listener->get());
  int lfd = listener->get();
  // The echo server uses blocking sockets, like a hand-written reference would.
  int flags = fcntl(lfd, F_GETFL);
  fcntl(lfd, F_SETFL, flags & ~O_NONBLOCK);
  std::thread server(echo_server, lfd, bytes);
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(bound->port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) std::abort();
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  std::string buf(bytes, 'x');
  std::vector<double> samples;
  for (int i = 0; i < o.warmup + o.iterations; ++i) {
    auto start = Clock::now();
    size_t sent = 0;
    while (sent < bytes)
      sent += static_cast<size_t>(::send(fd, buf.data() + sent, bytes - sent, 0));
    size_t got = 0;
    while (got < bytes) got += static_cast<size_t>(::recv(fd, buf.data() + got, bytes - got, 0));
    double us = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
    if (i >= o.warmup) samples.push_back(us);
  }
  ::close(fd);
  server.join();
  return samples;
}

template <class Fn>
std::vector<double> time_op(const Options& o, Fn&& op) {
  std::vector<double> samples;
  for (int i = 0; i < o.warmup + o.iterations; ++i) {
    auto start = Clock::now();
    op();
    double us = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
    if (i >= o.warmup) samples.push_back(us);
  }
  return samples;
}

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    auto v = orbite::parse_bytes(argv[i + 1]);
    if (!v || *v == 0) return false;
    if (flag == "-n")
      o.iterations = static_cast<int>(*v);
    else if (flag == "-w")
      o.warmup = static_cast<int>(*v);
    else if (flag == "-b")
      o.min_bytes = *v;
    else if (flag == "-e")
      o.max_bytes = *v;
    else if (flag == "-f")
      o.factor = *v;
    else
      return false;
  }
  return argc % 2 == 1 && o.factor >= 2;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, o)) {
    std::fprintf(stderr,
                 "usage: store_perf [-n iters] [-w warmup] [-b min] [-e max] [-f factor]\n");
    return 2;
  }
  auto server = orbite::TcpStoreServer::start({});
  if (!server.ok()) return 1;
  orbite::TcpStoreClientOptions copts;
  copts.address = (*server)->address();
  auto client = orbite::TcpStoreClient::connect(copts);
  if (!client.ok()) return 1;
  orbite::Store& store = **client;

  std::printf(
      "# store_perf: bootstrap store round trips vs a raw TCP ping-pong, loopback, one run\n");
  std::printf("# iterations %d, warmup %d; times are medians (p99) in microseconds\n", o.iterations,
              o.warmup);
  std::printf("%10s %18s %18s %18s %10s %10s\n", "bytes", "raw rtt", "store set", "store get",
              "set/raw", "get/raw");
  for (std::uint64_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= o.factor) {
    std::string value(bytes, 'v');
    auto raw = raw_pingpong(o, bytes);
    auto set = time_op(o, [&] {
      if (!store.set("bench", value).ok()) std::abort();
    });
    auto get = time_op(o, [&] {
      if (!store.get("bench", std::chrono::seconds(5)).ok()) std::abort();
    });
    double r = median_us(raw), s = median_us(set), g = median_us(get);
    char cells[3][40];
    std::snprintf(cells[0], sizeof cells[0], "%.1f (%.1f)", r, p99_us(raw));
    std::snprintf(cells[1], sizeof cells[1], "%.1f (%.1f)", s, p99_us(set));
    std::snprintf(cells[2], sizeof cells[2], "%.1f (%.1f)", g, p99_us(get));
    std::printf("%10llu %18s %18s %18s %10.2f %10.2f\n", static_cast<unsigned long long>(bytes),
                cells[0], cells[1], cells[2], s / r, g / r);
  }
  std::vector<double> add = time_op(o, [&] {
    if (!store.add("counter", 1).ok()) std::abort();
  });
  std::printf("# add (8-byte counter): median %.1f us, p99 %.1f us\n", median_us(add), p99_us(add));
  return 0;
}
