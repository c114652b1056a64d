// Moving frames: gathered writes from the caller's buffers onto TCP streams, reads that land
// large payloads straight in their destination, and the shared-memory rings.
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#include <algorithm>

#include <cerrno>
#include <cstring>

#include "common/log.h"
#include "p2p/transports.h"

namespace orbite::p2p {

using detail::PeerLink;
using detail::SendItem;
using detail::TcpStream;

namespace {
constexpr int kMaxIov = 64;
constexpr std::size_t kDirectReadMin = 32 * 1024;
constexpr int kRingBudget = 64;
constexpr std::size_t kMaxSpareBuffer = 1 << 20;
constexpr std::size_t kMaxSpareBuffers = 256;
}  // namespace

void Transports::queue(Link& link, Channel ch, SendItem item, std::size_t stream) {
  if (ch == Channel::Ring) {
    if (link.ring_out.empty() && link.tx_ring != nullptr) {
      iovec iov[2];
      int n = 0;
      if (!item.owned.empty()) iov[n++] = {item.owned.data(), item.owned.size()};
      if (item.data_len != 0) iov[n++] = {const_cast<std::byte*>(item.data), item.data_len};
      if (link.tx_ring->try_push(item.header, std::span<const iovec>(iov, n))) {
        on_item_written(item);
        ring_doorbell(link);
        return;
      }
    }
    link.ring_out.push_back(std::move(item));
    return;
  }
  if (stream >= link.streams.size() || !link.streams[stream]) stream = 0;
  if (link.streams.empty()) {
    if (item.pinned != nullptr) item.pinned->unpin();
    return;
  }
  TcpStream& s = *link.streams[stream];
  encode_header(item.header, item.encoded.data());
  s.out.push_back(std::move(item));
  // Written at the end of the pass (flush_dirty): frames queued together leave in one sendmsg.
  if (!s.dirty) {
    s.dirty = true;
    dirty_.push_back(&s);
  }
}

void Transports::on_item_written(SendItem& item) {
  counters_.bytes_sent += item.data_len;
  if (item.pinned != nullptr) {
    item.pinned->unpin();
    item.pinned = nullptr;
  }
  if (!item.req || item.on_written == SendItem::Nothing) return;
  Req& req = *item.req;
  if (req.phase.load() != 0) return;
  if (item.on_written == SendItem::FinishEager) {
    req.bytes_done.store(req.length);
    if (req.lane_link != nullptr) req.lane_link->inflight.erase(req.id);
    finish_request(req, {}, counters_);
  } else if (item.on_written == SendItem::SendProgress && req.lane_link != nullptr) {
    add_received(*req.lane_link, req.id, item.data_len);
  }
}

void Transports::flush_dirty() {
  // flush_stream may fail a link, which retires its streams (unlisting them here).
  while (!dirty_.empty()) {
    TcpStream* s = dirty_.back();
    dirty_.pop_back();
    s->dirty = false;
    if (s->fd.valid() && !s->connecting && s->link->state != PeerLink::State::Failed) {
      flush_stream(*s->link, *s);
    }
  }
}

void Transports::flush_stream(Link& link, TcpStream& s) {
  while (!s.out.empty()) {
    iovec iov[kMaxIov];
    int n = 0;
    for (auto it = s.out.begin(); it != s.out.end() && n + 3 <= kMaxIov; ++it) {
      std::uint64_t skip = it->written;
      auto add = [&](const void* p, std::uint64_t len) {
        if (skip >= len) {
          skip -= len;
          return;
        }
        iov[n++] = {const_cast<char*>(static_cast<const char*>(p)) + skip, len - skip};
        skip = 0;
      };
      add(it->encoded.data(), kFrameHeaderBytes);
      if (!it->owned.empty()) add(it->owned.data(), it->owned.size());
      if (it->data_len != 0) add(it->data, it->data_len);
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<std::size_t>(n);
    ssize_t w = ::sendmsg(s.fd.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      fail_link(link, Status::error(Errc::ConnectionLost,
                                    std::string("send failed: ") + std::strerror(errno)));
      return;
    }
    auto left = static_cast<std::uint64_t>(w);
    while (left > 0 && !s.out.empty()) {
      SendItem& front = s.out.front();
      std::uint64_t need = front.total() - front.written;
      if (left >= need) {
        left -= need;
        SendItem done = std::move(front);
        s.out.pop_front();
        on_item_written(done);
        if (link.state == PeerLink::State::Failed) return;
      } else {
        front.written += left;
        left = 0;
      }
    }
  }
  const bool want = !s.out.empty() || s.connecting;
  if (want != s.want_write) watch(s, want);
}

void Transports::read_stream(Link& link, TcpStream& s) {
  // A short read means the socket is (very likely) empty: stop there instead of paying one more
  // recv() for EAGAIN. Level-triggered epoll reports anything that arrives later.
  bool drained = false;
  for (;;) {
    // A handler may have failed the link or retired this stream (a lost connection race).
    if (link.state == PeerLink::State::Failed || !s.fd.valid()) return;
    if (s.in_payload) {
      const std::uint64_t remaining = s.cur.payload_len - s.got;
      const std::uint64_t staged = s.rx_end - s.rx_begin;
      const std::uint64_t take = std::min<std::uint64_t>(staged, remaining);
      if (take > 0) {
        if (s.sink.kind == Sink::Direct) {
          std::memcpy(s.sink.dst + s.got, s.rx.data() + s.rx_begin, take);
        } else if (s.sink.kind == Sink::Buffer) {
          s.buf.append(reinterpret_cast<const char*>(s.rx.data() + s.rx_begin), take);
        }
        s.rx_begin += take;
        s.got += take;
      }
      if (s.got == s.cur.payload_len) {
        s.in_payload = false;
        s.last_payload = s.cur.payload_len;
        std::string body = std::move(s.buf);
        s.buf = take_buffer();
        if (!s.handshaken) {
          on_hello_reply(link, s, s.cur, std::move(body));
        } else {
          end_frame(link, s.cur, Channel::Tcp, s.sink, std::move(body));
        }
        give_buffer(std::move(body));
        continue;
      }
      if (s.sink.kind == Sink::Direct && remaining - take >= kDirectReadMin) {
        if (drained) return;
        ssize_t n = ::recv(s.fd.get(), s.sink.dst + s.got, remaining - take, MSG_DONTWAIT);
        if (n > 0) {
          drained = static_cast<std::uint64_t>(n) < remaining - take;
          s.got += static_cast<std::uint64_t>(n);
          counters_.bytes_received += static_cast<std::uint64_t>(n);
          continue;
        }
        if (n == 0) {
          return fail_link(link, Status::error(Errc::ConnectionLost,
                                               "the peer closed the "
                                               "connection mid-frame"));
        }
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        return fail_link(link, Status::error(Errc::ConnectionLost,
                                             std::string("recv failed: ") + std::strerror(errno)));
      }
    } else if (s.rx_end - s.rx_begin >= kFrameHeaderBytes) {
      auto h = decode_header(s.rx.data() + s.rx_begin);
      if (!h.ok()) return protocol_error(link, h.status().message());
      s.rx_begin += kFrameHeaderBytes;
      s.cur = *h;
      s.got = 0;
      s.buf.clear();
      if (!s.handshaken) {
        if (h->type != FrameType::HelloAck && h->type != FrameType::HelloNack) {
          return protocol_error(
              link, std::string("expected a handshake reply, got ") + frame_type_name(h->type));
        }
        s.sink = Sink{};
      } else {
        auto sink = begin_frame(link, *h, Channel::Tcp);
        if (!sink.ok()) return protocol_error(link, sink.status().message());
        if (link.state == PeerLink::State::Failed) return;
        s.sink = *sink;
      }
      s.in_payload = true;
      quiet_polls_ = 0;
      continue;
    }
    // Refill the staging buffer.
    if (s.rx_begin > 0 && s.rx_begin == s.rx_end) s.rx_begin = s.rx_end = 0;
    if (s.rx_end == s.rx.size()) {
      std::memmove(s.rx.data(), s.rx.data() + s.rx_begin, s.rx_end - s.rx_begin);
      s.rx_end -= s.rx_begin;
      s.rx_begin = 0;
    }
    if (drained) return;
    std::size_t room = s.rx.size() - s.rx_end;
    if (!s.in_payload && s.last_payload >= kDirectReadMin) {
      // After a large frame another is likely: read just its header, so that its payload goes
      // straight to its destination instead of through the staging buffer.
      room = std::min(room, kFrameHeaderBytes - (s.rx_end - s.rx_begin));
    }
    ssize_t n = ::recv(s.fd.get(), s.rx.data() + s.rx_end, room, MSG_DONTWAIT);
    if (n > 0) {
      drained = static_cast<std::size_t>(n) < room;
      s.rx_end += static_cast<std::size_t>(n);
      counters_.bytes_received += static_cast<std::uint64_t>(n);
      continue;
    }
    if (n == 0) {
      return fail_link(link, Status::error(Errc::ConnectionLost, "the peer closed the connection"));
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return;
    return fail_link(link, Status::error(Errc::ConnectionLost,
                                         std::string("recv failed: ") + std::strerror(errno)));
  }
}

int Transports::poll_ring(Link& link) {
  int work = 0;
  while (work < kRingBudget && link.rx && link.state == PeerLink::State::Established) {
    ShmRing& ring = *link.rx;
    const std::byte* p = ring.peek();
    if (p == nullptr) {
      if (!ring.corrupt().empty()) protocol_error(link, ring.corrupt());
      break;
    }
    auto h = decode_header(p);
    if (!h.ok()) {
      protocol_error(link, h.status().message());
      break;
    }
    if (kFrameHeaderBytes + h->payload_len > ring.current_frame_room()) {
      protocol_error(link, "ring frame payload exceeds its record");
      break;
    }
    auto sink = begin_frame(link, *h, Channel::Ring);
    if (!sink.ok()) {
      protocol_error(link, sink.status().message());
      break;
    }
    if (link.state != PeerLink::State::Established) break;
    const std::byte* payload = p + kFrameHeaderBytes;
    std::string body;
    if (sink->kind == Sink::Direct && h->payload_len > 0) {
      std::memcpy(sink->dst, payload, h->payload_len);
    } else if (sink->kind == Sink::Buffer && h->payload_len > 0) {
      body = take_buffer();
      body.assign(reinterpret_cast<const char*>(payload), h->payload_len);
    }
    counters_.bytes_received += h->payload_len;
    // Retire the record before handling it: handlers may push into the self link's ring.
    ring.pop();
    end_frame(link, *h, Channel::Ring, *sink, std::move(body));
    give_buffer(std::move(body));
    ++work;
  }
  return work;
}

std::string Transports::take_buffer() {
  if (spare_buffers_.empty()) return {};
  std::string out = std::move(spare_buffers_.back());
  spare_buffers_.pop_back();
  return out;
}

void Transports::give_buffer(std::string&& buffer) {
  // Payload buffers are recycled: allocating and freeing them per message lets malloc trim and
  // regrow its heap, and every regrown page is a page fault.
  if (buffer.capacity() == 0 || buffer.capacity() > kMaxSpareBuffer ||
      spare_buffers_.size() >= kMaxSpareBuffers) {
    return;
  }
  buffer.clear();
  spare_buffers_.push_back(std::move(buffer));
}

int Transports::flush_ring(Link& link) {
  int work = 0;
  while (!link.ring_out.empty() && link.tx_ring != nullptr) {
    SendItem& item = link.ring_out.front();
    iovec iov[2];
    int n = 0;
    if (!item.owned.empty()) iov[n++] = {item.owned.data(), item.owned.size()};
    if (item.data_len != 0) iov[n++] = {const_cast<std::byte*>(item.data), item.data_len};
    if (!link.tx_ring->try_push(item.header, std::span<const iovec>(iov, n))) break;
    SendItem done = std::move(item);
    link.ring_out.pop_front();
    on_item_written(done);
    ++work;
  }
  if (work > 0) ring_doorbell(link);
  return work;
}

void Transports::ring_doorbell(Link& link) {
  if (link.is_self || link.tx_ring == nullptr || link.streams.empty()) return;
  if (!link.tx_ring->take_doorbell_request()) return;
  SendItem item;
  item.header.type = FrameType::Doorbell;
  queue(link, Channel::Tcp, std::move(item), 0);
}

void Transports::poll_sockets() {
  epoll_event evs[64];
  int n = ::epoll_wait(epfd_.get(), evs, 64, 0);
  bool accepts = false;
  for (int i = 0; i < n; ++i) {
    const int fd = evs[i].data.fd;
    if (fd == wake_fd_) {
      std::uint64_t drained = 0;
      [[maybe_unused]] auto r = ::read(fd, &drained, sizeof(drained));
      continue;
    }
    if (fd == listen_fd_) {
      accept_ready();
      accepts = true;
      continue;
    }
    auto it = stream_fds_.find(fd);
    if (it == stream_fds_.end()) {
      accepts = true;  // a pending accept
      continue;
    }
    TcpStream& s = *it->second;
    PeerLink& link = *s.link;
    if ((evs[i].events & EPOLLOUT) != 0 && s.connecting) {
      on_connected(link, s);
      if (link.state == PeerLink::State::Failed) continue;
    } else if ((evs[i].events & EPOLLOUT) != 0) {
      flush_stream(link, s);
      if (link.state == PeerLink::State::Failed) continue;
    }
    if ((evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) != 0 && !s.connecting) {
      read_stream(link, s);
    }
  }
  if (accepts || !pending_accepts_.empty()) poll_pending_accepts();
}

int Transports::progress(bool sockets) {
  int work = 0;
  for (std::size_t i = 0; i < ring_links_.size(); ++i) {
    Link& link = *ring_links_[i];
    if (!link.ring_out.empty()) work += flush_ring(link);
    work += poll_ring(link);
  }
  // Sockets are polled every pass while TCP is busy (output pending, or input seen lately);
  // otherwise the lane polls them every Nth pass, sparing shared-memory traffic the syscalls.
  if (sockets || quiet_polls_ < 64 || writers_ > 0) {
    const auto before = counters_.bytes_received.load(std::memory_order_relaxed);
    if (!sockets && writers_ == 0 && stream_fds_.size() <= 4) {
      // Few sockets and a hot path: one recv() per socket finds data without epoll's syscall.
      TcpStream* hot[4];
      std::size_t n = 0;
      for (auto& [fd, s] : stream_fds_) hot[n++] = s;
      for (std::size_t i = 0; i < n; ++i) {
        if (!hot[i]->connecting && hot[i]->fd.valid()) read_stream(*hot[i]->link, *hot[i]);
      }
    } else {
      poll_sockets();
    }
    if (counters_.bytes_received.load(std::memory_order_relaxed) != before) {
      ++work;
      quiet_polls_ = 0;
    } else {
      ++quiet_polls_;
    }
    check_connect_deadlines();
  }
  flush_dirty();
  graveyard_.clear();
  ring_graveyard_.clear();
  return work;
}

bool Transports::prepare_sleep() {
  for (std::size_t i = 0; i < ring_links_.size(); ++i) {
    if (!ring_links_[i]->rx || ring_links_[i]->is_self) continue;
    if (!ring_links_[i]->rx->prepare_sleep()) {
      for (std::size_t j = 0; j < i; ++j) {
        if (ring_links_[j]->rx) ring_links_[j]->rx->cancel_sleep();
      }
      return false;
    }
  }
  return true;
}

void Transports::end_sleep() {
  for (Link* link : ring_links_) {
    if (link->rx) link->rx->cancel_sleep();
  }
}

bool Transports::busy() const {
  if (!pending_accepts_.empty()) return true;
  for (const auto& [id, link] : links_) {
    if (!link->inflight.empty() || !link->sessions.empty() || !link->waiting.empty() ||
        std::any_of(link->posted.begin(), link->posted.end(),
                    [](const auto& r) { return !r->passive; }) ||
        !link->ring_out.empty() || link->state == PeerLink::State::Connecting ||
        link->state == PeerLink::State::AwaitingPeer) {
      return true;
    }
    for (const auto& s : link->streams) {
      if (s && (!s->out.empty() || s->in_payload)) return true;
    }
  }
  return false;
}

}  // namespace orbite::p2p
