// The one place that loads libibverbs.so.1. It is dlopen'ed once, never unloaded, and its
// exports are resolved into one table; a missing library or export is one Unavailable error.
// Whatever library the loader finds (rdma-core, or softverbs in CI) serves the same code path.
#pragma once

#include <orbite/status.h>

#include <cstdint>
#include <string>
#include <vector>

#if ORBITE_WITH_RDMA
#include <infiniband/verbs.h>
#endif

namespace orbite::rdma {

#if ORBITE_WITH_RDMA
// Exported entry points (IBVERBS_1.x default versions). Verbs that verbs.h implements inline
// (post_send, poll_cq, ...) dispatch through the context's ops and need no entry here.
struct IbvApi {
  std::string path;  // the file the dynamic loader picked
  ibv_device** (*get_device_list)(int*) = nullptr;
  void (*free_device_list)(ibv_device**) = nullptr;
  const char* (*get_device_name)(ibv_device*) = nullptr;
  ibv_context* (*open_device)(ibv_device*) = nullptr;
  int (*close_device)(ibv_context*) = nullptr;
  int (*query_device)(ibv_context*, ibv_device_attr*) = nullptr;
  int (*query_port)(ibv_context*, uint8_t, ibv_port_attr*) = nullptr;
  int (*query_gid)(ibv_context*, uint8_t, int, ibv_gid*) = nullptr;
  ibv_pd* (*alloc_pd)(ibv_context*) = nullptr;
  int (*dealloc_pd)(ibv_pd*) = nullptr;
  ibv_mr* (*reg_mr)(ibv_pd*, void*, size_t, int) = nullptr;
  int (*dereg_mr)(ibv_mr*) = nullptr;
  ibv_comp_channel* (*create_comp_channel)(ibv_context*) = nullptr;
  int (*destroy_comp_channel)(ibv_comp_channel*) = nullptr;
  ibv_cq* (*create_cq)(ibv_context*, int, void*, ibv_comp_channel*, int) = nullptr;
  int (*destroy_cq)(ibv_cq*) = nullptr;
  int (*get_cq_event)(ibv_comp_channel*, ibv_cq**, void**) = nullptr;
  void (*ack_cq_events)(ibv_cq*, unsigned int) = nullptr;
  ibv_qp* (*create_qp)(ibv_pd*, ibv_qp_init_attr*) = nullptr;
  int (*modify_qp)(ibv_qp*, ibv_qp_attr*, int) = nullptr;
  int (*destroy_qp)(ibv_qp*) = nullptr;
  int (*get_async_event)(ibv_context*, ibv_async_event*) = nullptr;
  void (*ack_async_event)(ibv_async_event*) = nullptr;
  // Optional (nullptr when the library predates them).
  ibv_mr* (*reg_dmabuf_mr)(ibv_pd*, uint64_t, size_t, uint64_t, int, int) = nullptr;
  int (*query_gid_ex)(ibv_context*, uint32_t, uint32_t, ibv_gid_entry*, uint32_t,
                      size_t) = nullptr;  // _ibv_query_gid_ex (IBVERBS_1.11)
  int (*query_qp)(ibv_qp*, ibv_qp_attr*, int, ibv_qp_init_attr*) = nullptr;
};

// Loads the library on first use and returns the retained table, or Unavailable naming
// libibverbs.so.1 and the missing export. `path` is what dlopen is given (empty: the
// configured default, libibverbs.so.1). The first load in a process wins: a later call naming
// another path is a Configuration error naming both.
Result<const IbvApi*> load_ibverbs(const std::string& path = {});
#endif

// Whether this process has loaded a verbs library through the loader (tests: a CPU-only engine
// never does).
bool ibverbs_loaded();

// Names of the verbs devices the loaded library reports (Unavailable without RDMA support).
Result<std::vector<std::string>> list_verbs_devices();
struct VerbsPortRecord {
  std::uint32_t number = 1;
  int state = 0;                 // ibv_port_state (4: ACTIVE)
  std::uint32_t speed_code = 0;  // ibv_port_attr::active_speed
  std::uint8_t width_code = 0;   // ibv_port_attr::active_width
};
struct VerbsDeviceRecord {
  std::string name;
  std::string pci_bus_id;  // from sysfs (<ibdev_path>/device); empty when not a PCI device
  int numa = -1;           // <ibdev_path>/device/numa_node; -1 when unknown
  std::vector<VerbsPortRecord> ports;  // empty when the device could not be opened
};
// The devices with what sysfs says about their place, and their ports' state and speed (each
// device is opened for ibv_query_device/ibv_query_port and closed again; nothing else).
Result<std::vector<VerbsDeviceRecord>> describe_verbs_devices();
#if ORBITE_WITH_RDMA
// One device's name and sysfs place (bus ID, NUMA node); opens nothing, so no ports.
VerbsDeviceRecord describe_sysfs_place(ibv_device* dev, const IbvApi& api);
#endif
// Where libibverbs.so.1 was loaded from (empty when it could not be loaded).
std::string ibverbs_path();

}  // namespace orbite::rdma
