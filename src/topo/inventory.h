// The host inventory: CPUs and NUMA nodes, the PCI tree, RDMA NICs and GPUs, read from hwloc (the
// live machine or an XML file) and joined with what the verbs provider and the CUDA driver
// report. Discovery never opens a device and never creates a CUDA context: the callers that can
// (src/p2p's loaders) pass their device lists in.
#pragma once

#include <orbite/status.h>

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "topo/location.h"

namespace orbite::topo {

struct PciAddress {
  std::uint32_t domain = 0;
  std::uint8_t bus = 0;
  std::uint8_t device = 0;
  std::uint8_t function = 0;

  // "dddd:bb:dd.f" (lower case hex); "bb:dd.f" means domain 0. Case-insensitive. nullopt when
  // the text is not a bus ID.
  static std::optional<PciAddress> parse(std::string_view text);
  [[nodiscard]] std::string to_string() const;  // "0000:4e:00.0"
  friend auto operator<=>(const PciAddress&, const PciAddress&) = default;
};

struct PciFunction {
  PciAddress address;
  std::uint16_t vendor_id = 0;
  std::uint16_t device_id = 0;
  std::uint16_t class_id = 0;  // base class and subclass, e.g. 0x0302 (3D controller)
  std::string model;           // hwloc's PCIDevice info, when the XML has it
  // The PCI-to-PCI bridges (switch ports and root ports) above this function, nearest first,
  // identified by their own bus IDs. Host bridges are not listed: sharing one proves nothing.
  std::vector<PciAddress> bridges;
};

struct NumaNode {
  int os_index = kUnknownNuma;
  int package = -1;    // os_index of the package holding it, -1 when unknown
  std::string cpuset;  // hwloc list syntax of its PUs, e.g. "0-27,56-83"
  std::uint64_t memory_bytes = 0;
};

// The name of an ibv_port_state value (4 → "ACTIVE"); the number itself when unknown.
[[nodiscard]] std::string port_state_name(std::uint64_t state);

struct PortInfo {
  std::uint32_t number = 1;
  std::string state;       // "ACTIVE", "DOWN", ...; empty when unknown
  double rate_gbps = 0.0;  // reported rate; 0 when unknown
  std::vector<std::string> gids;
};

struct NicInfo {
  int id = -1;         // stable: position after filters; a device that fails later keeps it
  std::string name;    // verbs device name, e.g. mlx5_0
  std::string netdev;  // network interface behind it (ib0, eth2); empty when unknown
  int numa = kUnknownNuma;
  std::optional<PciFunction> pci;  // nullopt: hwloc knows no PCI function for it
  std::vector<PortInfo> ports;     // known when the verbs provider reported them
  double link_gbps = 0.0;          // best known port rate; 0 when unknown
  bool seen_by_hwloc = false;
  bool seen_by_verbs = false;
};

struct GpuInfo {
  // The N of "cuda:N": the CUDA ordinal when the driver lists the GPU; without a driver, the
  // position in PCI bus order (CUDA_DEVICE_ORDER=PCI_BUS_ID); -1 for a GPU the driver hides.
  int ordinal = -1;
  bool cuda_visible = false;
  PciFunction pci;
  int numa = kUnknownNuma;
  std::string name;  // driver or hwloc model name, when known
};

struct Inventory {
  std::string source;             // "live machine" or the XML file's path
  std::string hwloc_api_version;  // hwloc_get_api_version() of the library that loaded it
  int packages = 0;
  int cores = 0;
  int pus = 0;
  std::vector<NumaNode> numa_nodes;
  std::vector<NicInfo> nics;  // nics[i].id == i
  std::vector<GpuInfo> gpus;  // CUDA-visible ones first, in ordinal order

  [[nodiscard]] const NicInfo* nic(std::string_view name) const;
  [[nodiscard]] const GpuInfo* gpu(int ordinal) const;
  [[nodiscard]] bool has_numa_node(int os_index) const;
};

// Device filters applied before IDs are given (so before any device is opened). An entry is an
// exact device name, "prefix*" for every name starting with prefix, and may end in ":PORT" to
// keep only that port. A nonempty whitelist wins; the blacklist applies only without one.
// ORBITE_RDMA_HCA (NCCL_IB_HCA's syntax) is turned into these lists by the configuration loader
// (common/strings.h, parse_hca_list).
struct NicFilter {
  std::vector<std::string> whitelist;
  std::vector<std::string> blacklist;
};
[[nodiscard]] bool filter_allows(const NicFilter& filter, std::string_view name,
                                 std::uint32_t port = 1);
// What the layers that may touch devices know; std::nullopt means "no provider / no driver".
struct VerbsDevice {
  std::string name;
  std::optional<PciAddress> pci;  // from sysfs, when known
  int numa = kUnknownNuma;
  std::vector<PortInfo> ports;
};
struct CudaDevice {
  int ordinal = 0;
  PciAddress pci;
  std::string name;
  // The host NUMA node the driver reports, used only when hwloc does not see the GPU (a
  // container without PCI data, or softcuda's configured devices).
  int numa = kUnknownNuma;
};

struct DiscoveryInput {
  std::string hwloc_xml;  // empty: the live machine
  // NCCL topology XML placing GPUs, NICs and NUMA nodes over hwloc's view (topo/nccl_xml.h);
  // empty: none.
  std::string nccl_xml;
  std::optional<std::vector<VerbsDevice>> verbs;
  std::optional<std::vector<CudaDevice>> cuda;
  NicFilter filter;
};

// Builds the inventory. NICs: the verbs provider's devices in its order (placed in the PCI tree
// by name or bus ID), or without a provider hwloc's OpenFabrics devices; filtered, then numbered.
// GPUs: NVIDIA PCI functions of a display class (0x03xx), so NVSwitches are not GPUs.
Result<Inventory> discover(const DiscoveryInput& input);

}  // namespace orbite::topo
