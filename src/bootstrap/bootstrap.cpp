#include <sys/random.h>

#include <atomic>
#include <cstdlib>

#include <orbite/bootstrap.h>

#include "common/log.h"
#include "common/net.h"
#include "common/strings.h"

namespace orbite {

struct Bootstrap::State {
  int rank = 0;
  int world_size = 1;
  std::optional<int> local_rank;
  std::shared_ptr<Store> store;
  std::unique_ptr<TcpStoreServer> server;
  std::string source;
  std::string store_address;
  BootstrapConfig config;
  std::atomic<std::uint64_t> setups{0};

  ~State() {
    if (!server) return;
    // Other ranks may still be talking to the store this process hosts: give them
    // bootstrap.shutdown_timeout to finish and disconnect before the server goes away.
    std::uint64_t ours = 1;
    if (store.use_count() == 1) {
      store.reset();
      ours = 0;
    }
    Status left = server->wait_for_connections_at_most(ours, config.shutdown_timeout);
    if (!left.ok()) {
      ORBITE_LOG(Warn, Bootstrap) << "stopping the hosted store: " << left.message();
    }
    server->stop();
  }
};

namespace {

std::optional<std::string> getenv_opt(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

TcpStoreClientOptions client_options(const BootstrapConfig& config, std::string address,
                                     std::string token) {
  TcpStoreClientOptions o;
  o.address = std::move(address);
  o.token = std::move(token);
  o.connect_timeout = config.connect_timeout;
  o.max_value_bytes = config.max_value_bytes;
  return o;
}

}  // namespace

std::string generate_store_token() {
  unsigned char bytes[16] = {};
  size_t got = 0;
  while (got < sizeof(bytes)) {
    ssize_t n = getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : bytes) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

Result<HostedStore> host_job_store(const BootstrapConfig& config, bool all_ranks_local,
                                   std::string_view listen) {
  HostedStore out;
  out.token = getenv_opt("ORBITE_STORE_TOKEN").value_or("");
  if (out.token.empty()) out.token = generate_store_token();

  TcpStoreServerOptions options;
  options.token = out.token;
  options.max_value_bytes = config.max_value_bytes;
  std::string advertise_host;
  if (!listen.empty()) {
    options.listen = std::string(listen);
  } else {
    ORBITE_ASSIGN_OR_RETURN(net::InterfaceAddress ifa,
                            net::select_interface(config.interface, all_ranks_local));
    options.listen = net::format_host_port(ifa.address, 0);
  }
  ORBITE_ASSIGN_OR_RETURN(out.server, TcpStoreServer::start(options));
  ORBITE_ASSIGN_OR_RETURN(net::HostPort bound, net::parse_host_port(out.server->address()));
  if (bound.host == "0.0.0.0" || bound.host == "::") {
    // A wildcard listener is reached through a concrete address of this host.
    ORBITE_ASSIGN_OR_RETURN(net::InterfaceAddress ifa,
                            net::select_interface(config.interface, all_ranks_local));
    bound.host = ifa.address;
  }
  out.address = net::format_host_port(bound.host, bound.port);
  return out;
}

Bootstrap::Bootstrap(std::shared_ptr<State> state) : state_(std::move(state)) {}

Result<Bootstrap> Bootstrap::from_env() {
  ORBITE_ASSIGN_OR_RETURN(EngineConfig config, EngineConfig::load());
  return from_env(config.bootstrap);
}

Result<Bootstrap> Bootstrap::from_env(const BootstrapConfig& config) {
  ORBITE_ASSIGN_OR_RETURN(LaunchEnvironment env, detect_launch_environment(config));
  log::set_rank(env.rank);
  auto state = std::make_shared<State>();
  state->rank = env.rank;
  state->world_size = env.world_size;
  state->local_rank = env.local_rank;
  state->source = env.source;
  state->config = config;
  std::string token = getenv_opt("ORBITE_STORE_TOKEN").value_or("");

  if (env.store_address.empty()) {
    // A single process needs no server.
    state->store = std::make_shared<InProcessStore>();
    return Bootstrap(std::move(state));
  }
  if (env.host_store) {
    TcpStoreServerOptions options;
    options.listen = env.store_address;
    options.token = token;
    options.max_value_bytes = config.max_value_bytes;
    auto server = TcpStoreServer::start(options);
    if (!server.ok()) {
      return server.status().with_context("rank 0 hosting the store at " + env.store_address +
                                          " (from " + env.store_source + ")");
    }
    state->server = std::move(*server);
  }
  auto client = TcpStoreClient::connect(client_options(config, env.store_address, token));
  if (!client.ok()) {
    return client.status().with_context("rank " + std::to_string(env.rank) +
                                        " connecting to the store from " + env.store_source);
  }
  state->store = std::move(*client);
  state->store_address = env.store_address;
  ORBITE_LOG(Info, Bootstrap) << "rank " << env.rank << " of " << env.world_size << " (from "
                              << env.source << " variables), store " << env.store_address
                              << (state->server ? " (hosted here)" : "");
  return Bootstrap(std::move(state));
}

Result<Bootstrap> Bootstrap::from_store(std::shared_ptr<Store> store, int rank, int world_size,
                                        std::optional<int> local_rank,
                                        const BootstrapConfig& config) {
  return from_hosted_store(nullptr, std::move(store), rank, world_size, local_rank, "explicit",
                           config);
}

Result<Bootstrap> Bootstrap::from_hosted_store(std::unique_ptr<TcpStoreServer> server,
                                               std::shared_ptr<Store> store, int rank,
                                               int world_size, std::optional<int> local_rank,
                                               std::string source, const BootstrapConfig& config) {
  if (!store) return Status::error(Errc::InvalidArgument, "bootstrap store is null");
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    return Status::error(Errc::InvalidArgument, "bootstrap rank " + std::to_string(rank) +
                                                    " is outside world size " +
                                                    std::to_string(world_size));
  }
  if (local_rank && *local_rank < 0) {
    return Status::error(Errc::InvalidArgument,
                         "bootstrap local rank " + std::to_string(*local_rank) + " is negative");
  }
  log::set_rank(rank);
  auto state = std::make_shared<State>();
  state->rank = rank;
  state->world_size = world_size;
  state->local_rank = local_rank;
  state->source = std::move(source);
  state->config = config;
  if (auto* tcp = dynamic_cast<TcpStoreClient*>(store.get())) state->store_address = tcp->address();
  state->store = std::move(store);
  state->server = std::move(server);
  return Bootstrap(std::move(state));
}

int Bootstrap::rank() const {
  return state_->rank;
}
int Bootstrap::world_size() const {
  return state_->world_size;
}
std::optional<int> Bootstrap::local_rank() const {
  return state_->local_rank;
}
const std::shared_ptr<Store>& Bootstrap::store() const {
  return state_->store;
}
const std::string& Bootstrap::source() const {
  return state_->source;
}
const std::string& Bootstrap::store_address() const {
  return state_->store_address;
}
const BootstrapConfig& Bootstrap::config() const {
  return state_->config;
}
bool Bootstrap::hosts_store() const {
  return state_->server != nullptr;
}
std::string Bootstrap::next_collective_tag(std::string_view kind) const {
  return std::string(kind) + "." + std::to_string(state_->setups.fetch_add(1));
}

}  // namespace orbite
