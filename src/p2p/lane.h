// A lane's protocol as the proxy sees it: what a worker (or a waiting user thread) calls with the
// lane's mutex held. The proxy names no socket, ring, stream or endpoint type: those live behind
// this interface (p2p/protocol.h implements it).
#pragma once

#include <orbite/config.h>
#include <orbite/status.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "cuda/staging.h"
#include "p2p/counters.h"
#include "p2p/domains.h"
#include "p2p/endpoint.h"
#include "p2p/registry.h"
#include "p2p/request.h"

namespace orbite::p2p {

struct Accepted;
class NotificationBox;

// A connection lane 0's listener accepted, its Hello read, on its way to the lane that owns the
// peer. The proxy only reads whose it is and hands it on.
class AcceptedConnection {
 public:
  explicit AcceptedConnection(std::unique_ptr<Accepted> accepted);
  AcceptedConnection(AcceptedConnection&&) noexcept;
  AcceptedConnection& operator=(AcceptedConnection&&) noexcept;
  ~AcceptedConnection();
  [[nodiscard]] const std::string& peer_id() const;
  std::unique_ptr<Accepted> take();

 private:
  std::unique_ptr<Accepted> accepted_;
};

// A message waiting for its receive, as a probe finds it: the sending engine, tag and size.
struct ProbeHit {
  std::string peer_id;
  std::int32_t tag = 0;
  std::uint64_t length = 0;
};
// The rank of each engine of a communicator, by engine id.
using PeerRanks = std::unordered_map<std::string, int>;

class LaneProtocol {
 public:
  virtual ~LaneProtocol() = default;
  virtual Status init() = 0;
  // The lane's epoll set, where an idle worker sleeps.
  [[nodiscard]] virtual int epoll_fd() const = 0;
  // Lane 0 accepts; connections of peers owned by other lanes go to `route`.
  virtual Status set_listener(int fd, std::function<void(AcceptedConnection)> route) = 0;
  // The lane's wake-up eventfd, put in the epoll set.
  virtual Status set_wake_fd(int fd) = 0;
  virtual void adopt(AcceptedConnection accepted) = 0;
  // Begins a request: connects if needed, then issues its first frames.
  virtual void start(std::shared_ptr<detail::RequestState> req) = 0;
  // One pass over the transports and (when asked) the sockets; returns how much work it did.
  virtual int progress(bool poll_sockets) = 0;
  // Writes what requests queued since the last pass.
  virtual void flush_dirty() = 0;
  // Arms the transports before the worker sleeps (false: work arrived, do not sleep).
  virtual bool prepare_sleep() = 0;
  virtual void end_sleep() = 0;
  [[nodiscard]] virtual bool busy() const = 0;
  // Device copies (staging) are in flight: no fd announces their end, so an idle worker naps
  // (tens of microseconds) instead of sleeping until a socket or doorbell wakes it.
  [[nodiscard]] virtual bool copies_pending() const = 0;
  // Whether the last pass polled the sockets (syscalls: a pass then costs microseconds, not
  // nanoseconds).
  [[nodiscard]] virtual bool polled_sockets() const = 0;
  // The soonest of the transports' timers (LaneTransport::next_timer_ms), or -1 for none.
  [[nodiscard]] virtual int next_timer_ms() const = 0;
  // Fails every request and closes every connection.
  virtual void shutdown(const Status& why) = 0;
  // The first message of communicator `comm` from `peer_id` (null: any of `members`) with `tag`
  // (or any tag) that waits for a receive, left where it is.
  // Appends the lane's part of the state report (docs/hangs.md): links, posted receives,
  // unexpected messages, requests in flight with their age at `now_ns` (coarse monotonic), and
  // the transports' lines.
  virtual void report(std::string& out, std::int64_t now_ns) const = 0;
  [[nodiscard]] virtual std::optional<ProbeHit> probe(std::uint32_t comm,
                                                      const std::string* peer_id, std::int32_t tag,
                                                      const PeerRanks& members) const = 0;
};

// `staging`: the engine's staging pool (device memory, and host memory a transport stages).
std::unique_ptr<LaneProtocol> make_lane_protocol(const EngineConfig& config,
                                                 const detail::Identity& self,
                                                 RegionRegistry& regions, Counters& counters,
                                                 const MemoryDomains& domains, int lane_index,
                                                 std::shared_ptr<cuda::StagingPool> staging,
                                                 NotificationBox& notifications);

}  // namespace orbite::p2p
