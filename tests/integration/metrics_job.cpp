// A job whose counters keep moving, for the Prometheus test (prometheus_test.py) and
// docs/metrics.md: under orbite-run -n 2 with ORBITE_METRICS_LISTEN set, each rank's exporter
// listens on the base port + its local rank. The ranks all-reduce and swap a message every
// 100 ms until the file named by --stop-file exists (or --seconds pass, default 120), then
// exit 0. Each prints "rank R serving H:P" once its first round is done.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <orbite/orbite.h>

int main(int argc, char** argv) {
  int seconds = 120;
  std::string stop_file;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--seconds") == 0) {
      seconds = std::atoi(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--stop-file") == 0) {
      stop_file = argv[i + 1];
    } else {
      std::fprintf(stderr, "usage: %s [--seconds N] [--stop-file PATH]\n", argv[0]);
      return 2;
    }
  }
  auto bootstrap = orbite::Bootstrap::from_env();
  if (!bootstrap.ok()) {
    std::fprintf(stderr, "bootstrap failed: %s\n", bootstrap.status().to_string().c_str());
    return 1;
  }
  auto comm = orbite::Communicator::create(*bootstrap);
  if (!comm.ok() || comm->size() != 2) {
    std::fprintf(stderr, "needs a communicator of 2 ranks: %s\n",
                 comm.ok() ? "wrong size" : comm.status().to_string().c_str());
    return 1;
  }
  const int peer = 1 - comm->rank();
  std::vector<float> values(4096, 1.0f);
  std::vector<char> out(65536, 'x'), in(65536);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  for (int round = 0; std::chrono::steady_clock::now() < until; ++round) {
    auto r = comm->irecv(in.data(), in.size(), peer, 5);
    auto s = comm->isend(out.data(), out.size(), peer, 5);
    auto a = comm->all_reduce(values.data(), values.data(), values.size(),
                              orbite::DataType::Float32, orbite::ReduceOp::Max);
    for (auto* req : {&r, &s, &a}) {
      orbite::Status st = req->ok() ? (*req)->wait(std::chrono::seconds(30)) : req->status();
      if (!st.ok()) {
        std::fprintf(stderr, "round %d failed: %s\n", round, st.to_string().c_str());
        return 1;
      }
    }
    if (round == 0) {
      std::printf("rank %d serving %s\n", comm->rank(), comm->engine().metrics_endpoint().c_str());
      std::fflush(stdout);
    }
    // Both ranks leave in the same round: rank 0 decides and tells the other.
    std::uint8_t stop =
        comm->rank() == 0 && !stop_file.empty() && std::filesystem::exists(stop_file) ? 1 : 0;
    auto b = comm->broadcast(&stop, &stop, 1, orbite::DataType::Uint8, 0);
    if (!b.ok() || !(*b).wait(std::chrono::seconds(30)).ok()) return 1;
    if (stop != 0) return 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return 0;
}
