// Communicator setup: every rank publishes its PeerInfo under the communicator's tag in the
// bootstrap store, waits for all the others, derives local ranks from host identities, and meets
// the others in a barrier.
#include <orbite/communicator.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>

#include "comm/host_identity.h"
#include "comm/peer_record.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/net.h"
#include "common/strings.h"

namespace orbite {

namespace {

std::string rank_list(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size() && i < 16; ++i) {
    out += (i == 0 ? "" : ",") + std::to_string(ranks[i]);
  }
  if (ranks.size() > 16) out += ",...";
  return out;
}

// Local-only jobs keep control traffic on loopback unless an interface is named.
bool store_is_local(const Bootstrap& bootstrap) {
  if (bootstrap.store_address().empty()) return true;
  auto hp = net::parse_host_port(bootstrap.store_address());
  return hp.ok() && net::is_loopback_host(hp->host);
}

}  // namespace

struct Communicator::Impl {
  Bootstrap bootstrap;
  EngineConfig config;
  std::string tag;
  int rank = 0;
  std::vector<PeerInfo> peers;
  // The control-channel listener this rank advertised; the data path accepts on it.
  net::Fd control_listener;
  std::uint64_t barriers = 0;

  Impl(Bootstrap b, EngineConfig c) : bootstrap(std::move(b)), config(std::move(c)) {}

  std::string key(std::string_view what) const { return "comm/" + tag + "/" + std::string(what); }

  Status exchange(const PeerInfo& self) {
    Store& store = *bootstrap.store();
    const int n = bootstrap.world_size();
    ORBITE_RETURN_IF_ERROR(
        store.set(key("peer/" + std::to_string(rank)), comm::encode_peer_record(self)));
    std::vector<std::string> keys;
    for (int r = 0; r < n; ++r) keys.push_back(key("peer/" + std::to_string(r)));
    Status waited = store.wait(keys, config.bootstrap.timeout);
    if (waited.code() == Errc::Timeout) {
      std::vector<int> missing;
      if (auto present = store.check(keys); present.ok()) {
        for (int r = 0; r < n; ++r) {
          if (!(*present)[static_cast<size_t>(r)]) missing.push_back(r);
        }
      }
      return Status::error(
          Errc::Timeout, "communicator setup: after " +
                             std::to_string(to_ms(config.bootstrap.timeout)) + " ms, " +
                             std::to_string(missing.size()) + " of " + std::to_string(n) +
                             " ranks had not published their address (ranks " + rank_list(missing) +
                             "; did they start, and use the same store?)");
    }
    ORBITE_RETURN_IF_ERROR(waited);
    peers.resize(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
      ORBITE_ASSIGN_OR_RETURN(std::string bytes,
                              store.get(keys[static_cast<size_t>(r)], config.bootstrap.timeout));
      ORBITE_ASSIGN_OR_RETURN(peers[static_cast<size_t>(r)], comm::decode_peer_record(bytes, r));
    }
    std::map<std::string, int> per_host;
    for (auto& p : peers) p.local_rank = per_host[p.host_id]++;
    for (auto& p : peers) p.local_size = per_host[p.host_id];
    return {};
  }
};

Communicator::Communicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Communicator::Communicator(Communicator&&) noexcept = default;
Communicator& Communicator::operator=(Communicator&&) noexcept = default;
Communicator::~Communicator() = default;

Result<Communicator> Communicator::create(const Bootstrap& bootstrap) {
  ORBITE_ASSIGN_OR_RETURN(EngineConfig config, EngineConfig::load());
  return create(bootstrap, config);
}

Result<Communicator> Communicator::create(const Bootstrap& bootstrap, const EngineConfig& config) {
  ORBITE_RETURN_IF_ERROR(config.validate());
  auto impl = std::make_unique<Impl>(bootstrap, config);
  impl->rank = bootstrap.rank();
  impl->tag = bootstrap.next_collective_tag("comm");

  auto iface = net::select_interface(config.tcp.interface, store_is_local(bootstrap));
  if (!iface.ok()) return iface.status().with_context("tcp.interface");
  auto listener = net::listen_tcp(net::HostPort{iface->address, 0});
  if (!listener.ok()) return listener.status().with_context("control listener");
  ORBITE_ASSIGN_OR_RETURN(net::HostPort bound, net::local_endpoint(listener->get()));
  impl->control_listener = std::move(*listener);

  const comm::HostIdentity& host = comm::this_host();
  PeerInfo self;
  self.rank = impl->rank;
  self.hostname = host.hostname;
  self.host_id = host.host_id;
  self.pid = host.pid;
  self.control_address = net::format_host_port(bound.host, bound.port);

  ORBITE_RETURN_IF_ERROR(impl->exchange(self));
  ORBITE_RETURN_IF_ERROR(bootstrap.store()->barrier(
      impl->key("ready"), impl->rank, bootstrap.world_size(), config.bootstrap.timeout));
  const PeerInfo& me = impl->peers[static_cast<size_t>(impl->rank)];
  if (bootstrap.local_rank() && *bootstrap.local_rank() != me.local_rank) {
    ORBITE_LOG(Warn, Bootstrap) << "the launcher gave local rank " << *bootstrap.local_rank()
                                << " but host identities give " << me.local_rank
                                << "; using the latter (set ORBITE_HOSTID to group hosts yourself)";
  }
  ORBITE_LOG(Info, Bootstrap) << "communicator " << impl->tag << ": rank " << impl->rank << " of "
                              << bootstrap.world_size() << ", local " << me.local_rank << " of "
                              << me.local_size << ", control " << me.control_address << " on "
                              << iface->interface;
  return Communicator(std::move(impl));
}

int Communicator::rank() const {
  return impl_->rank;
}
int Communicator::size() const {
  return static_cast<int>(impl_->peers.size());
}
int Communicator::local_rank() const {
  return impl_->peers[static_cast<size_t>(impl_->rank)].local_rank;
}
int Communicator::local_size() const {
  return impl_->peers[static_cast<size_t>(impl_->rank)].local_size;
}
std::span<const PeerInfo> Communicator::peers() const {
  return impl_->peers;
}

const PeerInfo& Communicator::peer(int rank) const {
  if (rank < 0 || rank >= size()) {
    std::fprintf(stderr, "orbite: Communicator::peer(%d) outside 0..%d\n", rank, size() - 1);
    std::abort();
  }
  return impl_->peers[static_cast<size_t>(rank)];
}

bool Communicator::same_host(int rank) const {
  return peer(rank).host_id == peer(impl_->rank).host_id;
}

const EngineConfig& Communicator::config() const {
  return impl_->config;
}
const Bootstrap& Communicator::bootstrap() const {
  return impl_->bootstrap;
}

Status Communicator::store_barrier() {
  std::string tag = impl_->key("barrier/" + std::to_string(impl_->barriers++));
  return impl_->bootstrap.store()->barrier(tag, impl_->rank, size(),
                                           impl_->config.bootstrap.timeout);
}

std::string Communicator::describe() const {
  std::ostringstream out;
  const PeerInfo& me = peer(impl_->rank);
  out << "rank " << me.rank << " of " << size() << " on " << me.hostname << " (pid " << me.pid
      << ", local rank " << me.local_rank << " of " << me.local_size << "), bootstrap "
      << impl_->bootstrap.source();
  if (!impl_->bootstrap.store_address().empty()) {
    out << ", store " << impl_->bootstrap.store_address();
  }
  out << "\n";
  for (const PeerInfo& p : impl_->peers) {
    out << "  peer " << p.rank << ": host " << p.hostname << ", pid " << p.pid << ", local "
        << p.local_rank << "/" << p.local_size << ", control " << p.control_address
        << (p.rank == me.rank ? " (self)" : (same_host(p.rank) ? " (same host)" : " (remote)"))
        << "\n";
  }
  return out.str();
}

}  // namespace orbite
