// Point-to-point latency and bandwidth between ranks 0 and 1 through Communicator isend/irecv, in
// the style of nccl-tests (same flags, same table). reference/mpi_sendrecv_perf.cpp measures the
// same loops with Open MPI; scripts/compare-mpi.sh runs both and prints the ratios.
//
//   orbite-run -n 2 build/perf_tests/sendrecv_perf [-b 8] [-e 64M] [-f 2] [-n 100] [-w 10]
//       [-c 1] [--transport unspec|tcp|shm|rdma|nvlink] [--window 16] [--memory host|cuda|pinned]
//       [--json FILE]
//
// Ranks beyond 1 only join the final barrier, so the binary runs under any launcher size.
#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <orbite/communicator.h>

#include "harness/bench_memory.h"
#include "harness/harness.h"
#include "harness/orbite_bench.h"

namespace {

using orbite::Communicator;
using orbite::Request;
using orbite::Status;
namespace perf = orbite::perf;

constexpr int kTagPing = 1;
constexpr int kTagStream = 2;
constexpr int kTagAck = 3;
constexpr int kTagWrong = 4;
constexpr int kTagVerify = 5;

// Receives of one window share memory beyond this (as osu_bw's do), so that a 64 MiB window does
// not need a gigabyte per rank; the sender's buffer is always shared.
constexpr std::uint64_t kRecvBytesCap = 256 * perf::kMiB;

int recv_slots(std::uint64_t size, int window) {
  return static_cast<int>(
      std::clamp<std::uint64_t>(kRecvBytesCap / size, 1, static_cast<std::uint64_t>(window)));
}

struct Point {
  double lat_us = 0;
  double bw_gbps = 0;
  std::uint64_t wrong = 0;  // on rank 0: both ranks' wrong bytes
  int lat_iters = 0;
  int bw_iters = 0;
};

class SendRecvBench {
 public:
  SendRecvBench(Communicator& comm, const perf::Options& options, int window,
                const std::string& memory)
      : comm_(comm),
        o_(options),
        window_(window),
        rank_(comm.rank()),
        peer_(1 - comm.rank()),
        topt_(perf::transfer_options(options)),
        ctl_(perf::control_options(options)) {
    auto sizes = perf::size_list(o_);
    std::uint64_t largest = sizes.back();
    std::uint64_t recv_bytes = 0;
    for (std::uint64_t s : sizes) recv_bytes = std::max(recv_bytes, s * recv_slots(s, window_));
    send_ = perf::BenchMemory(memory, largest, rank_);
    recv_ = perf::BenchMemory(memory, recv_bytes, rank_);
    reqs_.reserve(static_cast<std::size_t>(window_));
  }

  Point run(std::uint64_t size) {
    Point p;
    int lat_warm = perf::scaled_iters(o_.warmup_iters, 2 * size, 1);
    p.lat_iters = perf::scaled_iters(o_.iters, 2 * size, perf::kMinTimedIters);
    std::uint64_t window_bytes = size * static_cast<std::uint64_t>(window_);
    int bw_warm = perf::scaled_iters(o_.warmup_iters, window_bytes, 1);
    p.bw_iters = perf::scaled_iters(o_.iters, window_bytes, perf::kMinTimedIters);

    // Every timed message carries pattern 0, so -c checks what the timed loops delivered.
    if (o_.check) send_.fill(0, size, {rank_, size, 0});
    p.lat_us = latency(size, lat_warm, p.lat_iters);
    if (o_.check) p.wrong += check(0, size, 0, "ping-pong message");

    // The warm-up ends with an acknowledgement, so the timed stream starts with both ranks in
    // step even with -w 0.
    stream(size, bw_warm);
    double micros = stream(size, p.bw_iters);
    p.bw_gbps = perf::gbps(static_cast<double>(window_bytes) * p.bw_iters, micros);

    if (o_.check) {
      if (rank_ == 1) {
        int used = std::min(window_, recv_slots(size, window_));
        for (int k = 0; k < used; ++k) {
          p.wrong += check(static_cast<std::uint64_t>(k) * size, size, 0, "streamed message");
        }
      }
      p.wrong += verify(size);
      if (rank_ == 1) {
        perf::send_word(comm_, p.wrong, peer_, kTagWrong, ctl_, "sending the check result");
      } else {
        p.wrong +=
            perf::recv_word(comm_, peer_, kTagWrong, ctl_, "receiving rank 1's check result");
      }
    }
    return p;
  }

 private:
  [[noreturn]] void fail(const char* op, std::uint64_t bytes, const Status& s) const {
    perf::fatal(rank_, std::string(op) + " of " + std::to_string(bytes) + " bytes with rank " +
                           std::to_string(peer_) + ": " + s.to_string());
  }

  // The stream's 1-byte acknowledgement is host memory: under nvlink (device memory only) it
  // goes over shm, beside the measured messages, as the check words do.
  const orbite::TransferOptions& options_for(int tag) const {
    return tag == kTagAck ? ctl_ : topt_;
  }

  Request post_send(const void* data, std::uint64_t bytes, int tag) {
    auto r = comm_.isend(data, bytes, peer_, tag, options_for(tag));
    if (!r.ok()) fail("isend", bytes, r.status());
    return std::move(r).value();
  }

  Request post_recv(void* data, std::uint64_t bytes, int tag) {
    auto r = comm_.irecv(data, bytes, peer_, tag, options_for(tag));
    if (!r.ok()) fail("irecv", bytes, r.status());
    return std::move(r).value();
  }

  void complete(Request& r, const char* op, std::uint64_t bytes) {
    Status s = r.wait(perf::kOpTimeout);
    if (!s.ok()) fail(op, bytes, s);
  }

  void complete_recv(Request& r, std::uint64_t bytes) {
    complete(r, "irecv", bytes);
    if (r.bytes() != bytes) {
      perf::fatal(rank_, "irecv of " + std::to_string(bytes) + " bytes from rank " +
                             std::to_string(peer_) + " received " + std::to_string(r.bytes()));
    }
  }

  void complete_window(const char* op, std::uint64_t bytes) {
    Status s = orbite::wait_all(reqs_, perf::kOpTimeout);
    if (!s.ok()) fail(op, bytes, s);
  }

  // Half round trips of a ping-pong; rank 1 mirrors rank 0.
  double latency(std::uint64_t size, int warm, int iters) {
    std::vector<double> samples;
    samples.reserve(static_cast<std::size_t>(iters));
    for (int i = 0; i < warm + iters; ++i) {
      auto start = perf::PerfClock::now();
      if (rank_ == 0) {
        Request s = post_send(send_.data(), size, kTagPing);
        complete(s, "isend", size);
        Request r = post_recv(recv_.data(), size, kTagPing);
        complete_recv(r, size);
      } else {
        Request r = post_recv(recv_.data(), size, kTagPing);
        complete_recv(r, size);
        Request s = post_send(send_.data(), size, kTagPing);
        complete(s, "isend", size);
      }
      if (i >= warm) samples.push_back(perf::micros_since(start) / 2);
    }
    return perf::median(std::move(samples));
  }

  // Rank 0 sends `iters` windows of W messages; rank 1 receives them and then acknowledges with
  // one byte, so rank 0's clock stops only once every byte has landed. Returns rank 0's time.
  double stream(std::uint64_t size, int iters) {
    int slots = recv_slots(size, window_);
    auto start = perf::PerfClock::now();
    for (int it = 0; it < iters; ++it) {
      reqs_.clear();
      for (int j = 0; j < window_; ++j) {
        if (rank_ == 0) {
          reqs_.push_back(post_send(send_.data(), size, kTagStream));
        } else {
          std::uint64_t slot = static_cast<std::uint64_t>(j % slots) * size;
          reqs_.push_back(post_recv(recv_.data() + slot, size, kTagStream));
        }
      }
      complete_window(rank_ == 0 ? "streaming isend" : "streaming irecv", size);
    }
    char ack = 0;
    if (rank_ == 0) {
      Request r = post_recv(&ack, 1, kTagAck);
      complete_recv(r, 1);
    } else {
      Request s = post_send(&ack, 1, kTagAck);
      complete(s, "isend", 1);
    }
    return perf::micros_since(start);
  }

  // Untimed: distinct messages into distinct slots, so a message matched to the wrong receive or
  // delivered out of order is caught, not only a corrupted one.
  std::uint64_t verify(std::uint64_t size) {
    int used = std::min(window_, recv_slots(size, window_));
    std::uint64_t wrong = 0;
    if (rank_ == 0) {
      for (int k = 0; k < used; ++k) {
        send_.fill(0, size, {0, size, 1 + static_cast<std::uint64_t>(k)});
        Request s = post_send(send_.data(), size, kTagVerify);
        complete(s, "isend", size);
      }
      return wrong;
    }
    reqs_.clear();
    for (int k = 0; k < used; ++k) {
      reqs_.push_back(
          post_recv(recv_.data() + static_cast<std::uint64_t>(k) * size, size, kTagVerify));
    }
    complete_window("irecv", size);
    for (int k = 0; k < used; ++k) {
      wrong += check(static_cast<std::uint64_t>(k) * size, size, 1 + static_cast<std::uint64_t>(k),
                     "verification message");
    }
    return wrong;
  }

  std::uint64_t check(std::uint64_t offset, std::uint64_t size, std::uint64_t iteration,
                      const char* what) {
    perf::Mismatch m = recv_.check(offset, size, {peer_, size, iteration});
    if (m.wrong > 0) {
      perf::report_error(rank_, std::string(what) + " " + std::to_string(iteration) + " of " +
                                    std::to_string(size) + " bytes from rank " +
                                    std::to_string(peer_) + ": " + perf::describe(m, size));
    }
    return m.wrong;
  }

  Communicator& comm_;
  const perf::Options& o_;
  int window_;
  int rank_;
  int peer_;
  orbite::TransferOptions topt_;  // the measured messages
  orbite::TransferOptions ctl_;   // acknowledgements and check words (shm beside nvlink)
  perf::BenchMemory send_;
  perf::BenchMemory recv_;
  std::vector<Request> reqs_;
};

}  // namespace

int main(int argc, char** argv) {
  int window = 16;
  std::string memory = "host";
  std::string metrics_path;
  perf::Program program{
      "sendrecv_perf",
      "Ping-pong latency and streaming bandwidth between ranks 0 and 1 with OrbiTE isend/irecv.\n"
      "Run under a launcher: orbite-run -n 2 sendrecv_perf [flags]",
      {perf::int_flag("--window", "messages in flight per streaming iteration (default 16)",
                      &window, 1, 1024),
       perf::memory_flag(&memory), perf::metrics_flag(&metrics_path)}};
  program.rdma = true;
  program.nvlink = true;
  perf::Options o = perf::parse_options(argc, argv, program, perf::launcher_rank() <= 0);
  const bool nvlink =
      std::find(o.transports.begin(), o.transports.end(), "nvlink") != o.transports.end();
  if (nvlink && memory != "cuda") {
    perf::usage_error(program, perf::launcher_rank() <= 0,
                      "flag --transport: nvlink moves device memory only; add --memory cuda");
  }

  Communicator comm = perf::join_job();
  int rank = comm.rank();
  if (comm.size() < 2) {
    perf::fatal(rank, "sendrecv_perf needs 2 ranks (orbite-run -n 2 ...), got " +
                          std::to_string(comm.size()));
  }

  bool ok = true;
  std::uint64_t wrong = 0;
  for (const std::string& transport : perf::transports_to_measure(o, comm, rank == 0 ? 1 : 0)) {
    o.transport = transport;
    if (rank >= 2) continue;
    SendRecvBench bench(comm, o, window, memory);
    std::optional<perf::Report> report;
    if (rank == 0) {
      perf::RunInfo info{
          .program = "sendrecv_perf",
          .implementation = "orbite",
          .ranks = comm.size(),
          .transport = o.transport,
          .config = {{"window", window}},
          .notes = {"lat: half round trip of a ping-pong (isend+wait, irecv+wait), median",
                    "algbw: W isends per iteration, waited together; a 1-byte ack ends the "
                    "stream; bytes / time",
                    "iterations shrink above 2G moved per point (at least 3); the JSON rows "
                    "hold the counts",
                    perf::memory_note(memory)}};
      report.emplace(std::move(info), o, perf::sendrecv_columns());
      report->print_header();
    }
    // This table's own count for its footer; `wrong` keeps every table's for the exit status.
    std::uint64_t table_wrong = 0;
    // This table's share of the engine's per-transport counters: the route it measured.
    const orbite::EngineStats table_start = comm.engine().stats();
    for (std::uint64_t size : perf::size_list(o)) {
      Point p = bench.run(size);
      table_wrong += p.wrong;
      if (report) {
        report->add_row({static_cast<double>(size), p.lat_us, p.bw_gbps,
                         o.check ? perf::Cell(static_cast<double>(p.wrong)) : std::nullopt,
                         static_cast<double>(p.lat_iters), static_cast<double>(p.bw_iters)});
      }
    }
    if (report) {
      report->add_summary("engine (rank 0)", perf::describe_engine(comm.engine()));
      report->add_summary("bytes by transport (rank 0)",
                          perf::describe_routes(table_start, comm.engine().stats()));
      ok = report->finish(table_wrong) && ok;
    }
    wrong += table_wrong;
    if (report) std::printf("\n");
  }
  perf::write_metrics(rank, metrics_path, comm.engine());
  perf::check_ok(rank, comm.store_barrier(), "final barrier");
  return ok && wrong == 0 ? 0 : 1;
}
