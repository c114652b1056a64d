// MPI bootstrap (library orbite::orbite_mpi). MPI only carries the store's address: rank 0 of the
// MPI communicator starts a TCP store and broadcasts its address and a fresh token; every rank
// then connects to the store. No payload ever travels through MPI.
//
// This header does not include <mpi.h>. Include <mpi.h> before it to get the MPI_Comm overload.
#pragma once

#include <orbite/bootstrap.h>
#include <orbite/config.h>
#include <orbite/status.h>

#include <cstdint>

#if defined(__GNUC__) || defined(__clang__)
#define ORBITE_MPI_API __attribute__((visibility("default")))
#else
#define ORBITE_MPI_API
#endif

namespace orbite::mpi {

// Bootstraps from the Fortran handle of an MPI communicator (MPI_Comm_c2f). MPI must be
// initialized. Collective over the MPI communicator. The local rank comes from
// MPI_Comm_split_type(MPI_COMM_TYPE_SHARED). Bounded by config.timeout.
ORBITE_MPI_API Result<Bootstrap> bootstrap_from_fortran_handle(std::int64_t comm_f,
                                                               const BootstrapConfig& config = {});

#if defined(MPI_VERSION)
inline Result<Bootstrap> bootstrap(MPI_Comm comm, const BootstrapConfig& config = {}) {
  return bootstrap_from_fortran_handle(static_cast<std::int64_t>(MPI_Comm_c2f(comm)), config);
}
#endif

}  // namespace orbite::mpi
