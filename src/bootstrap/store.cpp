#include <orbite/store.h>

#include <string>
#include <vector>

#include "common/clock.h"

namespace orbite {

Store::~Store() = default;

Status Store::barrier(std::string_view tag, int rank, int world_size, Duration timeout) {
  if (world_size <= 0 || rank < 0 || rank >= world_size) {
    return Status::error(Errc::InvalidArgument,
                         "barrier " + std::string(tag) + ": rank " + std::to_string(rank) +
                             " is outside world size " + std::to_string(world_size));
  }
  const std::string base = "barrier/" + std::string(tag) + "/";
  // Each rank leaves a marker so that a timeout can name the ranks that never arrived.
  ORBITE_RETURN_IF_ERROR(set(base + "rank/" + std::to_string(rank), "1"));
  ORBITE_ASSIGN_OR_RETURN(std::int64_t arrived, add(base + "arrived", 1));
  if (arrived > world_size) {
    return Status::error(Errc::InvalidArgument, "barrier tag '" + std::string(tag) +
                                                    "' was used more than once (" +
                                                    std::to_string(arrived) + " arrivals for " +
                                                    std::to_string(world_size) + " ranks)");
  }
  const std::string done = base + "done";
  if (arrived == world_size) ORBITE_RETURN_IF_ERROR(set(done, "1"));
  Status waited = wait(std::span<const std::string>(&done, 1), timeout);
  if (waited.code() != Errc::Timeout) return waited;

  std::vector<std::string> markers;
  for (int r = 0; r < world_size; ++r) markers.push_back(base + "rank/" + std::to_string(r));
  auto present = check(markers);
  std::string missing;
  int count = 0;
  if (present.ok()) {
    for (int r = 0; r < world_size; ++r) {
      if ((*present)[static_cast<size_t>(r)]) continue;
      if (count++ < 16) missing += (missing.empty() ? "" : ",") + std::to_string(r);
    }
    if (count > 16) missing += ",...";
  }
  return Status::error(Errc::Timeout, "barrier '" + std::string(tag) + "' timed out after " +
                                          std::to_string(to_ms(timeout)) +
                                          " ms: " + std::to_string(count) + " of " +
                                          std::to_string(world_size) +
                                          " ranks did not arrive (ranks " + missing + ")");
}

}  // namespace orbite
