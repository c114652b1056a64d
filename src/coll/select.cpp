// The algorithm rule and the parser of the `algo` setting.
#include "coll/select.h"

#include <algorithm>
#include <vector>

namespace orbite::coll {

namespace {

constexpr std::string_view kCollNames[kCollectiveCount] = {
    "all_reduce", "reduce", "broadcast", "all_gather", "reduce_scatter",
    "all_to_all", "gather", "scatter",   "barrier"};

constexpr std::pair<Algo, std::string_view> kAlgoNames[] = {
    {Algo::Ring, "ring"},         {Algo::RecursiveDoubling, "recursive_doubling"},
    {Algo::Binomial, "binomial"}, {Algo::Chain, "chain"},
    {Algo::Bruck, "bruck"},       {Algo::Pairwise, "pairwise"},
    {Algo::Linear, "linear"},     {Algo::Dissemination, "dissemination"},
    {Algo::Shm, "shm"},           {Algo::Hierarchical, "hierarchical"}};

// The algorithms each collective implements.
std::vector<Algo> algorithms_of(Collective c) {
  switch (c) {
    case Collective::AllReduce:
      return {Algo::Ring, Algo::RecursiveDoubling, Algo::Shm, Algo::Hierarchical};
    case Collective::Reduce:
    case Collective::Broadcast: return {Algo::Binomial, Algo::Chain, Algo::Shm, Algo::Hierarchical};
    case Collective::AllGather: return {Algo::Ring, Algo::Bruck, Algo::Shm, Algo::Hierarchical};
    case Collective::ReduceScatter: return {Algo::Ring, Algo::Shm, Algo::Hierarchical};
    case Collective::AllToAll: return {Algo::Pairwise};
    case Collective::Gather:
    case Collective::Scatter: return {Algo::Linear};
    case Collective::Barrier: return {Algo::Dissemination, Algo::Shm, Algo::Hierarchical};
  }
  return {};
}

std::optional<Algo> algo_named(std::string_view name) {
  for (const auto& [a, n] : kAlgoNames) {
    if (n == name) return a;
  }
  return std::nullopt;
}

std::string names_of(const std::vector<Algo>& algos) {
  std::string out;
  for (Algo a : algos) out += (out.empty() ? "" : ", ") + std::string(to_string(a));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

Status bad(std::string_view spec, const std::string& why) {
  return Status::error(Errc::InvalidArgument, "'" + std::string(spec) + "': " + why);
}

}  // namespace

std::string_view to_string(Collective c) {
  return kCollNames[static_cast<int>(c)];
}

std::string_view to_string(Algo a) {
  for (const auto& [x, n] : kAlgoNames) {
    if (x == a) return n;
  }
  return "unknown";
}

Result<AlgoChoice> parse_algo(std::string_view spec) {
  AlgoChoice choice;
  const std::string_view whole = trim(spec);
  if (whole.empty() || whole == "auto") return choice;
  std::string_view rest = whole;
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    const std::string_view item = trim(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    if (item.empty()) return bad(spec, "empty item");
    const auto eq = item.find('=');
    if (eq == std::string_view::npos) {
      auto algo = algo_named(item);
      if (!algo) return bad(spec, "'" + std::string(item) + "' is not an algorithm");
      for (int c = 0; c < kCollectiveCount; ++c) {
        for (Algo a : algorithms_of(static_cast<Collective>(c))) {
          if (a == *algo) choice.forced[static_cast<std::size_t>(c)] = a;
        }
      }
      continue;
    }
    const std::string_view coll = trim(item.substr(0, eq));
    const std::string_view name = trim(item.substr(eq + 1));
    int index = -1;
    for (int c = 0; c < kCollectiveCount; ++c) {
      if (kCollNames[c] == coll) index = c;
    }
    if (index < 0) return bad(spec, "'" + std::string(coll) + "' is not a collective");
    const auto algos = algorithms_of(static_cast<Collective>(index));
    auto algo = algo_named(name);
    if (!algo || std::find(algos.begin(), algos.end(), *algo) == algos.end()) {
      return bad(spec, std::string(coll) + " has no algorithm '" + std::string(name) +
                           "' (it has " + names_of(algos) + ")");
    }
    choice.forced[static_cast<std::size_t>(index)] = *algo;
  }
  return choice;
}

bool has_shm(Collective c) {
  const auto algos = algorithms_of(c);
  return std::find(algos.begin(), algos.end(), Algo::Shm) != algos.end();
}

bool has_hierarchical(Collective c) {
  const auto algos = algorithms_of(c);
  return std::find(algos.begin(), algos.end(), Algo::Hierarchical) != algos.end();
}

bool shm_pays(Collective c, std::uint64_t bytes, int ranks, bool crowded) {
  // Measured on 2 and 4 ranks of one host (docs/performance.md, "Collectives through the shared
  // segment" and "Chunk steps where ranks outnumber cores"): the segment wins where a message's
  // protocol costs more than copying through it. Ranks that each have a core: every collective
  // that has it up to kShmMax (1.3-2x the messages' algorithms on 2 ranks; at 32 MiB these win
  // all_reduce, broadcast and reduce by about 2x, 2026-12-07; more ranks, each with a core, were
  // not measurable on the 2-core machine and take the same bound). Where the ranks outnumber
  // the cores the segment's larger steps win at every size measured (8-64 MiB on 4 ranks, 1.05-
  // 2.8x the messages', 2026-12-07). With more than two ranks the rooted ones keep their trees
  // at small sizes (non-roots that finish at once run ahead, where the segment's two slots hold
  // them to the root's pace).
  if (!has_shm(c)) return false;
  if (ranks > 2 && (c == Collective::Broadcast || c == Collective::Reduce) &&
      bytes < kShmRootedMin) {
    return false;
  }
  return crowded || bytes <= kShmMax;
}

Algo choose(Collective c, const AlgoChoice& choice, std::uint64_t bytes, int ranks, bool shared,
            bool nested, bool crowded) {
  if (auto forced = choice.forced[static_cast<std::size_t>(c)]) return *forced;
  if (shared && shm_pays(c, bytes, ranks, crowded)) return Algo::Shm;
  if (nested && (c == Collective::AllGather || c == Collective::ReduceScatter)) {
    if (bytes >= kHierarchicalBlocksMin && bytes <= kHierarchicalBlocksMax) {
      return Algo::Hierarchical;
    }
  } else if (nested && has_hierarchical(c) && c != Collective::Barrier &&
             bytes >= kHierarchicalMin) {
    return Algo::Hierarchical;
  }
  switch (c) {
    case Collective::AllReduce:
      // Latency-bound below the threshold: log2(n) exchanges beat 2(n - 1) ring steps.
      return bytes <= kRecursiveDoublingMax || bytes < static_cast<std::uint64_t>(ranks)
                 ? Algo::RecursiveDoubling
                 : Algo::Ring;
    case Collective::Reduce:
    case Collective::Broadcast: return bytes <= kBinomialMax ? Algo::Binomial : Algo::Chain;
    case Collective::AllGather: return bytes <= kBruckMax ? Algo::Bruck : Algo::Ring;
    case Collective::ReduceScatter: return Algo::Ring;
    case Collective::AllToAll: return Algo::Pairwise;
    case Collective::Gather:
    case Collective::Scatter: return Algo::Linear;
    case Collective::Barrier: return Algo::Dissemination;
  }
  return Algo::Ring;
}

}  // namespace orbite::coll
