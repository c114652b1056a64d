// The selection table (src/p2p/select.h) as a pure function: which transport each kind of peer
// gets for Transport::Unspec, what a forced transport gets, and the reason named when none can.
#include <gtest/gtest.h>

#include <string>

#include "../support/config_test_helpers.h"
#include "p2p/select.h"

namespace orbite::p2p {
namespace {

Capabilities caps_of(TransportId id, std::uint8_t reach, bool cuda = false) {
  Capabilities c;
  c.id = id;
  c.reach = reach;
  c.cuda_memory = cuda;
  return c;
}

const Capabilities kShm = caps_of(TransportId::Shm, kReachSelf | kReachSameHost);
const Capabilities kTcp = caps_of(TransportId::Tcp, kReachSameHost | kReachRemote);
const Capabilities kRdma = caps_of(TransportId::Rdma, kReachSameHost | kReachRemote);
const Capabilities kIpc = [] {
  Capabilities c = caps_of(TransportId::CudaIpc, kReachSameHost, true);
  c.host_memory = false;
  c.frames = false;
  c.rma = true;
  return c;
}();

std::size_t at(TransportId id) {
  return static_cast<std::size_t>(id);
}

// A peer with the endpoints of today's engine (shm when same host or self, tcp otherwise).
RouteQuery peer(bool self, bool same_host) {
  RouteQuery q;
  q.is_self = self;
  q.same_host = same_host || self;
  q.built[at(TransportId::Shm)] = true;
  q.built[at(TransportId::Tcp)] = true;
  if (self || same_host) q.open[at(TransportId::Shm)] = &kShm;
  if (!self) q.open[at(TransportId::Tcp)] = &kTcp;
  q.peer_id = "p";
  return q;
}

TransportId must(const RouteQuery& q) {
  auto r = select_route(q);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? *r : TransportId::CudaIpc;
}

void expect_unavailable(const RouteQuery& q, const std::string& names) {
  auto r = select_route(q);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Errc::Unavailable);
  EXPECT_CONTAINS(r.status().message(), names);
}

TEST(Select, TheTableIsSelfCudaIpcShmRdmaTcp) {
  const auto& t = route_table();
  ASSERT_EQ(t.size(), 5U);
  EXPECT_STREQ(t[0].name, "self");
  EXPECT_STREQ(t[1].name, "cuda_ipc");
  EXPECT_STREQ(t[2].name, "shm");
  EXPECT_STREQ(t[3].name, "rdma");
  EXPECT_STREQ(t[4].name, "tcp");
}

TEST(Select, UnspecTakesTheFirstRowThatReaches) {
  EXPECT_EQ(must(peer(true, true)), TransportId::Shm);
  EXPECT_EQ(must(peer(false, true)), TransportId::Shm);
  EXPECT_EQ(must(peer(false, false)), TransportId::Tcp);
  // Shared memory failed or is off: the same-host peer goes over tcp.
  RouteQuery q = peer(false, true);
  q.open[at(TransportId::Shm)] = nullptr;
  EXPECT_EQ(must(q), TransportId::Tcp);
}

TEST(Select, RdmaComesBeforeTcpWhenItHasAnEndpoint) {
  RouteQuery q = peer(false, false);
  q.built[at(TransportId::Rdma)] = true;
  q.open[at(TransportId::Rdma)] = &kRdma;
  EXPECT_EQ(must(q), TransportId::Rdma);
  // Same host: shm first, as its row comes first.
  q = peer(false, true);
  q.built[at(TransportId::Rdma)] = true;
  q.open[at(TransportId::Rdma)] = &kRdma;
  EXPECT_EQ(must(q), TransportId::Shm);
}

TEST(Select, CudaMemoryTakesAnEndpointThatCarriesIt) {
  RouteQuery q = peer(false, true);
  q.memory = MemoryKind::Cuda;
  expect_unavailable(q, "does not carry CUDA memory");
  q.built[at(TransportId::CudaIpc)] = true;
  q.open[at(TransportId::CudaIpc)] = &kIpc;
  q.rma = true;
  q.target_transports = ~0u;
  EXPECT_EQ(must(q), TransportId::CudaIpc);
}

// A same-host peer with a cuda_ipc endpoint beside shm, which stages device memory.
RouteQuery ipc_peer(MemoryKind memory) {
  RouteQuery q = peer(false, true);
  q.rma = true;
  q.memory = memory;
  q.target_transports = ~0u;
  q.built[at(TransportId::CudaIpc)] = true;
  q.open[at(TransportId::CudaIpc)] = &kIpc;
  const auto both = static_cast<std::uint8_t>(1u << static_cast<unsigned>(MemoryKind::Host) |
                                              1u << static_cast<unsigned>(MemoryKind::Cuda));
  q.carries[at(TransportId::Shm)] = both;
  q.carries[at(TransportId::Tcp)] = both;
  q.carries[at(TransportId::CudaIpc)] =
      static_cast<std::uint8_t>(1u << static_cast<unsigned>(MemoryKind::Cuda));
  return q;
}

TEST(Select, DeviceMemoryGoesOverCudaIpcBeforeShmAndHostMemoryFallsThrough) {
  EXPECT_EQ(must(ipc_peer(MemoryKind::Cuda)), TransportId::CudaIpc);
  EXPECT_EQ(must(ipc_peer(MemoryKind::Host)), TransportId::Shm);
  // A region not published on cuda_ipc (host memory, or memory the driver cannot export).
  RouteQuery q = ipc_peer(MemoryKind::Cuda);
  q.target_transports = ~(1u << at(TransportId::CudaIpc));
  EXPECT_EQ(must(q), TransportId::Shm);
  // send/recv: cuda_ipc carries no frames.
  q = ipc_peer(MemoryKind::Cuda);
  q.rma = false;
  EXPECT_EQ(must(q), TransportId::Shm);
}

TEST(Select, ForcedNvlinkNamesWhyItCannot) {
  RouteQuery q = ipc_peer(MemoryKind::Host);
  q.requested = Transport::Nvlink;
  expect_unavailable(q, "transport nvlink cannot reach peer p: it does not carry host memory");
  q = ipc_peer(MemoryKind::Cuda);
  q.requested = Transport::Nvlink;
  q.target_transports = 1u << at(TransportId::Shm);
  expect_unavailable(q, "the remote region is not published on cuda_ipc");
  q = ipc_peer(MemoryKind::Cuda);
  q.requested = Transport::Nvlink;
  q.rma = false;
  expect_unavailable(q, "it carries put/get only");
  q = ipc_peer(MemoryKind::Cuda);
  q.requested = Transport::Nvlink;
  q.same_host = false;
  expect_unavailable(q, "the peer is on another host");
  q = ipc_peer(MemoryKind::Cuda);
  q.requested = Transport::Nvlink;
  q.is_self = true;
  expect_unavailable(q, "it does not reach this engine itself");
  q = ipc_peer(MemoryKind::Cuda);
  q.requested = Transport::Nvlink;
  q.open[at(TransportId::CudaIpc)] = nullptr;
  expect_unavailable(q, "no cuda_ipc endpoint to the peer");
}

TEST(Select, AForcedTransportMustPassItsOwnRow) {
  RouteQuery q = peer(false, true);
  q.requested = Transport::Tcp;
  EXPECT_EQ(must(q), TransportId::Tcp);
  q.requested = Transport::Shm;
  EXPECT_EQ(must(q), TransportId::Shm);

  q = peer(false, false);
  q.requested = Transport::Shm;
  expect_unavailable(q, "transport shm cannot reach peer p: the peer is on another host");

  q = peer(false, true);
  q.open[at(TransportId::Shm)] = nullptr;
  q.requested = Transport::Shm;
  expect_unavailable(q, "shared memory with the peer is disabled or failed");
}

TEST(Select, RdmaAndNvlinkAreRefusedByTheTableWhenNotBuilt) {
  for (Transport t : {Transport::Rdma, Transport::Nvlink}) {
    RouteQuery q = peer(false, false);
    q.requested = t;
    expect_unavailable(q, "this engine has no");
    std::array<bool, kTransportCount> built{};
    built[at(TransportId::Tcp)] = built[at(TransportId::Shm)] = true;
    Status st = check_requested(t, built);
    EXPECT_EQ(st.code(), Errc::Unavailable);
    EXPECT_CONTAINS(st.message(), std::string(to_string(t)));
  }
  std::array<bool, kTransportCount> built{};
  built[at(TransportId::Tcp)] = true;
  EXPECT_TRUE(check_requested(Transport::Tcp, built).ok());
  EXPECT_TRUE(check_requested(Transport::Unspec, built).ok());
}

TEST(Select, RdmaBuiltButWithoutAPathNamesWhy) {
  RouteQuery q = peer(false, false);
  q.built[at(TransportId::Rdma)] = true;
  q.requested = Transport::Rdma;
  expect_unavailable(q, "no rdma endpoint to the peer");
}

TEST(Select, TheLoopbackAnswersHostTransportsToItself) {
  for (Transport t : {Transport::Unspec, Transport::Tcp, Transport::Shm}) {
    RouteQuery q = peer(true, true);
    q.requested = t;
    EXPECT_EQ(must(q), TransportId::Shm) << to_string(t);
  }
  RouteQuery q = peer(true, true);
  q.open[at(TransportId::Shm)] = nullptr;
  expect_unavailable(q, "no loopback to this engine");
  // A message with RDMA forced takes the loopback too (a self-send behaves as over tcp); a
  // put/get with RDMA forced is RDMA's own row, which does not reach this engine itself.
  q = peer(true, true);
  q.built[at(TransportId::Rdma)] = true;
  q.open[at(TransportId::Rdma)] = &kRdma;
  q.requested = Transport::Rdma;
  EXPECT_EQ(must(q), TransportId::Shm);
  q.rma = true;
  q.target_transports = ~0u;
  expect_unavailable(q, "does not reach this engine itself");
}

TEST(Select, NoRouteNamesEveryRowsReason) {
  RouteQuery q = peer(false, false);
  q.open[at(TransportId::Tcp)] = nullptr;
  expect_unavailable(q, "no transport reaches peer p");
  expect_unavailable(q, "shm: the peer is on another host");
  expect_unavailable(q, "tcp: no tcp endpoint to the peer");
}

}  // namespace
}  // namespace orbite::p2p
