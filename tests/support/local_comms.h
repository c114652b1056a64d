// Communicators of `n` ranks in this process, each with its own engine, made side by side on
// threads over an in-process store: for unit tests of point-to-point behaviour without processes.
#pragma once

#include <gtest/gtest.h>

#include <orbite/communicator.h>
#include <orbite/store.h>

#include <memory>
#include <optional>
#include <thread>
#include <vector>

namespace orbite::testing {

// On failure the result is empty and the test has a failure recorded.
inline std::vector<Communicator> local_communicators(int n, const EngineConfig& config) {
  auto store = std::make_shared<InProcessStore>();
  std::vector<std::optional<Result<Communicator>>> slots(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      auto boot = Bootstrap::from_store(store, r, n);
      slots[static_cast<size_t>(r)].emplace(Communicator::create(*boot, config));
    });
  }
  for (auto& t : threads) t.join();
  std::vector<Communicator> comms;
  for (auto& s : slots) {
    if (!s->ok()) {
      ADD_FAILURE() << s->status().to_string();
      return {};
    }
    comms.push_back(std::move(**s));
  }
  return comms;
}

}  // namespace orbite::testing
