// Which algorithm runs a collective: a documented rule on message size and rank count
// (docs/collectives.md), unless the `algo` setting (ORBITE_ALGO) names one.
#pragma once

#include <orbite/status.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace orbite::coll {

enum class Collective : std::uint8_t {
  AllReduce,
  Reduce,
  Broadcast,
  AllGather,
  ReduceScatter,
  AllToAll,
  Gather,
  Scatter,
  Barrier,
};
inline constexpr int kCollectiveCount = 9;

enum class Algo : std::uint8_t {
  Ring,
  RecursiveDoubling,
  Binomial,
  Chain,
  Bruck,
  Pairwise,
  Linear,
  Dissemination,
  Shm,           // through the communicator's shared segment (every rank on one host)
  Hierarchical,  // inside each host, among the hosts' leaders, inside each host again
};

std::string_view to_string(Collective c);
std::string_view to_string(Algo a);

// Per-collective overrides parsed from the `algo` setting: "" or "auto" (the rule), an
// algorithm name (every collective that has it), or a comma-separated list of
// collective=algorithm, e.g. "all_reduce=ring,broadcast=binomial".
struct AlgoChoice {
  std::array<std::optional<Algo>, kCollectiveCount> forced{};
};
Result<AlgoChoice> parse_algo(std::string_view spec);

// Size thresholds of the rule (bytes per rank of the collective's largest buffer).
inline constexpr std::uint64_t kRecursiveDoublingMax = 64 * 1024;
inline constexpr std::uint64_t kBinomialMax = 64 * 1024;
inline constexpr std::uint64_t kBruckMax = 64 * 1024;

// Where the rule takes the shm algorithms on a communicator with a shared segment: up to
// kShmMax, or at every size where the host's ranks outnumber its CPUs (`crowded`); broadcast
// and reduce on more than two ranks from kShmRootedMin.
inline constexpr std::uint64_t kShmMax = 16 << 20;
inline constexpr std::uint64_t kShmRootedMin = 4 * 1024;
bool shm_pays(Collective c, std::uint64_t bytes, int ranks, bool crowded = false);

// Where the rule takes the hierarchical all_reduce, broadcast and reduce on a communicator that
// spans hosts with several ranks on some (measured with claimed hosts on one VM: below it the
// extra steps cost more than the fewer messages across hosts save; docs/performance.md).
inline constexpr std::uint64_t kHierarchicalMin = 1 << 20;
// all_gather's and reduce_scatter's window (the result's or the input's bytes, the larger
// buffer): hierarchical from 512 B up to 4 MiB, where it ran 1.2-2.4x (all_gather) and 1.8-3.0x
// (reduce_scatter) faster than the flat rule's algorithm; at 16 MiB the padded leaders' exchange
// and the whole vectors moved inside the host cost more (0.91-0.93x, 0.68x; docs/performance.md).
inline constexpr std::uint64_t kHierarchicalBlocksMin = 512;
inline constexpr std::uint64_t kHierarchicalBlocksMax = 4 << 20;

// `shared`: the communicator has a shared segment and the collective's buffers may use it.
// `nested`: the communicator spans hosts and some host has several ranks (Hosts::nested), and
// the collective's buffers may go through host memory. `crowded`: the segment's ranks outnumber
// the CPUs they may run on (SharedArea::crowded).
Algo choose(Collective c, const AlgoChoice& choice, std::uint64_t bytes, int ranks, bool shared,
            bool nested = false, bool crowded = false);

// Whether `c` has an shm algorithm, a hierarchical one.
bool has_shm(Collective c);
bool has_hierarchical(Collective c);

}  // namespace orbite::coll
