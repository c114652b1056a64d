// Run under mpirun. Checks that the MPI bootstrap gives every rank the same view MPI has, that
// communicators built on it agree across ranks (verified through MPI itself), and that split
// MPI communicators bootstrap independent OrbiTE groups, whose all_reduce agrees with MPI's. Prints
// "N passed, M failed".
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <orbite/communicator.h>
#include <orbite/mpi.h>

namespace {

int g_passed = 0;
int g_failed = 0;
int g_rank = 0;

#define CHECK(cond, what)                                                              \
  do {                                                                                 \
    if (cond) {                                                                        \
      ++g_passed;                                                                      \
    } else {                                                                           \
      ++g_failed;                                                                      \
      std::fprintf(stderr, "[rank %d] FAILED %s:%d: %s\n", g_rank, __FILE__, __LINE__, \
                   std::string(what).c_str());                                         \
    }                                                                                  \
  } while (false)

orbite::EngineConfig test_config() {
  orbite::EngineConfig config;
  config.bootstrap.timeout = std::chrono::seconds(60);
  return config;
}

void check_group(MPI_Comm mpi_comm, const char* label) {
  int rank = 0;
  int size = 0;
  MPI_Comm_rank(mpi_comm, &rank);
  MPI_Comm_size(mpi_comm, &size);
  orbite::EngineConfig config = test_config();
  auto boot = orbite::mpi::bootstrap(mpi_comm, config.bootstrap);
  CHECK(boot.ok(), std::string(label) + " bootstrap: " + boot.status().to_string());
  if (!boot.ok()) return;
  CHECK(boot->rank() == rank, std::string(label) + " rank matches MPI");
  CHECK(boot->world_size() == size, std::string(label) + " size matches MPI");
  CHECK(boot->source() == "mpi", "source is mpi");
  CHECK(boot->hosts_store() == (rank == 0), "only rank 0 hosts the store");

  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(mpi_comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  int node_rank = 0;
  MPI_Comm_rank(node, &node_rank);
  MPI_Comm_free(&node);
  CHECK(boot->local_rank() == node_rank, "local rank matches MPI_COMM_TYPE_SHARED");

  auto comm = orbite::Communicator::create(*boot, config);
  CHECK(comm.ok(), std::string(label) + " communicator: " + comm.status().to_string());
  if (!comm.ok()) return;
  CHECK(comm->rank() == rank && comm->size() == size, "communicator rank and size");
  CHECK(comm->local_rank() == node_rank, "communicator local rank");

  // Every rank must see the same control addresses: compare against MPI_Allgather.
  char mine[128] = {};
  std::snprintf(mine, sizeof(mine), "%s", comm->peer(rank).control_address.c_str());
  std::vector<char> all(static_cast<size_t>(size) * sizeof(mine));
  MPI_Allgather(mine, sizeof(mine), MPI_CHAR, all.data(), sizeof(mine), MPI_CHAR, mpi_comm);
  for (int p = 0; p < size; ++p) {
    std::string theirs(&all[static_cast<size_t>(p) * sizeof(mine)]);
    CHECK(comm->peer(p).control_address == theirs,
          std::string(label) + " peer " + std::to_string(p) + " address " + theirs);
  }

  // OrbiTE's all_reduce (data over OrbiTE's transports; MPI only checks the answer), small
  // (recursive doubling) and large (ring), against MPI_Allreduce of the same inputs.
  for (int count : {3, 300001}) {
    std::vector<std::int64_t> in(static_cast<size_t>(count));
    for (int i = 0; i < count; ++i) in[static_cast<size_t>(i)] = (rank + 1) * 1000 + i % 977;
    std::vector<std::int64_t> ours(in.size()), theirs(in.size());
    auto req = comm->all_reduce(in.data(), ours.data(), in.size(), orbite::DataType::Int64,
                                orbite::ReduceOp::Sum);
    CHECK(req.ok(), "all_reduce accepted: " + req.status().to_string());
    if (!req.ok()) continue;
    orbite::Status st = req->wait(std::chrono::seconds(60));
    CHECK(st.ok(), std::string(label) + " all_reduce: " + st.to_string());
    MPI_Allreduce(in.data(), theirs.data(), count, MPI_INT64_T, MPI_SUM, mpi_comm);
    CHECK(ours == theirs, std::string(label) + " all_reduce of " + std::to_string(count) +
                              " int64 matches MPI_Allreduce");
  }

  // The store is shared by the group: a counter reaches the group size after a barrier.
  auto added = boot->store()->add(std::string(label) + "/count", 1);
  CHECK(added.ok(), "store add");
  CHECK(comm->store_barrier().ok(), "store barrier");
  auto total = boot->store()->get(std::string(label) + "/count", std::chrono::seconds(5));
  CHECK(total.ok() && *total == std::to_string(size), std::string(label) + " counter");
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);

  check_group(MPI_COMM_WORLD, "world");

  // Two halves bootstrap independently: separate stores, separate numbering.
  MPI_Comm half = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, g_rank % 2, g_rank, &half);
  check_group(half, g_rank % 2 == 0 ? "even" : "odd");
  MPI_Comm_free(&half);

  // An uninitialized-handle error is reported, not a crash.
  auto null_comm = orbite::mpi::bootstrap(MPI_COMM_NULL);
  CHECK(!null_comm.ok() && null_comm.status().code() == orbite::Errc::InvalidArgument,
        "MPI_COMM_NULL is rejected");

  int counts[2] = {g_passed, g_failed};
  int totals[2] = {0, 0};
  MPI_Reduce(counts, totals, 2, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  if (g_rank == 0) std::printf("mpi_bootstrap: %d passed, %d failed\n", totals[0], totals[1]);
  int any_failed = 0;
  MPI_Allreduce(&g_failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any_failed == 0 ? 0 : 1;
}
