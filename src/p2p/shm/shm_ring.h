// A single-producer, single-consumer ring of frames in a POSIX shared-memory segment: one per
// direction per same-host peer. The producer copies a frame header and payload in and publishes
// it by storing the record's length last; the consumer polls the length word where the next
// record starts (so publication and data share a cache line), reads the frame in place and
// retires it by advancing tail.
// A consumer about to sleep raises `consumer_sleeping`, and a producer that sees it rings the
// peer's doorbell on the TCP connection, so an idle engine needs no polling.
#pragma once

#include <orbite/status.h>

#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "p2p/frame.h"

namespace orbite::p2p {

class ShmRing {
 public:
  // Creates a new segment (O_EXCL) of `capacity` data bytes, a power of two.
  static Result<ShmRing> create(const std::string& name, std::uint64_t capacity);
  // Maps a segment the peer created; checks its header before trusting it.
  static Result<ShmRing> open(const std::string& name, std::uint64_t capacity);

  ShmRing() = default;
  ShmRing(ShmRing&& o) noexcept;
  ShmRing& operator=(ShmRing&& o) noexcept;
  ShmRing(const ShmRing&) = delete;
  ShmRing& operator=(const ShmRing&) = delete;
  ~ShmRing();

  [[nodiscard]] bool valid() const { return base_ != nullptr; }
  [[nodiscard]] const std::string& name() const { return name_; }
  [[nodiscard]] std::uint64_t capacity() const { return capacity_; }
  // The largest payload one frame may carry through this ring.
  [[nodiscard]] std::uint64_t max_payload() const { return capacity_ / 4; }
  // Removes the name; the mapping stays valid (both sides unlink once both have mapped).
  void unlink_name();

  // Producer: copies header and payload (gathered from iov) in; false when the ring lacks space.
  bool try_push(const FrameHeader& h, std::span<const iovec> payload);
  // Whether the consumer asked for a doorbell (and clears the request).
  bool take_doorbell_request();
  // Fence every push so that no doorbell request is ever missed (for sleepers without timeout).
  void set_strict_wakeup(bool strict) { strict_wakeup_ = strict; }

  // Consumer: the oldest frame's header bytes (kFrameHeaderBytes, then payload), or null. Null
  // with corrupt() set when the peer wrote an impossible record.
  const std::byte* peek();
  // Bytes of the record peek() returned that may hold header and payload.
  [[nodiscard]] std::uint64_t current_frame_room() const { return current_len_ - 8; }
  [[nodiscard]] const std::string& corrupt() const { return corrupt_; }
  void pop();
  [[nodiscard]] bool empty() const;
  // Raise before sleeping; returns false (and lowers it) if frames arrived meanwhile.
  bool prepare_sleep();
  void cancel_sleep();

 private:
  struct Header;
  Header* header() const { return reinterpret_cast<Header*>(base_); }
  std::byte* data() const;
  // The u32 that starts a record: its length, nonzero once the record is published.
  std::atomic_ref<std::uint32_t> length_word(std::uint64_t pos) const;
  void reset();

  std::byte* base_ = nullptr;
  std::size_t map_bytes_ = 0;
  std::shared_ptr<void> mapping_;  // unmaps on release
  std::uint64_t capacity_ = 0;
  std::string name_;
  bool owner_ = false;
  std::uint64_t current_len_ = 0;
  bool strict_wakeup_ = true;
  std::uint64_t cached_tail_ = 0;  // producer's last view of the consumer's tail
  std::string corrupt_;
};

}  // namespace orbite::p2p
