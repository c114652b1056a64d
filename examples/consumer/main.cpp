// Builds against the installed headers and library only; prints the version and proves a
// single-process communicator works.
#include <cstdio>

#include <orbite/orbite.h>

int main() {
  auto bootstrap = orbite::Bootstrap::from_store(std::make_shared<orbite::InProcessStore>(), 0, 1);
  if (!bootstrap.ok()) return 1;
  auto comm = orbite::Communicator::create(*bootstrap, orbite::EngineConfig{});
  if (!comm.ok()) {
    std::fprintf(stderr, "%s\n", comm.status().to_string().c_str());
    return 1;
  }
  std::printf("consumer: OrbiTE %s, rank %d of %d\n", ORBITE_VERSION_STRING, comm->rank(),
              comm->size());
  return 0;
}
