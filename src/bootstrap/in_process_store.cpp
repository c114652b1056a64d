#include <condition_variable>
#include <mutex>

#include <orbite/store.h>

#include "bootstrap/kv_table.h"
#include "common/clock.h"

namespace orbite {

struct InProcessStore::State {
  std::mutex mu;
  std::condition_variable changed;  // notified whenever a key is created or changed
  KvTable table;
};

InProcessStore::InProcessStore() : state_(std::make_unique<State>()) {}
InProcessStore::~InProcessStore() = default;

Status InProcessStore::set(std::string_view key, std::string_view value) {
  Status out;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    out = state_->table.set(key, std::string(value));
  }
  state_->changed.notify_all();
  return out;
}

Result<std::string> InProcessStore::get(std::string_view key, Duration timeout) {
  std::string k(key);
  ORBITE_RETURN_IF_ERROR(wait(std::span<const std::string>(&k, 1), timeout));
  std::lock_guard<std::mutex> lock(state_->mu);
  const std::string* v = state_->table.find(key);
  if (v == nullptr) {
    return Status::error(Errc::NotFound, "store key " + quote(key) + " was erased while waiting");
  }
  return *v;
}

Status InProcessStore::wait(std::span<const std::string> keys, Duration timeout) {
  Deadline deadline = Deadline::after(timeout);
  std::unique_lock<std::mutex> lock(state_->mu);
  auto all_present = [&] {
    for (const auto& k : keys) {
      if (!state_->table.contains(k)) return false;
    }
    return true;
  };
  if (!state_->changed.wait_until(lock, deadline.time_point(), all_present)) {
    std::string missing;
    for (const auto& k : keys) {
      if (!state_->table.contains(k)) missing += (missing.empty() ? "" : ", ") + quote(k);
    }
    return Status::error(Errc::Timeout, "store keys not set within " +
                                            std::to_string(to_ms(timeout)) + " ms: " + missing);
  }
  return {};
}

Result<std::vector<bool>> InProcessStore::check(std::span<const std::string> keys) {
  std::lock_guard<std::mutex> lock(state_->mu);
  std::vector<bool> out;
  out.reserve(keys.size());
  for (const auto& k : keys) out.push_back(state_->table.contains(k));
  return out;
}

Result<std::int64_t> InProcessStore::add(std::string_view key, std::int64_t delta) {
  Result<std::int64_t> out = std::int64_t{0};
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    out = state_->table.add(key, delta);
  }
  state_->changed.notify_all();
  return out;
}

Result<std::string> InProcessStore::compare_set(std::string_view key, std::string_view expected,
                                                std::string_view desired) {
  Result<std::string> out = std::string();
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    out = state_->table.compare_set(key, expected, desired);
  }
  state_->changed.notify_all();
  return out;
}

Result<bool> InProcessStore::erase(std::string_view key) {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->table.erase(key);
}

}  // namespace orbite
