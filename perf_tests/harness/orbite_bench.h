// What the OrbiTE benchmarks share beyond the harness: joining the job and turning a failed call
// into a fatal error that names the rank and the operation. Header-only, so that the harness
// library stays free of OrbiTE and the MPI references can link it.
#pragma once

#include <orbite/communicator.h>

#include <chrono>
#include <fstream>
#include <string>
#include <string_view>
#include <utility>

#include "harness/harness.h"

namespace orbite::perf {

// Every wait is bounded: a stalled data path becomes an error naming the operation instead of a
// benchmark that never ends. Far above any point's duration (a 64 MiB window over tcp included).
inline constexpr Duration kOpTimeout = std::chrono::seconds(120);

inline Transport transport_from_flag(const std::string& name) {
  if (name == "tcp") return Transport::Tcp;
  if (name == "shm") return Transport::Shm;
  if (name == "rdma") return Transport::Rdma;
  if (name == "nvlink") return Transport::Nvlink;
  return Transport::Unspec;
}

// The transports a run measures, one table each: --transport as given, else shm and tcp towards
// a peer on this host and tcp towards one elsewhere.
inline std::vector<std::string> transports_to_measure(const Options& options,
                                                      const Communicator& comm, int peer) {
  if (!options.transports.empty()) return options.transports;
  if (comm.same_host(peer)) return {"shm", "tcp"};
  return {"tcp"};
}

// Every send, receive, put and get of a run uses the transport --transport named.
inline TransferOptions transfer_options(const Options& options) {
  TransferOptions t;
  t.transport = transport_from_flag(options.transport);
  return t;
}

// The benchmark's own messages between the ranks (descriptors, "done" words): the measured
// transport, so that the route counters see that transport alone; shm beside cuda_ipc, which
// carries put/get only (its table then shows shm's few control bytes).
inline TransferOptions control_options(const Options& options) {
  TransferOptions t = transfer_options(options);
  if (t.transport == Transport::Nvlink) t.transport = Transport::Shm;
  return t;
}

inline void check_ok(int rank, const Status& status, std::string_view what) {
  if (!status.ok()) fatal(rank, std::string(what) + ": " + status.to_string());
}

template <class T>
T value_or_die(int rank, Result<T> result, std::string_view what) {
  if (!result.ok()) fatal(rank, std::string(what) + ": " + result.status().to_string());
  return std::move(result).value();
}

// Joins the job the launcher (orbite-run, mpirun, torchrun) described in the environment.
inline Communicator join_job() {
  int rank = launcher_rank();
  auto bootstrap = value_or_die(rank, Bootstrap::from_env(), "bootstrap");
  return value_or_die(bootstrap.rank(), Communicator::create(bootstrap), "communicator");
}

// The same with a configuration the benchmark adjusted (EngineConfig::load() and then its
// changes): the collectives take no TransferOptions, so a transport is chosen there.
inline Communicator join_job(const EngineConfig& config) {
  int rank = launcher_rank();
  auto bootstrap = value_or_die(rank, Bootstrap::from_env(), "bootstrap");
  return value_or_die(bootstrap.rank(), Communicator::create(bootstrap, config), "communicator");
}

inline void wait_ok(int rank, Request& request, std::string_view what) {
  check_ok(rank, request.wait(kOpTimeout), what);
}

// Sends and receives of the benchmark's own control traffic (acknowledgements, counts,
// descriptors). They take the run's TransferOptions too, so that --transport tcp never opens a
// second, shm path to the peer.
inline void send_bytes(Communicator& comm, const void* data, std::uint64_t bytes, int peer, int tag,
                       const TransferOptions& options, std::string_view what) {
  auto request = comm.isend(data, bytes, peer, tag, options);
  if (!request.ok()) fatal(comm.rank(), std::string(what) + ": " + request.status().to_string());
  check_ok(comm.rank(), request->wait(kOpTimeout), what);
}

// Returns the size received.
inline std::uint64_t recv_bytes(Communicator& comm, void* data, std::uint64_t bytes, int peer,
                                int tag, const TransferOptions& options, std::string_view what) {
  auto request = comm.irecv(data, bytes, peer, tag, options);
  if (!request.ok()) fatal(comm.rank(), std::string(what) + ": " + request.status().to_string());
  check_ok(comm.rank(), request->wait(kOpTimeout), what);
  return request->bytes();
}

inline void send_word(Communicator& comm, std::uint64_t word, int peer, int tag,
                      const TransferOptions& options, std::string_view what) {
  send_bytes(comm, &word, sizeof word, peer, tag, options, what);
}

inline std::uint64_t recv_word(Communicator& comm, int peer, int tag,
                               const TransferOptions& options, std::string_view what) {
  std::uint64_t word = 0;
  std::uint64_t received = recv_bytes(comm, &word, sizeof word, peer, tag, options, what);
  if (received != sizeof word) {
    fatal(comm.rank(), std::string(what) + ": expected " + std::to_string(sizeof word) +
                           " bytes, received " + std::to_string(received));
  }
  return word;
}

// --metrics FILE: the printing rank's engine counters, in the Prometheus text format
// (docs/metrics.md), written after the sweep beside its --json.
inline ExtraFlag metrics_flag(std::string* path) {
  ExtraFlag f;
  f.name = "--metrics";
  f.value_name = "FILE";
  f.help =
      "after the sweep, write rank 0's engine counters to FILE in the\n"
      "Prometheus text format (docs/metrics.md)";
  f.set = [path](std::string_view v) {
    if (v.empty()) return std::string("expected a file name");
    *path = std::string(v);
    return std::string();
  };
  return f;
}

// Writes --metrics on rank 0 (nothing when it was not given); a file that cannot be written is
// fatal, naming it.
inline void write_metrics(int rank, const std::string& path, const TransferEngine& engine) {
  if (path.empty() || rank != 0) return;
  std::ofstream out(path, std::ios::trunc);
  out << engine.metrics();
  out.close();
  if (!out) fatal(rank, "--metrics: cannot write " + path);
}

// One line on how rank 0's engine carried the run, for the summary.
inline std::string describe_engine(const TransferEngine& engine) {
  EngineStats s = engine.stats();
  return "eager " + std::to_string(s.eager_messages) + ", rendezvous " +
         std::to_string(s.rendezvous_messages) + ", single-copy bytes " +
         std::to_string(s.single_copy_bytes) + ", failed requests " +
         std::to_string(s.requests_failed) + ", unexpected bytes peak " +
         std::to_string(s.unexpected_bytes_peak) + ", staging loans " +
         std::to_string(s.staging_loans) + " (peak " + std::to_string(s.staging_lent_peak) +
         " chunks lent)";
}

// What each transport carried between two snapshots of rank 0's engine, for the summary: the
// route a table measured (tcp, shm; rdma and nvlink once they exist), payload bytes and frames.
inline std::string describe_routes(const EngineStats& before, const EngineStats& after) {
  std::string out;
  for (Transport t : {Transport::Tcp, Transport::Shm, Transport::Rdma, Transport::Nvlink}) {
    const TransportStats& a = after.of(t);
    const TransportStats& b = before.of(t);
    if (t != Transport::Tcp && t != Transport::Shm && a.frames_sent == b.frames_sent &&
        a.frames_received == b.frames_received && a.bytes_sent == b.bytes_sent &&
        a.bytes_received == b.bytes_received) {
      continue;  // transports this engine does not have stay out of the line
    }
    if (!out.empty()) out += "; ";
    out += std::string(to_string(t)) + ": sent " + std::to_string(a.bytes_sent - b.bytes_sent) +
           " B in " + std::to_string(a.frames_sent - b.frames_sent) + " frames, received " +
           std::to_string(a.bytes_received - b.bytes_received) + " B in " +
           std::to_string(a.frames_received - b.frames_received) + " frames";
  }
  return out;
}

}  // namespace orbite::perf
