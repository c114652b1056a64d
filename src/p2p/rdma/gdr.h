// GPUDirect RDMA routes (the guide's "GPU Direct registration routes"): how a GPU MR is made,
// chosen from what the device, the CUDA driver, the verbs library and the kernel offer. Pure
// decisions and one sysfs probe; the registrations themselves are the MrSet's (engine.cpp).
#pragma once

#include <orbite/config.h>
#include <orbite/status.h>

#include <string>

namespace orbite::rdma {

enum class GdrRoute : std::uint8_t { Dmabuf, Peermem };

[[nodiscard]] const char* gdr_route_name(GdrRoute route);

// Where the kernel's sysfs is: ORBITE_SYSFS_ROOT when set (tests and containers that mount the
// host's sysfs elsewhere), else "/sys".
[[nodiscard]] std::string sysfs_root();

// NCCL's module probe: any one of memory_peers/nv_mem/version, memory_peers/nv_mem_nc/version
// (MLNX_OFED's nv_peer_mem) or module/nvidia_peermem/version under `root` exists. A module
// directory alone is not evidence of support. The file that was found, or "".
[[nodiscard]] std::string peermem_probe(const std::string& root);

// What a route needs, as found for one allocation's device.
struct GdrPrerequisites {
  bool device_dma_buf = false;      // CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED
  bool export_entry = false;        // the driver exports cuMemGetHandleForAddressRange
  bool verbs_dmabuf_entry = false;  // libibverbs exports ibv_reg_dmabuf_mr
  std::string peermem_file;         // peermem_probe()'s answer
};

// auto: dma-buf when all three of its prerequisites hold, else peermem when its module is
// loaded; an explicit route with a prerequisite missing, or auto with neither, is Unavailable
// naming what is missing (`where` names the memory).
Result<GdrRoute> resolve_gdr_route(GpuDirectRegistration wanted, const GdrPrerequisites& p,
                                   const std::string& where);

}  // namespace orbite::rdma
