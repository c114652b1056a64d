// GPUDirect RDMA routes (p2p/rdma/gdr.h): the guide's rule for auto, dmabuf and peermem, and
// NCCL's three peermem probe files under a redirected sysfs root.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "../support/config_test_helpers.h"
#include "p2p/rdma/gdr.h"

namespace orbite::rdma {
namespace {

GdrPrerequisites all_dmabuf() {
  GdrPrerequisites p;
  p.device_dma_buf = true;
  p.export_entry = true;
  p.verbs_dmabuf_entry = true;
  return p;
}

TEST(GdrRoute, AutoPrefersDmabufThenPeermem) {
  GdrPrerequisites p = all_dmabuf();
  p.peermem_file = "/sys/module/nvidia_peermem/version";
  EXPECT_EQ(*resolve_gdr_route(GpuDirectRegistration::Auto, p, "m"), GdrRoute::Dmabuf);
  p.verbs_dmabuf_entry = false;  // any one dma-buf prerequisite missing
  EXPECT_EQ(*resolve_gdr_route(GpuDirectRegistration::Auto, p, "m"), GdrRoute::Peermem);
}

TEST(GdrRoute, AutoWithNeitherNamesEveryMissingPrerequisite) {
  GdrPrerequisites p;
  auto r = resolve_gdr_route(GpuDirectRegistration::Auto, p, "device 0");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Errc::Unavailable);
  EXPECT_CONTAINS(r.status().message(), "device 0");
  EXPECT_CONTAINS(r.status().message(), "DMA_BUF_SUPPORTED");
  EXPECT_CONTAINS(r.status().message(), "cuMemGetHandleForAddressRange");
  EXPECT_CONTAINS(r.status().message(), "ibv_reg_dmabuf_mr");
  EXPECT_CONTAINS(r.status().message(), "nvidia_peermem");
}

TEST(GdrRoute, AnExplicitRouteNeverFallsBackToTheOther) {
  GdrPrerequisites p = all_dmabuf();
  auto peermem = resolve_gdr_route(GpuDirectRegistration::Peermem, p, "m");
  ASSERT_FALSE(peermem.ok());
  EXPECT_EQ(peermem.status().code(), Errc::Unavailable);
  EXPECT_CONTAINS(peermem.status().message(), "gpu_direct_registration = peermem");
  p = {};
  p.peermem_file = "/x";
  p.device_dma_buf = true;
  p.verbs_dmabuf_entry = true;
  auto dmabuf = resolve_gdr_route(GpuDirectRegistration::Dmabuf, p, "m");
  ASSERT_FALSE(dmabuf.ok());
  EXPECT_CONTAINS(dmabuf.status().message(), "gpu_direct_registration = dmabuf");
  EXPECT_CONTAINS(dmabuf.status().message(), "cuMemGetHandleForAddressRange");
  EXPECT_EQ(*resolve_gdr_route(GpuDirectRegistration::Peermem, p, "m"), GdrRoute::Peermem);
}

TEST(GdrRoute, PeermemProbeReadsNcclsThreeFilesOnly) {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / ("orbite-sysfs-" + std::to_string(getpid()));
  fs::remove_all(root);
  fs::create_directories(root / "module/nvidia_peermem");  // a module directory alone: no
  EXPECT_EQ(peermem_probe(root.string()), "");
  const char* files[] = {"module/nvidia_peermem/version", "kernel/mm/memory_peers/nv_mem/version",
                         "kernel/mm/memory_peers/nv_mem_nc/version"};
  for (const char* f : files) {
    fs::create_directories((root / f).parent_path());
    std::ofstream(root / f) << "1.0\n";
    EXPECT_EQ(peermem_probe(root.string()), (root / f).string()) << f;
    fs::remove(root / f);
  }
  fs::remove_all(root);
  setenv("ORBITE_SYSFS_ROOT", "/somewhere", 1);
  EXPECT_EQ(sysfs_root(), "/somewhere");
  unsetenv("ORBITE_SYSFS_ROOT");
  EXPECT_EQ(sysfs_root(), "/sys");
}

}  // namespace
}  // namespace orbite::rdma
