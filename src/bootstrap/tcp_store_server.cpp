// The TCP store server: one thread running an epoll loop over nonblocking sockets. Waiting
// requests (get/wait) are parked as waiters and answered when their keys appear or their
// deadline passes, so a slow client never blocks the others.
#include <netdb.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <list>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include <orbite/store.h>

#include "bootstrap/kv_table.h"
#include "bootstrap/store_protocol.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/net.h"
#include "common/strings.h"
#include "common/wire.h"

namespace orbite {

namespace sp = store_protocol;

namespace {

constexpr std::uint64_t kListenId = 0;
constexpr std::uint64_t kWakeId = 1;
constexpr std::uint64_t kFirstConnId = 2;
constexpr size_t kReadChunk = 64 * 1024;
constexpr int kReadsPerWakeup = 64;
// Requests (get/wait) one connection may have parked at once; a client of ours has one.
constexpr std::uint32_t kMaxParkedPerConnection = 1024;
// How long the listener rests after accept ran out of file descriptors: level-triggered, it
// would report the pending connection again at once and spin the server thread.
constexpr auto kAcceptPause = std::chrono::milliseconds(100);

bool constant_time_equal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return diff == 0;
}

struct Connection {
  net::Fd fd;
  std::string peer;
  std::string in;
  std::string out;
  size_t out_sent = 0;      // bytes of `out` already written
  bool want_write = false;  // EPOLLOUT is registered
  bool authenticated = false;
  bool close_after_flush = false;
  std::uint32_t parked = 0;  // waiters of this connection in Impl::waiters
  // Until the hello succeeds, the connection must complete one within the frame timeout.
  Clock::time_point accepted_at;
  // When the first byte of the frame now being received arrived (for the stall bound).
  std::optional<Clock::time_point> frame_started;
};

// A refused header's reason; before the hello, saying that the limit is the hello's.
std::string unauthenticated_reason(const Connection& c, const Status& refused) {
  if (c.authenticated) return std::string(refused.message());
  return std::string(refused.message()) + " (before its hello a connection may send only a hello)";
}

struct Waiter {
  std::uint64_t conn = 0;
  std::uint32_t request_id = 0;
  sp::Op op = sp::Op::Wait;
  std::vector<std::string> keys;
  Clock::time_point deadline;
  std::uint64_t timeout_ms = 0;
};

}  // namespace

struct TcpStoreServer::Impl {
  TcpStoreServerOptions options;
  net::Fd listen_fd;
  net::Fd epoll_fd;
  net::Fd wake_fd;
  std::string address;
  std::uint16_t port = 0;
  std::thread thread;

  // Owned by the server thread.
  KvTable table;  // bounded by options.max_table_bytes (set in start())
  std::unordered_map<std::uint64_t, Connection> conns;
  std::list<Waiter> waiters;
  std::uint64_t next_conn_id = kFirstConnId;
  // Set while the listener is out of the epoll set after accept found no file descriptor.
  std::optional<Clock::time_point> listen_resume;
  Clock::time_point last_exhaustion_log{};

  // Shared with callers of stats()/wait_for_connections_at_most()/stop().
  mutable std::mutex mu;
  mutable std::condition_variable cv;
  Stats stats;
  bool stop_requested = false;
  bool stopped = false;

  size_t max_payload() const { return options.max_value_bytes + sp::kFrameOverhead; }
  // What a connection may announce in a header: a hello until it has authenticated.
  static size_t frame_limit(const Connection& c, size_t max_payload) {
    return c.authenticated ? max_payload : sp::kMaxHelloPayload;
  }

  void bump(std::uint64_t Stats::*field, std::int64_t delta = 1) {
    std::lock_guard<std::mutex> lock(mu);
    stats.*field += static_cast<std::uint64_t>(delta);
    cv.notify_all();
  }

  void run();
  void accept_all();
  void pause_listener(std::string_view why);
  void resume_listener();
  void park(Waiter waiter);
  void on_readable(std::uint64_t id);
  bool process_frames(std::uint64_t id);  // false when the connection was closed
  void flush(std::uint64_t id);
  void close_conn(std::uint64_t id, std::string_view reason, bool rejected);
  void handle(std::uint64_t id, const sp::Header& header, std::string_view payload);
  void reply(std::uint64_t id, std::string frame);
  void serve_waiters();
  std::vector<Waiter> take_waiters(const std::function<bool(const Waiter&)>& pick);
  void expire(Clock::time_point now);
  int next_timeout_ms(Clock::time_point now) const;
  bool waiter_ready(const Waiter& w) const;
  void answer_waiter(const Waiter& w);
};

void TcpStoreServer::Impl::run() {
  epoll_event events[64];
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (stop_requested) break;
    }
    int n = epoll_wait(epoll_fd.get(), events, 64, next_timeout_ms(Clock::now()));
    if (n < 0 && errno != EINTR) {
      ORBITE_LOG(Error, Bootstrap) << "store server: epoll_wait failed: " << std::strerror(errno);
      break;
    }
    for (int i = 0; i < n; ++i) {
      std::uint64_t id = events[i].data.u64;
      if (id == kListenId) {
        accept_all();
      } else if (id == kWakeId) {
        std::uint64_t value = 0;
        [[maybe_unused]] ssize_t r = ::read(wake_fd.get(), &value, sizeof(value));
      } else {
        if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) on_readable(id);
        if (conns.count(id) != 0 && (events[i].events & EPOLLOUT)) flush(id);
      }
    }
    const Clock::time_point now = Clock::now();
    if (listen_resume && now >= *listen_resume) resume_listener();
    expire(now);
  }
  std::vector<std::uint64_t> ids;
  for (auto& [id, conn] : conns) ids.push_back(id);
  for (auto id : ids) close_conn(id, "server stopping", false);
  std::lock_guard<std::mutex> lock(mu);
  stopped = true;
  cv.notify_all();
}

int TcpStoreServer::Impl::next_timeout_ms(Clock::time_point now) const {
  Clock::time_point next = now + std::chrono::seconds(1);
  for (const auto& w : waiters) next = std::min(next, w.deadline);
  for (const auto& [id, c] : conns) {
    if (c.frame_started) {
      next = std::min(next, *c.frame_started + options.frame_timeout);
    }
    if (!c.authenticated) next = std::min(next, c.accepted_at + options.frame_timeout);
  }
  if (listen_resume) next = std::min(next, *listen_resume);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count();
  return static_cast<int>(std::clamp<std::int64_t>(ms + 1, 0, 1000));
}

void TcpStoreServer::Impl::accept_all() {
  while (true) {
    auto accepted = net::accept_nonblocking(listen_fd.get());
    if (!accepted.ok()) {
      if (accepted.status().code() == Errc::ResourceExhausted) {
        pause_listener(accepted.status().message());
      } else {
        ORBITE_LOG(Warn, Bootstrap) << "store server: " << accepted.status().message();
      }
      return;
    }
    if (!accepted->valid()) return;
    if (conns.size() >= options.max_connections) {
      // Closed at once (the Fd's destructor) rather than left in the backlog unanswered.
      ORBITE_LOG(Warn, Bootstrap) << "store server: refusing a connection: "
                                  << options.max_connections << " are open (max_connections)";
      bump(&Stats::refused_connections);
      continue;
    }
    std::uint64_t id = next_conn_id++;
    Connection conn;
    conn.fd = std::move(*accepted);
    conn.accepted_at = Clock::now();
    auto peer = [&]() -> std::string {
      sockaddr_storage ss{};
      socklen_t len = sizeof(ss);
      if (getpeername(conn.fd.get(), reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
      char host[64] = {};
      char serv[16] = {};
      getnameinfo(reinterpret_cast<sockaddr*>(&ss), len, host, sizeof(host), serv, sizeof(serv),
                  NI_NUMERICHOST | NI_NUMERICSERV);
      return net::format_host_port(host, static_cast<std::uint16_t>(std::atoi(serv)));
    }();
    conn.peer = peer;
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.u64 = id;
    if (epoll_ctl(epoll_fd.get(), EPOLL_CTL_ADD, conn.fd.get(), &ev) != 0) {
      ORBITE_LOG(Warn, Bootstrap) << "store server: cannot watch a new connection: "
                                  << std::strerror(errno);
      continue;
    }
    conns.emplace(id, std::move(conn));
    std::lock_guard<std::mutex> lock(mu);
    stats.connections_accepted++;
    stats.connections_open++;
    cv.notify_all();
  }
}

void TcpStoreServer::Impl::pause_listener(std::string_view why) {
  if (epoll_ctl(epoll_fd.get(), EPOLL_CTL_DEL, listen_fd.get(), nullptr) != 0) {
    ORBITE_LOG(Error, Bootstrap) << "store server: cannot pause the listener: "
                                 << std::strerror(errno);
    return;
  }
  const Clock::time_point now = Clock::now();
  listen_resume = now + kAcceptPause;
  bump(&Stats::accept_pauses);
  // Once a second at most: a job that exhausts the descriptors would otherwise fill the log.
  if (now - last_exhaustion_log >= std::chrono::seconds(1)) {
    last_exhaustion_log = now;
    ORBITE_LOG(Warn, Bootstrap) << "store server: " << why << "; " << conns.size()
                                << " connections open; accepting again in " << to_ms(kAcceptPause)
                                << " ms";
  }
}

void TcpStoreServer::Impl::resume_listener() {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kListenId;
  if (epoll_ctl(epoll_fd.get(), EPOLL_CTL_ADD, listen_fd.get(), &ev) != 0) {
    ORBITE_LOG(Error, Bootstrap) << "store server: cannot watch the listener again: "
                                 << std::strerror(errno) << "; retrying in " << to_ms(kAcceptPause)
                                 << " ms";
    listen_resume = Clock::now() + kAcceptPause;
    return;
  }
  listen_resume.reset();
}

void TcpStoreServer::Impl::close_conn(std::uint64_t id, std::string_view reason, bool rejected) {
  auto it = conns.find(id);
  if (it == conns.end()) return;
  if (rejected) {
    ORBITE_LOG(Warn, Bootstrap) << "store server: closing connection from " << it->second.peer
                                << ": " << reason;
  } else {
    ORBITE_LOG(Debug, Bootstrap) << "store server: connection from " << it->second.peer
                                 << " closed: " << reason;
  }
  epoll_ctl(epoll_fd.get(), EPOLL_CTL_DEL, it->second.fd.get(), nullptr);
  // Half-close first so a reply queued just before a rejection still reaches the client.
  ::shutdown(it->second.fd.get(), SHUT_WR);
  conns.erase(it);
  waiters.remove_if([id](const Waiter& w) { return w.conn == id; });
  std::lock_guard<std::mutex> lock(mu);
  stats.connections_open--;
  if (rejected) stats.rejected_frames++;
  cv.notify_all();
}

void TcpStoreServer::Impl::on_readable(std::uint64_t id) {
  // A bounded number of reads per wake-up keeps one streaming client from starving the others;
  // level-triggered epoll reports the socket again if bytes remain.
  for (int round = 0; round < kReadsPerWakeup; ++round) {
    auto it = conns.find(id);
    if (it == conns.end()) return;
    Connection& c = it->second;
    size_t want = kReadChunk;
    if (c.in.size() >= sp::kHeaderBytes) {
      // Validate a header as soon as it is complete, before reading the payload it promises.
      auto header = sp::decode_header(c.in, frame_limit(c, max_payload()));
      if (!header.ok()) {
        close_conn(id, unauthenticated_reason(c, header.status()), true);
        return;
      }
      size_t total = sp::kHeaderBytes + header->payload_len;
      if (total > c.in.size()) want = std::max(want, total - c.in.size());
    }
    size_t old = c.in.size();
    c.in.resize(old + want);
    ssize_t n = ::recv(c.fd.get(), c.in.data() + old, want, 0);
    int err = errno;
    c.in.resize(old + (n > 0 ? static_cast<size_t>(n) : 0));
    if (n < 0 && err == EINTR) continue;
    if (n < 0 && (err == EAGAIN || err == EWOULDBLOCK)) return;
    if (n <= 0) {
      bool partial = !c.in.empty();
      close_conn(id, partial ? "client disconnected mid-frame" : "client disconnected", partial);
      return;
    }
    if (old == 0) c.frame_started = Clock::now();
    if (!process_frames(id)) return;
  }
}

bool TcpStoreServer::Impl::process_frames(std::uint64_t id) {
  Connection& c = conns.at(id);
  size_t consumed = 0;
  while (true) {
    std::string_view pending = std::string_view(c.in).substr(consumed);
    if (pending.size() < sp::kHeaderBytes) break;
    auto header = sp::decode_header(pending, frame_limit(c, max_payload()));
    if (!header.ok()) {
      close_conn(id, unauthenticated_reason(c, header.status()), true);
      return false;
    }
    if (pending.size() < sp::kHeaderBytes + header->payload_len) break;
    std::string_view payload = pending.substr(sp::kHeaderBytes, header->payload_len);
    consumed += sp::kHeaderBytes + header->payload_len;
    handle(id, *header, payload);
    if (conns.count(id) == 0) return false;
  }
  c.in.erase(0, consumed);
  if (c.in.empty()) {
    c.frame_started.reset();
  } else if (consumed > 0) {
    c.frame_started = Clock::now();
  }
  return true;
}

void TcpStoreServer::Impl::reply(std::uint64_t id, std::string frame) {
  auto it = conns.find(id);
  if (it == conns.end()) return;
  Connection& c = it->second;
  c.out += frame;
  if (c.out.size() - c.out_sent > 2 * max_payload()) {
    close_conn(id, "client is not reading its replies", true);
    return;
  }
  flush(id);
}

void TcpStoreServer::Impl::flush(std::uint64_t id) {
  auto it = conns.find(id);
  if (it == conns.end()) return;
  Connection& c = it->second;
  while (c.out_sent < c.out.size()) {
    ssize_t n =
        ::send(c.fd.get(), c.out.data() + c.out_sent, c.out.size() - c.out_sent, MSG_NOSIGNAL);
    if (n > 0) {
      c.out_sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    close_conn(id, "connection lost while replying", false);
    return;
  }
  if (c.out_sent == c.out.size()) {
    c.out.clear();
    c.out_sent = 0;
  } else if (c.out_sent > kReadChunk && c.out_sent * 2 > c.out.size()) {
    c.out.erase(0, c.out_sent);  // compact rarely, so large replies cost no quadratic copying
    c.out_sent = 0;
  }
  bool waiting = !c.out.empty();
  if (waiting != c.want_write) {
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP | (waiting ? static_cast<unsigned>(EPOLLOUT) : 0U);
    ev.data.u64 = id;
    epoll_ctl(epoll_fd.get(), EPOLL_CTL_MOD, c.fd.get(), &ev);
    c.want_write = waiting;
  }
  if (!waiting && c.close_after_flush) close_conn(id, "refused", false);
}

void TcpStoreServer::Impl::handle(std::uint64_t id, const sp::Header& header,
                                  std::string_view payload) {
  Connection& c = conns.at(id);
  auto decoded = sp::decode_request(header.op, payload);
  if (!decoded.ok()) {
    close_conn(id, decoded.status().message(), true);
    return;
  }
  sp::Request& req = *decoded;
  const std::uint32_t rid = header.request_id;
  if (!c.authenticated) {
    if (req.op != sp::Op::Hello) {
      bump(&Stats::refused_auth);
      c.close_after_flush = true;
      reply(id, sp::encode_error_reply(rid, header.op, Errc::PermissionDenied,
                                       "the first request must be hello"));
      return;
    }
    if (!constant_time_equal(req.value, options.token)) {
      bump(&Stats::refused_auth);
      ORBITE_LOG(Warn, Bootstrap) << "store server: refusing " << c.peer
                                  << ": wrong or missing ORBITE_STORE_TOKEN";
      c.close_after_flush = true;
      reply(id, sp::encode_error_reply(rid, header.op, Errc::PermissionDenied,
                                       "store token refused (check ORBITE_STORE_TOKEN)"));
      return;
    }
    c.authenticated = true;
    bump(&Stats::clients_authenticated);
  }
  bump(&Stats::requests_served);

  std::string result;
  wire::Writer w(result);
  bool changed = false;
  switch (req.op) {
    case sp::Op::Hello: break;
    case sp::Op::Set:
      if (Status st = table.set(req.key, std::move(req.value)); !st.ok()) {
        reply(id, sp::encode_error_reply(rid, header.op, st.code(), st.message()));
        return;
      }
      changed = true;
      break;
    case sp::Op::Get:
    case sp::Op::Wait: {
      Waiter waiter;
      waiter.conn = id;
      waiter.request_id = rid;
      waiter.op = req.op;
      waiter.keys = req.op == sp::Op::Get ? std::vector<std::string>{req.key} : std::move(req.keys);
      waiter.timeout_ms = req.timeout_ms;
      auto capped = std::min<std::uint64_t>(req.timeout_ms, 100ULL * 365 * 24 * 3600 * 1000);
      waiter.deadline = Clock::now() + std::chrono::milliseconds(capped);
      if (waiter_ready(waiter)) {
        answer_waiter(waiter);
      } else if (c.parked >= kMaxParkedPerConnection) {
        bump(&Stats::refused_waits);
        reply(id, sp::encode_error_reply(rid, header.op, Errc::ResourceExhausted,
                                         "this connection already has " +
                                             std::to_string(kMaxParkedPerConnection) +
                                             " get/wait requests waiting for keys"));
      } else {
        park(std::move(waiter));
      }
      return;
    }
    case sp::Op::Check:
      w.put<std::uint32_t>(static_cast<std::uint32_t>(req.keys.size()));
      for (const auto& k : req.keys) w.put<std::uint8_t>(table.contains(k) ? 1 : 0);
      break;
    case sp::Op::Add: {
      auto added = table.add(req.key, req.delta);
      if (!added.ok()) {
        reply(id, sp::encode_error_reply(rid, header.op, added.status().code(),
                                         added.status().message()));
        return;
      }
      w.put<std::int64_t>(*added);
      changed = true;
      break;
    }
    case sp::Op::CompareSet: {
      auto held = table.compare_set(req.key, req.value, req.desired);
      if (!held.ok()) {
        reply(id, sp::encode_error_reply(rid, header.op, held.status().code(),
                                         held.status().message()));
        return;
      }
      w.put_bytes(*held);
      changed = true;
      break;
    }
    case sp::Op::Erase: w.put<std::uint8_t>(table.erase(req.key) ? 1 : 0); break;
  }
  reply(id, sp::encode_ok_reply(rid, header.op, result));
  if (changed) serve_waiters();
}

bool TcpStoreServer::Impl::waiter_ready(const Waiter& w) const {
  return std::all_of(w.keys.begin(), w.keys.end(),
                     [this](const std::string& k) { return table.contains(k); });
}

void TcpStoreServer::Impl::answer_waiter(const Waiter& w) {
  std::string result;
  if (w.op == sp::Op::Get) {
    wire::Writer writer(result);
    writer.put_bytes(*table.find(w.keys.front()));
  }
  reply(w.conn, sp::encode_ok_reply(w.request_id, static_cast<std::uint8_t>(w.op), result));
}

void TcpStoreServer::Impl::park(Waiter waiter) {
  conns.at(waiter.conn).parked++;
  waiters.push_back(std::move(waiter));
}

// Both take the waiters they answer out of the list before replying: a reply can close its
// connection (a client not reading), which drops that connection's other waiters from the list.
std::vector<Waiter> TcpStoreServer::Impl::take_waiters(
    const std::function<bool(const Waiter&)>& pick) {
  std::vector<Waiter> taken;
  for (auto it = waiters.begin(); it != waiters.end();) {
    if (!pick(*it)) {
      ++it;
      continue;
    }
    conns.at(it->conn).parked--;
    taken.push_back(std::move(*it));
    it = waiters.erase(it);
  }
  return taken;
}

void TcpStoreServer::Impl::serve_waiters() {
  for (const Waiter& w : take_waiters([this](const Waiter& w) { return waiter_ready(w); })) {
    answer_waiter(w);
  }
}

void TcpStoreServer::Impl::expire(Clock::time_point now) {
  for (const Waiter& w : take_waiters([now](const Waiter& w) { return w.deadline <= now; })) {
    std::string missing;
    int shown = 0;
    for (const auto& k : w.keys) {
      if (table.contains(k)) continue;
      if (shown++ < 8) missing += (missing.empty() ? "" : ", ") + quote(k);
    }
    if (shown > 8) missing += ", ...";
    reply(w.conn,
          sp::encode_error_reply(
              w.request_id, static_cast<std::uint8_t>(w.op), Errc::Timeout,
              "store keys not set within " + std::to_string(w.timeout_ms) + " ms: " + missing));
  }
  std::vector<std::uint64_t> stalled;
  std::vector<std::uint64_t> silent;
  for (const auto& [id, c] : conns) {
    if (c.frame_started && now - *c.frame_started >= options.frame_timeout) {
      stalled.push_back(id);
    } else if (!c.authenticated && now - c.accepted_at >= options.frame_timeout) {
      silent.push_back(id);
    }
  }
  for (auto id : stalled) {
    close_conn(id,
               "frame not completed within " + std::to_string(to_ms(options.frame_timeout)) +
                   " ms (truncated frame?)",
               true);
  }
  for (auto id : silent) {
    close_conn(
        id, "no hello within " + std::to_string(to_ms(options.frame_timeout)) + " ms of connecting",
        true);
  }
}

TcpStoreServer::TcpStoreServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

TcpStoreServer::~TcpStoreServer() {
  stop();
}

Result<std::unique_ptr<TcpStoreServer>> TcpStoreServer::start(
    const TcpStoreServerOptions& options) {
  if (options.max_value_bytes == 0 || options.max_value_bytes > 1 * kGiB) {
    return Status::error(Errc::InvalidArgument, "store max_value_bytes " +
                                                    std::to_string(options.max_value_bytes) +
                                                    " must be in 1..1073741824");
  }
  if (options.frame_timeout <= Duration::zero()) {
    return Status::error(Errc::InvalidArgument, "store frame_timeout must be positive");
  }
  if (options.max_table_bytes < 1 * kKiB) {
    return Status::error(Errc::InvalidArgument, "store max_table_bytes " +
                                                    std::to_string(options.max_table_bytes) +
                                                    " must be at least 1024");
  }
  if (options.max_connections == 0 || options.max_connections > (1U << 20)) {
    return Status::error(Errc::InvalidArgument, "store max_connections " +
                                                    std::to_string(options.max_connections) +
                                                    " must be in 1..1048576");
  }
  ORBITE_ASSIGN_OR_RETURN(net::HostPort where, net::parse_host_port(options.listen));
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->table = KvTable(options.max_table_bytes);
  ORBITE_ASSIGN_OR_RETURN(impl->listen_fd, net::listen_tcp(where));
  ORBITE_ASSIGN_OR_RETURN(net::HostPort bound, net::local_endpoint(impl->listen_fd.get()));
  impl->port = bound.port;
  std::string host = where.host;
  if (host == "0.0.0.0" || host == "::" || host.empty()) host = bound.host;
  impl->address = net::format_host_port(host, bound.port);
  impl->epoll_fd = net::Fd(epoll_create1(EPOLL_CLOEXEC));
  impl->wake_fd = net::Fd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!impl->epoll_fd.valid() || !impl->wake_fd.valid()) {
    return Status::error(
        Errc::ResourceExhausted,
        std::string("store server: cannot create epoll/eventfd: ") + std::strerror(errno));
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kListenId;
  const bool watched =
      epoll_ctl(impl->epoll_fd.get(), EPOLL_CTL_ADD, impl->listen_fd.get(), &ev) == 0;
  ev.data.u64 = kWakeId;
  if (!watched || epoll_ctl(impl->epoll_fd.get(), EPOLL_CTL_ADD, impl->wake_fd.get(), &ev) != 0) {
    return Status::error(
        Errc::ResourceExhausted,
        std::string("store server: cannot watch its sockets: ") + std::strerror(errno));
  }
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->run(); });
  ORBITE_LOG(Info, Bootstrap) << "store server listening on " << impl->address
                              << (options.token.empty() ? " (no token)" : " (token required)");
  return std::unique_ptr<TcpStoreServer>(new TcpStoreServer(std::move(impl)));
}

std::string TcpStoreServer::address() const {
  return impl_->address;
}
std::uint16_t TcpStoreServer::port() const {
  return impl_->port;
}

TcpStoreServer::Stats TcpStoreServer::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->stats;
}

Status TcpStoreServer::wait_for_connections_at_most(std::uint64_t max_open,
                                                    Duration timeout) const {
  std::unique_lock<std::mutex> lock(impl_->mu);
  bool done = impl_->cv.wait_until(lock, Deadline::after(timeout).time_point(), [&] {
    return impl_->stats.connections_open <= max_open || impl_->stopped;
  });
  if (!done) {
    return Status::error(Errc::Timeout, std::to_string(impl_->stats.connections_open) +
                                            " store clients still connected after " +
                                            std::to_string(to_ms(timeout)) + " ms");
  }
  return {};
}

void TcpStoreServer::stop() {
  if (!impl_) return;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stop_requested = true;
  }
  std::uint64_t one = 1;
  [[maybe_unused]] ssize_t w = ::write(impl_->wake_fd.get(), &one, sizeof(one));
  if (impl_->thread.joinable()) impl_->thread.join();
  // Refuse new connections at once instead of leaving them in the backlog unanswered.
  impl_->listen_fd.reset();
}

}  // namespace orbite
