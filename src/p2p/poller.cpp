#include "p2p/poller.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "common/log.h"

namespace orbite::p2p {

namespace {
Status epoll_error(const char* op, int fd) {
  return Status::error(Errc::ResourceExhausted, std::string("epoll_ctl(") + op + ", fd " +
                                                    std::to_string(fd) +
                                                    ") failed: " + std::strerror(errno));
}
}  // namespace

Status Poller::init() {
  epfd_ = net::Fd(::epoll_create1(EPOLL_CLOEXEC));
  if (!epfd_.valid()) {
    return Status::error(Errc::ResourceExhausted,
                         std::string("epoll_create1 failed: ") + std::strerror(errno));
  }
  return {};
}

Status Poller::add(int fd, std::uint32_t events, Watcher* w, bool stream) {
  epoll_event ev{};
  ev.events = events;
  ev.data.fd = fd;
  if (::epoll_ctl(epfd_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) return epoll_error("ADD", fd);
  entries_[fd] = Entry{w, events, stream, false};
  if (stream) ++streams_;
  return {};
}

Status Poller::modify(int fd, std::uint32_t events) {
  auto it = entries_.find(fd);
  if (it == entries_.end()) {
    return Status::error(Errc::Internal, "epoll: fd " + std::to_string(fd) + " is not watched");
  }
  if (it->second.events == events) return {};
  epoll_event ev{};
  ev.events = events;
  ev.data.fd = fd;
  if (::epoll_ctl(epfd_.get(), EPOLL_CTL_MOD, fd, &ev) != 0) return epoll_error("MOD", fd);
  it->second.events = events;
  return {};
}

void Poller::remove(int fd) {
  auto it = entries_.find(fd);
  if (it == entries_.end()) return;
  // A closed fd has left the set already (EBADF/ENOENT): nothing else to undo.
  (void)::epoll_ctl(epfd_.get(), EPOLL_CTL_DEL, fd, nullptr);
  if (it->second.write) --writers_;
  if (it->second.stream) --streams_;
  entries_.erase(it);
}

void Poller::set_stream(int fd, bool stream) {
  auto it = entries_.find(fd);
  if (it == entries_.end() || it->second.stream == stream) return;
  it->second.stream = stream;
  if (stream) {
    ++streams_;
  } else {
    --streams_;
  }
}

void Poller::set_write_interest(int fd, bool want) {
  auto it = entries_.find(fd);
  if (it == entries_.end() || it->second.write == want) return;
  it->second.write = want;
  writers_ += want ? 1 : -1;
}

int Poller::poll() {
  epoll_event evs[64];
  const int n = ::epoll_wait(epfd_.get(), evs, 64, 0);
  if (n < 0 && errno != EINTR) {
    // Not recoverable by retrying here; the next pass tries again, and the log says why.
    ORBITE_LOG(Error, Proxy) << "epoll_wait on a lane's set failed: " << std::strerror(errno);
  }
  for (int i = 0; i < n; ++i) {
    // Looked up per event: a handler earlier in the batch may have removed this fd.
    auto it = entries_.find(evs[i].data.fd);
    if (it != entries_.end()) it->second.watcher->on_ready(evs[i].events);
  }
  return std::max(n, 0);
}

void Poller::read_streams() {
  Watcher* hot[8];
  std::size_t n = 0;
  for (auto& [fd, e] : entries_) {
    if (e.stream && n < 8) hot[n++] = e.watcher;
  }
  // Reading may fail a link and retire watchers: they stay alive until end_pass().
  for (std::size_t i = 0; i < n; ++i) hot[i]->on_ready(EPOLLIN);
}

void Poller::defer_flush(Watcher* w) {
  dirty_.push_back(w);
}

void Poller::cancel_flush(Watcher* w) {
  std::erase(dirty_, w);
}

void Poller::flush_deferred() {
  // A flush may fail a link, which cancels its other sockets' entries here.
  while (!dirty_.empty()) {
    Watcher* w = dirty_.back();
    dirty_.pop_back();
    w->flush();
  }
}

}  // namespace orbite::p2p
