// Ranks started by a test itself rather than by orbite-run, which stops the whole job when one
// rank dies: a store server in the test's process and orbite-run's variables set by hand. For
// tests that kill a rank and watch the others.
#pragma once

#include <gtest/gtest.h>

#include <orbite/bootstrap.h>
#include <orbite/store.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "subprocess.h"

namespace orbite::testing {

struct DirectJob {
  std::unique_ptr<TcpStoreServer> server;
  std::vector<std::unique_ptr<Child>> ranks;

  // Every rank's output, for failure messages.
  [[nodiscard]] std::string shown() const {
    std::string text;
    for (size_t r = 0; r < ranks.size(); ++r) {
      text += "\n--- rank " + std::to_string(r) + " stdout\n" + ranks[r]->out() + "--- stderr\n" +
              ranks[r]->err();
    }
    return text;
  }
};

// Starts `n` ranks of `argv` on this host with `env` added. On failure the job has no ranks and
// the test has a failure recorded.
inline DirectJob start_direct_ranks(int n, const std::vector<std::string>& argv,
                                    const std::map<std::string, std::string>& env) {
  DirectJob job;
  const std::string token = generate_store_token();
  TcpStoreServerOptions options;
  options.listen = "127.0.0.1:0";
  options.token = token;
  auto server = TcpStoreServer::start(options);
  if (!server.ok()) {
    ADD_FAILURE() << "store server: " << server.status().to_string();
    return job;
  }
  job.server = std::move(*server);
  for (int r = 0; r < n; ++r) {
    std::map<std::string, std::string> rank_env = env;
    rank_env.insert({{"ORBITE_STORE", job.server->address()},
                     {"ORBITE_STORE_TOKEN", token},
                     {"ORBITE_RANK", std::to_string(r)},
                     {"ORBITE_WORLD_SIZE", std::to_string(n)},
                     {"ORBITE_LOCAL_RANK", std::to_string(r)},
                     {"ORBITE_LOCAL_SIZE", std::to_string(n)}});
    job.ranks.push_back(std::make_unique<Child>(argv, rank_env));
    if (job.ranks.back()->pid() <= 0) {
      ADD_FAILURE() << "could not start rank " << r;
      job.ranks.clear();
      return job;
    }
  }
  return job;
}

}  // namespace orbite::testing
