#include <gtest/gtest.h>

#include <orbite/info.h>
#include <orbite/version.h>

namespace orbite {
namespace {

TEST(Info, BuildInfoMatchesTheBuild) {
  BuildInfo b = build_info();
  EXPECT_EQ(b.version, ORBITE_VERSION_STRING);
  EXPECT_EQ(b.with_rdma, ORBITE_WITH_RDMA != 0);
  EXPECT_EQ(b.with_cuda, ORBITE_WITH_CUDA != 0);
  EXPECT_EQ(b.with_mpi, ORBITE_WITH_MPI != 0);
  EXPECT_FALSE(b.hwloc_build_version.empty());
}

TEST(Info, ProbesReportInsteadOfCrashing) {
  // Whatever this machine has, a probe answers with a consistent record.
  for (const LibraryProbe& p : {probe_libibverbs(), probe_libcuda(), probe_hwloc()}) {
    EXPECT_FALSE(p.library.empty());
    if (!p.found) {
      EXPECT_FALSE(p.detail.empty()) << p.library << " must say why it is missing";
    }
    if (!p.built_with) {
      EXPECT_FALSE(p.found) << p.library;
    }
  }
  LibraryProbe hw = probe_hwloc();
  EXPECT_TRUE(hw.found) << hw.detail;
  EXPECT_NE(hw.detail.find("core(s)"), std::string::npos);
}

TEST(Info, MissingCudaDriverIsUnavailableNamingTheLibrary) {
  LibraryProbe cuda = probe_libcuda();
  if (cuda.found) GTEST_SKIP() << "this machine has a CUDA driver: " << cuda.path;
  EXPECT_NE(cuda.detail.find("libcuda.so.1"), std::string::npos) << cuda.detail;
}

TEST(Info, ProbingTwiceGivesTheSameAnswer) {
  // The loaders resolve once and retain the result.
  LibraryProbe a = probe_libibverbs();
  LibraryProbe b = probe_libibverbs();
  EXPECT_EQ(a.found, b.found);
  EXPECT_EQ(a.path, b.path);
  EXPECT_EQ(a.detail, b.detail);
}

}  // namespace
}  // namespace orbite
