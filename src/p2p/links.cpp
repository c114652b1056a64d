// The life of a peer link on its lane: creation, the handshake's transport offers, establishment,
// failure and shutdown, and the lane's passes over the control channel and the transports.
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/log.h"
#include "p2p/protocol.h"
#include "p2p/transports.h"

namespace orbite::p2p {

using detail::PeerLink;
using Clock = std::chrono::steady_clock;

namespace {
constexpr std::size_t kMaxSpareBuffer = 1 << 20;
constexpr std::size_t kMaxSpareBuffers = 256;

}  // namespace

// Drains the lane's eventfd: its only job is to end the worker's epoll_wait.
class Protocol::WakeWatch final : public Watcher {
 public:
  explicit WakeWatch(int fd) : fd_(fd) {}
  void on_ready(std::uint32_t) override {
    std::uint64_t drained = 0;
    if (::read(fd_, &drained, sizeof(drained)) < 0 && errno != EAGAIN) {
      ORBITE_LOG(Error, Proxy) << "read(eventfd) of the lane's wake-up failed: "
                               << std::strerror(errno);
    }
  }

 private:
  int fd_;
};

Protocol::Protocol(const EngineConfig& config, const detail::Identity& self,
                   RegionRegistry& regions, Counters& counters, const MemoryDomains& domains,
                   int lane_index, std::shared_ptr<cuda::StagingPool> staging,
                   NotificationBox& notifications)
    : config_(config),
      self_(self),
      regions_(regions),
      counters_(counters),
      domains_(domains),
      notifications_(notifications),
      lane_index_(lane_index),
      staging_(std::move(staging)) {}

Protocol::~Protocol() {
  shutdown(Status::error(Errc::Cancelled, "the engine closed"));
  links_.clear();
  dead_endpoints_.clear();
  poller_.end_pass();
}

Status Protocol::init() {
  ORBITE_RETURN_IF_ERROR(poller_.init());
  control_ = std::make_unique<ControlPlane>(config_, self_, poller_, *this, counters_);
  const LaneParts parts{config_, self_, poller_, *this, *control_, regions_};
  ORBITE_ASSIGN_OR_RETURN(transports_, make_lane_transports(parts, domains_));
  return {};
}

AcceptedConnection::AcceptedConnection(std::unique_ptr<Accepted> accepted)
    : accepted_(std::move(accepted)) {}
AcceptedConnection::AcceptedConnection(AcceptedConnection&&) noexcept = default;
AcceptedConnection& AcceptedConnection::operator=(AcceptedConnection&&) noexcept = default;
AcceptedConnection::~AcceptedConnection() = default;
const std::string& AcceptedConnection::peer_id() const {
  return accepted_->hello.engine_id;
}
std::unique_ptr<Accepted> AcceptedConnection::take() {
  return std::move(accepted_);
}

std::unique_ptr<LaneProtocol> make_lane_protocol(const EngineConfig& config,
                                                 const detail::Identity& self,
                                                 RegionRegistry& regions, Counters& counters,
                                                 const MemoryDomains& domains, int lane_index,
                                                 std::shared_ptr<cuda::StagingPool> staging,
                                                 NotificationBox& notifications) {
  return std::make_unique<Protocol>(config, self, regions, counters, domains, lane_index,
                                    std::move(staging), notifications);
}

Status Protocol::set_listener(int fd, std::function<void(AcceptedConnection)> route) {
  return control_->set_listener(fd, [route = std::move(route)](Accepted a) {
    route(AcceptedConnection(std::make_unique<Accepted>(std::move(a))));
  });
}

void Protocol::adopt(AcceptedConnection accepted) {
  if (auto a = accepted.take()) control_->adopt(std::move(*a));
}

Status Protocol::set_wake_fd(int fd) {
  wake_ = std::make_unique<WakeWatch>(fd);
  return poller_.add(fd, EPOLLIN, wake_.get());
}

PeerLink& Protocol::link_for(const detail::Endpoint& ep) {
  auto it = links_.find(ep.id);
  if (it != links_.end()) {
    if (it->second->ep.address.empty()) it->second->ep.address = ep.address;
    return *it->second;
  }
  auto link = std::make_unique<PeerLink>();
  link->ep = ep;
  link->is_self = ep.id == self_.id;
  link->same_host = ep.host_id == self_.host_id;
  PeerLink& ref = *link;
  links_[ep.id] = std::move(link);
  if (ref.is_self) {
    // A rank talking to itself needs no handshake: the loopback endpoint is up at once.
    Status st = Status::error(Errc::Unavailable, "no transport reaches this engine itself");
    for (auto& t : transports_) {
      if (t && (t->caps().reach & kReachSelf) != 0) st = t->open_self(ref);
      if (st.ok()) break;
    }
    if (!st.ok()) {
      fail_link(ref, st, false);
      return ref;
    }
    ref.credit = ref.credit_window = config_.eager_credit_bytes;
    ref.state = PeerLink::State::Established;
  }
  return ref;
}

std::vector<ConnectBlob> Protocol::offers(PeerLink& link) {
  std::vector<ConnectBlob> out;
  for (auto& t : transports_) {
    if (!t) continue;
    if (auto blob = t->offer(link)) out.push_back(ConnectBlob{t->caps().id, std::move(*blob)});
  }
  return out;
}

std::vector<ConnectBlob> Protocol::accept_offers(PeerLink& link, const Handshake& peer) {
  std::vector<ConnectBlob> out;
  for (const ConnectBlob& offered : peer.transports) {
    LaneTransport* t = transport(offered.id);
    if (t == nullptr) continue;  // not built here: the peer goes on without it
    auto mine = t->accept(link, offered.blob);
    if (mine.ok()) {
      out.push_back(ConnectBlob{offered.id, std::move(*mine)});
    } else {
      ORBITE_LOG(Debug, Proxy) << "peer " << short_id(link.ep.id) << ": "
                               << transport_name(offered.id)
                               << " declined: " << mine.status().message();
    }
  }
  return out;
}

void Protocol::decline_offers(PeerLink& link, const Handshake& peer) {
  for (const ConnectBlob& offered : peer.transports) {
    if (LaneTransport* t = transport(offered.id)) t->decline(link, offered.blob);
  }
}

Status Protocol::complete_offers(PeerLink& link, const Handshake& peer) {
  for (auto& t : transports_) {
    if (!t) continue;
    const ConnectBlob* answer = peer.find(t->caps().id);
    ORBITE_RETURN_IF_ERROR(
        t->complete(link, answer ? std::optional<std::string_view>(answer->blob) : std::nullopt));
  }
  return {};
}

Status Protocol::adopt_join(PeerLink& link, net::Fd fd, const Handshake& hello) {
  LaneTransport* t = transport(*hello.join);
  if (t == nullptr) {
    return Status::error(Errc::Protocol, std::string("peer joined transport ") +
                                             transport_name(*hello.join) +
                                             ", which this engine does not have");
  }
  return t->adopt_connection(link, fd.release(), hello.join_index);
}

void Protocol::transport_control(PeerLink& link, const FrameHeader& h, std::string_view body) {
  LaneTransport* t = h.a < kTransportCount ? transport(static_cast<TransportId>(h.a)) : nullptr;
  if (t == nullptr) {
    return protocol_error(link, "TransportControl for transport " + std::to_string(h.a) +
                                    ", which this engine does not have");
  }
  if (link.state != PeerLink::State::Established) return;
  if (Status st = t->on_control(link, h.b, body); !st.ok()) protocol_error(link, st.message());
}

void Protocol::established(PeerLink& link, const Handshake& peer) {
  link.state = PeerLink::State::Established;
  link.host_routes = {};
  link.rma_routes = {};
  link.connect_deadline.reset();
  link.ep.pid = peer.pid;
  link.credit = peer.eager_credit;
  link.credit_window = config_.eager_credit_bytes;
  bump(counters_.peers_connected);
  std::string routes;
  for (const auto& ep : link.endpoints) {
    if (ep) routes += std::string(routes.empty() ? "" : ", ") + transport_name(ep->id());
  }
  ORBITE_LOG(Debug, Tcp) << "connected to peer " << short_id(link.ep.id) << " (pid " << peer.pid
                         << ") with " << (routes.empty() ? "no transport" : routes);
  auto waiting = std::move(link.waiting);
  link.waiting.clear();
  for (auto& req : waiting) issue(link, req);
}

void Protocol::endpoint_failed(PeerLink& link, const Status& why) {
  fail_link(link, why, false);
}

void Protocol::protocol_error(PeerLink& link, const std::string& what) {
  bump(counters_.protocol_errors);
  ORBITE_LOG(Error, Tcp) << "protocol error from peer " << short_id(link.ep.id) << " (pid "
                         << link.ep.pid << "): " << what << "; closing its connection";
  fail_link(link, Status::error(Errc::Protocol, "protocol error: " + what), false);
}

void Protocol::fail_link(PeerLink& link, const Status& why, bool orderly) {
  if (link.state == PeerLink::State::Failed) return;
  const bool was_up = link.state == PeerLink::State::Established;
  orderly = orderly || link.peer_closing;
  link.state = PeerLink::State::Failed;
  link.host_routes = {};
  link.rma_routes = {};
  link.failure = link.peer_closing
                     ? Status::error(Errc::ConnectionLost,
                                     "the peer closed its engine (" + why.message() + ")")
                     : why;
  if (was_up && !orderly) bump(counters_.peers_lost);
  if (orderly) {
    ORBITE_LOG(Debug, Tcp) << "connection to peer " << short_id(link.ep.id) << " (pid "
                           << link.ep.pid << ") closed: " << link.failure.message();
  } else {
    ORBITE_LOG(Warn, Tcp) << "peer " << short_id(link.ep.id) << " (pid " << link.ep.pid
                          << ") lost: " << why.message();
  }
  if (link.control) {
    link.control->close();
    poller_.retire(std::move(link.control));
  }
  for (auto& t : transports_) {
    if (t) t->forget(link);
  }
  // Parked, not destroyed: a transport call may be on the stack below this one.
  for (auto& ep : link.endpoints) {
    if (!ep) continue;
    ep->close(false);
    dead_endpoints_.push_back(std::move(ep));
  }
  // A local close cancels; anything else is the peer's connection being lost.
  const Errc code = why.code() == Errc::Cancelled ? Errc::Cancelled : Errc::ConnectionLost;
  Status lost = Status::error(code, "peer " + short_id(link.ep.id) + " (pid " +
                                        std::to_string(link.ep.pid) + "): " + why.message());
  fail_inflight_of(link, lost);
  fail_staged_of(link, lost);
  fail_windows_of(link);
}

void Protocol::check_connect_deadlines() {
  const auto now = Clock::now();
  for (auto& [id, link] : links_) {
    if (link->connect_deadline && now > *link->connect_deadline &&
        (link->state == PeerLink::State::Connecting ||
         link->state == PeerLink::State::AwaitingPeer)) {
      fail_link(
          *link,
          Status::error(Errc::Timeout,
                        "no connection to " + link->ep.address + " within " +
                            std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                               config_.tcp.connect_timeout)
                                               .count()) +
                            " ms (tcp.connect_timeout)"),
          false);
    }
  }
}

void Protocol::peer_closed(PeerLink& link, const Status& why) {
  // Its end of stream would be reported again every pass: the control connection goes now.
  if (link.control) {
    link.control->close();
    poller_.retire(std::move(link.control));
  }
  closing_.push_back(Closing{link.ep.id, why, Deadline::after(kOrderlyCloseGrace),
                             Deadline::after(kOrderlyCloseBound)});
}

int Protocol::progress(bool sockets) {
  int work = 0;
  // Closes whose grace had passed before this pass's transports were polled, and whose peer's
  // Byes on the other transports had arrived (or their bound passed), fail after them.
  for (Closing& c : closing_) {
    c.due = c.grace.expired() && (c.bound.expired() || !awaits_frames(c.peer_id));
  }
  for (auto& t : transports_) {
    if (t) work += t->progress();
  }
  for (std::size_t i = 0; i < closing_.size();) {
    if (!closing_[i].due) {
      ++i;
      continue;
    }
    Closing c = std::move(closing_[i]);
    closing_.erase(closing_.begin() + static_cast<std::ptrdiff_t>(i));
    if (auto it = links_.find(c.peer_id); it != links_.end()) fail_link(*it->second, c.why, true);
    ++work;
  }
  if (!staged_ops_.empty() || !draining_windows_.empty() || !withdrawn_.empty() ||
      open_windows_ > 0) {
    work += progress_staged();
    release_withdrawn();
  }
  // Sockets are polled every pass while they are busy (output pending, or input seen lately);
  // otherwise the lane polls them every Nth pass, sparing shared-memory traffic the syscalls.
  polled_sockets_ = sockets || quiet_polls_ < 64 || poller_.writers() > 0 || control_->busy();
  if (polled_sockets_) {
    const auto before = poller_.activity;
    if (!sockets && poller_.writers() == 0 && poller_.streams() <= 4 && !control_->busy()) {
      // Few sockets and a hot path: one recv() per socket finds data without epoll's syscall.
      poller_.read_streams();
    } else {
      poller_.poll();
      work += control_->progress();
    }
    if (poller_.activity != before) {
      ++work;
      quiet_polls_ = 0;
    } else {
      ++quiet_polls_;
    }
    check_connect_deadlines();
  }
  poller_.flush_deferred();
  dead_endpoints_.clear();
  poller_.end_pass();
  // A link left closing keeps the lane awake for the pass that fails it.
  return work + static_cast<int>(closing_.size());
}

bool Protocol::prepare_sleep() {
  std::size_t armed = 0;
  for (; armed < transports_.size(); ++armed) {
    if (transports_[armed] && !transports_[armed]->prepare_sleep()) break;
  }
  if (armed == transports_.size()) return true;
  for (std::size_t i = 0; i < armed; ++i) {
    if (transports_[i]) transports_[i]->end_sleep();
  }
  return false;
}

void Protocol::end_sleep() {
  for (auto& t : transports_) {
    if (t) t->end_sleep();
  }
}

bool Protocol::copies_pending() const {
  return !staged_ops_.empty() || !draining_windows_.empty() || !withdrawn_.empty() ||
         open_windows_ > 0;
}

int Protocol::next_timer_ms() const {
  int soonest = -1;
  for (const auto& t : transports_) {
    const int ms = t ? t->next_timer_ms() : -1;
    if (ms >= 0 && (soonest < 0 || ms < soonest)) soonest = ms;
  }
  return soonest;
}

bool Protocol::busy() const {
  if (control_->busy()) return true;
  // Staged transfers and windows wait for copies no fd announces: keep passing.
  if (!staged_ops_.empty() || !draining_windows_.empty() || !withdrawn_.empty()) return true;
  for (const auto& t : transports_) {
    if (t && t->busy()) return true;
  }
  if (std::any_of(wildcards_.begin(), wildcards_.end(), [](const AnySource& w) {
        return !w.recv->passive && !w.recv->claimed.load(std::memory_order_acquire);
      })) {
    return true;
  }
  for (const auto& [id, link] : links_) {
    if (!link->inflight.empty() || !link->sessions.empty() || !link->waiting.empty() ||
        !link->windows.empty() ||
        std::any_of(link->posted.begin(), link->posted.end(),
                    [](const auto& r) { return !r->passive; }) ||
        link->state == PeerLink::State::Connecting ||
        link->state == PeerLink::State::AwaitingPeer) {
      return true;
    }
    if (link->control && link->control->busy()) return true;
    for (const auto& ep : link->endpoints) {
      if (ep && ep->busy()) return true;
    }
  }
  return false;
}

bool Protocol::awaits_frames(const std::string& peer_id) const {
  const auto it = links_.find(peer_id);
  if (it == links_.end()) return false;
  for (const auto& t : transports_) {
    if (t && t->expects_frames(*it->second)) return true;
  }
  return false;
}

void Protocol::send_farewells() {
  const Deadline bound = Deadline::after(kFarewellBound);
  auto busy = [this] {
    for (const auto& [id, link] : links_) {
      if (link->state != PeerLink::State::Established) continue;
      for (const auto& ep : link->endpoints) {
        if (ep && ep->busy()) return true;
      }
    }
    return false;
  };
  // The engine's threads are stopped: this is the lane's only driver now.
  while (busy() && !bound.expired()) progress(true);
}

void Protocol::shutdown(const Status& why) {
  // Best effort: tell the peer the end of stream is orderly, on every connection it reads (an
  // RDMA endpoint queues a Bye on its message QP after its last frame, which must leave before
  // the QPs go).
  for (auto& [id, link] : links_) {
    if (link->state != PeerLink::State::Established) continue;
    if (control_) control_->say_bye(*link);
    for (auto& ep : link->endpoints) {
      if (ep) ep->close(true);
    }
  }
  send_farewells();
  for (auto& [id, link] : links_) fail_link(*link, why, true);
  fail_any_source(why);
  if (control_) control_->shutdown();
  for (auto& t : transports_) {
    if (t) t->shutdown(why);
  }
  dead_endpoints_.clear();
  poller_.end_pass();
}

std::string Protocol::take_buffer() {
  if (spare_buffers_.empty()) return {};
  std::string out = std::move(spare_buffers_.back());
  spare_buffers_.pop_back();
  return out;
}

void Protocol::give_buffer(std::string&& buffer) {
  // Payload buffers are recycled: allocating and freeing them per message lets malloc trim and
  // regrow its heap, and every regrown page is a page fault.
  if (buffer.capacity() == 0 || buffer.capacity() > kMaxSpareBuffer ||
      spare_buffers_.size() >= kMaxSpareBuffers) {
    return;
  }
  buffer.clear();
  spare_buffers_.push_back(std::move(buffer));
}

}  // namespace orbite::p2p
