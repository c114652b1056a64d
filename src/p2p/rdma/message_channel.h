// One peer's message channel on a lane (frames.cpp drives it over verbs): this side's message
// QP to the peer, the frames waiting for it (a credit, SQ room or the connection) and those
// posted, in order, until their SEND completes. It owns the frames' pins: a frame leaves it
// written (handed to the protocol), failed or dropped, and each way releases the pin once.
// Touched by the lane's mutex holder only.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <utility>
#include <vector>

#include "p2p/peer.h"
#include "p2p/registry.h"

namespace orbite::rdma {

// One QP slot of a peer on this lane: a slot of a QP array, or the message channel's.
struct QpSlot {
  enum class State : std::uint8_t { Empty, Building, Ready } state = State::Empty;
  std::uint16_t qp_handle = 0;
  std::uint64_t incarnation = 0;  // this side's generation of the slot
  std::uint64_t builder = 0;
  std::vector<std::uint64_t> waiters;  // parents
};

class MessageChannel {
 public:
  QpSlot qp;                    // slot kMessageSlot
  std::uint8_t remote_nic = 0;  // the peer's NIC the message QP connects to

  void queue(detail::SendItem item) { out_.push_back(std::move(item)); }
  [[nodiscard]] bool waiting() const { return !out_.empty(); }       // frames not posted yet
  [[nodiscard]] bool in_flight() const { return !posted_.empty(); }  // posted, not completed
  [[nodiscard]] bool pending() const { return waiting() || in_flight(); }
  [[nodiscard]] std::size_t unposted() const { return out_.size(); }
  [[nodiscard]] std::size_t posted_count() const { return posted_.size(); }
  // The next frame to post, and its move to the posted ones once the HCA accepted it.
  [[nodiscard]] detail::SendItem& next() { return out_.front(); }
  void posted() {
    posted_.push_back(std::move(out_.front()));
    out_.pop_front();
  }
  // The oldest posted frame, whose SEND completed (RC completes a QP's sends in order); nullopt
  // when none was posted. The caller owns its pin from here.
  std::optional<detail::SendItem> completed() {
    if (posted_.empty()) return std::nullopt;
    detail::SendItem item = std::move(posted_.front());
    posted_.pop_front();
    return item;
  }
  // The endpoint closed: frames not yet posted are dropped, posted ones complete or flush.
  void drop_unsent() { release(out_); }
  // The link failed: every frame goes (whether a posted one arrived is unknown; none is resent).
  void fail() {
    release(out_);
    release(posted_);
    qp.state = QpSlot::State::Empty;
  }
  static void release(detail::SendItem& item) {
    if (item.pinned != nullptr) item.pinned->unpin();
    item.pinned = nullptr;
  }

 private:
  static void release(std::deque<detail::SendItem>& items) {
    for (detail::SendItem& item : items) release(item);
    items.clear();
  }
  std::deque<detail::SendItem> out_;
  std::deque<detail::SendItem> posted_;
};

}  // namespace orbite::rdma
