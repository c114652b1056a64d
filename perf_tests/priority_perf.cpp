// What priority buys on a loaded RDMA rail (issue 24): the latency of small High puts issued at a
// fixed rate, on an idle rail, under a saturating Low stream, and under the same stream posted at
// High (one priority for everything), in one run. Rank 0 puts into memory rank 1 registered.
//
//   orbite-run -n 2 build/perf_tests/priority_perf [--samples 200] [--interval-us 2000]
//       [--high 65536] [--low 4194304] [--low-window 8] [--nap-us 20]
//
// Run it on one rate-limited rail to make the rail the bottleneck, for example softverbs with
// SOFTVERBS_CONFIG naming {"devices": [{"bind": "127.0.0.1", "rate_gbps": 10}]}.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <orbite/communicator.h>
#include <orbite/transfer.h>

#include "harness/harness.h"
#include "harness/orbite_bench.h"

namespace {

using orbite::Priority;
using orbite::Request;
using orbite::TransferOptions;
namespace perf = orbite::perf;

struct Args {
  int samples = 200;
  long interval_us = 2000;
  std::uint64_t high = 64 * 1024;
  std::uint64_t low = 4 * 1024 * 1024;
  int low_window = 8;
  long nap_us = 20;  // the driving thread's nap when nothing finished (see run())
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const long long v = std::atoll(argv[i + 1]);
    if (v <= 0) perf::fatal(0, flag + " needs a positive number, got " + argv[i + 1]);
    if (flag == "--samples")
      a.samples = static_cast<int>(v);
    else if (flag == "--interval-us")
      a.interval_us = static_cast<long>(v);
    else if (flag == "--high")
      a.high = static_cast<std::uint64_t>(v);
    else if (flag == "--low")
      a.low = static_cast<std::uint64_t>(v);
    else if (flag == "--low-window")
      a.low_window = static_cast<int>(v);
    else if (flag == "--nap-us")
      a.nap_us = static_cast<long>(v);
    else
      perf::fatal(0, "unknown flag " + flag);
  }
  return a;
}

double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const auto k = static_cast<std::size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(k, v.size() - 1)];
}

struct Phase {
  const char* name;
  std::vector<double> high_us;  // each High put: post to completion
  double low_gbps = 0.0;        // the Low stream's rate over the phase
};

class Bench {
 public:
  Bench(orbite::Communicator& comm, const Args& a) : comm_(comm), a_(a) {
    rdma_.transport = orbite::Transport::Rdma;
    const std::uint64_t bytes = a.high + a.low * static_cast<std::uint64_t>(a.low_window);
    buffer_.assign(bytes, std::byte{0x5A});
    region_ = perf::value_or_die(comm.rank(), comm.engine().register_memory(buffer_.data(), bytes),
                                 "register_memory");
    if (comm.rank() == 1) {
      const std::string d = region_.export_descriptor().bytes();
      perf::send_word(comm, d.size(), 0, 1, rdma_, "descriptor length");
      perf::send_bytes(comm, d.data(), d.size(), 0, 2, rdma_, "descriptor");
      return;
    }
    std::string d(perf::recv_word(comm, 1, 1, rdma_, "descriptor length"), '\0');
    d.resize(perf::recv_bytes(comm, d.data(), d.size(), 1, 2, rdma_, "descriptor"));
    remote_ = perf::value_or_die(0, orbite::RemoteRegion::from_bytes(std::string_view(d)),
                                 "importing the descriptor");
  }

  // High puts every interval; with `low_window` > 0, a stream of Low (or `low_priority`) puts
  // kept that many deep in disjoint slots. One thread drives everything with test().
  Phase run(const char* name, int low_window, Priority low_priority) {
    Phase p{name, {}, 0.0};
    TransferOptions high = rdma_;
    high.priority = Priority::High;
    TransferOptions low = rdma_;
    low.priority = low_priority;
    std::vector<Request> lows(static_cast<std::size_t>(low_window));
    auto post_low = [&](int k) {
      const std::uint64_t at = a_.high + static_cast<std::uint64_t>(k) * a_.low;
      lows[static_cast<std::size_t>(k)] = perf::value_or_die(
          0, comm_.engine().put(region_, at, remote_, at, a_.low, low), "low put");
    };
    for (int k = 0; k < low_window; ++k) post_low(k);
    std::uint64_t low_bytes = 0;
    const auto start = perf::PerfClock::now();
    auto next = start + std::chrono::milliseconds(50);  // let the stream fill the rail first
    Request h;
    perf::PerfClock::time_point posted{};
    while (static_cast<int>(p.high_us.size()) < a_.samples) {
      for (int k = 0; k < low_window; ++k) {
        Request& q = lows[static_cast<std::size_t>(k)];
        if (!q.test()) continue;
        perf::check_ok(0, *q.status(), "a low put");
        low_bytes += a_.low;
        post_low(k);
      }
      const auto now = perf::PerfClock::now();
      if (!h.valid() && now >= next) {
        posted = now;
        h = perf::value_or_die(0, comm_.engine().put(region_, 0, remote_, 0, a_.high, high),
                               "high put");
        next += std::chrono::microseconds(a_.interval_us);
      }
      if (h.valid() && h.test()) {
        perf::check_ok(0, *h.status(), "a high put");
        p.high_us.push_back(perf::micros_since(posted));
        h = Request();
        if (next < perf::PerfClock::now()) next = perf::PerfClock::now();
        continue;
      }
      // Nothing finished: nap rather than spin. A thread spinning on test() holds one of the
      // VM's two CPUs, and the ranks' lanes and softverbs' NIC threads then wait for time
      // slices (the idle rail's p99 was 4 ms of CFS slices against a 0.3 ms median).
      std::this_thread::sleep_for(std::chrono::microseconds(a_.nap_us));
    }
    p.low_gbps = static_cast<double>(low_bytes) / 1e3 / perf::micros_since(start);
    for (Request& q : lows) perf::check_ok(0, q.wait(perf::kOpTimeout), "draining a low put");
    return p;
  }

  void finish() {
    if (comm_.rank() == 0)
      perf::send_word(comm_, 1, 1, 3, rdma_, "done");
    else
      perf::recv_word(comm_, 0, 3, rdma_, "waiting for rank 0");
    perf::check_ok(comm_.rank(), region_.unregister(perf::kOpTimeout), "unregister");
  }

 private:
  orbite::Communicator& comm_;
  Args a_;
  TransferOptions rdma_;
  std::vector<std::byte> buffer_;
  orbite::MemoryRegion region_;
  orbite::RemoteRegion remote_;
};

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  orbite::Communicator comm = perf::join_job();
  if (comm.size() != 2) perf::fatal(comm.rank(), "priority_perf needs exactly 2 ranks");
  Bench bench(comm, a);
  if (comm.rank() == 0) {
    std::vector<Phase> phases;
    phases.push_back(bench.run("idle rail", 0, Priority::Low));
    phases.push_back(bench.run("Low stream, High puts", a.low_window, Priority::Low));
    phases.push_back(bench.run("one priority (all High)", a.low_window, Priority::High));
    const double idle_p99 = percentile(phases[0].high_us, 0.99);
    std::printf(
        "# priority_perf: %d High puts of %llu B every %ld us; stream of %d x %llu B puts\n",
        a.samples, static_cast<unsigned long long>(a.high), a.interval_us, a.low_window,
        static_cast<unsigned long long>(a.low));
    std::printf("%-26s %10s %10s %14s %12s\n", "phase", "p50_us", "p99_us", "p99/idle_p99",
                "stream_GB/s");
    for (const Phase& p : phases) {
      const double p99 = percentile(p.high_us, 0.99);
      std::printf("%-26s %10.1f %10.1f %14.2f %12.3f\n", p.name, percentile(p.high_us, 0.5), p99,
                  p99 / idle_p99, p.low_gbps);
    }
    const orbite::RdmaStats s = comm.engine().rdma_stats();
    std::printf("# tiers posted (High/Medium/Low): %llu/%llu/%llu, promoted into High %llu\n",
                static_cast<unsigned long long>(s.tiers[0].posted),
                static_cast<unsigned long long>(s.tiers[1].posted),
                static_cast<unsigned long long>(s.tiers[2].posted),
                static_cast<unsigned long long>(s.tiers[0].promoted));
  }
  bench.finish();
  perf::check_ok(comm.rank(), comm.store_barrier(), "final barrier");
  return 0;
}
