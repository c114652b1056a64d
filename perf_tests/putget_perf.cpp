// One-sided put/get latency and bandwidth from rank 0 into memory rank 1 registered, through the
// TransferEngine, in the style of nccl-tests (same flags, same table). Rank 1 stays passive: it
// only exchanges the descriptor and the check handshakes. reference/mpi_putget_perf.cpp measures
// the same loops with MPI_Put/MPI_Get; scripts/compare-mpi.sh runs both and prints the ratios.
//
//   orbite-run -n 2 build/perf_tests/putget_perf [-b 8] [-e 64M] [-f 2] [-n 100] [-w 10]
//       [-c 1] [--transport unspec|tcp|shm|rdma|nvlink] [--window 16]
//       [--memory host|cuda|pinned] [--notify]
//       [--json FILE]
//
// Ranks beyond 1 only join the final barrier.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <orbite/communicator.h>
#include <orbite/transfer.h>

#include "harness/bench_memory.h"
#include "harness/harness.h"
#include "harness/orbite_bench.h"

namespace {

using orbite::Communicator;
using orbite::Request;
using orbite::Status;
namespace perf = orbite::perf;

constexpr int kTagDescriptorLength = 1;
constexpr int kTagDescriptor = 2;
constexpr int kTagPutsDone = 3;
constexpr int kTagTargetReady = 4;
constexpr int kTagSizeDone = 5;

// A descriptor is a few hundred bytes; a length beyond this is a broken exchange.
constexpr std::uint64_t kMaxDescriptorBytes = 1 * perf::kMiB;

enum class Op { Put, Get };

const char* op_name(Op op) {
  return op == Op::Put ? "put" : "get";
}

struct Point {
  double put_lat_us = 0;
  double get_lat_us = 0;
  double put_bw_gbps = 0;
  double get_bw_gbps = 0;
  std::uint64_t wrong = 0;  // on rank 0: both ranks' wrong bytes
  int lat_iters = 0;
  int bw_iters = 0;
};

class PutGetBench {
 public:
  PutGetBench(Communicator& comm, const perf::Options& options, int window, bool batch, bool notify,
              const std::string& memory)
      : comm_(comm),
        engine_(comm.engine()),
        o_(options),
        window_(window),
        batch_(batch),
        rank_(comm.rank()),
        // A batch's W ranges are disjoint: the region holds W of the largest size.
        largest_(perf::size_list(options).back() *
                 (batch ? static_cast<std::uint64_t>(window) : 1)),
        topt_(perf::transfer_options(options)),
        ctl_(perf::control_options(options)),
        exclusive_ranges_(topt_.transport == orbite::Transport::Rdma),
        buffer_(memory, largest_, rank_) {
    region_ = perf::value_or_die(rank_, buffer_.register_with(engine_),
                                 "register_memory of " + std::to_string(largest_) + " bytes");
    reqs_.reserve(static_cast<std::size_t>(window_));
    if (notify) {
      topt_.notification = std::string(16, 'n');  // what a KV-cache layer sends: a request id
      // The target's application takes them as a serving loop does (NIXL's get_new_notifs):
      // every millisecond, without waiting in the engine (an engine holds at most 64 Ki).
      if (rank_ == 1) {
        taker_ = std::thread([this] {
          while (!stop_taking_.load()) {
            taken_ += engine_.notifications().size();
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
          }
        });
      }
    }
    if (rank_ == 1) {
      std::string descriptor = region_.export_descriptor().bytes();
      perf::send_word(comm_, descriptor.size(), 0, kTagDescriptorLength, ctl_,
                      "sending the descriptor length");
      perf::send_bytes(comm_, descriptor.data(), descriptor.size(), 0, kTagDescriptor, ctl_,
                       "sending the descriptor");
      return;
    }
    std::uint64_t length =
        perf::recv_word(comm_, 1, kTagDescriptorLength, ctl_, "receiving the descriptor length");
    if (length == 0 || length > kMaxDescriptorBytes) {
      perf::fatal(rank_, "rank 1 announced a descriptor of " + std::to_string(length) + " bytes");
    }
    std::string descriptor(length, '\0');
    std::uint64_t received = perf::recv_bytes(comm_, descriptor.data(), length, 1, kTagDescriptor,
                                              ctl_, "receiving the descriptor");
    descriptor.resize(received);
    remote_ =
        perf::value_or_die(rank_, orbite::RemoteRegion::from_bytes(std::string_view(descriptor)),
                           "importing rank 1's descriptor");
    if (remote_.length() < largest_) {
      perf::fatal(rank_, "rank 1's region holds " + std::to_string(remote_.length()) +
                             " bytes, the sweep needs " + std::to_string(largest_));
    }
  }

  Point run(std::uint64_t size) {
    Point p;
    int lat_warm = perf::scaled_iters(o_.warmup_iters, size, 1);
    p.lat_iters = perf::scaled_iters(o_.iters, size, perf::kMinTimedIters);
    std::uint64_t window_bytes = size * static_cast<std::uint64_t>(window_);
    int bw_warm = perf::scaled_iters(o_.warmup_iters, window_bytes, 1);
    p.bw_iters = perf::scaled_iters(o_.iters, window_bytes, perf::kMinTimedIters);
    double window_total = static_cast<double>(window_bytes) * p.bw_iters;
    int n_slots = slots(size);

    if (rank_ == 1) {
      perf::recv_word(comm_, 0, kTagPutsDone, ctl_, "waiting for rank 0's puts");
      if (o_.check) {
        for (int k = 0; k < n_slots; ++k) p.wrong += check(size, k, 0, "put");
        for (int k = 0; k < n_slots; ++k) buffer_.fill(offset(size, k), size, {1, size, key(k)});
      }
      // Doubles as "the target holds the get pattern".
      perf::send_word(comm_, p.wrong, 0, kTagTargetReady, ctl_, "sending the put check result");
      perf::recv_word(comm_, 0, kTagSizeDone, ctl_, "waiting for rank 0's gets");
      return p;
    }

    // What each slot of a put carries; the timed puts move these bytes.
    if (o_.check) {
      for (int k = 0; k < n_slots; ++k) buffer_.fill(offset(size, k), size, {0, size, key(k)});
    }
    p.put_lat_us = latency(Op::Put, size, lat_warm, p.lat_iters);
    stream(Op::Put, size, bw_warm);
    p.put_bw_gbps = perf::gbps(window_total, stream(Op::Put, size, p.bw_iters));
    perf::send_word(comm_, 0, 1, kTagPutsDone, ctl_, "telling rank 1 the puts are done");
    p.wrong +=
        perf::recv_word(comm_, 1, kTagTargetReady, ctl_, "receiving rank 1's put check result");

    p.get_lat_us = latency(Op::Get, size, lat_warm, p.lat_iters);
    stream(Op::Get, size, bw_warm);
    p.get_bw_gbps = perf::gbps(window_total, stream(Op::Get, size, p.bw_iters));
    if (o_.check) {
      for (int k = 0; k < n_slots; ++k) p.wrong += check(size, k, 1, "get");
    }
    perf::send_word(comm_, 0, 1, kTagSizeDone, ctl_, "telling rank 1 the gets are done");
    return p;
  }

  // Both ranks call this after the last size: rank 0 has no transfer left on either region.
  void close() {
    if (taker_.joinable()) {
      stop_taking_.store(true);
      taker_.join();
      taken_ += engine_.notifications().size();
      if (taken_ == 0) perf::fatal(rank_, "--notify: no notification arrived");
    }
    perf::check_ok(rank_, region_.unregister(perf::kOpTimeout), "unregister");
  }

 private:
  // Disjoint slots a window cycles through: the W operations of a window touch different bytes
  // while W slots fit in the region.
  int slots(std::uint64_t size) const {
    return static_cast<int>(
        std::clamp<std::uint64_t>(largest_ / size, 1, static_cast<std::uint64_t>(window_)));
  }
  static std::uint64_t offset(std::uint64_t size, int k) {
    return static_cast<std::uint64_t>(k) * size;
  }
  static std::uint64_t key(int k) { return static_cast<std::uint64_t>(k); }

  [[noreturn]] void fail(Op op, std::uint64_t bytes, const Status& s) const {
    perf::fatal(rank_, std::string(op_name(op)) + " of " + std::to_string(bytes) +
                           " bytes with rank 1: " + s.to_string());
  }

  // Local and remote offsets are equal, so slot k of rank 0 pairs with slot k of rank 1.
  Request post(Op op, std::uint64_t offset, std::uint64_t size) {
    auto r = op == Op::Put ? engine_.put(region_, offset, remote_, offset, size, topt_)
                           : engine_.get(region_, offset, remote_, offset, size, topt_);
    if (!r.ok()) fail(op, size, r.status());
    return std::move(r).value();
  }

  double latency(Op op, std::uint64_t size, int warm, int iters) {
    std::vector<double> samples;
    samples.reserve(static_cast<std::size_t>(iters));
    for (int i = 0; i < warm + iters; ++i) {
      auto start = perf::PerfClock::now();
      Request r = post(op, 0, size);
      Status s = r.wait(perf::kOpTimeout);
      if (!s.ok()) fail(op, size, s);
      if (i >= warm) samples.push_back(perf::micros_since(start));
    }
    return perf::median(std::move(samples));
  }

  // `iters` windows of W operations, each window waited as a whole (or, --batch, one operation
  // of W ranges). Returns the time.
  double stream(Op op, std::uint64_t size, int iters) {
    int n = slots(size);
    if (batch_) return stream_batches(op, size, iters);
    auto start = perf::PerfClock::now();
    for (int it = 0; it < iters; ++it) {
      reqs_.clear();
      for (int j = 0; j < window_; ++j) {
        // RDMA grants lock their exact range and refuse a conflicting one: where the slots run
        // out, a window waits for one round of slots before it reuses them.
        if (exclusive_ranges_ && j > 0 && j % n == 0) wait_window(op, size);
        reqs_.push_back(post(op, static_cast<std::uint64_t>(j % n) * size, size));
      }
      wait_window(op, size);
    }
    return perf::micros_since(start);
  }

  double stream_batches(Op op, std::uint64_t size, int iters) {
    std::vector<orbite::TransferRange> ranges(static_cast<std::size_t>(window_));
    for (int j = 0; j < window_; ++j) {
      const std::uint64_t at = static_cast<std::uint64_t>(j) * size;
      ranges[static_cast<std::size_t>(j)] = {at, at, size};
    }
    auto start = perf::PerfClock::now();
    for (int it = 0; it < iters; ++it) {
      auto r = op == Op::Put ? engine_.put(region_, remote_, ranges, topt_)
                             : engine_.get(region_, remote_, ranges, topt_);
      if (!r.ok()) fail(op, size * ranges.size(), r.status());
      Status st = r->wait(perf::kOpTimeout);
      if (!st.ok()) fail(op, size * ranges.size(), st);
    }
    return perf::micros_since(start);
  }

  void wait_window(Op op, std::uint64_t size) {
    Status s = orbite::wait_all(reqs_, perf::kOpTimeout);
    if (!s.ok()) fail(op, size, s);
    reqs_.clear();
  }

  std::uint64_t check(std::uint64_t size, int k, int writer, const char* what) {
    perf::Mismatch m = buffer_.check(offset(size, k), size, {writer, size, key(k)});
    if (m.wrong > 0) {
      perf::report_error(rank_, std::string(what) + " of " + std::to_string(size) +
                                    " bytes into slot " + std::to_string(k) + ": " +
                                    perf::describe(m, size));
    }
    return m.wrong;
  }

  Communicator& comm_;
  orbite::TransferEngine& engine_;
  const perf::Options& o_;
  int window_;
  bool batch_;  // each bandwidth iteration is one batched operation of W ranges
  int rank_;
  std::uint64_t largest_;
  orbite::TransferOptions topt_;  // the puts and gets
  orbite::TransferOptions ctl_;   // the handshakes between the ranks (send/recv)
  bool exclusive_ranges_;         // concurrent operations on one range are refused, not raced
  perf::BenchMemory buffer_;
  orbite::MemoryRegion region_;
  orbite::RemoteRegion remote_;
  std::vector<Request> reqs_;
  // --notify on rank 1: the thread that takes the notifications, and how many it took.
  std::thread taker_;
  std::atomic<bool> stop_taking_{false};
  std::uint64_t taken_ = 0;
};

}  // namespace

// The RDMA NICs' shares of the bytes since `before` (nic_load_stats), one summary line.
std::string describe_rails(const std::vector<orbite::NicLoad>& before,
                           const std::vector<orbite::NicLoad>& after) {
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < after.size() && i < before.size(); ++i) {
    total += after[i].allocated_bytes - before[i].allocated_bytes;
  }
  std::string out;
  for (std::size_t i = 0; i < after.size() && i < before.size(); ++i) {
    const std::uint64_t a = after[i].allocated_bytes - before[i].allocated_bytes;
    char line[256];
    std::snprintf(line, sizeof line,
                  "%s%s (nic %d, %s, link %.1f Gb/s): %.1f%% of %llu B, selection %.3g B/s, "
                  "transmit %.3g B/s",
                  out.empty() ? "" : "; ", after[i].name.c_str(), after[i].nic_id,
                  after[i].healthy ? "healthy" : "unhealthy", after[i].link_gbps,
                  total == 0 ? 0.0 : 100.0 * static_cast<double>(a) / static_cast<double>(total),
                  static_cast<unsigned long long>(total), after[i].selection_bytes_per_s,
                  after[i].transmit_bytes_per_s);
    out += line;
  }
  return out.empty() ? "no RDMA NIC" : out;
}

int main(int argc, char** argv) {
  int window = 16;
  int rails = 0;
  bool batch = false;
  bool notify = false;
  std::string memory = "host";
  std::string metrics_path;
  bool verbose = false;
  perf::Program program{
      "putget_perf",
      "Put and get latency and bandwidth from rank 0 into registered memory of rank 1 with the\n"
      "OrbiTE TransferEngine. Run under a launcher: orbite-run -n 2 putget_perf [flags]",
      {perf::int_flag("--window", "operations in flight per bandwidth iteration (default 16)",
                      &window, 1, 1024),
       perf::int_flag("--rails", "RDMA NICs to spread over: the first N (rdma.device_mask); 0: all",
                      &rails, 0, 64),
       perf::switch_flag("--verbose",
                         "after each table, each RDMA NIC's share of the bytes (nic_load_stats)",
                         &verbose, 'v'),
       perf::switch_flag("--batch",
                         "each bandwidth iteration is one put (get) of W disjoint ranges, the "
                         "batch API, instead of W operations (the region holds W of the largest "
                         "size)",
                         &batch),
       perf::switch_flag("--notify",
                         "every put and get carries a 16-byte notification "
                         "(TransferOptions::notification), which a thread of rank 1 takes every "
                         "millisecond",
                         &notify),
       perf::memory_flag(&memory), perf::metrics_flag(&metrics_path)}};
  program.rdma = true;
  program.nvlink = true;
  perf::Options o = perf::parse_options(argc, argv, program, perf::launcher_rank() <= 0);

  auto config = orbite::EngineConfig::load();
  if (!config.ok()) {
    perf::fatal(perf::launcher_rank(), "configuration: " + config.status().to_string());
  }
  if (rails > 0) config->rdma.device_mask = rails >= 64 ? ~0ULL : (1ULL << rails) - 1;
  Communicator comm = perf::join_job(*config);
  int rank = comm.rank();
  if (rails > 0) {
    const auto nics = comm.engine().nic_load_stats();
    int healthy = 0;
    for (const auto& n : nics) healthy += n.healthy && n.nic_id < rails ? 1 : 0;
    if (healthy < rails) {
      perf::fatal(rank, "--rails " + std::to_string(rails) + ": this engine has " +
                            std::to_string(healthy) + " healthy RDMA NIC(s) among the first " +
                            std::to_string(rails) +
                            " (softverbs: a SOFTVERBS_CONFIG with that many devices)");
    }
  }
  if (comm.size() < 2) {
    perf::fatal(rank, "putget_perf needs 2 ranks (orbite-run -n 2 ...), got " +
                          std::to_string(comm.size()));
  }

  bool ok = true;
  std::uint64_t wrong = 0;
  for (const std::string& transport : perf::transports_to_measure(o, comm, rank == 0 ? 1 : 0)) {
    o.transport = transport;
    if (rank >= 2) continue;
    PutGetBench bench(comm, o, window, batch, notify, memory);
    std::optional<perf::Report> report;
    if (rank == 0) {
      perf::RunInfo info{
          .program = "putget_perf",
          .implementation = "orbite",
          .ranks = comm.size(),
          .transport = o.transport,
          .config = {{"window", window}, {"batch", batch ? 1 : 0}, {"notify", notify ? 1 : 0}},
          .notes = {"lat: one put (get) and its wait, median; the request completes once the "
                    "bytes are at the target (in the local buffer)",
                    "bw: W operations per iteration to disjoint slots, waited together; "
                    "bytes / time (rdma: where fewer than W slots fit, each round of slots is "
                    "waited before reuse, since a grant refuses an overlapping one)",
                    "iterations shrink above 2G moved per point (at least 3); the JSON rows "
                    "hold the counts",
                    perf::memory_note(memory)}};
      if (notify) {
        info.notes.emplace_back(
            "--notify: each operation carries a 16-byte notification and completes once the "
            "target holds it");
      }
      report.emplace(std::move(info), o, perf::putget_columns());
      report->print_header();
    }
    // This table's own count for its footer; `wrong` keeps every table's for the exit status.
    std::uint64_t table_wrong = 0;
    // This table's share of the engine's per-transport counters: the route it measured.
    const orbite::EngineStats table_start = comm.engine().stats();
    const std::vector<orbite::NicLoad> rails_start = comm.engine().nic_load_stats();
    for (std::uint64_t size : perf::size_list(o)) {
      Point p = bench.run(size);
      table_wrong += p.wrong;
      if (report) {
        report->add_row({static_cast<double>(size), p.put_lat_us, p.get_lat_us, p.put_bw_gbps,
                         p.get_bw_gbps,
                         o.check ? perf::Cell(static_cast<double>(p.wrong)) : std::nullopt,
                         static_cast<double>(p.lat_iters), static_cast<double>(p.bw_iters)});
      }
    }
    bench.close();
    if (report) {
      report->add_summary("engine (rank 0)", perf::describe_engine(comm.engine()));
      report->add_summary("bytes by transport (rank 0)",
                          perf::describe_routes(table_start, comm.engine().stats()));
      if (verbose) {
        report->add_summary("rails (rank 0)",
                            describe_rails(rails_start, comm.engine().nic_load_stats()));
      }
      ok = report->finish(table_wrong) && ok;
    }
    wrong += table_wrong;
    if (report) std::printf("\n");
  }
  perf::write_metrics(rank, metrics_path, comm.engine());
  perf::check_ok(rank, comm.store_barrier(), "final barrier");
  return ok && wrong == 0 ? 0 : 1;
}
