// The bootstrap key-value store: how ranks find each other before any data path exists.
// Values are byte strings (std::string may hold any bytes, NUL included).
#pragma once

#include <orbite/config.h>
#include <orbite/export.h>
#include <orbite/status.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace orbite {

class ORBITE_API Store {
 public:
  virtual ~Store();

  virtual Status set(std::string_view key, std::string_view value) = 0;
  // Waits up to `timeout` for the key to exist, then returns its value (Timeout otherwise).
  virtual Result<std::string> get(std::string_view key, Duration timeout) = 0;
  // Waits up to `timeout` until every key exists.
  virtual Status wait(std::span<const std::string> keys, Duration timeout) = 0;
  // Whether each key exists now, without waiting.
  virtual Result<std::vector<bool>> check(std::span<const std::string> keys) = 0;
  // Atomically adds `delta` to the decimal counter at `key` (absent = 0); returns the new value.
  virtual Result<std::int64_t> add(std::string_view key, std::int64_t delta) = 0;
  // Atomically sets `desired` if the key currently holds `expected` (an absent key matches an
  // empty `expected`). Returns the value held after the operation ("" for an absent key).
  virtual Result<std::string> compare_set(std::string_view key, std::string_view expected,
                                          std::string_view desired) = 0;
  // Removes the key; returns whether it existed.
  virtual Result<bool> erase(std::string_view key) = 0;

  // All `world_size` ranks calling barrier with the same tag return together. A tag is used
  // once. On timeout the error names the ranks that did not arrive.
  Status barrier(std::string_view tag, int rank, int world_size, Duration timeout);
};

// A thread-safe store inside one process, for ranks that are threads (tests, single process).
class ORBITE_API InProcessStore final : public Store {
 public:
  InProcessStore();
  ~InProcessStore() override;
  InProcessStore(const InProcessStore&) = delete;
  InProcessStore& operator=(const InProcessStore&) = delete;

  Status set(std::string_view key, std::string_view value) override;
  Result<std::string> get(std::string_view key, Duration timeout) override;
  Status wait(std::span<const std::string> keys, Duration timeout) override;
  Result<std::vector<bool>> check(std::span<const std::string> keys) override;
  Result<std::int64_t> add(std::string_view key, std::int64_t delta) override;
  Result<std::string> compare_set(std::string_view key, std::string_view expected,
                                  std::string_view desired) override;
  Result<bool> erase(std::string_view key) override;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

struct TcpStoreServerOptions {
  // host:port to listen on; port 0 picks a free port. "[::1]:0" for IPv6.
  std::string listen = "127.0.0.1:0";
  // Shared secret clients must present (ORBITE_STORE_TOKEN). Empty: no authentication.
  std::string token;
  // Largest frame (key + value + header) accepted; larger frames close the connection.
  std::uint64_t max_value_bytes = 64 * kMiB;
  // A frame that does not complete within this bound closes its connection, and so does a
  // connection that has not completed its hello within it of being accepted.
  Duration frame_timeout = std::chrono::seconds(30);
  // Connections open at once, authenticated or not (1..1048576); one more is accepted and closed
  // at once, so that it does not wait in the backlog.
  std::uint32_t max_connections = 4096;
  // Keys and values held at once (at least 1 KiB); a set, add or compare_set that would pass it
  // is answered ResourceExhausted and changes nothing.
  std::uint64_t max_table_bytes = 1 * kGiB;
};

// The store server: one thread, nonblocking sockets. A malformed, oversized, unauthenticated or
// stalled connection is closed with a logged reason; other clients are unaffected.
class ORBITE_API TcpStoreServer {
 public:
  static Result<std::unique_ptr<TcpStoreServer>> start(const TcpStoreServerOptions& options);
  ~TcpStoreServer();  // stop()
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  // The bound address as host:port (the port resolved when 0 was asked for).
  [[nodiscard]] std::string address() const;
  [[nodiscard]] std::uint16_t port() const;

  struct Stats {
    std::uint64_t connections_accepted = 0;
    std::uint64_t connections_open = 0;  // authenticated or not
    std::uint64_t clients_authenticated = 0;
    std::uint64_t rejected_frames = 0;  // malformed, oversized or stalled
    std::uint64_t refused_auth = 0;
    std::uint64_t requests_served = 0;
    std::uint64_t refused_connections = 0;  // over max_connections
    std::uint64_t accept_pauses = 0;        // the listener paused: out of file descriptors
    std::uint64_t refused_waits = 0;        // over the parked requests allowed per connection
  };
  [[nodiscard]] Stats stats() const;

  // Waits until at most `max_open` connections remain open, or the timeout passes (Timeout).
  Status wait_for_connections_at_most(std::uint64_t max_open, Duration timeout) const;

  // Stops serving and closes every connection; waiting clients see ConnectionLost. Idempotent.
  void stop();

 private:
  struct Impl;
  explicit TcpStoreServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

struct TcpStoreClientOptions {
  std::string address;  // host:port
  std::string token;    // must match the server's
  // Connection attempts are retried with backoff until this bound (the server may start later).
  Duration connect_timeout = std::chrono::seconds(60);
  std::uint64_t max_value_bytes = 64 * kMiB;
  // Extra time granted to the server's reply beyond an operation's own timeout.
  Duration reply_grace = std::chrono::seconds(5);
};

// A client connection. Thread-safe: concurrent calls are serialized on the one connection, so a
// long wait() delays other threads' calls. A dead server gives ConnectionLost, never a hang.
class ORBITE_API TcpStoreClient final : public Store {
 public:
  static Result<std::shared_ptr<TcpStoreClient>> connect(const TcpStoreClientOptions& options);
  ~TcpStoreClient() override;
  TcpStoreClient(const TcpStoreClient&) = delete;
  TcpStoreClient& operator=(const TcpStoreClient&) = delete;

  Status set(std::string_view key, std::string_view value) override;
  Result<std::string> get(std::string_view key, Duration timeout) override;
  Status wait(std::span<const std::string> keys, Duration timeout) override;
  Result<std::vector<bool>> check(std::span<const std::string> keys) override;
  Result<std::int64_t> add(std::string_view key, std::int64_t delta) override;
  Result<std::string> compare_set(std::string_view key, std::string_view expected,
                                  std::string_view desired) override;
  Result<bool> erase(std::string_view key) override;

  [[nodiscard]] const std::string& address() const;

 private:
  struct Impl;
  explicit TcpStoreClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace orbite
