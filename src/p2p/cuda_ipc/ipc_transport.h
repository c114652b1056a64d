// The cuda_ipc transport (Transport::Nvlink): device memory of another process on this host,
// reached through the driver's IPC. Its memory domain exports a legacy handle per registration
// of device memory (a registration whose memory cannot be exported is simply not published
// here); host memory is Absent (shm carries it). put/get run as the requester's copies:
//
//   the requester asks the owner for each range (IpcAccess); the owner checks it as it checks
//   every access (rights, generation, bounds), waits for its producer's readiness, pins the
//   registration for this peer on first use (a mapping pin) and answers with the handle
//   (IpcGrant); the requester maps the handle once per (peer, allocation, device), copies
//   device to device on its allocation's stream and completes on the event.
//
// The handle never travels in a descriptor, so a forged descriptor reaches nothing the owner did
// not check. Mappings live until the owner unregisters (IpcUnmap: the requester drains its
// copies, closes the mapping and answers IpcUnmapped, which drops the pin that unregister waits
// for within its bound, else Unquiesced) or the link ends. send/recv frames do not travel here.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "cuda/ipc.h"
#include "p2p/cuda_ipc/wire.h"
#include "p2p/transport.h"

namespace orbite::p2p::ipc {

// The handle a registration exported, or why none (then the region is not published here).
struct IpcRegistration final : DomainRegistration {
  std::optional<cuda::IpcHandle> handle;
  std::string why_not;
};

class CudaIpcDomain final : public MemoryDomain {
 public:
  [[nodiscard]] TransportId id() const override { return TransportId::CudaIpc; }
  [[nodiscard]] Backing backing(MemoryKind kind, std::string* why) const override;
  Result<std::unique_ptr<DomainRegistration>> register_region(
      const detail::RegionRecord& region) override;
  Status deregister(std::unique_ptr<DomainRegistration>) override { return {}; }
  [[nodiscard]] std::size_t retained() const override { return 0; }
  [[nodiscard]] std::string pack(const detail::RegionRecord& region,
                                 const DomainRegistration* registration) const override;
  [[nodiscard]] Status unpack(std::string_view blob) const override;
  [[nodiscard]] bool published(const detail::RegionRecord& region,
                               const DomainRegistration* registration) const override;
  Result<std::unique_ptr<LaneTransport>> make_lane(const LaneParts& parts) const override;
};

class CudaIpcLane;

class CudaIpcEndpoint final : public PeerEndpoint {
 public:
  CudaIpcEndpoint(CudaIpcLane& lane, detail::PeerLink& link) : lane_(lane), link_(link) {}
  [[nodiscard]] const Capabilities& caps() const override;
  // No frames travel here (caps().frames is false): the protocol never routes one.
  void send(detail::SendItem item) override;
  bool send_now(const FrameHeader&, std::span<const iovec>) override { return false; }
  [[nodiscard]] std::size_t paths() const override { return 1; }
  Status read_peer(std::byte*, std::uint64_t, std::uint64_t) override;
  Status write_peer(const std::byte*, std::uint64_t, std::uint64_t) override;
  [[nodiscard]] bool one_sided_usable() const override { return false; }
  Status start_rma(RmaOp op) override;
  [[nodiscard]] bool busy() const override;
  void close(bool) override {}

 private:
  CudaIpcLane& lane_;
  detail::PeerLink& link_;
};

class CudaIpcLane final : public LaneTransport {
 public:
  explicit CudaIpcLane(const LaneParts& parts);
  ~CudaIpcLane() override;
  [[nodiscard]] const Capabilities& caps() const override { return caps_; }
  std::optional<std::string> offer(detail::PeerLink& link) override;
  Result<std::string> accept(detail::PeerLink& link, std::string_view blob) override;
  Status complete(detail::PeerLink& link, std::optional<std::string_view> blob) override;
  Status open_self(detail::PeerLink&) override;
  Status adopt_connection(detail::PeerLink&, int fd, std::uint32_t) override;
  Status on_control(detail::PeerLink& link, std::uint64_t kind, std::string_view body) override;
  int progress() override;
  bool prepare_sleep() override { return !busy(); }
  void end_sleep() override {}
  [[nodiscard]] bool busy() const override;
  [[nodiscard]] int next_timer_ms() const override;
  void forget(detail::PeerLink& link) override;
  void shutdown(const Status& why) override;

  // The endpoint's parts.
  Status start(detail::PeerLink& link, RmaOp op);
  [[nodiscard]] bool busy_with(const detail::PeerLink& link) const;
  FrameHandler& handler() { return handler_; }

 private:
  // --- the owner's side (owner.cpp) ---
  struct Deferred {  // an access waiting for its region's producer
    detail::PeerLink* link = nullptr;
    IpcAccess access;
    Deadline deadline;
  };
  struct Exported {  // a registration this peer mapped: its mapping pin
    std::shared_ptr<detail::RegionRecord> region;
    bool unmap_sent = false;
  };
  void on_access(detail::PeerLink& link, const IpcAccess& m);
  // Answers now (true) or leaves the access for later (false: the producer still runs).
  bool answer_access(detail::PeerLink& link, const IpcAccess& m, Deadline deadline);
  void on_unmapped(detail::PeerLink& link, const IpcUnmapped& m);
  int owner_pass();
  void release_exports(detail::PeerLink& link);

  // --- the requester's side (requester.cpp) ---
  struct Mapping {  // a peer's allocation mapped on one device of ours
    std::unique_ptr<cuda::PeerMapping> map;
    std::vector<std::uint64_t> regions;   // the owner's registrations that share it
    int copies = 0;                       // in flight
    std::vector<std::uint64_t> unmapped;  // regions the owner asked to unmap, answered at 0 copies
  };
  using MappingKey = std::tuple<const detail::PeerLink*, cuda::IpcHandle, int>;
  struct MappingLess {
    bool operator()(const MappingKey& a, const MappingKey& b) const;
  };
  struct Op {
    detail::PeerLink* link = nullptr;
    RmaOp rma;
    std::shared_ptr<cuda::Allocation> local;
    std::uint64_t local_offset = 0;  // in `local`
    std::shared_ptr<cuda::CopyJob> job;
    Mapping* mapping = nullptr;
  };
  void on_grant(detail::PeerLink& link, const IpcGrant& m);
  void on_unmap(detail::PeerLink& link, const IpcUnmap& m);
  Result<Mapping*> mapping_for(detail::PeerLink& link, const IpcGrant& m, int ordinal);
  void finish(Op& op, const Status& st);
  // Closes `m` once no copy uses it and no registration holds it, answering the owner.
  void settle(const MappingKey& key);
  int requester_pass();
  void drop_requests(detail::PeerLink& link, const Status& why);
  void send(detail::PeerLink& link, IpcKind kind, std::string body);

  const EngineConfig& config_;
  const detail::Identity& self_;
  FrameHandler& handler_;
  ControlSender& control_;
  RegionRegistry& regions_;
  Capabilities caps_;
  std::unordered_map<const detail::PeerLink*, std::unique_ptr<CudaIpcEndpoint>> endpoints_;
  // Owner: accesses waiting for a producer, and the registrations each peer mapped.
  std::vector<Deferred> deferred_;
  std::unordered_map<const detail::PeerLink*, std::map<std::uint64_t, Exported>> exported_;
  // Requester: operations waiting for their grant (by token) and copying; the mappings.
  std::uint64_t next_token_ = 1;
  std::unordered_map<std::uint64_t, Op> waiting_;
  std::vector<Op> copying_;
  std::map<MappingKey, Mapping, MappingLess> mappings_;
};

}  // namespace orbite::p2p::ipc
