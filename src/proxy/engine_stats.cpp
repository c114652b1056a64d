// What an engine counts, as its stats() structs and as Prometheus metrics (docs/metrics.md): one
// table per struct, so that a counter added to a struct is one line here.
#include <orbite/version.h>

#include <algorithm>
#include <array>

#include "common/host_identity.h"
#include "common/metrics.h"
#include "p2p/counters.h"
#include "p2p/domains.h"
#include "proxy/engine_core.h"

namespace orbite::detail {

std::vector<NicLoad> EngineCore::nic_load_stats() const {
  return p2p::report_of(domains, domain_notes).nics;
}

RdmaStats EngineCore::rdma_stats() const {
  return p2p::report_of(domains, domain_notes).rdma;
}

EngineStats EngineCore::stats() const {
  EngineStats s;
  s.requests_submitted = submitted.load(std::memory_order_relaxed);
  s.ranges_merged = ranges_merged.load(std::memory_order_relaxed);
  s.notifications_received = notifications.received();
  s.notifications_refused = notifications.refused();
  s.notifications_pending = notifications.pending();
  s.regions_registered = regions.size();
  s.yields_when_idle = yield_when_idle.load(std::memory_order_relaxed);
  if (staging.pool) {
    const cuda::StagingStats st = staging.pool->stats();
    s.staging_loans = st.loans;
    s.staging_lent_peak = st.lent_peak;
    s.staging_retained = st.retained;
    s.staging_slab_bytes = st.slab_bytes;
  }
  // Each lane counts its own peers; the engine's figures are their sums (the unexpected-bytes
  // peak is the sum of the lanes' peaks, an upper bound of the engine's).
  for (const auto& lane : lanes) {
    const p2p::Counters& c = lane->counters;
    auto get = [](const std::atomic<std::uint64_t>& v) {
      return v.load(std::memory_order_relaxed);
    };
    s.requests_completed += get(c.completed);
    s.requests_failed += get(c.failed);
    for (std::size_t i = 0; i < kErrcCount; ++i) s.failures_by_code[i] += get(c.failed_by_code[i]);
    s.bytes_sent += get(c.bytes_sent);
    s.bytes_received += get(c.bytes_received);
    s.eager_messages += get(c.eager);
    s.rendezvous_messages += get(c.rendezvous);
    s.single_copy_bytes += get(c.single_copy_bytes);
    s.peers_connected += get(c.peers_connected);
    s.peers_lost += get(c.peers_lost);
    s.protocol_errors += get(c.protocol_errors);
    s.unexpected_bytes += get(c.unexpected_bytes);
    s.unexpected_bytes_peak += get(c.unexpected_peak);
    s.worker_idle_sleeps += get(lane->idle_sleeps);
    s.control_listener_rests += get(c.listener_rests);
    for (std::size_t i = 0; i < p2p::kTransportCount; ++i) {
      const p2p::TransportCounters& t = c.transport[i];
      TransportStats& out = s.transports[static_cast<std::size_t>(
          p2p::public_transport(static_cast<p2p::TransportId>(i)))];
      out.bytes_sent += get(t.bytes_sent);
      out.bytes_received += get(t.bytes_received);
      out.frames_sent += get(t.frames_sent);
      out.frames_received += get(t.frames_received);
    }
  }
  return s;
}

namespace {

constexpr std::array<std::string_view, 3> kTierNames = {"high", "medium", "low"};

template <class S>
struct Field {
  std::string_view name;
  MetricType type;
  std::uint64_t S::*member;
  std::string_view help;
};

template <class S, std::size_t N>
void add_fields(Exposition& out, const Field<S> (&fields)[N], const S& s,
                const MetricLabels& labels) {
  for (const Field<S>& f : fields) {
    const auto v = static_cast<double>(s.*(f.member));
    if (f.type == MetricType::Counter) {
      out.counter(f.name, f.help, labels, v);
    } else {
      out.gauge(f.name, f.help, labels, v);
    }
  }
}

constexpr MetricType C = MetricType::Counter;
constexpr MetricType G = MetricType::Gauge;

using E = EngineStats;
constexpr Field<E> kEngineFields[] = {
    {"orbite_requests_submitted_total", C, &E::requests_submitted,
     "Requests this engine accepted (send, recv, put, get, notify)."},
    {"orbite_requests_completed_total", C, &E::requests_completed,
     "Requests that completed successfully."},
    {"orbite_ranges_merged_total", C, &E::ranges_merged,
     "Batched put/get ranges joined to the range before them (merge_requests)."},
    {"orbite_notifications_received_total", C, &E::notifications_received,
     "Notifications peers delivered to this engine."},
    {"orbite_notifications_refused_total", C, &E::notifications_refused,
     "Notifications refused because too many were untaken."},
    {"orbite_notifications_pending", G, &E::notifications_pending,
     "Notifications delivered and not yet taken by the application."},
    {"orbite_eager_messages_total", C, &E::eager_messages,
     "Messages sent eagerly (payload inside the frame)."},
    {"orbite_rendezvous_messages_total", C, &E::rendezvous_messages,
     "Messages sent by rendezvous (the receiver's buffer known before the payload moves)."},
    {"orbite_single_copy_bytes_total", C, &E::single_copy_bytes,
     "Bytes copied once from process to process (process_vm_readv/writev)."},
    {"orbite_peers_connected_total", C, &E::peers_connected, "Peer connections established."},
    {"orbite_peers_lost_total", C, &E::peers_lost, "Peer connections lost."},
    {"orbite_protocol_errors_total", C, &E::protocol_errors,
     "Malformed or unexpected control messages from peers."},
    {"orbite_registered_regions", G, &E::regions_registered,
     "Memory regions registered with this engine now."},
    {"orbite_unexpected_bytes", G, &E::unexpected_bytes,
     "Eager bytes buffered now for receives not yet posted."},
    {"orbite_unexpected_peak_bytes", G, &E::unexpected_bytes_peak,
     "The most eager bytes ever buffered for receives not yet posted."},
    {"orbite_worker_idle_sleeps_total", C, &E::worker_idle_sleeps,
     "Times a proxy worker found nothing to do and slept."},
    {"orbite_control_listener_rests_total", C, &E::control_listener_rests,
     "Times the control listener rested (no descriptor, or too many handshakes pending)."},
    {"orbite_cuda_staging_loans_total", C, &E::staging_loans,
     "Staging chunks lent (device memory and staged host memory)."},
    {"orbite_cuda_staging_lent_peak_chunks", G, &E::staging_lent_peak,
     "The most staging chunks lent at once."},
    {"orbite_cuda_staging_retained_chunks", G, &E::staging_retained,
     "Staging chunks kept for good (a copy that could not be proven finished)."},
    {"orbite_cuda_staging_slab_bytes", G, &E::staging_slab_bytes,
     "Bytes of the staging pool's slabs."},
};

using R = RdmaStats;
constexpr Field<R> kRdmaFields[] = {
    {"orbite_rdma_parents_total", C, &R::parents, "Put/get units that got or asked for a grant."},
    {"orbite_rdma_parents_failed_total", C, &R::parents_failed, "Put/get units that failed."},
    {"orbite_rdma_payload_completions_total", C, &R::payload_send_cqes,
     "Payload completions polled (signaled and flushed)."},
    {"orbite_rdma_reads_completed_total", C, &R::completed_reads,
     "RDMA READ work requests proven successful."},
    {"orbite_rdma_writes_completed_total", C, &R::completed_writes,
     "RDMA WRITE work requests proven successful."},
    {"orbite_rdma_read_bytes_total", C, &R::bytes_read, "Bytes read by RDMA READ."},
    {"orbite_rdma_written_bytes_total", C, &R::bytes_written, "Bytes written by RDMA WRITE."},
    {"orbite_rdma_receipts_sent_total", C, &R::receipts_sent,
     "Receipts (SEND_WITH_INV) this requester completed."},
    {"orbite_rdma_receipts_released_total", C, &R::receipts_released,
     "Receipts giving segments back unwritten (deadline passed after the payload started)."},
    {"orbite_rdma_reconnects_total", C, &R::reconnects,
     "Connections rebuilt after a pre-authority cache miss."},
    {"orbite_rdma_stale_completions_total", C, &R::stale_cqes,
     "Completions of an older QP generation, ignored."},
    {"orbite_rdma_duplicate_completions_total", C, &R::duplicate_cqes,
     "Completions of a work request already resolved, ignored."},
    {"orbite_rdma_qps_reaped_total", C, &R::qps_reaped,
     "Payload QPs retired after rdma.idle_qp_timeout without traffic."},
    {"orbite_rdma_grants_total", C, &R::grants, "Grants this engine published as the source."},
    {"orbite_rdma_grants_active", G, &R::grants_active, "Grants published and not yet closed."},
    {"orbite_rdma_grants_peak", G, &R::grants_peak, "The most grants open at once."},
    {"orbite_rdma_grant_nacks_total", C, &R::grant_nacks,
     "Grant requests refused before any authority existed."},
    {"orbite_rdma_grant_requests_deferred_total", C, &R::grant_requests_deferred,
     "Grant requests that waited (receipt slots, SQ room, budgets, range, receive)."},
    {"orbite_rdma_grants_expired_total", C, &R::grants_expired,
     "Grants revoked after rdma.grant_timeout without their receipts."},
    {"orbite_rdma_range_conflicts_total", C, &R::range_conflicts,
     "Grant requests that found their range locked by another grant."},
    {"orbite_rdma_windows_total", C, &R::windows, "Memory windows bound."},
    {"orbite_rdma_windows_invalidated_total", C, &R::windows_invalidated,
     "Memory windows invalidated by a receipt's SEND_WITH_INV."},
    {"orbite_rdma_windows_revoked_total", C, &R::windows_revoked,
     "Memory windows deallocated without a receipt (failure, close)."},
    {"orbite_rdma_receipts_total", C, &R::receipts, "Receipts accepted as the source."},
    {"orbite_rdma_receipt_mismatches_total", C, &R::receipt_mismatches,
     "Receipts whose binding did not match (the link failed)."},
    {"orbite_rdma_segments_released_total", C, &R::segments_released,
     "Receipts of status 1: segments released without payload."},
    {"orbite_rdma_window_keys_used_total", C, &R::window_keys_used, "Window keys used."},
    {"orbite_rdma_window_indices", G, &R::window_indices, "Window indices in the pool."},
    {"orbite_rdma_window_indices_parked", G, &R::window_indices_parked,
     "Window indices parked until their keys may be reused."},
    {"orbite_rdma_qps_created_total", C, &R::qps_created, "Queue pairs created."},
    {"orbite_rdma_qps_destroyed_total", C, &R::qps_destroyed, "Queue pairs destroyed."},
    {"orbite_rdma_qps_destroyed_undrained_total", C, &R::qps_destroyed_undrained,
     "Queue pairs destroyed after rdma.destroy_timeout with work requests not all drained."},
    {"orbite_rdma_mr_registrations_total", C, &R::mr_registrations, "Memory regions registered."},
    {"orbite_rdma_mr_deregistrations_total", C, &R::mr_deregistrations,
     "Memory regions deregistered."},
    {"orbite_rdma_dmabuf_registrations_total", C, &R::dmabuf_registrations,
     "GPU memory regions registered from a dma-buf (one per context)."},
    {"orbite_rdma_peermem_registrations_total", C, &R::peermem_registrations,
     "GPU memory regions registered through a peermem module (one per context)."},
    {"orbite_rdma_private_grants_total", C, &R::private_grants,
     "Grants of device memory built on the private grant path."},
    {"orbite_rdma_private_teardowns_total", C, &R::private_teardowns,
     "Private grants whose objects were all destroyed again."},
    {"orbite_rdma_monitor_ticks_total", C, &R::monitor_ticks, "Scans of the RDMA monitor."},
    {"orbite_rdma_route_queries_total", C, &R::route_queries, "Route queries of the monitor."},
    {"orbite_rdma_route_fences_total", C, &R::route_fences,
     "Routes fenced (port down, address changed or gone, fatal event)."},
    {"orbite_rdma_route_recoveries_total", C, &R::route_recoveries, "Routes published again."},
    {"orbite_rdma_route_qps_retired_total", C, &R::route_qps_retired,
     "Payload QPs retired because their route was fenced."},
    {"orbite_rdma_cq_poll_failures_total", C, &R::cq_poll_failures,
     "ibv_poll_cq calls that failed."},
    {"orbite_rdma_progress_recoveries_total", C, &R::progress_recoveries,
     "CQ sets replaced because their polls kept failing."},
    {"orbite_rdma_qps_lost_total", C, &R::qps_lost, "QPs destroyed with a replaced CQ set."},
    {"orbite_rdma_budget_exhausted_total", C, &R::budget_exhausted,
     "ResourceExhausted answers of any RDMA budget."},
    {"orbite_rdma_nic_tables_sent_total", C, &R::nic_tables_sent,
     "NIC tables sent to peers after a context paused or resumed."},
    {"orbite_rdma_nic_tables_received_total", C, &R::nic_tables_received,
     "NIC tables received from peers."},
    {"orbite_rdma_message_qp_moves_total", C, &R::message_qp_moves,
     "Message QPs moved off a paused or fenced rail."},
    {"orbite_rdma_rail_errors_total", C, &R::rail_errors, "Payload errors counted by rail health."},
    {"orbite_rdma_rail_open_pairs", G, &R::rail_open_pairs,
     "Rail pairs whose circuit breaker is open now."},
    {"orbite_rdma_rail_probes_total", C, &R::rail_probes, "Half-open trials admitted."},
    {"orbite_rdma_rail_recoveries_total", C, &R::rail_recoveries,
     "Trials whose receipt reopened their pair."},
    {"orbite_rdma_rail_pauses_total", C, &R::rail_pauses, "Rail pairs paused."},
    {"orbite_rdma_rail_pairs", G, &R::rail_pairs,
     "Rail pairs tracked now (of rdma.max_rail_pairs)."},
    {"orbite_rdma_rail_pairs_refused_total", C, &R::rail_pairs_refused,
     "Errors of pairs the full rail table could not track."},
    {"orbite_rdma_endpoints_in_use", G, &R::endpoints_in_use,
     "Endpoints in use (of rdma.max_endpoints)."},
    {"orbite_rdma_grants_in_use", G, &R::grants_in_use, "Grants in use (of rdma.max_grants)."},
    {"orbite_rdma_direct_in_use_bytes", G, &R::direct_bytes_in_use,
     "Requester loans in use (of rdma.max_direct_bytes)."},
    {"orbite_rdma_granted_in_use_bytes", G, &R::granted_bytes_in_use,
     "Ranges granted as the source now (of rdma.max_direct_bytes)."},
    {"orbite_rdma_retained_objects", G, &R::retained,
     "Native objects whose destroy failed, kept for good."},
};

using M = RdmaMrCacheStats;
constexpr Field<M> kMrCacheFields[] = {
    {"orbite_rdma_mr_cache_ranges", G, &M::declared, "Engine-owned ranges known to the MR cache."},
    {"orbite_rdma_mr_cache_registered_ranges", G, &M::registered, "Of them, registered now."},
    {"orbite_rdma_mr_cache_draining_ranges", G, &M::draining,
     "Freed by their owner, still used by a transfer."},
    {"orbite_rdma_mr_cache_mr_copies", G, &M::mr_copies, "MR copies (of rdma.max_cached_mrs)."},
    {"orbite_rdma_mr_cache_bytes", G, &M::bytes, "Bytes charged to rdma.max_cached_mr_bytes."},
    {"orbite_rdma_mr_cache_hits_total", C, &M::hits, "Lookups served by a kept registration."},
    {"orbite_rdma_mr_cache_registrations_total", C, &M::registrations,
     "Ranges registered at first use."},
    {"orbite_rdma_mr_cache_evictions_total", C, &M::evictions,
     "Unreferenced registrations dropped to make room."},
    {"orbite_rdma_mr_cache_refused_total", C, &M::refused,
     "Lookups and slabs the MR cache's budgets could not take."},
    {"orbite_rdma_bounce_sends_total", C, &M::bounce_sends,
     "Rendezvous messages sent through bounce buffers."},
    {"orbite_rdma_bounce_receives_total", C, &M::bounce_receives,
     "Rendezvous messages received through bounce buffers."},
    {"orbite_rdma_bounce_fallbacks_total", C, &M::bounce_fallbacks,
     "Messages under rdma.bounce_limit that registered their buffer (no chunk there)."},
    {"orbite_rdma_bounce_pool_bytes", G, &M::bounce_pool_bytes,
     "Bytes of the bounce pool's slabs."},
    {"orbite_rdma_bounce_lent_chunks", G, &M::bounce_lent, "Bounce chunks lent now."},
    {"orbite_rdma_slot_slab_bytes", G, &M::slab_bytes,
     "Bytes of the lanes' receive and staging slot slabs."},
};

using T = RdmaTierStats;
constexpr Field<T> kTierFields[] = {
    {"orbite_rdma_tier_queued", G, &T::queued,
     "Parents waiting now for admission or to post their payload, by scheduler tier."},
    {"orbite_rdma_tier_posted_total", C, &T::posted, "Parents whose payload started, by tier."},
    {"orbite_rdma_tier_promoted_total", C, &T::promoted,
     "Entries promoted into the tier (priority_promotion_timeout)."},
    {"orbite_rdma_tier_dropped_total", C, &T::dropped,
     "Entries dropped before dispatch (deadline passed or infeasible)."},
    {"orbite_rdma_tier_slot_waits_total", C, &T::slot_waits,
     "Passes a payload waited for its shared priority slot."},
};

using N = NicLoad;
constexpr Field<N> kNicFields[] = {
    {"orbite_nic_charged_bytes", G, &N::charged_bytes,
     "Bytes charged by parents to the NIC, not yet completed or abandoned."},
    {"orbite_nic_posted_bytes", G, &N::posted_bytes,
     "Payload posted to the NIC, not yet completed."},
    {"orbite_nic_completed_bytes_total", C, &N::completed_bytes,
     "Payload bytes the NIC completed successfully."},
    {"orbite_nic_allocated_bytes_total", C, &N::allocated_bytes,
     "Bytes the bandwidth-aware selection gave the NIC."},
    {"orbite_nic_rail_errors_total", C, &N::rail_errors, "Payload errors of the NIC's rail pairs."},
    {"orbite_nic_rail_probes_total", C, &N::rail_probes,
     "Half-open trials admitted on the NIC's rail pairs."},
    {"orbite_nic_rail_open_pairs", G, &N::rail_open_pairs,
     "Rail pairs of the NIC whose circuit breaker is open now."},
};

MetricLabels with(MetricLabels labels, std::string name, std::string value) {
  labels.emplace_back(std::move(name), std::move(value));
  return labels;
}

}  // namespace

MetricLabels EngineCore::metric_labels() const {
  MetricLabels labels{{"host", this_host().hostname}};
  const int rank = metrics_rank.load(std::memory_order_relaxed);
  if (rank >= 0) labels.emplace_back("rank", std::to_string(rank));
  labels.emplace_back("engine", std::to_string(metrics_index));
  return labels;
}

void EngineCore::append_metrics(Exposition& out) const {
  const MetricLabels base = metric_labels();
  const EngineStats s = stats();
  out.gauge("orbite_build_info", "OrbiTE's version (the value is always 1).",
            with(base, "version", ORBITE_VERSION_STRING), 1);
  add_fields(out, kEngineFields, s, base);
  // Failures by code: every code present (zero included), so that rate() sees a series begin.
  for (std::size_t i = 1; i < kErrcCount; ++i) {
    out.counter("orbite_requests_failed_total", "Requests that failed, by error code.",
                with(base, "code", std::string(errc_name(static_cast<Errc>(i)))),
                static_cast<double>(s.failures_by_code[i]));
  }
  const std::uint64_t ended = s.requests_completed + s.requests_failed;
  out.gauge("orbite_requests_outstanding",
            "Requests accepted and not yet ended (submitted minus completed and failed).", base,
            static_cast<double>(s.requests_submitted - std::min(ended, s.requests_submitted)));
  for (Transport t : {Transport::Tcp, Transport::Shm, Transport::Rdma, Transport::Nvlink}) {
    const TransportStats& ts = s.of(t);
    const MetricLabels l = with(base, "transport", std::string(to_string(t)));
    out.counter("orbite_transport_sent_bytes_total",
                "Payload bytes a transport carried out of this engine.", l,
                static_cast<double>(ts.bytes_sent));
    out.counter("orbite_transport_received_bytes_total",
                "Payload bytes a transport carried into this engine.", l,
                static_cast<double>(ts.bytes_received));
    out.counter("orbite_transport_sent_frames_total", "Frames a transport sent.", l,
                static_cast<double>(ts.frames_sent));
    out.counter("orbite_transport_received_frames_total", "Frames a transport received.", l,
                static_cast<double>(ts.frames_received));
  }
  // One report of the transports gives both the RDMA counters and the NICs.
  const p2p::TransportReport report = p2p::report_of(domains, domain_notes);
  const RdmaStats& r = report.rdma;
  out.gauge("orbite_rdma_installed", "Whether the RDMA transport is installed (1) or not (0).",
            base, r.installed ? 1 : 0);
  if (!r.installed) return;
  add_fields(out, kRdmaFields, r, base);
  add_fields(out, kMrCacheFields, r.mr_cache, base);
  for (std::size_t i = 0; i < r.tiers.size(); ++i) {
    add_fields(out, kTierFields, r.tiers[i], with(base, "tier", std::string(kTierNames[i])));
  }
  for (const RdmaContextStats& c : r.contexts) {
    const MetricLabels l = with(with(base, "nic", c.name), "port", std::to_string(c.port));
    out.gauge("orbite_rdma_context_active",
              "Whether an RDMA context's route is active (1) or paused or inert (0).", l,
              c.state == "active" ? 1 : 0);
    out.gauge("orbite_rdma_context_live_qps", "QPs on the device now, every lane's.", l,
              c.live_qps);
    out.gauge("orbite_rdma_context_route_generation",
              "The route's generation (advances on every fence and publication).", l,
              static_cast<double>(c.route_generation));
    out.counter("orbite_rdma_context_events_total", "Device async events the monitor consumed.", l,
                static_cast<double>(c.events_read));
    out.counter("orbite_rdma_context_port_events_total", "Of them, port events.", l,
                static_cast<double>(c.port_events));
  }
  for (const NicLoad& n : report.nics) {
    const MetricLabels l = with(base, "nic", n.name);
    out.gauge("orbite_nic_healthy", "Whether the NIC is healthy (1) or not (0).", l,
              n.healthy ? 1 : 0);
    out.gauge("orbite_nic_link_rate_bytes_per_second", "The port's reported rate (0: unknown).", l,
              n.link_gbps * 1e9 / 8);
    out.gauge("orbite_nic_effective_rate_bytes_per_second",
              "The selection's seed: the reported rate, or rdma.default_bandwidth_gbps.", l,
              n.effective_gbps * 1e9 / 8);
    out.gauge("orbite_nic_selection_estimate_bytes_per_second",
              "The selection's estimate (EWMA of completed slices).", l, n.selection_bytes_per_s);
    out.gauge("orbite_nic_transmit_rate_bytes_per_second", "The transmit meter.", l,
              n.transmit_bytes_per_s);
    add_fields(out, kNicFields, n, l);
    for (std::size_t i = 0; i < kTierNames.size(); ++i) {
      const MetricLabels lt = with(l, "tier", std::string(kTierNames[i]));
      out.counter("orbite_nic_tier_posted_bytes_total",
                  "Payload bytes posted to the NIC, by the scheduler tier of their parent.", lt,
                  static_cast<double>(n.posted_by_tier[i]));
      out.gauge("orbite_nic_tier_outstanding_bytes",
                "Payload bytes posted to the NIC and not yet completed, by tier.", lt,
                static_cast<double>(n.outstanding_by_tier[i]));
    }
  }
}

std::string EngineCore::metrics_text() const {
  Exposition out;
  append_metrics(out);
  return out.render();
}

}  // namespace orbite::detail
