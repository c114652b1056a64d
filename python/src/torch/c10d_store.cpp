#include "c10d_store.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <string>

namespace orbite::torch_backend {

namespace {

std::vector<std::uint8_t> bytes_of(std::string_view s) {
  return {s.begin(), s.end()};
}
std::string string_of(const std::vector<std::uint8_t>& b) {
  return {b.begin(), b.end()};
}

// c10d reports a wait that ran out as an exception whose text says so; anything else is a store
// that is gone or broken.
Status status_of(const std::exception& e, std::string_view op, std::string_view key) {
  const std::string what = e.what();
  const bool timeout =
      what.find("imeout") != std::string::npos || what.find("timed out") != std::string::npos;
  return Status::error(timeout ? Errc::Timeout : Errc::ConnectionLost,
                       "c10d store " + std::string(op) + " '" + std::string(key) +
                           "': " + what.substr(0, what.find('\n')));
}

std::chrono::milliseconds ms_of(Duration d) {
  // c10d takes milliseconds; a bound beyond a year is as good as none.
  constexpr auto kYear = std::chrono::hours(24 * 365);
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::min<Duration>(d, kYear));
}

}  // namespace

Status C10dStore::set(std::string_view key, std::string_view value) {
  try {
    store_->set(std::string(key), bytes_of(value));
    return Status();
  } catch (const std::exception& e) {
    return status_of(e, "set", key);
  }
}

Result<std::string> C10dStore::get(std::string_view key, Duration timeout) {
  try {
    const std::string k(key);
    store_->wait({k}, ms_of(timeout));
    return string_of(store_->get(k));
  } catch (const std::exception& e) {
    return status_of(e, "get", key);
  }
}

Status C10dStore::wait(std::span<const std::string> keys, Duration timeout) {
  try {
    store_->wait(std::vector<std::string>(keys.begin(), keys.end()), ms_of(timeout));
    return Status();
  } catch (const std::exception& e) {
    return status_of(e, "wait", keys.empty() ? "" : keys.front());
  }
}

Result<std::vector<bool>> C10dStore::check(std::span<const std::string> keys) {
  std::vector<bool> out;
  out.reserve(keys.size());
  for (const std::string& k : keys) {
    try {
      out.push_back(store_->check({k}));
    } catch (const std::exception& e) {
      return status_of(e, "check", k);
    }
  }
  return out;
}

Result<std::int64_t> C10dStore::add(std::string_view key, std::int64_t delta) {
  try {
    return store_->add(std::string(key), delta);
  } catch (const std::exception& e) {
    return status_of(e, "add", key);
  }
}

Result<std::string> C10dStore::compare_set(std::string_view key, std::string_view expected,
                                           std::string_view desired) {
  try {
    return string_of(store_->compareSet(std::string(key), bytes_of(expected), bytes_of(desired)));
  } catch (const std::exception& e) {
    return status_of(e, "compare_set", key);
  }
}

Result<bool> C10dStore::erase(std::string_view key) {
  try {
    return store_->deleteKey(std::string(key));
  } catch (const std::exception& e) {
    return status_of(e, "erase", key);
  }
}

}  // namespace orbite::torch_backend
