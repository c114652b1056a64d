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

Algo choose(Collective c, const AlgoChoice& choice, std::uint64_t bytes, int ranks);

}  // namespace orbite::coll
