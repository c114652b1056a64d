// Helpers shared by store tests: a TCP store server on loopback and clients of it.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include <orbite/store.h>

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

}  // namespace orbite::testing
