// orbite-rdma-probe's budget scenarios (see rdma_probe.cpp): crossed messages that each need the
// whole rdma.max_direct_bytes.
#include <cstdio>

#include "rdma_probe.h"

namespace orbite::probe {

// ---------------------------------------------------------------------------------------------
// crossed_messages: with ORBITE_RDMA_MAX_DIRECT_BYTES=1MiB from the test, both ranks send the other
// a 1 MiB message over RDMA at once, then receive. Each sender's loan takes its whole budget at
// admission; each receiver's grant needs the same amount. With one pool for both roles neither
// grant could be made (issue 24, defect 1); both messages must arrive, byte for byte.

void scenario_rdma_crossed_messages(RdmaContext& r) {
  constexpr std::uint64_t kBytes = 1 * kMiB;
  constexpr int kTag = 90;
  const int peer = 1 - r.c.rank;
  const std::uint64_t mine_seed = 0xC205 + static_cast<std::uint64_t>(r.c.rank);
  const std::uint64_t their_seed = 0xC205 + static_cast<std::uint64_t>(peer);
  Bytes out(kBytes), in(kBytes);
  fill_pattern(out.data(), kBytes, mine_seed);
  fill_pattern(in.data(), kBytes, 0xBAD);
  barrier(r.c, "crossed: filled");
  std::vector<Request> both;
  both.push_back(accepted(r.c.comm.isend(out.data(), kBytes, peer, kTag, r.rdma), "isend"));
  both.push_back(accepted(r.c.comm.irecv(in.data(), kBytes, peer, kTag, r.rdma), "irecv"));
  wait_all_ok(both, "1 MiB both ways with a 1 MiB rdma.max_direct_bytes");
  check_pattern(in.data(), kBytes, their_seed, "the crossed message");
  const RdmaStats s = r.c.comm.engine().rdma_stats();
  check(s.direct_bytes_in_use == 0 && s.granted_bytes_in_use == 0,
        "charges left: " + sz(s.direct_bytes_in_use) + " lent, " + sz(s.granted_bytes_in_use) +
            " granted");
  barrier(r.c, "crossed: checked");
}

}  // namespace orbite::probe
