// GPUDirect RDMA routes: the peermem probe and the route rule (gdr.h).
#include "p2p/rdma/gdr.h"

#include <sys/stat.h>

#include <cstdlib>

namespace orbite::rdma {

const char* gdr_route_name(GdrRoute route) {
  return route == GdrRoute::Dmabuf ? "dmabuf" : "peermem";
}

std::string sysfs_root() {
  const char* v = std::getenv("ORBITE_SYSFS_ROOT");
  return v != nullptr && *v != '\0' ? std::string(v) : std::string("/sys");
}

std::string peermem_probe(const std::string& root) {
  for (const char* rel :
       {"/kernel/mm/memory_peers/nv_mem/version", "/kernel/mm/memory_peers/nv_mem_nc/version",
        "/module/nvidia_peermem/version"}) {
    const std::string path = root + rel;
    struct stat st {};
    if (stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) return path;
  }
  return {};
}

namespace {

// The dma-buf prerequisites that do not hold, "" when all do.
std::string dmabuf_missing(const GdrPrerequisites& p) {
  std::string out;
  auto add = [&](bool ok, const char* what) {
    if (ok) return;
    if (!out.empty()) out += ", ";
    out += what;
  };
  add(p.device_dma_buf, "the device does not advertise CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED");
  add(p.export_entry, "the CUDA driver does not export cuMemGetHandleForAddressRange");
  add(p.verbs_dmabuf_entry, "libibverbs does not export ibv_reg_dmabuf_mr");
  return out;
}

constexpr const char* kNoPeermem =
    "no peermem module is loaded (none of memory_peers/nv_mem/version, "
    "memory_peers/nv_mem_nc/version, module/nvidia_peermem/version under the sysfs root)";

}  // namespace

Result<GdrRoute> resolve_gdr_route(GpuDirectRegistration wanted, const GdrPrerequisites& p,
                                   const std::string& where) {
  const std::string no_dmabuf = dmabuf_missing(p);
  const bool peermem = !p.peermem_file.empty();
  switch (wanted) {
    case GpuDirectRegistration::Dmabuf:
      if (no_dmabuf.empty()) return GdrRoute::Dmabuf;
      return Status::error(Errc::Unavailable,
                           where + ": rdma.gpu_direct_registration = dmabuf, but " + no_dmabuf);
    case GpuDirectRegistration::Peermem:
      if (peermem) return GdrRoute::Peermem;
      return Status::error(Errc::Unavailable,
                           where + ": rdma.gpu_direct_registration = peermem, but " + kNoPeermem);
    case GpuDirectRegistration::Auto: break;
  }
  if (no_dmabuf.empty()) return GdrRoute::Dmabuf;
  if (peermem) return GdrRoute::Peermem;
  return Status::error(Errc::Unavailable, where +
                                              ": no GPUDirect RDMA route (rdma.cuda_memory = "
                                              "direct): dma-buf needs what is missing here (" +
                                              no_dmabuf + ") and " + kNoPeermem);
}

}  // namespace orbite::rdma
