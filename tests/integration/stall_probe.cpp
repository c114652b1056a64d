// A job that stalls on purpose, for orbite-dump's test (tools_test.cpp) and docs/hangs.md: under
// orbite-run -n 2, rank 0 posts a receive (tag 42) that rank 1 never matches and starts an
// all_reduce that rank 1 never joins; rank 1 sends a message (tag 7) that rank 0 never receives
// and posts a receive (tag 43) that rank 0 never matches. Each rank prints "stalled" and waits up
// to --seconds (default 60) before it exits 0.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <orbite/orbite.h>

int main(int argc, char** argv) {
  int seconds = 60;
  if (argc == 3 && std::strcmp(argv[1], "--seconds") == 0) seconds = std::atoi(argv[2]);
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
  std::vector<char> buf(4096), small(100, 'x');
  std::vector<float> values(1024, 1.0f);
  std::vector<orbite::Request> stalled;
  auto keep = [&](orbite::Result<orbite::Request> r) {
    if (!r.ok()) {
      std::fprintf(stderr, "posting failed: %s\n", r.status().to_string().c_str());
      std::exit(1);
    }
    stalled.push_back(*r);
  };
  if (comm->rank() == 0) {
    keep(comm->irecv(buf.data(), buf.size(), 1, 42));
    keep(comm->all_reduce(values.data(), values.data(), values.size(), orbite::DataType::Float32,
                          orbite::ReduceOp::Sum));
  } else {
    keep(comm->isend(small.data(), small.size(), 0, 7));
    keep(comm->irecv(buf.data(), buf.size(), 0, 43));
  }
  std::printf("rank %d stalled\n", comm->rank());
  std::fflush(stdout);
  // The receives never complete: the wait times out, and the job ends without an error.
  (void)stalled.back().wait(std::chrono::seconds(seconds));
  return 0;
}
