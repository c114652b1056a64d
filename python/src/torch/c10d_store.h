// An orbite::Store over the c10d::Store torch hands a backend (a PrefixStore over the job's
// TCPStore or FileStore), so that a process group bootstraps OrbiTE through torch's own
// rendezvous. c10d throws; this adapter returns OrbiTE statuses naming the key.
#pragma once

#include <orbite/store.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

namespace orbite::torch_backend {

class C10dStore final : public Store {
 public:
  explicit C10dStore(c10::intrusive_ptr<c10d::Store> store) : store_(std::move(store)) {}

  Status set(std::string_view key, std::string_view value) override;
  Result<std::string> get(std::string_view key, Duration timeout) override;
  Status wait(std::span<const std::string> keys, Duration timeout) override;
  Result<std::vector<bool>> check(std::span<const std::string> keys) override;
  Result<std::int64_t> add(std::string_view key, std::int64_t delta) override;
  // c10d's compareSet; an absent key with a non-empty `expected` is left absent.
  Result<std::string> compare_set(std::string_view key, std::string_view expected,
                                  std::string_view desired) override;
  Result<bool> erase(std::string_view key) override;

 private:
  // c10d's stores are thread-safe (TCPStore serializes on its socket).
  c10::intrusive_ptr<c10d::Store> store_;
};

}  // namespace orbite::torch_backend
