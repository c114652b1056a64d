// split() and dup(): new communicators over some or all of this one's ranks, on the same engine.
// Their tags (hence message scopes) derive from the parent's tag and a per-parent counter, so
// every member computes the same ones without asking the store.
#include <algorithm>
#include <tuple>

#include "comm/communicator_impl.h"
#include "common/log.h"

namespace orbite {

Result<std::unique_ptr<Communicator::Impl>> Communicator::Impl::make_child(
    const std::vector<int>& members, std::string child_tag) const {
  const Impl& parent = *this;
  auto child = std::make_unique<Impl>(parent.bootstrap, parent.config);
  child->set_tag(std::move(child_tag));
  child->engine = parent.engine;
  child->core = parent.core;
  for (std::size_t i = 0; i < members.size(); ++i) {
    const auto old = static_cast<std::size_t>(members[i]);
    PeerInfo p = parent.peers[old];
    p.rank = static_cast<int>(i);
    child->peers.push_back(std::move(p));
    child->endpoints.push_back(parent.endpoints[old]);
    if (members[i] == parent.rank) child->rank = static_cast<int>(i);
  }
  ORBITE_RETURN_IF_ERROR(child->start_collectives());
  if (child->wants_segment()) {
    ORBITE_RETURN_IF_ERROR(child->attach_segment(child->key("ready")));
  }
  return child;
}

Result<std::optional<Communicator>> Communicator::split(int color, int key) {
  if (color < 0 && color != kUndefinedColor) {
    return Status::error(Errc::InvalidArgument,
                         "split: color " + std::to_string(color) +
                             " is negative (kUndefinedColor, -1, joins no communicator)");
  }
  const int n = size();
  std::vector<std::int32_t> mine = {color, key};
  std::vector<std::int32_t> all(2 * static_cast<std::size_t>(n));
  ORBITE_ASSIGN_OR_RETURN(Request r, all_gather(mine.data(), all.data(), 2, DataType::Int32));
  ORBITE_RETURN_IF_ERROR(r.wait(impl_->config.bootstrap.timeout).with_context("split"));
  const std::uint64_t serial = impl_->children++;
  if (color == kUndefinedColor) return std::optional<Communicator>{};
  std::vector<std::tuple<int, int>> order;  // (key, old rank) of this colour
  for (int p = 0; p < n; ++p) {
    if (all[2 * static_cast<std::size_t>(p)] == color) {
      order.emplace_back(all[2 * static_cast<std::size_t>(p) + 1], p);
    }
  }
  std::sort(order.begin(), order.end());
  std::vector<int> members;
  for (const auto& [k, p] : order) members.push_back(p);
  ORBITE_ASSIGN_OR_RETURN(
      auto child, impl_->make_child(members, impl_->tag + "/split" + std::to_string(serial) + "c" +
                                                 std::to_string(color)));
  ORBITE_LOG(Info, Coll) << "split " << impl_->tag << " colour " << color << ": rank "
                         << child->rank << " of " << members.size();
  return std::optional<Communicator>(Communicator(std::move(child)));
}

Result<Communicator> Communicator::dup() {
  // No message is needed (every rank derives the same tag), but the ranks meet so that dup()
  // is collective as in MPI.
  ORBITE_ASSIGN_OR_RETURN(Request r, barrier());
  ORBITE_RETURN_IF_ERROR(r.wait(impl_->config.bootstrap.timeout).with_context("dup"));
  const std::uint64_t serial = impl_->children++;
  std::vector<int> members(static_cast<std::size_t>(size()));
  for (int p = 0; p < size(); ++p) members[static_cast<std::size_t>(p)] = p;
  ORBITE_ASSIGN_OR_RETURN(auto child,
                          impl_->make_child(members, impl_->tag + "/dup" + std::to_string(serial)));
  return Communicator(std::move(child));
}

}  // namespace orbite
