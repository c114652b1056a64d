// The Open MPI reference for putget_perf: the same loops, flags and table with MPI one-sided
// communication. Both measuring ranks expose their buffer with MPI_Win_create and hold a
// passive-target epoch (MPI_Win_lock_all) for the whole run; every put or get is completed with
// MPI_Win_flush, which is what a TransferEngine request's wait means. The transport is chosen by
// mpirun (--mca btl ...); --transport only labels the output.
//
//   mpirun -np 2 --mca pml ob1 --mca btl self,vader build/perf_tests/mpi_putget_perf
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

constexpr int kTagPutsDone = 3;
constexpr int kTagTargetReady = 4;
constexpr int kTagSizeDone = 5;

enum class Op { Put, Get };

const char* op_name(Op op) {
  return op == Op::Put ? "MPI_Put" : "MPI_Get";
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

void send_word(int rank, std::uint64_t word, int peer, int tag) {
  mpi_ok(rank, MPI_Send(&word, 1, MPI_UINT64_T, peer, tag, MPI_COMM_WORLD), "MPI_Send handshake",
         sizeof word);
}

std::uint64_t recv_word(int rank, int peer, int tag) {
  std::uint64_t word = 0;
  mpi_ok(rank, MPI_Recv(&word, 1, MPI_UINT64_T, peer, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
         "MPI_Recv handshake", sizeof word);
  return word;
}

struct Point {
  double put_lat_us = 0;
  double get_lat_us = 0;
  double put_bw_gbps = 0;
  double get_bw_gbps = 0;
  std::uint64_t wrong = 0;
  int lat_iters = 0;
  int bw_iters = 0;
};

class PutGetBench {
 public:
  // `buffer` is this rank's window memory, MPI_Win_lock_all already held.
  PutGetBench(int rank, const perf::Options& options, int window, perf::Buffer& buffer, MPI_Win win)
      : o_(options),
        window_(window),
        rank_(rank),
        largest_(perf::size_list(options).back()),
        buffer_(buffer),
        win_(win) {}

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
      recv_word(rank_, 0, kTagPutsDone);
      // Win_sync orders the window's public copy (the puts) with this rank's own loads and
      // stores, as the separate memory model requires; a no-op in the unified one.
      mpi_ok(rank_, MPI_Win_sync(win_), "MPI_Win_sync", 0);
      if (o_.check) {
        for (int k = 0; k < n_slots; ++k) p.wrong += check(size, k, 0, "MPI_Put");
        for (int k = 0; k < n_slots; ++k) perf::fill_pattern(slot(size, k), {1, size, key(k)});
      }
      mpi_ok(rank_, MPI_Win_sync(win_), "MPI_Win_sync", 0);
      send_word(rank_, p.wrong, 0, kTagTargetReady);
      recv_word(rank_, 0, kTagSizeDone);
      return p;
    }

    if (o_.check) {
      for (int k = 0; k < n_slots; ++k) perf::fill_pattern(slot(size, k), {0, size, key(k)});
    }
    p.put_lat_us = latency(Op::Put, size, lat_warm, p.lat_iters);
    stream(Op::Put, size, bw_warm);
    p.put_bw_gbps = perf::gbps(window_total, stream(Op::Put, size, p.bw_iters));
    send_word(rank_, 0, 1, kTagPutsDone);
    p.wrong += recv_word(rank_, 1, kTagTargetReady);

    p.get_lat_us = latency(Op::Get, size, lat_warm, p.lat_iters);
    stream(Op::Get, size, bw_warm);
    p.get_bw_gbps = perf::gbps(window_total, stream(Op::Get, size, p.bw_iters));
    if (o_.check) {
      for (int k = 0; k < n_slots; ++k) p.wrong += check(size, k, 1, "MPI_Get");
    }
    send_word(rank_, 0, 1, kTagSizeDone);
    return p;
  }

 private:
  int slots(std::uint64_t size) const {
    return static_cast<int>(
        std::clamp<std::uint64_t>(largest_ / size, 1, static_cast<std::uint64_t>(window_)));
  }
  std::span<std::byte> slot(std::uint64_t size, int k) const {
    return buffer_.span(static_cast<std::uint64_t>(k) * size, size);
  }
  static std::uint64_t key(int k) { return static_cast<std::uint64_t>(k); }

  // Origin and target offsets are equal, as in putget_perf.
  void post(Op op, std::uint64_t offset, std::uint64_t size) {
    int n = static_cast<int>(size);
    auto disp = static_cast<MPI_Aint>(offset);
    std::byte* local = buffer_.data() + offset;
    int rc = op == Op::Put ? MPI_Put(local, n, MPI_BYTE, 1, disp, n, MPI_BYTE, win_)
                           : MPI_Get(local, n, MPI_BYTE, 1, disp, n, MPI_BYTE, win_);
    mpi_ok(rank_, rc, op_name(op), size);
  }

  void flush(Op op, std::uint64_t size) {
    mpi_ok(rank_, MPI_Win_flush(1, win_),
           op == Op::Put ? "MPI_Win_flush after MPI_Put" : "MPI_Win_flush after MPI_Get", size);
  }

  double latency(Op op, std::uint64_t size, int warm, int iters) {
    std::vector<double> samples;
    samples.reserve(static_cast<std::size_t>(iters));
    for (int i = 0; i < warm + iters; ++i) {
      auto start = perf::PerfClock::now();
      post(op, 0, size);
      flush(op, size);
      if (i >= warm) samples.push_back(perf::micros_since(start));
    }
    return perf::median(std::move(samples));
  }

  // `iters` windows of W operations, one flush per window. Returns the time.
  double stream(Op op, std::uint64_t size, int iters) {
    int n = slots(size);
    auto start = perf::PerfClock::now();
    for (int it = 0; it < iters; ++it) {
      for (int j = 0; j < window_; ++j) post(op, static_cast<std::uint64_t>(j % n) * size, size);
      flush(op, size);
    }
    return perf::micros_since(start);
  }

  std::uint64_t check(std::uint64_t size, int k, int writer, const char* what) {
    perf::Mismatch m = perf::check_pattern(slot(size, k), {writer, size, key(k)});
    if (m.wrong > 0) {
      perf::report_error(rank_, std::string(what) + " of " + std::to_string(size) +
                                    " bytes into slot " + std::to_string(k) + ": " +
                                    perf::describe(m, size));
    }
    return m.wrong;
  }

  const perf::Options& o_;
  int window_;
  int rank_;
  std::uint64_t largest_;
  perf::Buffer& buffer_;
  MPI_Win win_;
};

}  // namespace

int main(int argc, char** argv) {
  int window = 16;
  perf::Program program{
      "mpi_putget_perf",
      "The Open MPI reference of putget_perf (MPI_Put/MPI_Get + MPI_Win_flush under\n"
      "MPI_Win_lock_all). Run under mpirun -np 2; the btl chosen there is the transport.",
      {perf::int_flag("--window", "operations in flight per bandwidth iteration (default 16)",
                      &window, 1, 1024)}};
  perf::Options o = perf::parse_options(argc, argv, program, perf::launcher_rank() <= 0);

  MPI_Init(&argc, &argv);
  perf::set_fatal_hook(abort_job);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size < 2) {
    perf::fatal(rank,
                "mpi_putget_perf needs 2 ranks (mpirun -np 2 ...), got " + std::to_string(size));
  }
  std::uint64_t largest = perf::size_list(o).back();
  if (largest > static_cast<std::uint64_t>(INT_MAX)) {
    perf::fatal(rank, "sizes above " + std::to_string(INT_MAX) + " bytes do not fit an MPI count");
  }

  // Ranks beyond 1 join the collective window calls with no memory.
  bool measuring = rank < 2;
  perf::Buffer buffer(measuring ? largest : 0);
  MPI_Win win = MPI_WIN_NULL;
  mpi_ok(rank,
         MPI_Win_create(measuring ? buffer.data() : nullptr,
                        static_cast<MPI_Aint>(measuring ? largest : 0), 1, MPI_INFO_NULL,
                        MPI_COMM_WORLD, &win),
         "MPI_Win_create", largest);
  MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);

  bool ok = true;
  std::uint64_t wrong = 0;
  if (measuring) {
    mpi_ok(rank, MPI_Win_lock_all(0, win), "MPI_Win_lock_all", largest);
    PutGetBench bench(rank, o, window, buffer, win);
    std::optional<perf::Report> report;
    if (rank == 0) {
      perf::RunInfo info{
          .program = "mpi_putget_perf",
          .implementation = "mpi",
          .ranks = size,
          .transport = o.transport,
          .config = {{"window", window}},
          .notes = {"lat: one MPI_Put (MPI_Get) and MPI_Win_flush, median",
                    "bw: W operations per iteration to disjoint slots, one MPI_Win_flush; "
                    "bytes / time",
                    "iterations shrink above 2G moved per point (at least 3); the JSON rows "
                    "hold the counts"}};
      report.emplace(std::move(info), o, perf::putget_columns());
      report->print_header();
    }
    for (std::uint64_t bytes : perf::size_list(o)) {
      Point p = bench.run(bytes);
      wrong += p.wrong;
      if (report) {
        report->add_row({static_cast<double>(bytes), p.put_lat_us, p.get_lat_us, p.put_bw_gbps,
                         p.get_bw_gbps,
                         o.check ? perf::Cell(static_cast<double>(p.wrong)) : std::nullopt,
                         static_cast<double>(p.lat_iters), static_cast<double>(p.bw_iters)});
      }
    }
    mpi_ok(rank, MPI_Win_unlock_all(win), "MPI_Win_unlock_all", largest);
    if (report) {
      report->add_summary("library", perf::mpi_library_version());
      ok = report->finish(wrong);
    }
  }
  mpi_ok(rank, MPI_Win_free(&win), "MPI_Win_free", largest);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return ok && wrong == 0 ? 0 : 1;
}
