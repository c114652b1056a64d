// The monitor's address resolution (resolve_gid, context.h) on a GID table the test controls:
// an unpinned route re-ranks the valid GIDs every time it is asked (what publication after a
// fence does), a pinned index is re-read and never falls back.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "p2p/rdma/context.h"

namespace orbite::rdma {
namespace {

struct Entry {
  ibv_gid gid{};
  ibv_gid_type type = IBV_GID_TYPE_ROCE_V2;
};

// The table the fake verbs below answer from (tests run one at a time in this binary).
std::vector<Entry> g_table;

ibv_gid v4_mapped(std::uint8_t last) {
  ibv_gid g{};
  g.raw[10] = 0xff;
  g.raw[11] = 0xff;
  g.raw[12] = 10;
  g.raw[15] = last;
  return g;
}

ibv_gid link_local(std::uint8_t last) {
  ibv_gid g{};
  g.raw[0] = 0xfe;
  g.raw[1] = 0x80;
  g.raw[15] = last;
  return g;
}

int fake_query_gid(ibv_context*, std::uint8_t port, int index, ibv_gid* gid) {
  if (port != 1 || index < 0 || static_cast<std::size_t>(index) >= g_table.size()) return EINVAL;
  *gid = g_table[static_cast<std::size_t>(index)].gid;
  return 0;
}

int fake_query_gid_ex(ibv_context*, std::uint32_t port, std::uint32_t index, ibv_gid_entry* e,
                      std::uint32_t, std::size_t) {
  if (port != 1 || index >= g_table.size()) return EINVAL;
  const Entry& in = g_table[index];
  bool zero = true;
  for (std::uint8_t b : in.gid.raw) zero = zero && b == 0;
  if (zero) return ENODATA;  // as rdma-core answers for an empty entry
  *e = {};
  e->gid = in.gid;
  e->gid_index = index;
  e->port_num = port;
  e->gid_type = in.type;
  return 0;
}

IbvApi fake_api(bool with_ex) {
  IbvApi api;
  api.query_gid = &fake_query_gid;
  if (with_ex) api.query_gid_ex = &fake_query_gid_ex;
  return api;
}

bool same(const ibv_gid& a, const ibv_gid& b) {
  return std::memcmp(a.raw, b.raw, 16) == 0;
}

int len() {
  return static_cast<int>(g_table.size());
}

TEST(RdmaRoute, AnUnpinnedRouteRanksTheTableAgainEveryTime) {
  const IbvApi api = fake_api(true);
  // RoCE v1 first, then a RoCE v2 link-local address, then an IPv4-mapped RoCE v2 one: the last
  // wins (TENT's order).
  g_table = {{link_local(1), IBV_GID_TYPE_IB}, {link_local(2)}, {v4_mapped(7)}};
  Route r;
  ASSERT_TRUE(resolve_gid(api, nullptr, 1, len(), std::nullopt, r));
  EXPECT_EQ(r.gid_index, 2);
  EXPECT_TRUE(same(r.gid, v4_mapped(7)));
  // The address went away (the entry reads as empty): the next best is RoCE v2 at index 1.
  g_table[2].gid = {};
  ASSERT_TRUE(resolve_gid(api, nullptr, 1, len(), std::nullopt, r));
  EXPECT_EQ(r.gid_index, 1);
  EXPECT_TRUE(same(r.gid, link_local(2)));
  // A new IPv4 address at another index: recovery picks it.
  g_table.push_back({v4_mapped(9)});
  ASSERT_TRUE(resolve_gid(api, nullptr, 1, len(), std::nullopt, r));
  EXPECT_EQ(r.gid_index, 3);
  EXPECT_TRUE(same(r.gid, v4_mapped(9)));
  // Nothing valid at all: no address, and the route is left as it was.
  g_table = {{}, {}};
  Route before = r;
  EXPECT_FALSE(resolve_gid(api, nullptr, 1, len(), std::nullopt, r));
  EXPECT_EQ(r.gid_index, before.gid_index);
}

TEST(RdmaRoute, WithoutTheExtendedQueryTheFirstNonZeroEntryWins) {
  const IbvApi api = fake_api(false);
  g_table = {{}, {link_local(3)}, {v4_mapped(4)}};
  Route r;
  ASSERT_TRUE(resolve_gid(api, nullptr, 1, len(), std::nullopt, r));
  EXPECT_EQ(r.gid_index, 1);
}

TEST(RdmaRoute, APinnedIndexIsReReadAndNeverFallsBack) {
  const IbvApi api = fake_api(true);
  g_table = {{v4_mapped(1)}, {v4_mapped(2)}};
  Route r;
  ASSERT_TRUE(resolve_gid(api, nullptr, 1, len(), 1U, r));
  EXPECT_EQ(r.gid_index, 1);
  EXPECT_TRUE(same(r.gid, v4_mapped(2)));
  // The pinned entry changed: the new value, at the same index.
  g_table[1].gid = v4_mapped(5);
  ASSERT_TRUE(resolve_gid(api, nullptr, 1, len(), 1U, r));
  EXPECT_EQ(r.gid_index, 1);
  EXPECT_TRUE(same(r.gid, v4_mapped(5)));
  // Emptied, or gone from the table: no address, though index 0 is valid.
  g_table[1].gid = {};
  EXPECT_FALSE(resolve_gid(api, nullptr, 1, len(), 1U, r));
  g_table.pop_back();
  EXPECT_FALSE(resolve_gid(api, nullptr, 1, len(), 1U, r));
}

}  // namespace
}  // namespace orbite::rdma
