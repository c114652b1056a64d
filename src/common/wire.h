// Bounds-checked little-endian encoding for OrbiTE's framed protocols (store, control channel).
// A reader never reads past its buffer: every accessor fails once the data runs out, and the
// caller checks ok() before trusting anything it decoded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

namespace orbite::wire {

class Writer {
 public:
  explicit Writer(std::string& out) : out_(out) {}

  template <class T>
  requires std::is_integral_v<T>
  void put(T value) {
    using U = std::make_unsigned_t<T>;
    auto u = static_cast<U>(value);
    for (size_t i = 0; i < sizeof(T); ++i) out_.push_back(static_cast<char>((u >> (8 * i)) & 0xff));
  }
  // u32 length, then the bytes.
  void put_bytes(std::string_view bytes) {
    put<std::uint32_t>(static_cast<std::uint32_t>(bytes.size()));
    out_.append(bytes);
  }
  // Overwrites a u32 at `offset` (for lengths known only after the payload).
  void patch_u32(size_t offset, std::uint32_t value) {
    for (size_t i = 0; i < 4; ++i) out_[offset + i] = static_cast<char>((value >> (8 * i)) & 0xff);
  }
  [[nodiscard]] size_t size() const { return out_.size(); }

 private:
  std::string& out_;
};

class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}

  template <class T>
  requires std::is_integral_v<T> T get() {
    using U = std::make_unsigned_t<T>;
    if (!ok_ || data_.size() - pos_ < sizeof(T)) {
      ok_ = false;
      return T{};
    }
    U u = 0;
    for (size_t i = 0; i < sizeof(T); ++i) {
      u |= static_cast<U>(static_cast<U>(static_cast<unsigned char>(data_[pos_ + i])) << (8 * i));
    }
    pos_ += sizeof(T);
    return static_cast<T>(u);
  }
  // Reads a u32-length-prefixed byte string of at most max_len bytes.
  std::string_view get_bytes(size_t max_len) {
    auto len = get<std::uint32_t>();
    if (!ok_ || len > max_len || data_.size() - pos_ < len) {
      ok_ = false;
      return {};
    }
    std::string_view out = data_.substr(pos_, len);
    pos_ += len;
    return out;
  }

  [[nodiscard]] bool ok() const { return ok_; }
  [[nodiscard]] bool at_end() const { return pos_ == data_.size(); }
  // True when everything decoded and nothing is left over.
  [[nodiscard]] bool done() const { return ok_ && at_end(); }
  void fail() { ok_ = false; }

 private:
  std::string_view data_;
  size_t pos_ = 0;
  bool ok_ = true;
};

}  // namespace orbite::wire
