// One lane's transports: the TCP streams and shared-memory rings of the peers assigned to the
// lane, the connection handshake, and the protocol that runs send/recv matching, rendezvous and
// put/get over them. Not thread-safe: the lane's mutex holder calls it.
#pragma once

#include <orbite/config.h>
#include <orbite/transfer.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/net.h"
#include "p2p/frame.h"
#include "p2p/registry.h"
#include "p2p/state.h"

namespace orbite::p2p {

using detail::Arrival;
using detail::Channel;
using detail::Sink;

struct Identity {
  std::string id;
  std::string address;
  std::string host_id;
  std::int64_t pid = 0;
};

struct Counters {
  std::atomic<std::uint64_t> submitted{0}, completed{0}, failed{0}, bytes_sent{0},
      bytes_received{0}, eager{0}, rendezvous{0}, single_copy_bytes{0}, peers_connected{0},
      peers_lost{0}, protocol_errors{0}, unexpected_bytes{0}, unexpected_peak{0}, idle_sleeps{0};
};

// A connection lane 0 accepted, with the Hello it carried, for the lane that owns the peer.
struct Accepted {
  net::Fd fd;
  Handshake hello;
};

// Completes a request (success when `status` is ok) and releases what it borrowed.
void finish_request(detail::RequestState& req, Status status, Counters& counters);

class Transports {
 public:
  Transports(const EngineConfig& config, const Identity& self, RegionRegistry& regions,
             Counters& counters, int lane_index);
  ~Transports();
  Transports(const Transports&) = delete;
  Transports& operator=(const Transports&) = delete;

  Status init();
  [[nodiscard]] int epoll_fd() const { return epfd_.get(); }
  // Lane 0 accepts; handshakes for peers of other lanes are routed to them.
  void set_listener(int fd, std::function<void(Accepted)> route);
  // The lane's wake-up eventfd: part of the epoll set so a sleeping worker wakes on submission.
  void set_wake_fd(int fd);
  void adopt(Accepted accepted);

  // Begins a request: connects if needed, then issues its first frames.
  void start(std::shared_ptr<detail::RequestState> req);
  // One pass over rings, outboxes and (when asked) sockets; returns how much work it did.
  int progress(bool poll_sockets);
  // Writes what requests queued on TCP streams since the last pass (one sendmsg per stream).
  void flush_dirty();
  // Raises the rings' doorbell requests before the worker sleeps; false if work arrived.
  bool prepare_sleep();
  void end_sleep();
  // Requests or sessions in flight, or connections being made.
  [[nodiscard]] bool busy() const;
  // Fails every request and closes every connection.
  void shutdown(const Status& why);

 private:
  using Link = detail::PeerLink;
  using Req = detail::RequestState;
  using ReqPtr = std::shared_ptr<detail::RequestState>;

  // connections (connect.cpp)
  Link& link_for(const detail::Endpoint& ep);
  void connect(Link& link);
  void on_connected(Link& link, detail::TcpStream& s);
  void on_hello_reply(Link& link, detail::TcpStream& s, const FrameHeader& h, std::string&& body);
  void accept_ready();
  void poll_pending_accepts();
  void establish(Link& link, const Handshake& peer);
  void fail_link(Link& link, const Status& why, bool orderly = false);
  void check_connect_deadlines();
  Status open_peer_ring(Link& link, const Handshake& peer);
  Result<std::string> create_own_ring(Link& link);

  // I/O (io.cpp)
  void queue(Link& link, Channel ch, detail::SendItem item, std::size_t stream = 0);
  void flush_stream(Link& link, detail::TcpStream& s);
  void read_stream(Link& link, detail::TcpStream& s);
  void on_item_written(detail::SendItem& item);
  int poll_ring(Link& link);
  int flush_ring(Link& link);
  void ring_doorbell(Link& link);
  void update_interest(Link& link, detail::TcpStream& s);
  void poll_sockets();

  // protocol (protocol.cpp: send/recv; frames.cpp: frame handlers, put/get)
  Channel pick_channel(const Link& link, const Req& req, Status& err) const;
  void issue(Link& link, const ReqPtr& req);
  void issue_send(Link& link, const ReqPtr& req);
  void issue_recv(Link& link, const ReqPtr& req);
  void issue_put_get(Link& link, const ReqPtr& req);
  Result<Sink> begin_frame(Link& link, const FrameHeader& h, Channel ch);
  void end_frame(Link& link, const FrameHeader& h, Channel ch, Sink& sink, std::string&& body);
  void deliver_arrival(Link& link, Arrival&& a);
  bool try_match_arrival(Link& link, Arrival& a);
  void match_rts(Link& link, const ReqPtr& recv, const Arrival& a);
  void consume_eager(Link& link, const ReqPtr& recv, Arrival& a);
  // Fails a receive too small for its message and tells the sender (Reject).
  void reject_truncated(Link& link, const ReqPtr& recv, const Arrival& a);
  std::string take_buffer();
  void give_buffer(std::string&& buffer);
  // Queues [data + base, data + base + len) as Data frames whose offsets start at base. False if
  // pin_each could not be pinned (the region was unregistered): the rest was not queued.
  bool send_data(Link& link, Channel ch, DataTarget target, std::uint64_t id, const std::byte* data,
                 std::uint64_t len, const ReqPtr& req, detail::RegionRecord* pin_each,
                 std::uint64_t base = 0);
  void issue_part(Link& link, const ReqPtr& req, const TransferRange& range, bool by_address);
  void send_control(Link& link, Channel ch, FrameType type, std::uint64_t id, std::uint64_t a,
                    std::uint64_t b = 0, std::uint64_t c = 0, std::uint64_t d = 0,
                    std::string payload = {});
  void return_credit(Link& link, std::uint64_t bytes, Channel ch);
  void on_put_or_get(Link& link, const FrameHeader& h, Channel ch, std::string_view body);
  void on_ack(Link& link, const FrameHeader& h, std::string_view body);
  void maybe_complete_part(Link& link, std::uint64_t wire_id);
  // Counts bytes of a request copied by either side; completes it when all are there.
  void add_received(Link& link, std::uint64_t id, std::uint64_t bytes, const Status& error = {});
  void fail_inflight_of(Link& link, const Status& why);
  std::uint64_t chunk_limit(const Link& link, Channel ch) const;
  [[nodiscard]] std::uint64_t eager_limit(Channel ch) const;
  void protocol_error(Link& link, const std::string& what);

  const EngineConfig& config_;
  Identity self_;
  RegionRegistry& regions_;
  Counters& counters_;
  int lane_index_;
  net::Fd epfd_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;
  std::function<void(Accepted)> route_;
  struct PendingAccept {
    net::Fd fd;
    std::vector<std::byte> bytes;
    std::chrono::steady_clock::time_point deadline;
  };
  std::vector<std::unique_ptr<PendingAccept>> pending_accepts_;
  std::unordered_map<std::string, std::unique_ptr<Link>> links_;
  std::vector<Link*> ring_links_;
  std::uint64_t next_wire_id_ = 1;
  std::uint64_t ring_seq_ = 0;
  std::unordered_map<int, detail::TcpStream*> stream_fds_;
  // Links and streams that failed during a pass; destroyed at its end, never mid-call.
  std::vector<std::unique_ptr<detail::TcpStream>> graveyard_;
  std::vector<std::unique_ptr<ShmRing>> ring_graveyard_;
  std::vector<std::string> spare_buffers_;
  std::vector<detail::TcpStream*> dirty_;
  int quiet_polls_ = 0;
  int writers_ = 0;  // streams waiting for EPOLLOUT: their output needs every pass
  void watch(detail::TcpStream& s, bool write);
  void unwatch(detail::TcpStream& s);
  void bury_stream(Link& link, std::size_t index);
};

}  // namespace orbite::p2p
