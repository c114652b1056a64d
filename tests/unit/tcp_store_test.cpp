// TCP-specific store behaviour: many clients, authentication, limits, server death.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "../support/store_fixtures.h"
#include "common/clock.h"

namespace orbite {
namespace {

using namespace std::chrono_literals;

TEST(TcpStore, ManyClientsRaceOnCountersAndCompareSet) {
  auto server = testing::start_server();
  ASSERT_NE(server, nullptr);
  constexpr int kClients = 24;
  constexpr int kAdds = 50;
  std::vector<std::thread> threads;
  std::atomic<int> cas_wins{0};
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      auto client = testing::connect_client(*server);
      ASSERT_TRUE(client.ok()) << client.status().to_string();
      for (int i = 0; i < kAdds; ++i) ASSERT_TRUE((*client)->add("hits", 1).ok());
      // Every client tries to claim each of 10 slots; exactly one claim per slot succeeds.
      for (int slot = 0; slot < 10; ++slot) {
        std::string me = std::to_string(c);
        auto after = (*client)->compare_set("slot" + std::to_string(slot), "", me);
        ASSERT_TRUE(after.ok());
        if (*after == me) cas_wins++;
      }
    });
  }
  for (auto& t : threads) t.join();
  auto check = testing::connect_client(*server);
  ASSERT_TRUE(check.ok());
  EXPECT_EQ(*(*check)->get("hits", 1s), std::to_string(kClients * kAdds));
  EXPECT_EQ(cas_wins.load(), 10);
  EXPECT_EQ(server->stats().connections_accepted, static_cast<std::uint64_t>(kClients + 1));
}

TEST(TcpStore, OneClientSharedByThreadsSerializesCalls) {
  auto server = testing::start_server();
  auto client = testing::connect_client(*server);
  ASSERT_TRUE(client.ok());
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 100; ++i) ASSERT_TRUE((*client)->add("shared", 1).ok());
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(*(*client)->get("shared", 1s), "600");
}

TEST(TcpStore, TokenIsRequiredWhenConfigured) {
  auto server = testing::start_server("s3cret");
  ASSERT_NE(server, nullptr);
  auto none = testing::connect_client(*server, "");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), Errc::PermissionDenied);
  EXPECT_NE(none.status().message().find("ORBITE_STORE_TOKEN"), std::string::npos);
  auto wrong = testing::connect_client(*server, "guess");
  EXPECT_EQ(wrong.status().code(), Errc::PermissionDenied);
  auto right = testing::connect_client(*server, "s3cret");
  ASSERT_TRUE(right.ok()) << right.status().to_string();
  EXPECT_TRUE((*right)->set("k", "v").ok());
  EXPECT_EQ(server->stats().refused_auth, 2U);
  EXPECT_EQ(server->stats().clients_authenticated, 1U);
}

TEST(TcpStore, OversizedValuesAndKeysAreRefusedBeforeSending) {
  auto server = testing::start_server();
  TcpStoreClientOptions options;
  options.address = server->address();
  options.max_value_bytes = 1024;
  auto client = TcpStoreClient::connect(options);
  ASSERT_TRUE(client.ok());
  Status big = (*client)->set("k", std::string(1025, 'x'));
  EXPECT_EQ(big.code(), Errc::InvalidArgument);
  EXPECT_NE(big.message().find("1025 bytes"), std::string::npos);
  EXPECT_EQ((*client)->set(std::string(5000, 'k'), "v").code(), Errc::InvalidArgument);
  EXPECT_TRUE((*client)->set("k", std::string(1024, 'x')).ok());  // the connection still works
}

TEST(TcpStore, ServerEnforcesItsOwnValueLimit) {
  auto server = testing::start_server("", 30s, /*max_value_bytes=*/1024);
  auto client = testing::connect_client(*server);  // client allows 64 MiB
  ASSERT_TRUE(client.ok());
  Status big = (*client)->set("k", std::string(200 * 1024, 'x'));
  EXPECT_EQ(big.code(), Errc::ConnectionLost);  // the server closes an oversized frame
  auto other = testing::connect_client(*server);
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE((*other)->set("k", "small").ok());
}

TEST(TcpStore, LargeValuesRoundTrip) {
  auto server = testing::start_server();
  auto client = testing::connect_client(*server);
  ASSERT_TRUE(client.ok());
  std::string value(8 * 1024 * 1024 + 3, '\0');
  for (size_t i = 0; i < value.size(); ++i) value[i] = static_cast<char>(i * 131 + 7);
  ASSERT_TRUE((*client)->set("blob", value).ok());
  auto back = (*client)->get("blob", 5s);
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(*back == value);
}

TEST(TcpStore, ServerDeathGivesConnectionLostToWaitingClients) {
  auto server = testing::start_server();
  auto waiter = testing::connect_client(*server);
  ASSERT_TRUE(waiter.ok());
  Status waited;
  auto started = Clock::now();
  std::thread t([&] {
    std::vector<std::string> keys = {"never-set"};
    waited = (*waiter)->wait(keys, 60s);
  });
  std::this_thread::sleep_for(100ms);
  server->stop();
  t.join();
  EXPECT_EQ(waited.code(), Errc::ConnectionLost) << waited.to_string();
  EXPECT_LT(Clock::now() - started, 30s);  // a bound, not a measurement: it must not hang
  // Later calls fail the same way instead of hanging.
  EXPECT_EQ((*waiter)->set("k", "v").code(), Errc::ConnectionLost);
}

TEST(TcpStore, ConnectRetriesUntilTheServerAppearsOrTimesOut) {
  // Nothing listens: the connect bound turns into a Timeout naming the address.
  TcpStoreClientOptions options;
  options.address = "127.0.0.1:1";  // privileged port, nothing listens there in tests
  options.connect_timeout = 200ms;
  auto r = TcpStoreClient::connect(options);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Errc::Timeout);
  EXPECT_NE(r.status().message().find("127.0.0.1:1"), std::string::npos);

  TcpStoreClientOptions no_port;
  no_port.address = "no-port";
  auto bad = TcpStoreClient::connect(no_port);
  EXPECT_EQ(bad.status().code(), Errc::InvalidArgument);
}

TEST(TcpStore, BadServerOptionsAreRejected) {
  TcpStoreServerOptions options;
  options.max_value_bytes = 0;
  EXPECT_EQ(TcpStoreServer::start(options).status().code(), Errc::InvalidArgument);
  options = {};
  options.listen = "127.0.0.1:notaport";
  EXPECT_EQ(TcpStoreServer::start(options).status().code(), Errc::InvalidArgument);
}

TEST(TcpStore, WaitForConnectionsToDrain) {
  auto server = testing::start_server();
  {
    auto c = testing::connect_client(*server);
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(server->wait_for_connections_at_most(0, 50ms).code(), Errc::Timeout);
  }
  EXPECT_TRUE(server->wait_for_connections_at_most(0, 10s).ok());
}

}  // namespace
}  // namespace orbite
