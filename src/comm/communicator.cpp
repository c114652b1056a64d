// Communicator setup: every rank publishes its PeerInfo under the communicator's tag in the
// bootstrap store, waits for all the others, derives local ranks from host identities, and meets
// the others in a barrier.
#include <orbite/communicator.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <thread>
#include <unordered_map>

#include <orbite/cuda.h>

#include "comm/communicator_impl.h"
#include "comm/peer_record.h"
#include "common/clock.h"
#include "common/host_identity.h"
#include "common/log.h"
#include "common/net.h"
#include "common/strings.h"
#include "proxy/engine_core.h"

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

namespace {

std::uint32_t fnv1a(std::string_view text) {
  std::uint32_t h = 2166136261u;
  for (char ch : text) h = (h ^ static_cast<unsigned char>(ch)) * 16777619u;
  return h;
}

}  // namespace

void Communicator::Impl::set_tag(std::string t) {
  tag = std::move(t);
  comm_id = fnv1a(tag);
  coll_comm_id = fnv1a(tag + "/collectives");
}

coll::ScratchHooks Communicator::Impl::scratch_hooks() const {
  // Weak: a failed collective's scratch may outlive the engine (its last message's request).
  std::weak_ptr<detail::EngineCore> weak = core;
  coll::ScratchHooks hooks;
  hooks.allocated = [weak](std::byte* base, std::uint64_t bytes) {
    if (auto c = weak.lock()) c->declare_owned(base, bytes);
  };
  hooks.freeing = [weak](std::byte* base) {
    if (auto c = weak.lock()) c->forget_owned(base);
  };
  return hooks;
}

Status Communicator::Impl::start_collectives() {
  {
    auto by_engine = std::make_shared<std::unordered_map<std::string, int>>();
    for (std::size_t r = 0; r < endpoints.size(); ++r) {
      by_engine->emplace(endpoints[r]->ep.id, static_cast<int>(r));
    }
    ranks_by_engine = std::move(by_engine);
  }
  auto parsed = coll::parse_algo(config.coll.algo);
  if (!parsed.ok()) return parsed.status().with_context("coll.algo");
  algos = *parsed;
  {
    // The one grouping of ranks by host: the hierarchical collectives' and local_rank()'s.
    auto h = std::make_shared<coll::Hosts>();
    std::map<std::string, int> index;  // host id -> host
    for (std::size_t r = 0; r < peers.size(); ++r) {
      auto [it, fresh] = index.try_emplace(peers[r].host_id, static_cast<int>(h->members.size()));
      if (fresh) h->members.emplace_back();
      h->members[static_cast<std::size_t>(it->second)].push_back(static_cast<int>(r));
      h->host_of.push_back(it->second);
    }
    for (std::size_t r = 0; r < peers.size(); ++r) {
      peers[r].local_rank = h->local_rank(static_cast<int>(r));
      peers[r].local_size = static_cast<int>(h->of(static_cast<int>(r)).size());
    }
    hosts = std::move(h);
  }
  auto ep = endpoints;
  auto c = core;
  const std::uint32_t id = coll_comm_id;
  const Transport transport = config.coll.transport;
  executor = std::make_shared<coll::Executor>(
      rank, static_cast<int>(peers.size()),
      [ep = std::move(ep), c = std::move(c), id, transport](
          bool send, void* data, std::uint64_t bytes, int peer, std::int32_t msg_tag, bool passive,
          bool device) -> Result<Request> {
        auto s = detail::make_request_state();
        s->passive = passive;
        s->options.transport = transport;
        s->kind = send ? detail::OpKind::Send : detail::OpKind::Recv;
        s->peer = ep[static_cast<size_t>(peer)];
        s->peer_rank = peer;
        s->length = bytes;
        s->comm = id;
        s->tag = msg_tag;
        if (send) {
          s->src = static_cast<const std::byte*>(data);
        } else {
          s->dst = static_cast<std::byte*>(data);
        }
        if (device && bytes > 0) {
          ORBITE_RETURN_IF_ERROR(detail::attach_device_buffer(*s, data, bytes, send)
                                     .with_context("a collective's device message"));
        }
        return c->submit(std::move(s));
      },
      scratch_hooks());
  executor->set_polling_hint([c = core] { c->note_memory_polling(); });
  // Removed by ~Impl before the executor and the rest of *this go.
  reporter = core->add_reporter([this](std::string& out) { report(out); });
  return {};
}

Communicator::Impl::~Impl() {
  if (reporter != 0 && core) core->remove_reporter(reporter);
}

void Communicator::Impl::report(std::string& out) const {
  char ids[64];
  std::snprintf(ids, sizeof ids, "comm 0x%08x, collectives 0x%08x", comm_id, coll_comm_id);
  out += "communicator \"" + tag + "\": rank " + std::to_string(rank) + " of " +
         std::to_string(peers.size()) + " (" + ids + ")\n";
  for (std::size_t r = 0; r < endpoints.size(); ++r) {
    const auto& ep = endpoints[r]->ep;
    out += "  rank " + std::to_string(r) + ": engine " + p2p::short_id(ep.id) + ", pid " +
           std::to_string(ep.pid) + ", " + ep.address +
           (static_cast<int>(r) == rank ? " (this)" : "") + "\n";
  }
  if (executor) executor->report(out);
}

Status Communicator::Impl::exchange(const PeerInfo& self) {
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
    return Status::error(Errc::Timeout,
                         "communicator setup: after " +
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
  return {};  // local ranks come with the host grouping (start_collectives)
}

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
  ORBITE_ASSIGN_OR_RETURN(auto core, detail::EngineCore::create(config, store_is_local(bootstrap)));
  // The engine is this communicator's: its metrics carry this rank (docs/metrics.md).
  core->metrics_rank.store(bootstrap.rank(), std::memory_order_relaxed);
  return create(bootstrap, std::shared_ptr<TransferEngine>(new TransferEngine(std::move(core))));
}

Result<Communicator> Communicator::create(const Bootstrap& bootstrap,
                                          std::shared_ptr<TransferEngine> engine) {
  if (!engine) return Status::error(Errc::InvalidArgument, "Communicator::create: engine is null");
  const EngineConfig& config = engine->config();
  auto impl = std::make_unique<Impl>(bootstrap, config);
  impl->rank = bootstrap.rank();
  impl->set_tag(bootstrap.next_collective_tag("comm"));
  impl->core = engine->core_;
  impl->engine = std::move(engine);

  const HostIdentity& host = this_host();
  PeerInfo self;
  self.rank = impl->rank;
  self.hostname = host.hostname;
  self.host_id = host.host_id;
  self.pid = host.pid;
  self.control_address = impl->engine->control_address();
  self.engine_id = impl->engine->id();

  ORBITE_RETURN_IF_ERROR(impl->exchange(self));
  for (const PeerInfo& p : impl->peers) {
    auto ref = std::make_shared<detail::PeerRef>();
    ref->ep = detail::Endpoint{p.engine_id, p.control_address, p.host_id, p.pid};
    impl->endpoints.push_back(std::move(ref));
  }
  ORBITE_RETURN_IF_ERROR(impl->start_collectives());
  // The ready barrier: every rank set up (its collectives' segment included).
  ORBITE_RETURN_IF_ERROR(impl->attach_segment(impl->key("ready")));
  const PeerInfo& me = impl->peers[static_cast<size_t>(impl->rank)];
  if (bootstrap.local_rank() && *bootstrap.local_rank() != me.local_rank) {
    ORBITE_LOG(Warn, Bootstrap) << "the launcher gave local rank " << *bootstrap.local_rank()
                                << " but host identities give " << me.local_rank
                                << "; using the latter (set ORBITE_HOSTID to group hosts yourself)";
  }
  ORBITE_LOG(Info, Bootstrap) << "communicator " << impl->tag << ": rank " << impl->rank << " of "
                              << bootstrap.world_size() << ", local " << me.local_rank << " of "
                              << me.local_size << ", engine " << me.control_address;
  return Communicator(std::move(impl));
}

TransferEngine& Communicator::engine() const {
  return *impl_->engine;
}

std::shared_ptr<TransferEngine> Communicator::shared_engine() const {
  return impl_->engine;
}

namespace {

static_assert(kAnyTag == detail::kAnyTagWire);

// A receive or probe may name kAnySource and kAnyTag; a send names a rank and a tag >= 0.
Status check_peer_and_tag(const char* op, int peer, int size, int tag, bool wildcards) {
  if ((peer < 0 || peer >= size) && !(wildcards && peer == kAnySource)) {
    return Status::error(Errc::InvalidArgument, std::string(op) + ": peer " + std::to_string(peer) +
                                                    " is outside 0.." + std::to_string(size - 1) +
                                                    (wildcards ? " and is not kAnySource" : ""));
  }
  if (tag < 0 && !(wildcards && tag == kAnyTag)) {
    return Status::error(Errc::InvalidArgument, std::string(op) + ": tag " + std::to_string(tag) +
                                                    " is negative" +
                                                    (wildcards ? " and is not kAnyTag" : ""));
  }
  return {};
}

Status check_p2p(const char* op, const void* data, std::uint64_t bytes, int peer, int size, int tag,
                 const TransferOptions& options, bool receive) {
  ORBITE_RETURN_IF_ERROR(check_peer_and_tag(op, peer, size, tag, receive));
  if (options.notification) {
    return Status::error(Errc::InvalidArgument,
                         std::string(op) +
                             ": options.notification is set; notifications go with put and get "
                             "(a message already tells its receiver)");
  }
  if (data == nullptr && bytes > 0) {
    return Status::error(Errc::InvalidArgument, std::string(op) + ": data is null with " +
                                                    std::to_string(bytes) + " bytes");
  }
  // A message forced onto nvlink moves device memory device to device (its frames go over shm
  // beside cuda_ipc): a host buffer has no such path.
  if (options.transport == Transport::Nvlink && bytes > 0 && !cuda::is_device_pointer(data)) {
    return Status::error(Errc::Unavailable,
                         std::string(op) +
                             ": transport nvlink carries device memory only; this buffer is host "
                             "memory");
  }
  return {};
}

}  // namespace

Result<Request> Communicator::isend(const void* data, std::uint64_t bytes, int peer, int tag,
                                    const TransferOptions& options) {
  ORBITE_RETURN_IF_ERROR(check_p2p("isend", data, bytes, peer, size(), tag, options, false));
  auto s = impl_->message(detail::OpKind::Send, bytes, peer, tag, options);
  s->src = static_cast<const std::byte*>(data);
  ORBITE_RETURN_IF_ERROR(detail::attach_device_buffer(*s, data, bytes, true).with_context("isend"));
  return impl_->engine->core_->submit(std::move(s));
}

Result<Request> Communicator::irecv(void* data, std::uint64_t bytes, int peer, int tag,
                                    const TransferOptions& options) {
  ORBITE_RETURN_IF_ERROR(check_p2p("irecv", data, bytes, peer, size(), tag, options, true));
  const bool any_source = peer == kAnySource;
  auto s = impl_->message(detail::OpKind::Recv, bytes, any_source ? rank() : peer, tag, options);
  s->dst = static_cast<std::byte*>(data);
  ORBITE_RETURN_IF_ERROR(
      detail::attach_device_buffer(*s, data, bytes, false).with_context("irecv"));
  if (!any_source) {
    s->source = peer;
    return impl_->engine->core_->submit(std::move(s));
  }
  s->peer = nullptr;
  s->peer_rank = -1;
  s->any_source = true;
  s->ranks = impl_->ranks_by_engine;
  return impl_->engine->core_->submit_any_source(std::move(s));
}

Result<std::optional<MessageInfo>> Communicator::iprobe(int source, int tag) {
  ORBITE_RETURN_IF_ERROR(check_peer_and_tag("iprobe", source, size(), tag, true));
  const std::string* peer_id =
      source == kAnySource ? nullptr : &impl_->endpoints[static_cast<size_t>(source)]->ep.id;
  ORBITE_ASSIGN_OR_RETURN(
      auto hit, impl_->core->probe(impl_->comm_id, peer_id, tag, *impl_->ranks_by_engine));
  if (!hit) return std::optional<MessageInfo>();
  MessageInfo info;
  info.source = impl_->ranks_by_engine->at(hit->peer_id);
  info.tag = hit->tag;
  info.bytes = hit->length;
  return std::optional<MessageInfo>(info);
}

Result<MessageInfo> Communicator::probe(int source, int tag, Duration timeout) {
  // MPI_Probe polls too. Each look makes a progress pass; between looks the thread yields, and
  // after the first millisecond it naps, so a long probe leaves the core to the lanes' workers.
  const Deadline deadline = Deadline::after(timeout);
  const auto started = std::chrono::steady_clock::now();
  for (;;) {
    ORBITE_ASSIGN_OR_RETURN(auto hit, iprobe(source, tag));
    if (hit) return *hit;
    if (deadline.expired()) {
      return Status::error(
          Errc::Timeout,
          "probe: no message from " +
              (source == kAnySource ? std::string("any source")
                                    : "rank " + std::to_string(source)) +
              " with " + (tag == kAnyTag ? std::string("any tag") : "tag " + std::to_string(tag)) +
              " arrived within the timeout");
    }
    if (std::chrono::steady_clock::now() - started < std::chrono::milliseconds(1)) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(
          std::min<Duration>(std::chrono::microseconds(50), deadline.remaining()));
    }
  }
}

Status Communicator::send(const void* data, std::uint64_t bytes, int peer, int tag,
                          Duration timeout) {
  ORBITE_ASSIGN_OR_RETURN(Request r, isend(data, bytes, peer, tag));
  return r.wait(timeout);
}

Status Communicator::recv(void* data, std::uint64_t bytes, int peer, int tag,
                          std::uint64_t* received, Duration timeout) {
  ORBITE_ASSIGN_OR_RETURN(Request r, irecv(data, bytes, peer, tag));
  Status st = r.wait(timeout);
  if (received != nullptr) *received = r.bytes();
  return st;
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
