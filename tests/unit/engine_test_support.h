// Shared pieces of the engine tests: engines on loopback in this process, guarded buffers, and a
// fake peer that speaks the control protocol by hand over a raw TCP socket.
#pragma once

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include <orbite/transfer.h>

#include "common/clock.h"
#include "common/net.h"
#include "common/wire.h"
#include "p2p/control/handshake.h"
#include "p2p/frame.h"

namespace orbite {
// Readable error classes in gtest failure messages.
inline void PrintTo(Errc code, std::ostream* os) {
  *os << errc_name(code);
}
}  // namespace orbite

namespace orbite::testing {

// Every wait in these tests is bounded by this.
inline constexpr auto kWait = std::chrono::seconds(30);

struct Mode {
  ProgressMode progress = ProgressMode::Polling;
  std::uint32_t lanes = 1;
};

inline void PrintTo(const Mode& m, std::ostream* os) {
  *os << (m.progress == ProgressMode::Polling ? "polling" : "event-driven") << ", " << m.lanes
      << " lane(s)";
}

inline std::string mode_name(const ::testing::TestParamInfo<Mode>& info) {
  return std::string(info.param.progress == ProgressMode::Polling ? "Polling" : "EventDriven") +
         "_" + std::to_string(info.param.lanes) + "lanes";
}

inline EngineConfig loopback_config(const Mode& mode) {
  EngineConfig c;
  c.tcp.interface = "lo";  // an explicit interface: 127.0.0.1
  c.progress_mode = mode.progress;
  c.num_lanes = mode.lanes;
  return c;
}

inline std::shared_ptr<TransferEngine> make_engine(const EngineConfig& c) {
  auto e = TransferEngine::create(c);
  if (!e.ok()) {
    ADD_FAILURE() << "TransferEngine::create: " << e.status().to_string();
    return nullptr;
  }
  EXPECT_EQ((*e)->control_address().rfind("127.0.0.1:", 0), 0U) << (*e)->control_address();
  return *e;
}

inline std::byte pattern_at(std::uint64_t seed, std::uint64_t i) {
  return static_cast<std::byte>((seed * 0x9E3779B1u + i * 131 + (i >> 8) * 7 + 1) & 0xff);
}

// `size` bytes with kGuard guard bytes on each side that no transfer may touch.
class Guarded {
 public:
  static constexpr std::size_t kGuard = 256;
  static constexpr std::byte kGuardByte{0xA5};

  explicit Guarded(std::size_t size) : size_(size), storage_(size + 2 * kGuard, kGuardByte) {
    fill_zero();
  }
  [[nodiscard]] std::byte* data() { return storage_.data() + kGuard; }
  [[nodiscard]] std::size_t size() const { return size_; }
  std::byte& operator[](std::size_t i) { return storage_[kGuard + i]; }

  void fill(std::uint64_t seed) {
    for (std::size_t i = 0; i < size_; ++i) storage_[kGuard + i] = pattern_at(seed, i);
  }
  void fill_zero() { std::memset(data(), 0, size_); }

  // Where [at, at+len) differs from pattern(seed) shifted by `from`, or nullopt.
  [[nodiscard]] std::optional<std::size_t> mismatch(std::size_t at, std::size_t len,
                                                    std::uint64_t seed,
                                                    std::size_t from = 0) const {
    for (std::size_t i = 0; i < len; ++i) {
      if (storage_[kGuard + at + i] != pattern_at(seed, from + i)) return at + i;
    }
    return std::nullopt;
  }
  [[nodiscard]] bool zero(std::size_t at, std::size_t len) const {
    for (std::size_t i = 0; i < len; ++i) {
      if (storage_[kGuard + at + i] != std::byte{0}) return false;
    }
    return true;
  }
  [[nodiscard]] bool guards_intact() const {
    for (std::size_t i = 0; i < kGuard; ++i) {
      if (storage_[i] != kGuardByte || storage_[kGuard + size_ + i] != kGuardByte) return false;
    }
    return true;
  }

 private:
  std::size_t size_;
  std::vector<std::byte> storage_;
};

inline MemoryRegion must_register(TransferEngine& e, void* data, std::uint64_t len,
                                  Access access = {}) {
  auto r = e.register_memory(data, len, MemoryKind::Host, access);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? std::move(*r) : MemoryRegion();
}

// What a peer does with an exported descriptor: ship its bytes and parse them.
inline RemoteRegion import(const MemoryRegion& region) {
  auto r = RemoteRegion::from_bytes(region.export_descriptor().bytes());
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? *r : RemoteRegion();
}

// A descriptor in RemoteRegion::bytes()'s layout naming an engine that exists only as a fake.
inline RemoteRegion foreign_descriptor(const std::string& owner_id, const std::string& host_id,
                                       std::uint64_t region_id, std::uint64_t length,
                                       const std::string& address = "127.0.0.1:1") {
  std::string out;
  wire::Writer w(out);
  w.put<std::uint32_t>(0x4f52524d);  // "ORRM"
  w.put<std::uint8_t>(1);
  w.put_bytes(owner_id);
  // By default never dialled: the engine finds the fake's connection by id.
  w.put_bytes(address);
  w.put_bytes(host_id);
  w.put<std::int64_t>(::getpid());
  w.put<std::uint64_t>(region_id);
  w.put<std::uint64_t>(1);  // generation
  w.put<std::uint64_t>(length);
  w.put<std::uint8_t>(3);                                             // read | write
  w.put<std::uint32_t>(1u << static_cast<unsigned>(Transport::Tcp));  // tcp only
  auto r = RemoteRegion::from_bytes(out);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? *r : RemoteRegion();
}

// Two engines, A and B, on loopback in the test's mode, and a 64-byte region of A filled with
// pattern 21. After the test both engines must close cleanly.
class EnginePairTest : public ::testing::TestWithParam<Mode> {
 protected:
  void SetUp() override {
    a_ = make_engine(loopback_config(GetParam()));
    b_ = make_engine(loopback_config(GetParam()));
    ASSERT_TRUE(a_ && b_);
    local_.fill(21);
    local_r_ = must_register(*a_, local_.data(), local_.size());
  }
  void TearDown() override {
    local_r_ = MemoryRegion();
    for (auto* e : {&a_, &b_}) {
      if (*e) {
        EXPECT_TRUE((*e)->close(kWait).ok());
      }
    }
  }

  std::shared_ptr<TransferEngine> a_, b_;
  Guarded local_{64};
  MemoryRegion local_r_;
};

// A peer engine played by hand: a raw socket to an engine's control listener.
class FakePeer {
 public:
  static constexpr const char* kHostId = "elsewhere:boot";

  explicit FakePeer(const std::string& engine_address) {
    static int counter = 0;
    char id[33];
    std::snprintf(id, sizeof id, "fa4e%020x%08x", ::getpid(), counter++);
    id_ = id;
    auto hp = net::parse_host_port(engine_address);
    EXPECT_TRUE(hp.ok()) << hp.status().to_string();
    if (!hp.ok()) return;
    where_ = *hp;
    auto fd = net::connect_tcp(*hp, Deadline::after(kWait));
    EXPECT_TRUE(fd.ok()) << fd.status().to_string();
    if (fd.ok()) fd_ = std::move(*fd);
  }

  [[nodiscard]] const std::string& id() const { return id_; }
  [[nodiscard]] bool connected() const { return fd_.valid(); }

  // On the control connection, after the handshake too.
  Status send_control_bytes(const std::string& bytes) {
    return net::write_all(fd_.get(),
                          std::span(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()),
                          Deadline::after(kWait), "fake peer control write");
  }

  // On the tcp data stream once hello() opened it, on the control connection before.
  Status send_bytes(const std::string& bytes) {
    return net::write_all(io(),
                          std::span(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()),
                          Deadline::after(kWait), "fake peer write");
  }

  static std::string frame(const p2p::FrameHeader& h, const std::string& payload = {}) {
    p2p::FrameHeader copy = h;
    copy.payload_len = static_cast<std::uint32_t>(payload.size());
    std::array<std::byte, p2p::kFrameHeaderBytes> hdr{};
    p2p::encode_header(copy, hdr.data());
    return std::string(reinterpret_cast<const char*>(hdr.data()), hdr.size()) + payload;
  }

  // The Hello of a peer on another host that offers tcp (so no shared memory).
  static p2p::Handshake hello_body(const std::string& id) {
    p2p::Handshake h;
    h.engine_id = id;
    h.host_id = kHostId;
    h.pid = ::getpid();
    h.eager_credit = kMiB;
    h.transports.push_back(p2p::ConnectBlob{p2p::TransportId::Tcp, ""});
    return h;
  }

  // Sends Hello on the control connection and reads the engine's answer (HelloAck expected),
  // then opens the tcp data stream as an initiator does: a second connection whose Hello joins
  // the link. The frames of the data path go there.
  Result<p2p::Handshake> hello() {
    p2p::FrameHeader h;
    h.type = p2p::FrameType::Hello;
    ORBITE_RETURN_IF_ERROR(send_bytes(frame(h, p2p::encode_handshake(hello_body(id_)))));
    std::string body;
    ORBITE_ASSIGN_OR_RETURN(p2p::FrameHeader reply, read_frame(body));
    if (reply.type != p2p::FrameType::HelloAck) {
      return Status::error(Errc::Protocol, std::string("expected HelloAck, got ") +
                                               p2p::frame_type_name(reply.type));
    }
    ORBITE_ASSIGN_OR_RETURN(p2p::Handshake ack, p2p::decode_handshake(body));
    ORBITE_ASSIGN_OR_RETURN(data_, net::connect_tcp(where_, Deadline::after(kWait)));
    p2p::Handshake join = hello_body(id_);
    join.transports.clear();
    join.join = p2p::TransportId::Tcp;
    ORBITE_RETURN_IF_ERROR(send_bytes(frame(h, p2p::encode_handshake(join))));
    ORBITE_ASSIGN_OR_RETURN(p2p::FrameHeader joined, read_frame(body));
    if (joined.type != p2p::FrameType::HelloAck) {
      return Status::error(Errc::Protocol,
                           std::string("expected HelloAck on the tcp stream, got ") +
                               p2p::frame_type_name(joined.type));
    }
    return ack;
  }

  Result<p2p::FrameHeader> read_frame(std::string& payload) {
    std::array<std::byte, p2p::kFrameHeaderBytes> hdr{};
    ORBITE_RETURN_IF_ERROR(net::read_exact(io(), hdr, Deadline::after(kWait), "fake peer header"));
    ORBITE_ASSIGN_OR_RETURN(p2p::FrameHeader h, p2p::decode_header(hdr.data()));
    payload.assign(h.payload_len, '\0');
    ORBITE_RETURN_IF_ERROR(net::read_exact(
        io(), std::span(reinterpret_cast<std::byte*>(payload.data()), payload.size()),
        Deadline::after(kWait), "fake peer payload"));
    return h;
  }

  // Whether the engine closed the connection within the bound (any bytes first are discarded).
  bool closed_by_engine() {
    const Deadline deadline = Deadline::after(kWait);
    char buf[512];
    while (!deadline.expired()) {
      ssize_t n = ::recv(io(), buf, sizeof buf, MSG_DONTWAIT);
      if (n == 0) return true;
      if (n < 0 && errno == ECONNRESET) return true;
      if (n > 0 || errno == EINTR) continue;
      pollfd p{io(), POLLIN, 0};
      ::poll(&p, 1, deadline.poll_timeout_ms(100));
    }
    return false;
  }

  void close() {
    data_.reset();
    fd_.reset();
  }

 private:
  [[nodiscard]] int io() const { return data_.valid() ? data_.get() : fd_.get(); }

  std::string id_;
  net::HostPort where_;
  net::Fd fd_;    // the control connection
  net::Fd data_;  // the tcp data stream, once hello() opened it
};

}  // namespace orbite::testing
