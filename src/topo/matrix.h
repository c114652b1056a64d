// Explicit NIC priorities: TENT's classic priority matrix or its native {"nics","mems"} topology,
// compiled against the discovered inventory into a PriorityTable.
//
// Unlike TENT, an explicit configuration never replaces discovery: it can only rank NICs that
// discovery found (after filters) for memory locations that discovery knows, and any error fails
// initialization instead of falling back to autodiscovery.
#pragma once

#include <orbite/config.h>
#include <orbite/status.h>

#include <cstddef>
#include <string_view>

#include "topo/inventory.h"
#include "topo/location.h"

namespace orbite::topo {

// Limit on the inline matrix and on the file, in bytes (the guide's 1 MiB).
inline constexpr std::size_t kMaxMatrixBytes = 1 << 20;

// Priorities from the explicit configuration: rdma.priority_matrix (inline, wins) or the file
// rdma.custom_json_path; with neither, discovered_priorities(inventory). When the inline matrix
// is set the file is not opened.
Result<PriorityTable> load_priorities(const rdma::RdmaConfig& config, const Inventory& inventory);

// Parses one JSON text: the native form when the top-level object has a "nics" or "mems" key,
// otherwise the classic matrix. `origin` ("priority_matrix" or "custom_json_path FILE") becomes
// the table's origin and prefixes every error message; an origin without a space is read as the
// name of the JSON value, so paths continue it (priority_matrix["cuda:0"][1][0]), while a file
// origin is followed by ": " and the path (custom_json_path /x.json: mems[0].name). Every
// rejection is Errc::Configuration.
Result<PriorityTable> parse_priorities(std::string_view json_text, std::string_view origin,
                                       const Inventory& inventory);

}  // namespace orbite::topo
