// The CUDA loader against a recording fake libcuda.so.1 (fake_libcuda.c): each entry point is
// asked for by name with its own version and default flags, every version is an ABI the
// toolkit's driver stub defines, and a missing library or export is Unavailable naming it. Each
// case runs in a process of its own (the loader loads once): see tests/unit/CMakeLists.txt.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "platform/cuda_loader.h"

namespace orbite {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(CudaLoader, AsksForEachEntryPointWithItsOwnVersion) {
  const char* log = std::getenv("FAKE_CUDA_LOG");
  ASSERT_NE(nullptr, log);
  auto driver = cuda::probe_driver();
  ASSERT_TRUE(driver.ok()) << driver.status().to_string();
  EXPECT_EQ(12040, driver->driver_version);
  EXPECT_EQ(0, driver->device_count);
  // What the loader asked, in order (entry_points() asks again, after).
  std::istringstream asked(slurp(log));
  const std::vector<cuda::EntryPoint> table = cuda::entry_points();
  ASSERT_FALSE(table.empty());
  for (const cuda::EntryPoint& e : table) {
    std::string name;
    int version = 0;
    unsigned long long flags = 99;
    ASSERT_TRUE(asked >> name >> version >> flags) << "the loader never asked for " << e.name;
    EXPECT_EQ(e.name, name);
    EXPECT_EQ(e.version, version) << name;
    EXPECT_EQ(0u, flags) << name << ": CU_GET_PROC_ADDRESS_DEFAULT";
    EXPECT_TRUE(e.resolved) << name;
    EXPECT_LE(e.version, 12000) << name << ": a 12.x driver must serve every entry point";
  }
  // Every (name, version) is an ABI of the CUDA driver (the stub's table, as softcuda has it).
  const std::string exports = slurp(ORBITE_SOURCE_DIR "/softcuda/src/exports.inc");
  std::set<std::pair<std::string, int>> abis;
  const std::regex row(R"(SC_SYMBOL\((\w+), (\d+), "", \w+\))");
  for (std::sregex_iterator it(exports.begin(), exports.end(), row), end; it != end; ++it) {
    abis.emplace((*it)[1].str(), std::stoi((*it)[2].str()));
  }
  ASSERT_GT(abis.size(), 300u);
  for (const cuda::EntryPoint& e : table) {
    EXPECT_EQ(1u, abis.count({e.name, e.version}))
        << e.name << " version " << e.version << " is not an ABI of the driver stub";
  }
}

TEST(CudaLoader, AMissingRequiredExportIsUnavailableNamingIt) {
  auto driver = cuda::probe_driver();
  ASSERT_FALSE(driver.ok());
  EXPECT_EQ(Errc::Unavailable, driver.status().code());
  const std::string missing = std::getenv("FAKE_CUDA_MISSING");
  EXPECT_NE(std::string::npos,
            driver.status().message().find("libcuda.so.1 does not provide " + missing))
      << driver.status().message();
}

TEST(CudaLoader, AMissingOptionalExportLeavesTheDriverUsable) {
  auto driver = cuda::probe_driver();
  ASSERT_TRUE(driver.ok()) << driver.status().to_string();
  for (const cuda::EntryPoint& e : cuda::entry_points()) {
    if (e.name == std::getenv("FAKE_CUDA_MISSING")) {
      EXPECT_FALSE(e.required);
      EXPECT_FALSE(e.resolved);
      EXPECT_EQ("symbol not found", e.status);
    }
  }
}

TEST(CudaLoader, NoLibraryIsUnavailableNamingIt) {
  auto driver = cuda::probe_driver();
  ASSERT_FALSE(driver.ok());
  EXPECT_EQ(Errc::Unavailable, driver.status().code());
  EXPECT_NE(std::string::npos, driver.status().message().find("libcuda.so.1 could not be loaded"))
      << driver.status().message();
}

}  // namespace
}  // namespace orbite
