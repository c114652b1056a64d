// Every rank bootstraps from its launcher's environment, builds a communicator and prints its
// view of the group. Run: orbite-run -n 4 --tag-output -- build/examples/orbite-hello
#include <cstdio>

#include <orbite/orbite.h>

int main() {
  auto bootstrap = orbite::Bootstrap::from_env();
  if (!bootstrap.ok()) {
    std::fprintf(stderr, "bootstrap failed: %s\n", bootstrap.status().to_string().c_str());
    return 1;
  }
  auto comm = orbite::Communicator::create(*bootstrap);
  if (!comm.ok()) {
    std::fprintf(stderr, "communicator failed: %s\n", comm.status().to_string().c_str());
    return 1;
  }
  std::printf("%s", comm->describe().c_str());
  std::fflush(stdout);
  // Leave together, so that rank 0's view is printed before anyone tears down.
  orbite::Status done = comm->store_barrier();
  if (!done.ok()) {
    std::fprintf(stderr, "barrier failed: %s\n", done.to_string().c_str());
    return 1;
  }
  return 0;
}
