#include <gtest/gtest.h>

#include <orbite/status.h>
#include <memory>
#include <set>

namespace orbite {
namespace {

Result<int> parse_positive(int v) {
  if (v <= 0) return Status::error(Errc::InvalidArgument, "value " + std::to_string(v) + " <= 0");
  return v;
}

Result<int> doubled(int v) {
  ORBITE_ASSIGN_OR_RETURN(int x, parse_positive(v));
  return 2 * x;
}

Status check_both(int a, int b) {
  ORBITE_RETURN_IF_ERROR(parse_positive(a).status());
  ORBITE_RETURN_IF_ERROR(parse_positive(b).status());
  return {};
}

TEST(Status, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), Errc::Ok);
  EXPECT_EQ(s.to_string(), "OK");
}

TEST(Status, ErrorCarriesCodeMessageAndLocation) {
  Status s = Status::error(Errc::Timeout, "wait for key 'x' ran out");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Errc::Timeout);
  EXPECT_EQ(s.to_string(), "Timeout: wait for key 'x' ran out");
  EXPECT_NE(std::string(s.file()).find("status_test.cpp"), std::string::npos);
  EXPECT_GT(s.line(), 0U);
}

TEST(Status, WithContextPrefixesAndKeepsCode) {
  Status s = Status::error(Errc::ConnectionLost, "peer closed").with_context("rank 3");
  EXPECT_EQ(s.code(), Errc::ConnectionLost);
  EXPECT_EQ(s.message(), "rank 3: peer closed");
  EXPECT_TRUE(Status().with_context("ignored").ok());
}

TEST(Status, EveryErrcHasADistinctName) {
  std::set<std::string_view> names;
  for (int c = 0; c <= static_cast<int>(Errc::Internal); ++c) {
    auto name = errc_name(static_cast<Errc>(c));
    EXPECT_NE(name, "Unknown");
    EXPECT_TRUE(names.insert(name).second) << name;
  }
  EXPECT_EQ(errc_name(Errc::Unquiesced), "Unquiesced");
}

TEST(Result, ValueAndErrorPaths) {
  auto good = doubled(21);
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, 42);
  auto bad = doubled(-1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Errc::InvalidArgument);
  EXPECT_EQ(bad.status().message(), "value -1 <= 0");
  EXPECT_EQ(bad.value_or(7), 7);
}

TEST(Result, ReturnIfErrorStopsAtTheFirstFailure) {
  EXPECT_TRUE(check_both(1, 2).ok());
  EXPECT_EQ(check_both(1, -5).message(), "value -5 <= 0");
  EXPECT_EQ(check_both(-4, -5).message(), "value -4 <= 0");
}

TEST(Result, OkStatusWithoutValueBecomesInternal) {
  Result<int> r{Status()};
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Errc::Internal);
}

TEST(Result, HoldsMoveOnlyValues) {
  Result<std::unique_ptr<int>> r = std::make_unique<int>(5);
  ASSERT_TRUE(r.ok());
  std::unique_ptr<int> p = std::move(r).value();
  EXPECT_EQ(*p, 5);
}

TEST(ResultDeathTest, ValueOfErrorAborts) {
  Result<int> r = Status::error(Errc::NotFound, "no such key");
  EXPECT_DEATH({ (void)r.value(); }, "no such key");
}

}  // namespace
}  // namespace orbite
