// MPI bootstrap: MPI carries only the store's address and token, once, from rank 0 to the
// others. Built as the separate library orbite_mpi so that liborbite never links MPI; it uses
// only OrbiTE's public API.
#include <mpi.h>

#include <orbite/bootstrap.h>
#include <orbite/mpi.h>

#include <cstring>
#include <string>

namespace orbite::mpi {
namespace {

constexpr int kMaxMessage = 1024;

Status mpi_error(const char* call, int rc) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  return Status::error(Errc::Unavailable, std::string(call) + " failed: " + std::string(text, len));
}

}  // namespace

Result<Bootstrap> bootstrap_from_fortran_handle(std::int64_t comm_f,
                                                const BootstrapConfig& config) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    return Status::error(Errc::InvalidArgument, "MPI bootstrap: MPI is not initialized");
  }
  MPI_Comm comm = MPI_Comm_f2c(static_cast<MPI_Fint>(comm_f));
  if (comm == MPI_COMM_NULL) {
    return Status::error(Errc::InvalidArgument, "MPI bootstrap: the communicator is MPI_COMM_NULL");
  }
  // Errors must come back to us as codes, not abort the job.
  MPI_Errhandler previous;
  MPI_Comm_get_errhandler(comm, &previous);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  struct Restore {
    MPI_Comm comm;
    MPI_Errhandler handler;
    ~Restore() {
      MPI_Comm_set_errhandler(comm, handler);
      MPI_Errhandler_free(&handler);
    }
  } restore{comm, previous};

  int rank = 0;
  int size = 0;
  if (int rc = MPI_Comm_rank(comm, &rank); rc != MPI_SUCCESS) return mpi_error("MPI_Comm_rank", rc);
  if (int rc = MPI_Comm_size(comm, &size); rc != MPI_SUCCESS) return mpi_error("MPI_Comm_size", rc);

  MPI_Comm node = MPI_COMM_NULL;
  if (int rc = MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
      rc != MPI_SUCCESS) {
    return mpi_error("MPI_Comm_split_type", rc);
  }
  int local_rank = 0;
  int local_size = 1;
  MPI_Comm_rank(node, &local_rank);
  MPI_Comm_size(node, &local_size);
  MPI_Comm_free(&node);
  int all_local = local_size == size ? 1 : 0;

  // Rank 0 hosts the store and broadcasts "status|address|token"; a failure to start it is
  // broadcast too, so that no rank waits for a store that will never exist.
  HostedStore hosted;
  char message[kMaxMessage] = {};
  if (rank == 0) {
    auto started = host_job_store(config, all_local != 0);
    std::string text;
    if (started.ok()) {
      hosted = std::move(*started);
      text = "ok|" + hosted.address + "|" + hosted.token;
    } else {
      text = "error|" + started.status().message();
    }
    std::strncpy(message, text.c_str(), kMaxMessage - 1);
  }
  if (int rc = MPI_Bcast(message, kMaxMessage, MPI_CHAR, 0, comm); rc != MPI_SUCCESS) {
    return mpi_error("MPI_Bcast", rc);
  }
  std::string text(message);
  if (text.rfind("ok|", 0) != 0) {
    return Status::error(Errc::Unavailable, "MPI bootstrap: rank 0 could not start the store: " +
                                                text.substr(text.find('|') + 1));
  }
  size_t bar = text.find('|', 3);
  if (bar == std::string::npos) {
    return Status::error(Errc::Protocol, "MPI bootstrap: malformed store announcement");
  }
  TcpStoreClientOptions options;
  options.address = text.substr(3, bar - 3);
  options.token = text.substr(bar + 1);
  options.connect_timeout = config.connect_timeout;
  options.max_value_bytes = config.max_value_bytes;
  auto client = TcpStoreClient::connect(options);
  if (!client.ok()) {
    return client.status().with_context("MPI bootstrap: rank " + std::to_string(rank));
  }
  return Bootstrap::from_hosted_store(std::move(hosted.server), std::move(*client), rank, size,
                                      local_rank, "mpi", config);
}

}  // namespace orbite::mpi
