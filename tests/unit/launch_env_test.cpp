#include <gtest/gtest.h>

#include <map>

#include <orbite/bootstrap.h>

namespace orbite {
namespace {

using Env = std::map<std::string, std::string>;

Result<LaunchEnvironment> detect(const Env& env, const BootstrapConfig& config = {}) {
  return detect_launch_environment(config,
                                   [&env](std::string_view name) -> std::optional<std::string> {
                                     auto it = env.find(std::string(name));
                                     if (it == env.end()) return std::nullopt;
                                     return it->second;
                                   });
}

TEST(LaunchEnv, NothingSetIsASingleProcess) {
  auto e = detect({});
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->rank, 0);
  EXPECT_EQ(e->world_size, 1);
  EXPECT_EQ(e->source, "none");
  EXPECT_TRUE(e->store_address.empty());
}

TEST(LaunchEnv, EachLauncherIsRecognized) {
  struct Case {
    Env env;
    std::string source;
    int rank, size;
    std::optional<int> local_rank;
  };
  const Case cases[] = {
      {{{"ORBITE_RANK", "2"},
        {"ORBITE_WORLD_SIZE", "4"},
        {"ORBITE_LOCAL_RANK", "2"},
        {"ORBITE_STORE", "127.0.0.1:5000"}},
       "orbite",
       2,
       4,
       2},
      {{{"OMPI_COMM_WORLD_RANK", "3"},
        {"OMPI_COMM_WORLD_SIZE", "8"},
        {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
        {"ORBITE_STORE", "h:1"}},
       "openmpi",
       3,
       8,
       1},
      {{{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}, {"ORBITE_STORE", "h:1"}}, "pmi", 1, 2, std::nullopt},
      {{{"SLURM_PROCID", "5"},
        {"SLURM_NTASKS", "6"},
        {"SLURM_LOCALID", "0"},
        {"ORBITE_STORE", "h:1"}},
       "slurm",
       5,
       6,
       0},
      {{{"RANK", "0"},
        {"WORLD_SIZE", "2"},
        {"LOCAL_RANK", "0"},
        {"MASTER_ADDR", "127.0.0.1"},
        {"MASTER_PORT", "29500"}},
       "torchrun",
       0,
       2,
       0},
  };
  for (const Case& c : cases) {
    auto e = detect(c.env);
    ASSERT_TRUE(e.ok()) << c.source << ": " << e.status().to_string();
    EXPECT_EQ(e->source, c.source);
    EXPECT_EQ(e->rank, c.rank) << c.source;
    EXPECT_EQ(e->world_size, c.size) << c.source;
    EXPECT_EQ(e->local_rank, c.local_rank) << c.source;
  }
}

TEST(LaunchEnv, OrbiteVariablesWinOverLauncherVariables) {
  auto e = detect({{"ORBITE_RANK", "1"},
                   {"ORBITE_WORLD_SIZE", "2"},
                   {"OMPI_COMM_WORLD_RANK", "7"},
                   {"OMPI_COMM_WORLD_SIZE", "9"},
                   {"SLURM_PROCID", "3"},
                   {"SLURM_NTASKS", "4"},
                   {"ORBITE_STORE", "h:1"}});
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->source, "orbite");
  EXPECT_EQ(e->rank, 1);
  EXPECT_EQ(e->world_size, 2);
}

TEST(LaunchEnv, TorchrunStyleRankZeroHostsTheStore) {
  Env env = {
      {"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}};
  auto zero = detect(env);
  ASSERT_TRUE(zero.ok());
  EXPECT_TRUE(zero->host_store);
  EXPECT_EQ(zero->store_address, "127.0.0.1:29500");
  EXPECT_EQ(zero->store_source, "MASTER_ADDR");
  env["RANK"] = "1";
  auto one = detect(env);
  ASSERT_TRUE(one.ok());
  EXPECT_FALSE(one->host_store);
}

TEST(LaunchEnv, StoreAddressPrecedence) {
  BootstrapConfig config;
  config.store = "10.0.0.1:7";
  auto e =
      detect({{"ORBITE_STORE", "127.0.0.1:8"}, {"MASTER_ADDR", "x"}, {"MASTER_PORT", "9"}}, config);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->store_address, "10.0.0.1:7");
  EXPECT_EQ(e->store_source, "config");
  auto f = detect({{"ORBITE_STORE", "127.0.0.1:8"}, {"MASTER_ADDR", "x"}, {"MASTER_PORT", "9"}});
  EXPECT_EQ(f->store_address, "127.0.0.1:8");
  EXPECT_FALSE(f->host_store);
}

TEST(LaunchEnv, BadValuesNameTheVariableAndValue) {
  struct Case {
    Env env;
    std::string needle;
  };
  const Case cases[] = {
      {{{"ORBITE_RANK", "abc"}, {"ORBITE_WORLD_SIZE", "2"}}, "ORBITE_RANK='abc'"},
      {{{"ORBITE_RANK", "0"}}, "ORBITE_WORLD_SIZE is not set"},
      {{{"ORBITE_RANK", "4"}, {"ORBITE_WORLD_SIZE", "4"}},
       "ORBITE_RANK=4 is not below ORBITE_WORLD_SIZE=4"},
      {{{"ORBITE_RANK", "0"}, {"ORBITE_WORLD_SIZE", "0"}}, "ORBITE_WORLD_SIZE='0'"},
      {{{"SLURM_PROCID", "-1"}, {"SLURM_NTASKS", "2"}}, "SLURM_PROCID='-1'"},
      {{{"ORBITE_RANK", "0"}, {"ORBITE_WORLD_SIZE", "2"}, {"ORBITE_LOCAL_RANK", "x"}},
       "ORBITE_LOCAL_RANK='x'"},
      {{{"ORBITE_RANK", "0"},
        {"ORBITE_WORLD_SIZE", "2"},
        {"ORBITE_LOCAL_RANK", "3"},
        {"ORBITE_LOCAL_SIZE", "2"},
        {"ORBITE_STORE", "h:1"}},
       "ORBITE_LOCAL_RANK=3 is not below ORBITE_LOCAL_SIZE=2"},
      {{{"ORBITE_RANK", "0"}, {"ORBITE_WORLD_SIZE", "2"}}, "has no store address"},
      {{{"ORBITE_RANK", "0"}, {"ORBITE_WORLD_SIZE", "2"}, {"ORBITE_STORE", "nocolon"}},
       "'nocolon'"},
      {{{"MASTER_ADDR", "h"}}, "MASTER_PORT is not"},
      {{{"MASTER_ADDR", "h"}, {"MASTER_PORT", "70000"}}, "MASTER_PORT='70000'"},
  };
  for (const Case& c : cases) {
    auto e = detect(c.env);
    ASSERT_FALSE(e.ok()) << c.needle;
    EXPECT_EQ(e.status().code(), Errc::Configuration) << c.needle;
    EXPECT_NE(e.status().message().find(c.needle), std::string::npos)
        << "expected '" << c.needle << "' in: " << e.status().message();
  }
}

}  // namespace
}  // namespace orbite
