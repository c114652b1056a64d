// A framed, nonblocking TCP connection: frames queued by the owner leave in gathered sendmsg
// calls straight from the caller's buffers; arriving frames are staged in a receive buffer, and
// large payloads are read straight into the destination the owner's sink names. The control
// channel's connection and the tcp transport's data streams are both FramedSockets; what the
// frames mean is their owner's business.
#pragma once

#include <orbite/config.h>

#include <deque>
#include <string>
#include <vector>

#include "common/net.h"
#include "p2p/peer.h"
#include "p2p/poller.h"

namespace orbite::p2p {

class FramedSocket;

class StreamOwner {
 public:
  virtual ~StreamOwner() = default;
  virtual Result<detail::Sink> stream_frame_begins(FramedSocket& s, const FrameHeader& h) = 0;
  virtual void stream_frame_ends(FramedSocket& s, const FrameHeader& h, detail::Sink& sink,
                                 std::string&& body) = 0;
  virtual void stream_written(FramedSocket& s, detail::SendItem& item) = 0;
  // The connection failed (reset, closed, a malformed header): the owner retires the socket.
  virtual void stream_failed(FramedSocket& s, const Status& why) = 0;
  virtual std::string take_buffer() = 0;
  virtual void give_buffer(std::string&& buffer) = 0;
};

// Socket options from the tcp configuration (nodelay, keepalive from peer_timeout, user
// timeout, buffer sizes); every setsockopt is checked.
Status tune_socket(int fd, const TcpConfig& tcp);
// A nonblocking, tuned socket with its connect to `address` (IPv4 host:port) under way.
Result<net::Fd> start_connect(const std::string& address, const TcpConfig& tcp);
// The pending error of a nonblocking connect (0 when it succeeded).
Result<int> connect_result(int fd);

class FramedSocket final : public Watcher {
 public:
  // Lifetime: owned by its owner (a PeerLink's control slot, a tcp endpoint's stream list); when
  // retired mid-pass it goes to the poller's graveyard and is destroyed at the end of the pass.
  FramedSocket(Poller& poller, StreamOwner& owner, net::Fd fd, bool connecting,
               detail::PeerLink* link, std::uint32_t index);
  ~FramedSocket() override;
  FramedSocket(const FramedSocket&) = delete;
  FramedSocket& operator=(const FramedSocket&) = delete;

  // Puts the fd in the poller's set; `hot`: the hot path reads it directly (see Poller).
  Status watch(bool hot = true);
  // Leaves reading to epoll from now on (a control connection past its handshake).
  void cool() { poller_.set_stream(fd_.get(), false); }
  // Queues a frame (header encoded here); it leaves when the pass ends.
  void queue(detail::SendItem item);
  // Writes now what it can; the rest waits for EPOLLOUT.
  void write_out();
  void flush() override;
  void on_ready(std::uint32_t events) override;
  // Removes the fd from the poller and closes it; queued frames' pins are released.
  void close();
  // Best effort, never blocking: a Bye when no frame is half written.
  void send_bye();

  [[nodiscard]] bool open() const { return fd_.valid(); }
  [[nodiscard]] bool connecting() const { return connecting_; }
  [[nodiscard]] bool busy() const { return !out_.empty() || in_payload_; }
  [[nodiscard]] int fd() const { return fd_.get(); }

  detail::PeerLink* const link;
  const std::uint32_t index;
  bool handshaken = false;

 private:
  void read();
  void fail(const Status& why);
  void set_write(bool want);

  Poller& poller_;
  StreamOwner& owner_;
  net::Fd fd_;
  bool connecting_ = false;  // nonblocking connect in progress
  bool want_write_ = false;
  bool dirty_ = false;  // queued output not yet offered to the socket
  std::deque<detail::SendItem> out_;
  // Receive side: a staging buffer for headers and small payloads.
  std::vector<std::byte> rx_ = std::vector<std::byte>(256 * 1024);
  std::size_t rx_begin_ = 0;
  std::size_t rx_end_ = 0;
  bool in_payload_ = false;
  FrameHeader cur_;
  std::uint64_t got_ = 0;
  detail::Sink sink_;
  std::string buf_;
  std::uint64_t last_payload_ = 0;  // of the previous frame: picks how much to read ahead
};

}  // namespace orbite::p2p
