// Communicators whose ranks are threads of this process (in-process and TCP stores).
#include <gtest/gtest.h>

#include <sched.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include <orbite/communicator.h>

#include "../support/store_fixtures.h"
#include "comm/peer_record.h"
#include "common/host_identity.h"
#include "common/log.h"

namespace orbite {
namespace {

using namespace std::chrono_literals;

EngineConfig quick_config(Duration timeout = 20s) {
  EngineConfig config;
  config.bootstrap.timeout = timeout;
  return config;
}

// Creates one communicator per store on its own thread; returns them (or their errors) by rank.
std::vector<Result<Communicator>> create_all(const std::vector<std::shared_ptr<Store>>& stores,
                                             int world_size, const EngineConfig& config) {
  std::vector<Result<Communicator>> out;
  std::vector<std::optional<Result<Communicator>>> slots(stores.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < stores.size(); ++r) {
    threads.emplace_back([&, r] {
      auto boot = Bootstrap::from_store(stores[r], static_cast<int>(r), world_size);
      if (!boot.ok()) {
        slots[r].emplace(boot.status());
        return;
      }
      slots[r].emplace(Communicator::create(*boot, config));
    });
  }
  for (auto& t : threads) t.join();
  for (auto& s : slots) out.push_back(std::move(*s));
  return out;
}

void expect_consistent(std::vector<Result<Communicator>>& comms) {
  const int n = static_cast<int>(comms.size());
  std::set<std::string> addresses;
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(comms[static_cast<size_t>(r)].ok())
        << comms[static_cast<size_t>(r)].status().to_string();
    Communicator& c = *comms[static_cast<size_t>(r)];
    EXPECT_EQ(c.rank(), r);
    EXPECT_EQ(c.size(), n);
    // Every rank is a thread of this process: one host, local ranks follow global ranks.
    EXPECT_EQ(c.local_rank(), r);
    EXPECT_EQ(c.local_size(), n);
    addresses.insert(c.peer(r).control_address);
    for (int p = 0; p < n; ++p) {
      const PeerInfo& info = c.peer(p);
      EXPECT_EQ(info.rank, p);
      EXPECT_TRUE(c.same_host(p));
      EXPECT_EQ(info.host_id, this_host().host_id);
      EXPECT_EQ(info.control_address, comms[static_cast<size_t>(p)]->peer(p).control_address);
      EXPECT_TRUE(info.control_address.starts_with("127.0.0.1:")) << info.control_address;
    }
    std::string view = c.describe();
    EXPECT_NE(view.find("rank " + std::to_string(r) + " of " + std::to_string(n)),
              std::string::npos);
    EXPECT_NE(view.find("(self)"), std::string::npos);
  }
  EXPECT_EQ(addresses.size(), static_cast<size_t>(n));  // each rank has its own listener
}

TEST(Communicator, FourThreadRanksOverAnInProcessStore) {
  auto store = std::make_shared<InProcessStore>();
  std::vector<std::shared_ptr<Store>> stores(4, store);
  auto comms = create_all(stores, 4, quick_config());
  expect_consistent(comms);
}

TEST(Communicator, FourThreadRanksOverTheTcpStore) {
  auto server = testing::start_server();
  std::vector<std::shared_ptr<Store>> stores;
  for (int r = 0; r < 4; ++r) {
    auto c = testing::connect_client(*server);
    ASSERT_TRUE(c.ok());
    stores.push_back(*c);
  }
  auto comms = create_all(stores, 4, quick_config());
  expect_consistent(comms);
  // A barrier through the store, and a second communicator from the same bootstraps.
  std::vector<std::thread> threads;
  for (auto& c : comms) {
    threads.emplace_back([&c] { EXPECT_TRUE(c->store_barrier().ok()); });
  }
  for (auto& t : threads) t.join();
}

// shm asked for where no segment can be (shared memory off): the collective's call says what
// the segment needs, posts nothing, and the communicator keeps working.
TEST(Communicator, ShmAlgorithmWithoutASegmentIsUnavailableAndChangesNothing) {
  auto store = std::make_shared<InProcessStore>();
  std::vector<std::shared_ptr<Store>> stores(2, store);
  EngineConfig config = quick_config();
  config.shm.enable = false;
  config.coll.algo = "all_reduce=shm";
  auto comms = create_all(stores, 2, config);
  std::vector<std::thread> threads;
  for (auto& c : comms) {
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    threads.emplace_back([&c] {
      std::vector<float> v(8, 1.0f);
      auto r = c->all_reduce(v.data(), v.data(), v.size(), DataType::Float32, ReduceOp::Sum);
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.status().code(), Errc::Unavailable);
      EXPECT_NE(r.status().message().find("no shared segment"), std::string::npos)
          << r.status().message();
      EXPECT_NE(r.status().message().find("shm.enable"), std::string::npos);
      auto b = c->barrier();
      ASSERT_TRUE(b.ok()) << b.status().to_string();
      EXPECT_TRUE(b->wait(20s).ok());
    });
  }
  for (auto& t : threads) t.join();
}

// Thread ranks each run on `cpus` (set on the thread before its communicator exists) and report
// whether their engine yields its core on every idle pass.
std::vector<bool> yields_with(int n, const std::vector<int>& cpus, bool segment) {
  auto store = std::make_shared<InProcessStore>();
  EngineConfig config = quick_config();
  config.shm.enable = segment;
  // Not vector<bool>: its elements share words, and the threads write theirs concurrently.
  std::vector<std::uint8_t> yields(static_cast<std::size_t>(n), 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      cpu_set_t set;
      CPU_ZERO(&set);
      for (int cpu : cpus) CPU_SET(cpu, &set);
      ASSERT_EQ(::sched_setaffinity(0, sizeof set, &set), 0) << std::strerror(errno);
      auto boot = Bootstrap::from_store(store, r, n);
      ASSERT_TRUE(boot.ok()) << boot.status().to_string();
      auto comm = Communicator::create(*boot, config);
      ASSERT_TRUE(comm.ok()) << comm.status().to_string();
      yields[static_cast<std::size_t>(r)] = comm->engine().stats().yields_when_idle ? 1 : 0;
    });
  }
  for (auto& t : threads) t.join();
  return std::vector<bool>(yields.begin(), yields.end());
}

// The CPUs this process may use, in order.
std::vector<int> usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> out;
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return out;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) out.push_back(cpu);
  }
  return out;
}

// Open MPI's mpi_yield_when_idle: an engine whose waiting threads would otherwise spin a core
// away from the rank they wait for. Found in the segment (every rank's placement) and, without
// one, from the rank's own mask.
TEST(Communicator, RanksOutnumberingTheirCpusMakeTheEngineYieldWhenIdle) {
  const std::vector<int> cpus = usable_cpus();
  ASSERT_FALSE(cpus.empty());
  const int one = cpus[0];
  EXPECT_EQ(yields_with(3, {one}, true), std::vector<bool>(3, true))
      << "three ranks on one CPU, with the segment";
  EXPECT_EQ(yields_with(3, {one}, false), std::vector<bool>(3, false))
      << "a rank bound to one CPU cannot tell without the segment whether others share it";
  if (cpus.size() < 2) {
    GTEST_SKIP() << "this process may run on one CPU only: the cases of two CPUs need two";
  }
  const int two = cpus[1];
  EXPECT_EQ(yields_with(3, {one, two}, false), std::vector<bool>(3, true))
      << "three ranks on two CPUs, without the segment";
  EXPECT_EQ(yields_with(3, {one, two}, true), std::vector<bool>(3, true))
      << "three ranks on two CPUs, with the segment";
  EXPECT_EQ(yields_with(2, {one, two}, true), std::vector<bool>(2, false))
      << "two ranks on two CPUs";
  EXPECT_EQ(yields_with(2, {one, two}, false), std::vector<bool>(2, false))
      << "two ranks on two CPUs, without the segment";
}

TEST(Communicator, SuccessiveCommunicatorsFromOneBootstrapDoNotCollide) {
  auto store = std::make_shared<InProcessStore>();
  std::vector<Bootstrap> boots;
  for (int r = 0; r < 3; ++r) boots.push_back(*Bootstrap::from_store(store, r, 3));
  for (int round = 0; round < 3; ++round) {
    std::vector<std::thread> threads;
    std::vector<std::optional<Result<Communicator>>> comms(3);
    for (int r = 0; r < 3; ++r) {
      threads.emplace_back([&, r] {
        comms[static_cast<size_t>(r)].emplace(
            Communicator::create(boots[static_cast<size_t>(r)], quick_config()));
      });
    }
    for (auto& t : threads) t.join();
    for (auto& c : comms)
      ASSERT_TRUE(c->ok()) << "round " << round << ": " << c->status().to_string();
  }
}

TEST(Communicator, MissingRanksTimeOutAndAreNamed) {
  auto store = std::make_shared<InProcessStore>();
  std::vector<std::shared_ptr<Store>> stores(2, store);  // world of 4, only ranks 0 and 1 come
  auto comms = create_all(stores, 4, quick_config(300ms));
  for (auto& c : comms) {
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.status().code(), Errc::Timeout);
    EXPECT_NE(c.status().message().find("2 of 4 ranks had not published their address (ranks 2,3"),
              std::string::npos)
        << c.status().message();
  }
}

TEST(Communicator, RanksOnOtherHostsGetTheirOwnLocalRanks) {
  // Ranks 1 and 3 are simulated on another host by publishing their records directly.
  auto store = std::make_shared<InProcessStore>();
  const std::string tag = "comm/comm.0/peer/";
  for (int r : {1, 3}) {
    PeerInfo fake;
    fake.rank = r;
    fake.hostname = "elsewhere";
    fake.host_id = "elsewhere:boot";
    fake.pid = 1000 + r;
    fake.control_address = "192.0.2.10:" + std::to_string(4000 + r);
    fake.engine_id = std::string(31, 'e') + std::to_string(r);
    ASSERT_TRUE(store->set(tag + std::to_string(r), comm::encode_peer_record(fake)).ok());
    ASSERT_TRUE(store->set("barrier/comm/comm.0/ready/rank/" + std::to_string(r), "1").ok());
    ASSERT_TRUE(store->add("barrier/comm/comm.0/ready/arrived", 1).ok());
  }
  std::vector<std::shared_ptr<Store>> stores(2, store);
  std::vector<std::optional<Result<Communicator>>> comms(2);
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&, i] {
      int rank = i * 2;  // ranks 0 and 2 are real
      auto boot = Bootstrap::from_store(store, rank, 4);
      comms[static_cast<size_t>(i)].emplace(Communicator::create(*boot, quick_config()));
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_TRUE(comms[0]->ok()) << comms[0]->status().to_string();
  Communicator& c = **comms[0];
  EXPECT_EQ(c.local_size(), 2);
  EXPECT_EQ(c.peer(0).local_rank, 0);
  EXPECT_EQ(c.peer(2).local_rank, 1);
  EXPECT_EQ(c.peer(1).local_rank, 0);
  EXPECT_EQ(c.peer(3).local_rank, 1);
  EXPECT_EQ(c.peer(3).local_size, 2);
  EXPECT_FALSE(c.same_host(1));
  EXPECT_TRUE(c.same_host(2));
  EXPECT_NE(c.describe().find("(remote)"), std::string::npos);
}

TEST(Communicator, MalformedPeerRecordIsAProtocolErrorNamingTheRank) {
  auto store = std::make_shared<InProcessStore>();
  ASSERT_TRUE(store->set("comm/comm.0/peer/1", "garbage").ok());
  auto boot = Bootstrap::from_store(store, 0, 2);
  auto c = Communicator::create(*boot, quick_config(2s));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Errc::Protocol);
  EXPECT_NE(c.status().message().find("rank 1"), std::string::npos);
}

TEST(Communicator, PeerRecordsRoundTripAndRejectLies) {
  PeerInfo p;
  p.rank = 7;
  p.hostname = "h";
  p.host_id = "h:b";
  p.pid = 42;
  p.control_address = "[::1]:9";
  p.engine_id = std::string(32, 'a');
  auto back = comm::decode_peer_record(comm::encode_peer_record(p), 7);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->control_address, "[::1]:9");
  EXPECT_EQ(back->pid, 42);
  EXPECT_EQ(back->engine_id, p.engine_id);
  EXPECT_EQ(comm::decode_peer_record(comm::encode_peer_record(p), 6).status().code(),
            Errc::Protocol);
  std::string bytes = comm::encode_peer_record(p);
  EXPECT_FALSE(comm::decode_peer_record(bytes.substr(0, bytes.size() - 1), 7).ok());
}

TEST(Communicator, InvalidConfigurationIsRejectedBeforeAnythingIsPublished) {
  auto store = std::make_shared<InProcessStore>();
  auto boot = Bootstrap::from_store(store, 0, 1);
  EngineConfig config;
  config.num_lanes = 0;
  auto c = Communicator::create(*boot, config);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Errc::Configuration);
  EXPECT_NE(c.status().message().find("num_lanes"), std::string::npos);
  EXPECT_FALSE((*store->check(std::vector<std::string>{"comm/comm.0/peer/0"}))[0]);
}

TEST(Communicator, LauncherLocalRankThatDisagreesIsReported) {
  std::vector<std::string> lines;
  log::set_sink([&lines](std::string_view line) { lines.emplace_back(line); });
  auto boot = Bootstrap::from_store(std::make_shared<InProcessStore>(), 0, 1, /*local_rank=*/3);
  auto c = Communicator::create(*boot, quick_config());
  log::set_sink({});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->local_rank(), 0);  // host identities decide
  bool warned = false;
  for (const auto& l : lines) {
    warned |= l.find("launcher gave local rank 3 but host identities give 0") != std::string::npos;
  }
  EXPECT_TRUE(warned);
}

TEST(Communicator, BootstrapRejectsBadRanks) {
  auto store = std::make_shared<InProcessStore>();
  EXPECT_EQ(Bootstrap::from_store(store, 2, 2).status().code(), Errc::InvalidArgument);
  EXPECT_EQ(Bootstrap::from_store(nullptr, 0, 1).status().code(), Errc::InvalidArgument);
  EXPECT_EQ(Bootstrap::from_store(store, 0, 1, -1).status().code(), Errc::InvalidArgument);
}

}  // namespace
}  // namespace orbite
