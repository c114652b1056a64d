#include <gtest/gtest.h>

#include <unistd.h>

#include <string>
#include <vector>

#include "common/log.h"

namespace orbite {
namespace {

class LogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    log::set_sink([this](std::string_view line) { lines_.emplace_back(line); });
  }
  void TearDown() override {
    log::set_sink({});
    log::configure(log::Settings{});
    log::set_rank(-1);
  }
  std::vector<std::string> lines_;
};

TEST_F(LogTest, LevelFiltersAndPrefixNamesHostPidRankSubsystem) {
  log::configure({log::Level::Info, ~0U});
  log::set_rank(3);
  ORBITE_LOG(Info, Bootstrap) << "hello " << 42;
  ORBITE_LOG(Debug, Bootstrap) << "hidden";
  ASSERT_EQ(lines_.size(), 1U);
  const std::string& line = lines_[0];
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  std::string prefix = std::string(host) + ":" + std::to_string(getpid()) + ":3 [bootstrap] INFO ";
  EXPECT_EQ(line, prefix + "hello 42\n");
}

TEST_F(LogTest, DisabledMessagesAreNotEvaluated) {
  log::configure({log::Level::Error, ~0U});
  int evaluated = 0;
  auto touch = [&] { return ++evaluated; };
  ORBITE_LOG(Warn, Tcp) << touch();
  EXPECT_EQ(evaluated, 0);
  EXPECT_TRUE(lines_.empty());
}

TEST_F(LogTest, SubsystemMask) {
  auto parsed = log::parse_settings(std::string("trace"), std::string("tcp,shm"));
  ASSERT_TRUE(parsed.ok());
  log::configure(*parsed);
  ORBITE_LOG(Trace, Tcp) << "a";
  ORBITE_LOG(Trace, Rdma) << "b";
  ORBITE_LOG(Error, Rdma) << "c";
  ASSERT_EQ(lines_.size(), 1U);
  EXPECT_NE(lines_[0].find("[tcp] TRACE a"), std::string::npos);

  auto inverted = log::parse_settings(std::string("info"), std::string("^rdma"));
  ASSERT_TRUE(inverted.ok());
  EXPECT_TRUE(inverted->subsys_mask & (1U << static_cast<unsigned>(log::Subsys::Tcp)));
  EXPECT_FALSE(inverted->subsys_mask & (1U << static_cast<unsigned>(log::Subsys::Rdma)));
}

TEST_F(LogTest, BadSettingsNameTheVariableAndValue) {
  auto level = log::parse_settings(std::string("loud"), std::nullopt);
  ASSERT_FALSE(level.ok());
  EXPECT_EQ(level.status().code(), Errc::Configuration);
  EXPECT_NE(level.status().message().find("ORBITE_LOG_LEVEL='loud'"), std::string::npos);
  auto subsys = log::parse_settings(std::nullopt, std::string("tcp,gpu"));
  ASSERT_FALSE(subsys.ok());
  EXPECT_NE(subsys.status().message().find("'gpu'"), std::string::npos);
  auto defaults = log::parse_settings(std::nullopt, std::nullopt);
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->level, log::Level::Warn);
}

TEST_F(LogTest, UnknownRankPrintsDash) {
  log::configure({log::Level::Warn, ~0U});
  log::set_rank(-1);
  ORBITE_LOG(Warn, General) << "x";
  ASSERT_EQ(lines_.size(), 1U);
  EXPECT_NE(lines_[0].find(":- [general] WARN x"), std::string::npos);
}

}  // namespace
}  // namespace orbite
