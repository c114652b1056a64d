// What a lane's parts (the frame messenger, the grant source, the requester) need from the lane:
// its QP table, its control sender, its failure paths, the engine and the protocol's frame handler.
// RdmaLane implements it; a part holds a reference for its whole life (the lane owns its parts) and
// calls it from the lane's thread only, under the lane's mutex, like everything else on the lane.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "p2p/rdma/qp.h"
#include "p2p/rdma/wire.h"
#include "p2p/transport.h"

namespace orbite::rdma {

class RdmaEngine;
struct PeerRdma;

class LaneServices {
 public:
  // The QP table: a live QP by handle (null once retired), a new one on the lane's CQ set of
  // `context` for the peer's slot, retirement (destroyed once drained), receives to repost.
  [[nodiscard]] virtual Qp* qp(std::uint16_t handle) const = 0;
  // (`pd`: a private grant's own PD instead of the context's.)
  virtual Result<Qp*> new_qp(std::size_t context, QpRole role, PeerRdma& peer, std::uint32_t slot,
                             ibv_pd* pd = nullptr) = 0;
  virtual void retire_qp(std::uint16_t handle) = 0;
  // Destroyed now (a private grant's teardown): QpTable::destroy_now.
  virtual Status destroy_qp_now(std::uint16_t handle) = 0;
  virtual Status post_receives(Qp& q) = 0;
  // The lane's CQ sets: whether context `context` (an index into RdmaEngine::contexts()) has one
  // here, and the context of a CQ set.
  [[nodiscard]] virtual bool context_usable(std::size_t context) const = 0;
  [[nodiscard]] virtual std::size_t context_of(const CqSet& cqs) const = 0;
  // The peer's requester-role QP arrays (arrays.cpp): the message channel's (the first active
  // local context's), the one from local context `context` to its rail-mapped NIC of the peer,
  // and the local NICs (bit = NIC id) with a usable context and a path to an active NIC of it.
  virtual Result<std::size_t> array_for(PeerRdma& peer) = 0;
  virtual Result<std::size_t> array_to(PeerRdma& peer, std::size_t context) = 0;
  [[nodiscard]] virtual std::uint64_t compatible_nics(const PeerRdma& peer) const = 0;
  // A number for a cold QP builder, unique on the lane (QpConnect and QpAccept carry it).
  virtual std::uint64_t next_builder() = 0;
  // A control message to the peer, on its control connection.
  virtual void send(PeerRdma& peer, ControlKind kind, std::string body) = 0;
  // The peer broke the protocol: the whole link fails (and every grant and parent with it).
  virtual void protocol_error(PeerRdma& peer, const std::string& what) = 0;
  [[nodiscard]] virtual RdmaEngine& engine() const = 0;
  [[nodiscard]] virtual p2p::FrameHandler& handler() const = 0;

 protected:
  LaneServices() = default;
  LaneServices(const LaneServices&) = delete;
  LaneServices& operator=(const LaneServices&) = delete;
  ~LaneServices() = default;
};

}  // namespace orbite::rdma
