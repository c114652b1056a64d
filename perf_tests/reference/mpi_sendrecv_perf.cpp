// The Open MPI reference for sendrecv_perf: the same ping-pong and streaming loops, flags and
// table, with MPI_Send/MPI_Recv and MPI_Isend/MPI_Irecv/MPI_Waitall. The transport is chosen by
// mpirun (--mca btl self,vader or self,tcp); --transport only labels the output.
//
//   mpirun -np 2 --mca pml ob1 --mca btl self,vader build/perf_tests/mpi_sendrecv_perf
//       [-b 8] [-e 64M] [-f 2] [-n 100] [-w 10] [-c 1] [--transport shm] [--window 16]
//       [--json FILE]
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "harness/harness.h"
#include "reference/mpi_common.h"

namespace {

namespace perf = orbite::perf;

constexpr int kTagPing = 1;
constexpr int kTagStream = 2;
constexpr int kTagAck = 3;
constexpr int kTagWrong = 4;
constexpr int kTagVerify = 5;

// As in sendrecv_perf: receives of one window share memory beyond this.
constexpr std::uint64_t kRecvBytesCap = 256 * perf::kMiB;

int recv_slots(std::uint64_t size, int window) {
  return static_cast<int>(
      std::clamp<std::uint64_t>(kRecvBytesCap / size, 1, static_cast<std::uint64_t>(window)));
}

void abort_job() {
  MPI_Abort(MPI_COMM_WORLD, 1);
}

void mpi_ok(int rank, int rc, const char* what, std::uint64_t bytes) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  perf::fatal(rank, std::string(what) + " of " + std::to_string(bytes) +
                        " bytes: " + std::string(text, static_cast<std::size_t>(len)));
}

struct Point {
  double lat_us = 0;
  double bw_gbps = 0;
  std::uint64_t wrong = 0;
  int lat_iters = 0;
  int bw_iters = 0;
};

class SendRecvBench {
 public:
  SendRecvBench(int rank, const perf::Options& options, int window)
      : o_(options), window_(window), rank_(rank), peer_(1 - rank) {
    auto sizes = perf::size_list(o_);
    std::uint64_t recv_bytes = 0;
    for (std::uint64_t s : sizes) recv_bytes = std::max(recv_bytes, s * recv_slots(s, window_));
    send_ = perf::Buffer(sizes.back());
    recv_ = perf::Buffer(recv_bytes);
    reqs_.resize(static_cast<std::size_t>(window_));
  }

  Point run(std::uint64_t size) {
    Point p;
    int lat_warm = perf::scaled_iters(o_.warmup_iters, 2 * size, 1);
    p.lat_iters = perf::scaled_iters(o_.iters, 2 * size, perf::kMinTimedIters);
    std::uint64_t window_bytes = size * static_cast<std::uint64_t>(window_);
    int bw_warm = perf::scaled_iters(o_.warmup_iters, window_bytes, 1);
    p.bw_iters = perf::scaled_iters(o_.iters, window_bytes, perf::kMinTimedIters);

    if (o_.check) perf::fill_pattern(send_.span(0, size), {rank_, size, 0});
    p.lat_us = latency(size, lat_warm, p.lat_iters);
    if (o_.check) p.wrong += check(recv_.span(0, size), 0, "ping-pong message");

    stream(size, bw_warm);
    double micros = stream(size, p.bw_iters);
    p.bw_gbps = perf::gbps(static_cast<double>(window_bytes) * p.bw_iters, micros);

    if (o_.check) {
      if (rank_ == 1) {
        int used = std::min(window_, recv_slots(size, window_));
        for (int k = 0; k < used; ++k) {
          p.wrong +=
              check(recv_.span(static_cast<std::uint64_t>(k) * size, size), 0, "streamed message");
        }
      }
      p.wrong += verify(size);
      std::uint64_t word = p.wrong;
      if (rank_ == 1) {
        mpi_ok(rank_, MPI_Send(&word, 1, MPI_UINT64_T, 0, kTagWrong, MPI_COMM_WORLD),
               "MPI_Send check result", sizeof word);
      } else {
        mpi_ok(rank_,
               MPI_Recv(&word, 1, MPI_UINT64_T, 1, kTagWrong, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
               "MPI_Recv check result", sizeof word);
        p.wrong += word;
      }
    }
    return p;
  }

 private:
  int count(std::uint64_t size) const { return static_cast<int>(size); }

  double latency(std::uint64_t size, int warm, int iters) {
    std::vector<double> samples;
    samples.reserve(static_cast<std::size_t>(iters));
    for (int i = 0; i < warm + iters; ++i) {
      auto start = perf::PerfClock::now();
      if (rank_ == 0) {
        mpi_ok(rank_,
               MPI_Send(send_.data(), count(size), MPI_BYTE, peer_, kTagPing, MPI_COMM_WORLD),
               "MPI_Send", size);
        mpi_ok(rank_,
               MPI_Recv(recv_.data(), count(size), MPI_BYTE, peer_, kTagPing, MPI_COMM_WORLD,
                        MPI_STATUS_IGNORE),
               "MPI_Recv", size);
      } else {
        mpi_ok(rank_,
               MPI_Recv(recv_.data(), count(size), MPI_BYTE, peer_, kTagPing, MPI_COMM_WORLD,
                        MPI_STATUS_IGNORE),
               "MPI_Recv", size);
        mpi_ok(rank_,
               MPI_Send(send_.data(), count(size), MPI_BYTE, peer_, kTagPing, MPI_COMM_WORLD),
               "MPI_Send", size);
      }
      if (i >= warm) samples.push_back(perf::micros_since(start) / 2);
    }
    return perf::median(std::move(samples));
  }

  // As sendrecv_perf: W messages per iteration, then a 1-byte ack that stops rank 0's clock.
  double stream(std::uint64_t size, int iters) {
    int slots = recv_slots(size, window_);
    auto start = perf::PerfClock::now();
    for (int it = 0; it < iters; ++it) {
      for (int j = 0; j < window_; ++j) {
        auto& req = reqs_[static_cast<std::size_t>(j)];
        if (rank_ == 0) {
          mpi_ok(rank_,
                 MPI_Isend(send_.data(), count(size), MPI_BYTE, peer_, kTagStream, MPI_COMM_WORLD,
                           &req),
                 "MPI_Isend", size);
        } else {
          std::uint64_t slot = static_cast<std::uint64_t>(j % slots) * size;
          mpi_ok(rank_,
                 MPI_Irecv(recv_.data() + slot, count(size), MPI_BYTE, peer_, kTagStream,
                           MPI_COMM_WORLD, &req),
                 "MPI_Irecv", size);
        }
      }
      mpi_ok(rank_, MPI_Waitall(window_, reqs_.data(), MPI_STATUSES_IGNORE), "MPI_Waitall", size);
    }
    char ack = 0;
    if (rank_ == 0) {
      mpi_ok(rank_, MPI_Recv(&ack, 1, MPI_CHAR, peer_, kTagAck, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
             "MPI_Recv ack", 1);
    } else {
      mpi_ok(rank_, MPI_Send(&ack, 1, MPI_CHAR, peer_, kTagAck, MPI_COMM_WORLD), "MPI_Send ack", 1);
    }
    return perf::micros_since(start);
  }

  // As sendrecv_perf: distinct messages into distinct slots, untimed.
  std::uint64_t verify(std::uint64_t size) {
    int used = std::min(window_, recv_slots(size, window_));
    std::uint64_t wrong = 0;
    if (rank_ == 0) {
      for (int k = 0; k < used; ++k) {
        perf::fill_pattern(send_.span(0, size), {0, size, 1 + static_cast<std::uint64_t>(k)});
        mpi_ok(rank_,
               MPI_Send(send_.data(), count(size), MPI_BYTE, peer_, kTagVerify, MPI_COMM_WORLD),
               "MPI_Send", size);
      }
      return wrong;
    }
    for (int k = 0; k < used; ++k) {
      mpi_ok(rank_,
             MPI_Irecv(recv_.data() + static_cast<std::uint64_t>(k) * size, count(size), MPI_BYTE,
                       peer_, kTagVerify, MPI_COMM_WORLD, &reqs_[static_cast<std::size_t>(k)]),
             "MPI_Irecv", size);
    }
    mpi_ok(rank_, MPI_Waitall(used, reqs_.data(), MPI_STATUSES_IGNORE), "MPI_Waitall", size);
    for (int k = 0; k < used; ++k) {
      wrong += check(recv_.span(static_cast<std::uint64_t>(k) * size, size),
                     1 + static_cast<std::uint64_t>(k), "verification message");
    }
    return wrong;
  }

  std::uint64_t check(std::span<const std::byte> got, std::uint64_t iteration, const char* what) {
    perf::Mismatch m = perf::check_pattern(got, {peer_, got.size(), iteration});
    if (m.wrong > 0) {
      perf::report_error(rank_, std::string(what) + " " + std::to_string(iteration) + " of " +
                                    std::to_string(got.size()) + " bytes from rank " +
                                    std::to_string(peer_) + ": " + perf::describe(m, got.size()));
    }
    return m.wrong;
  }

  const perf::Options& o_;
  int window_;
  int rank_;
  int peer_;
  perf::Buffer send_;
  perf::Buffer recv_;
  std::vector<MPI_Request> reqs_;
};

}  // namespace

int main(int argc, char** argv) {
  int window = 16;
  perf::Program program{
      "mpi_sendrecv_perf",
      "The Open MPI reference of sendrecv_perf (MPI_Send/MPI_Recv ping-pong, MPI_Isend/MPI_Irecv\n"
      "windows). Run under mpirun -np 2; the btl chosen there is the transport.",
      {perf::int_flag("--window", "messages in flight per streaming iteration (default 16)",
                      &window, 1, 1024)}};
  // Parsed before MPI_Init, so that a bad flag exits 2 without a half-started job.
  perf::Options o = perf::parse_options(argc, argv, program, perf::launcher_rank() <= 0);

  MPI_Init(&argc, &argv);
  perf::set_fatal_hook(abort_job);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size < 2) {
    perf::fatal(rank,
                "mpi_sendrecv_perf needs 2 ranks (mpirun -np 2 ...), got " + std::to_string(size));
  }
  if (perf::size_list(o).back() > static_cast<std::uint64_t>(INT_MAX)) {
    perf::fatal(rank, "sizes above " + std::to_string(INT_MAX) + " bytes do not fit an MPI count");
  }

  bool ok = true;
  std::uint64_t wrong = 0;
  if (rank < 2) {
    SendRecvBench bench(rank, o, window);
    std::optional<perf::Report> report;
    if (rank == 0) {
      perf::RunInfo info{
          .program = "mpi_sendrecv_perf",
          .implementation = "mpi",
          .ranks = size,
          .transport = o.transport,
          .config = {{"window", window}},
          .notes = {"lat: half round trip of a ping-pong (MPI_Send, MPI_Recv), median",
                    "algbw: W MPI_Isends per iteration, MPI_Waitall; a 1-byte ack ends the "
                    "stream; bytes / time",
                    "iterations shrink above 2G moved per point (at least 3); the JSON rows "
                    "hold the counts"}};
      report.emplace(std::move(info), o, perf::sendrecv_columns());
      report->print_header();
    }
    for (std::uint64_t bytes : perf::size_list(o)) {
      Point p = bench.run(bytes);
      wrong += p.wrong;
      if (report) {
        report->add_row({static_cast<double>(bytes), p.lat_us, p.bw_gbps,
                         o.check ? perf::Cell(static_cast<double>(p.wrong)) : std::nullopt,
                         static_cast<double>(p.lat_iters), static_cast<double>(p.bw_iters)});
      }
    }
    if (report) {
      report->add_summary("library", perf::mpi_library_version());
      ok = report->finish(wrong);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return ok && wrong == 0 ? 0 : 1;
}
