// Job start-up to a ready group, for scripts/bootstrap-perf.sh:
//   mpi_startup mpi      MPI_Init + MPI_Barrier + MPI_Finalize (the reference)
//   mpi_startup orbite   the same plus the OrbiTE MPI bootstrap and a Communicator
#include <mpi.h>

#include <cstdio>
#include <cstring>

#include <orbite/communicator.h>
#include <orbite/mpi.h>

int main(int argc, char** argv) {
  bool with_orbite = argc > 1 && std::strcmp(argv[1], "orbite") == 0;
  MPI_Init(&argc, &argv);
  int rc = 0;
  if (with_orbite) {
    auto boot = orbite::mpi::bootstrap(MPI_COMM_WORLD);
    auto comm = boot.ok() ? orbite::Communicator::create(*boot, orbite::EngineConfig{})
                          : orbite::Result<orbite::Communicator>(boot.status());
    if (!comm.ok()) {
      std::fprintf(stderr, "%s\n", comm.status().to_string().c_str());
      rc = 1;
    }
    MPI_Barrier(MPI_COMM_WORLD);
  } else {
    MPI_Barrier(MPI_COMM_WORLD);
  }
  MPI_Finalize();
  return rc;
}
