#include "platform/ibv_loader.h"

#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "platform/symbols.h"

namespace orbite::rdma {

#if ORBITE_WITH_RDMA
namespace {

constexpr const char* kLibrary = "libibverbs.so.1";

Result<IbvApi> open_library(const std::string& file) {
  // RTLD_LOCAL keeps verbs symbols out of the global namespace; the handle is never closed
  // because providers and their threads may outlive any engine.
  void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    return Status::error(Errc::Unavailable,
                         std::string(kLibrary) + " could not be loaded" +
                             (file == kLibrary ? std::string() : " from '" + file + "'") + ": " +
                             (err != nullptr ? err : "unknown error"));
  }
  IbvApi api;
  api.path = file;
  link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr &&
      map->l_name[0] != '\0') {
    api.path = map->l_name;
  }
  struct Entry {
    const char* name;
    bool ok;
  };
  const Entry required[] = {
      {"ibv_get_device_list",
       platform::resolve_symbol(handle, "ibv_get_device_list", api.get_device_list)},
      {"ibv_free_device_list",
       platform::resolve_symbol(handle, "ibv_free_device_list", api.free_device_list)},
      {"ibv_get_device_name",
       platform::resolve_symbol(handle, "ibv_get_device_name", api.get_device_name)},
      {"ibv_open_device", platform::resolve_symbol(handle, "ibv_open_device", api.open_device)},
      {"ibv_close_device", platform::resolve_symbol(handle, "ibv_close_device", api.close_device)},
      {"ibv_query_device", platform::resolve_symbol(handle, "ibv_query_device", api.query_device)},
      {"ibv_query_port", platform::resolve_symbol(handle, "ibv_query_port", api.query_port)},
      {"ibv_query_gid", platform::resolve_symbol(handle, "ibv_query_gid", api.query_gid)},
      {"ibv_alloc_pd", platform::resolve_symbol(handle, "ibv_alloc_pd", api.alloc_pd)},
      {"ibv_dealloc_pd", platform::resolve_symbol(handle, "ibv_dealloc_pd", api.dealloc_pd)},
      {"ibv_reg_mr", platform::resolve_symbol(handle, "ibv_reg_mr", api.reg_mr)},
      {"ibv_dereg_mr", platform::resolve_symbol(handle, "ibv_dereg_mr", api.dereg_mr)},
      {"ibv_create_comp_channel",
       platform::resolve_symbol(handle, "ibv_create_comp_channel", api.create_comp_channel)},
      {"ibv_destroy_comp_channel",
       platform::resolve_symbol(handle, "ibv_destroy_comp_channel", api.destroy_comp_channel)},
      {"ibv_create_cq", platform::resolve_symbol(handle, "ibv_create_cq", api.create_cq)},
      {"ibv_destroy_cq", platform::resolve_symbol(handle, "ibv_destroy_cq", api.destroy_cq)},
      {"ibv_get_cq_event", platform::resolve_symbol(handle, "ibv_get_cq_event", api.get_cq_event)},
      {"ibv_ack_cq_events",
       platform::resolve_symbol(handle, "ibv_ack_cq_events", api.ack_cq_events)},
      {"ibv_create_qp", platform::resolve_symbol(handle, "ibv_create_qp", api.create_qp)},
      {"ibv_modify_qp", platform::resolve_symbol(handle, "ibv_modify_qp", api.modify_qp)},
      {"ibv_destroy_qp", platform::resolve_symbol(handle, "ibv_destroy_qp", api.destroy_qp)},
      {"ibv_get_async_event",
       platform::resolve_symbol(handle, "ibv_get_async_event", api.get_async_event)},
      {"ibv_ack_async_event",
       platform::resolve_symbol(handle, "ibv_ack_async_event", api.ack_async_event)},
  };
  for (const Entry& e : required) {
    if (!e.ok) {
      return Status::error(Errc::Unavailable, std::string(kLibrary) + " (" + api.path +
                                                  ") lacks the required export " + e.name);
    }
  }
  platform::resolve_symbol(handle, "ibv_reg_dmabuf_mr", api.reg_dmabuf_mr);
  platform::resolve_symbol(handle, "_ibv_query_gid_ex", api.query_gid_ex);
  platform::resolve_symbol(handle, "ibv_query_qp", api.query_qp);
  return api;
}

struct Loaded {
  std::string requested;
  Result<IbvApi> api;
};
std::mutex g_load_mu;
// Written once under g_load_mu and never freed (the library stays loaded for the process).
std::atomic<const Loaded*> g_loaded{nullptr};

}  // namespace

Result<const IbvApi*> load_ibverbs(const std::string& path) {
  const std::string file = path.empty() ? std::string(kLibrary) : path;
  const Loaded* done = g_loaded.load(std::memory_order_acquire);
  if (done == nullptr) {
    std::lock_guard lock(g_load_mu);
    done = g_loaded.load(std::memory_order_relaxed);
    if (done == nullptr) {
      // Resolved once per process and retained, success or failure.
      done = new Loaded{file, open_library(file)};
      g_loaded.store(done, std::memory_order_release);
    }
  }
  if (!path.empty() && done->requested != file) {
    return Status::error(Errc::Configuration, "rdma.ibverbs_library: '" + file +
                                                  "' requested, but this process already "
                                                  "loaded the verbs library from '" +
                                                  done->requested +
                                                  "' (the first load in a process wins)");
  }
  if (!done->api.ok()) return done->api.status();
  return &done->api.value();
}

bool ibverbs_loaded() {
  const Loaded* done = g_loaded.load(std::memory_order_acquire);
  return done != nullptr && done->api.ok();
}

VerbsDeviceRecord describe_sysfs_place(ibv_device* dev, const IbvApi& api) {
  VerbsDeviceRecord r;
  r.name = api.get_device_name(dev);
  // The device link resolves to the PCI function's directory, whose name is the bus ID.
  const std::string device_dir = std::string(dev->ibdev_path) + "/device";
  if (char* real = ::realpath(device_dir.c_str(), nullptr)) {
    std::string path = real;
    std::free(real);
    const std::string base = path.substr(path.rfind('/') + 1);
    if (base.size() >= 7 && base[base.size() - 2] == '.') r.pci_bus_id = base;
  }
  if (std::FILE* f = std::fopen((device_dir + "/numa_node").c_str(), "r")) {
    int node = -1;
    if (std::fscanf(f, "%d", &node) == 1 && node >= 0) r.numa = node;
    std::fclose(f);
  }
  return r;
}

Result<std::vector<VerbsDeviceRecord>> describe_verbs_devices() {
  ORBITE_ASSIGN_OR_RETURN(const IbvApi* api, load_ibverbs());
  int n = 0;
  ibv_device** devices = api->get_device_list(&n);
  if (devices == nullptr) {
    int err = errno;
    return Status::error(
        Errc::Unavailable,
        std::string(kLibrary) + ": ibv_get_device_list failed: " + std::strerror(err));
  }
  std::vector<VerbsDeviceRecord> records;
  for (int i = 0; i < n; ++i) {
    VerbsDeviceRecord r = describe_sysfs_place(devices[i], *api);
    // The ports' state and rate, for the selector's link rates. A device that cannot be opened
    // (permissions, a provider error) keeps no ports: its rate stays unknown.
    if (ibv_context* ctx = api->open_device(devices[i])) {
      ibv_device_attr attr{};
      if (api->query_device(ctx, &attr) == 0) {
        for (std::uint32_t p = 1; p <= attr.phys_port_cnt; ++p) {
          ibv_port_attr port{};
          if (api->query_port(ctx, static_cast<std::uint8_t>(p), &port) != 0) continue;
          r.ports.push_back(
              {p, static_cast<int>(port.state), port.active_speed, port.active_width});
        }
      }
      api->close_device(ctx);
    }
    records.push_back(std::move(r));
  }
  api->free_device_list(devices);
  return records;
}

Result<std::vector<std::string>> list_verbs_devices() {
  ORBITE_ASSIGN_OR_RETURN(const IbvApi* api, load_ibverbs());
  int n = 0;
  ibv_device** devices = api->get_device_list(&n);
  if (devices == nullptr) {
    int err = errno;
    return Status::error(Errc::Unavailable,
                         std::string(kLibrary) +
                             ": ibv_get_device_list failed: " + std::strerror(err) + " (errno " +
                             std::to_string(err) + "; no RDMA-capable kernel support or devices)");
  }
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i) names.emplace_back(api->get_device_name(devices[i]));
  api->free_device_list(devices);
  return names;
}

std::string ibverbs_path() {
  auto api = load_ibverbs();
  return api.ok() ? (*api)->path : std::string();
}

#else

bool ibverbs_loaded() {
  return false;
}

Result<std::vector<VerbsDeviceRecord>> describe_verbs_devices() {
  return list_verbs_devices().status();
}

Result<std::vector<std::string>> list_verbs_devices() {
  return Status::error(
      Errc::Unavailable,
      "libibverbs.so.1: OrbiTE was built without RDMA support (ORBITE_WITH_RDMA=OFF)");
}
std::string ibverbs_path() {
  return {};
}

#endif

}  // namespace orbite::rdma
