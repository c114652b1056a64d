// A lane's epoll set, shared by the control channel and the transports: each puts its fds here
// (listener, accepted sockets, streams, the wake-up eventfd) with the object that handles them.
// It also keeps two end-of-pass lists: output queued during a pass leaves at its end (so frames
// queued together leave in one sendmsg), and objects retired during a pass are destroyed at its
// end, never in the middle of a call that still uses them. Single-threaded: the lane's owner.
#pragma once

#include <orbite/status.h>

#include <sys/epoll.h>

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "common/net.h"

namespace orbite::p2p {

class Watcher {
 public:
  virtual ~Watcher() = default;
  // The fd is ready (EPOLLIN/EPOLLOUT/EPOLLHUP/EPOLLERR bits).
  virtual void on_ready(std::uint32_t events) = 0;
  // Deferred output (see Poller::defer_flush).
  virtual void flush() {}
};

class Poller {
 public:
  Status init();
  [[nodiscard]] int fd() const { return epfd_.get(); }

  // `stream`: a data socket that the hot path may read without epoll (see read_streams).
  Status add(int fd, std::uint32_t events, Watcher* w, bool stream = false);
  Status modify(int fd, std::uint32_t events);
  // Also used on fds already closed elsewhere: only the table entry matters then.
  void remove(int fd);
  // Whether the hot path reads `fd` directly (a data stream) or leaves it to epoll.
  void set_stream(int fd, bool stream);
  // Sockets with output waiting for EPOLLOUT: while any, every pass polls.
  void set_write_interest(int fd, bool want);
  [[nodiscard]] int writers() const { return writers_; }
  [[nodiscard]] std::size_t streams() const { return streams_; }

  // Polls (timeout 0) and dispatches; returns the number of ready fds.
  int poll();
  // One read attempt on every stream, without epoll_wait: cheaper with a few hot sockets.
  void read_streams();

  void defer_flush(Watcher* w);
  void cancel_flush(Watcher* w);
  void flush_deferred();
  void retire(std::unique_ptr<Watcher> w) { graveyard_.push_back(std::move(w)); }
  void end_pass() { graveyard_.clear(); }

  // Bumped by watchers whenever they read bytes: how a pass knows it did work.
  std::uint64_t activity = 0;

 private:
  struct Entry {
    Watcher* watcher = nullptr;
    std::uint32_t events = 0;
    bool stream = false;
    bool write = false;
  };
  net::Fd epfd_;
  std::unordered_map<int, Entry> entries_;
  std::vector<Watcher*> dirty_;
  std::vector<std::unique_ptr<Watcher>> graveyard_;
  int writers_ = 0;
  std::size_t streams_ = 0;
};

}  // namespace orbite::p2p
