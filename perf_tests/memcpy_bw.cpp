// Ceilings for the point-to-point bandwidths, in one process: single-thread memcpy (what a
// copy-in/copy-out shm path cannot beat per thread) and a raw TCP loopback stream between two
// threads with blocking sockets (what a tcp transport on this host competes with).
// scripts/compare-mpi.sh prints these next to the OrbiTE and Open MPI numbers.
//
//   memcpy_bw [--sizes 1M,64M] [-n 100] [-w 10] [-c 1] [--json FILE]
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "harness/harness.h"

namespace {

namespace perf = orbite::perf;

[[noreturn]] void sys_fail(const char* what) {
  perf::fatal(-1, std::string(what) + ": " + std::strerror(errno));
}

// With -c 1 the copies and the stream carry the pattern, and the last of each is checked.
std::uint64_t g_wrong = 0;

void check(std::span<const std::byte> got, const char* what) {
  perf::Mismatch m = perf::check_pattern(got, {0, got.size(), 0});
  if (m.wrong > 0) perf::report_error(-1, std::string(what) + ": " + perf::describe(m, got.size()));
  g_wrong += m.wrong;
}

double memcpy_gbps(std::uint64_t size, int warm, int iters, bool check_data) {
  perf::Buffer src(size), dst(size);
  perf::fill_pattern(src.span(0, size), {0, size, 0});
  std::vector<double> samples;
  for (int i = 0; i < warm + iters; ++i) {
    auto start = perf::PerfClock::now();
    std::memcpy(dst.data(), src.data(), size);
    // The copy's result is never read; this keeps the compiler from dropping it.
    asm volatile("" : : "r"(dst.data()) : "memory");
    if (i >= warm) samples.push_back(perf::micros_since(start));
  }
  if (check_data) check(dst.span(0, size), "memcpy");
  return perf::gbps(static_cast<double>(size), perf::median(std::move(samples)));
}

void send_all(int fd, const std::byte* data, std::uint64_t bytes) {
  while (bytes > 0) {
    ssize_t n = ::send(fd, data, bytes, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) sys_fail("send");
    data += n;
    bytes -= static_cast<std::uint64_t>(n);
  }
}

void recv_all(int fd, std::byte* data, std::uint64_t bytes) {
  while (bytes > 0) {
    ssize_t n = ::recv(fd, data, bytes, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) sys_fail("recv");
    data += n;
    bytes -= static_cast<std::uint64_t>(n);
  }
}

// A connected loopback pair: {sender, receiver}.
std::pair<int, int> loopback_pair() {
  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  if (listener < 0) sys_fail("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) sys_fail("bind");
  if (::listen(listener, 1) != 0) sys_fail("listen");
  if (::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    sys_fail("getsockname");
  }
  int sender = ::socket(AF_INET, SOCK_STREAM, 0);
  if (sender < 0) sys_fail("socket");
  if (::connect(sender, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) sys_fail("connect");
  int receiver = ::accept(listener, nullptr, nullptr);
  if (receiver < 0) sys_fail("accept");
  ::close(listener);
  return {sender, receiver};
}

// Streams `count` messages of `size` bytes; the receiving thread acknowledges the last with one
// byte, which stops the clock. A warm-up stream of `warm` messages goes first.
double tcp_gbps(std::uint64_t size, int warm, int count, bool check_data) {
  auto [sender, receiver] = loopback_pair();
  perf::Buffer in(size);
  std::thread reader([receiver = receiver, &in, size, warm, count] {
    std::byte ack{1};
    for (int round : {warm, count}) {
      for (int i = 0; i < round; ++i) recv_all(receiver, in.data(), size);
      send_all(receiver, &ack, 1);
    }
  });
  perf::Buffer out(size);
  perf::fill_pattern(out.span(0, size), {0, size, 0});
  std::byte ack{};
  double micros = 0;
  for (int round : {warm, count}) {
    auto start = perf::PerfClock::now();
    for (int i = 0; i < round; ++i) send_all(sender, out.data(), size);
    recv_all(sender, &ack, 1);
    micros = perf::micros_since(start);
  }
  reader.join();
  ::close(sender);
  ::close(receiver);
  if (check_data) check(in.span(0, size), "tcp stream");
  return perf::gbps(static_cast<double>(size) * count, micros);
}

}  // namespace

int main(int argc, char** argv) {
  perf::Program program{"memcpy_bw",
                        "Single-thread memcpy and raw TCP loopback stream bandwidth: the ceilings "
                        "the\npoint-to-point benchmarks are read against. One process.",
                        {}};
  perf::Options defaults;
  defaults.sizes = {1 * perf::kMiB, 64 * perf::kMiB};
  perf::Options o = perf::parse_options(argc, argv, program, true, defaults);

  perf::RunInfo info{.program = "memcpy_bw",
                     .implementation = "reference",
                     .ranks = 1,
                     .transport = "none",
                     .config = {},
                     .notes = {"memcpy: one thread, median time of one copy of size bytes",
                               "tcp: blocking loopback socket between two threads, a stream of "
                               "messages of size bytes; bytes / time"}};
  perf::Report report(
      std::move(info), o,
      {{"size(B)", "size", 0}, {"memcpy(GB/s)", "memcpy_gbps", 2}, {"tcp(GB/s)", "tcp_gbps", 2}});
  report.print_header();
  for (std::uint64_t size : perf::size_list(o)) {
    int warm = perf::scaled_iters(o.warmup_iters, size, 1);
    int iters = perf::scaled_iters(o.iters, size, perf::kMinTimedIters);
    double copy = memcpy_gbps(size, warm, iters, o.check);
    double tcp = tcp_gbps(size, warm, iters, o.check);
    report.add_row({static_cast<double>(size), copy, tcp});
  }
  return report.finish(g_wrong) ? 0 : 1;
}
