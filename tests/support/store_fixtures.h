// Helpers shared by store tests: a TCP store server on loopback and clients of it.
#pragma once

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>

#include <memory>
#include <string>

#include <orbite/store.h>

#include "common/clock.h"
#include "common/net.h"

namespace orbite::testing {

inline std::unique_ptr<TcpStoreServer> start_server(
    std::string token = {}, Duration frame_timeout = std::chrono::seconds(30),
    std::uint64_t max_value_bytes = 64 * kMiB) {
  TcpStoreServerOptions options;
  options.listen = "127.0.0.1:0";
  options.token = std::move(token);
  options.frame_timeout = frame_timeout;
  options.max_value_bytes = max_value_bytes;
  auto server = TcpStoreServer::start(options);
  EXPECT_TRUE(server.ok()) << server.status().to_string();
  return server.ok() ? std::move(*server) : nullptr;
}

inline Result<std::shared_ptr<TcpStoreClient>> connect_client(const TcpStoreServer& server,
                                                              std::string token = {}) {
  TcpStoreClientOptions options;
  options.address = server.address();
  options.token = std::move(token);
  options.connect_timeout = std::chrono::seconds(5);
  return TcpStoreClient::connect(options);
}

// Reads what the server sends until it closes the connection (true) or `bound` passes (false);
// appends what arrived to `received` when given.
inline bool closed_by_server(const net::Fd& fd, Duration bound = std::chrono::seconds(5),
                             std::string* received = nullptr) {
  Deadline deadline = Deadline::after(bound);
  char buf[4096];
  while (!deadline.expired()) {
    pollfd p{fd.get(), POLLIN, 0};
    if (::poll(&p, 1, deadline.poll_timeout_ms()) <= 0) continue;
    ssize_t n = ::recv(fd.get(), buf, sizeof(buf), 0);
    if (n > 0 && received != nullptr) received->append(buf, static_cast<size_t>(n));
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return true;
  }
  return false;
}

}  // namespace orbite::testing
