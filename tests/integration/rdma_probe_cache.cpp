// The MR cache of engine-owned memory, seen from orbite-rdma-probe: all_reduce over RDMA
// (ORBITE_COLL_TRANSPORT=rdma) receives its peers' blocks into the executor's scratch, which the
// cache keeps registered across collectives; user buffers stay registered per request.
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "rdma_probe.h"

namespace orbite::probe {

// mr_cache: four all_reduce of 1 MiB (float32 sums, every element checked). MR_CACHE_EXPECT:
// "kept": the first collective registers scratch ranges and the later ones hit them, within
//         max_cached_mrs / max_cached_mr_bytes;
// "evict": rounds alternate 16 KiB and 1 MiB, whose algorithms take different scratch blocks,
//         and the budget (ORBITE_RDMA_MAX_CACHED_MR_BYTES) holds the slot slabs and one of them:
//         each switch evicts;
// "refused": the budgets take the slot slabs but no scratch range, nothing else is cached and
//         the collectives still succeed on per-request registrations;
// "slabs_refused": the budget cannot take the lanes' slot slabs either: the first collective
//         fails on both ranks, and at least one names rdma.max_cached_mr_bytes (the test reads it).
void scenario_rdma_mr_cache(RdmaContext& r) {
  const char* env = std::getenv("MR_CACHE_EXPECT");
  const std::string expect = env != nullptr ? env : "kept";
  const bool evict = expect == "evict";
  constexpr std::uint64_t kMaxCount = 256 * 1024;
  constexpr int kRounds = 4;
  TransferEngine& engine = r.c.comm.engine();
  std::vector<float> in(kMaxCount), out(kMaxCount);
  RdmaMrCacheStats first{};
  for (int round = 0; round < kRounds; ++round) {
    const std::uint64_t kCount = evict && round % 2 == 0 ? 4096 : kMaxCount;
    for (std::uint64_t i = 0; i < kCount; ++i) {
      in[i] = static_cast<float>((i % 97) * (r.c.rank + 1) + round);
    }
    Request q = accepted(
        r.c.comm.all_reduce(in.data(), out.data(), kCount, DataType::Float32, ReduceOp::Sum),
        "all_reduce");
    if (expect == "slabs_refused") {
      const Status st = q.wait(std::chrono::seconds(60));
      std::printf("rank %d: all_reduce with no room for the slot slabs: %s\n", r.c.rank,
                  st.to_string().c_str());
      // The rank whose slab was refused names the budget; its peer may see only the link close
      // (the test checks that one of them named it).
      check(st.code() == Errc::ConnectionLost || st.code() == Errc::ResourceExhausted,
            "the collective did not fail as a lost or exhausted link: " + st.to_string());
      check(engine.rdma_stats().mr_cache.slabs == 0, "a slab was charged past the budget");
      barrier(r.c, "mr_cache checked");
      return;
    }
    wait_ok(q, "all_reduce round " + std::to_string(round));
    const float ranks = static_cast<float>(r.c.size);
    const float rank_sum = ranks * (ranks + 1) / 2;
    for (std::uint64_t i = 0; i < kCount; ++i) {
      const float want = static_cast<float>(i % 97) * rank_sum + ranks * static_cast<float>(round);
      if (out[i] != want) {
        fail("round " + std::to_string(round) + ": element " + sz(i) + " is " +
             std::to_string(out[i]) + ", not " + std::to_string(want));
      }
    }
    if (round == 0) first = engine.rdma_stats().mr_cache;
  }
  const RdmaStats s = engine.rdma_stats();
  const RdmaMrCacheStats& c = s.mr_cache;
  const EngineConfig& cfg = engine.config();
  std::printf("rank %d: mr_cache declared %" PRIu64 ", registered %" PRIu64 ", copies %" PRIu64
              ", bytes %" PRIu64 ", hits %" PRIu64 ", registrations %" PRIu64 ", evictions %" PRIu64
              ", refused %" PRIu64 "\n",
              r.c.rank, c.declared, c.registered, c.mr_copies, c.bytes, c.hits, c.registrations,
              c.evictions, c.refused);
  check(c.declared > 0, "no scratch was declared engine-owned");
  check(c.mr_copies <= cfg.rdma.max_cached_mrs && c.bytes <= cfg.rdma.max_cached_mr_bytes,
        "the cache is over its budgets: " + sz(c.mr_copies) + " copies, " + sz(c.bytes) + " bytes");
  if (expect == "kept") {
    check(first.registrations > 0, "the first all_reduce registered no scratch range");
    check(c.registrations == first.registrations,
          "later collectives registered scratch again: " + sz(first.registrations) + " -> " +
              sz(c.registrations));
    check(c.hits > first.hits,
          "later collectives did not hit the cache (" + sz(first.hits) + " -> " + sz(c.hits) + ")");
    check(c.refused == 0, sz(c.refused) + " lookups refused");
    check(c.slabs > 0 && c.slab_bytes > 0, "the lanes' slot slabs were not charged to the budgets");
  } else if (evict) {
    check(c.declared == 2, "two scratch blocks, not " + sz(c.declared));
    check(c.evictions >= 2 && c.registrations >= 3 && c.refused == 0,
          "no eviction at each switch: " + sz(c.evictions) + " evictions, " + sz(c.registrations) +
              " registrations, " + sz(c.refused) + " refused");
  } else {
    check(c.registrations == 0 && c.registered == 0 && c.mr_copies == c.slabs && c.slabs > 0,
          "a range was cached beyond the budget, or no slab was charged");
    check(c.refused > 0, "no lookup was refused");
  }
  barrier(r.c, "mr_cache checked");
}

}  // namespace orbite::probe
