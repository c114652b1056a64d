// Shared pieces of orbite-p2p-probe (tests/integration/p2p_probe*.cpp): the per-rank context,
// checks that end the process on the first failure, bounded request helpers, and deterministic
// byte patterns. A failed check prints "rank R: FAIL <detail>" and exits 1 at once, without
// unwinding: a wedged engine must not turn a failure into a hang in its destructors.
#pragma once

#include <orbite/communicator.h>
#include <orbite/status.h>
#include <orbite/transfer.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace orbite::probe {

using Bytes = std::vector<std::byte>;

// Bound on every single wait. Generous: 8 ranks on 2 cores with polling workers are slow, and
// only a hang (not a slow run) must fail.
inline constexpr Duration kWait = std::chrono::seconds(60);

// A number as the failure messages print it.
inline std::string sz(std::uint64_t n) {
  return std::to_string(n);
}
// Control messages (signals, descriptors) use tags above every data tag.
inline constexpr int kControlTag = 1 << 20;

struct Context {
  Communicator& comm;
  TransferOptions options;  // the transport under test, passed to every operation
  int rank = 0;
  int size = 0;
};

// The rank that failure messages name (-1 before bootstrap).
void set_rank_for_messages(int rank);

[[noreturn]] void fail(const std::string& detail);
void check(bool condition, const std::string& what);
void check_ok(const Status& status, const std::string& what);
// The request of a submission that must be accepted.
Request accepted(Result<Request> result, const std::string& what);
// Waits (bounded by kWait) for a request that must succeed; a request still running is a failure.
void wait_ok(Request& request, const std::string& what);
// Waits for all (bounded); names the first request that failed or is still running.
void wait_all_ok(std::vector<Request>& requests, const std::string& what);
// An operation that must fail with one of `codes`, either when submitted or when waited for
// (the engine may validate early or late). Returns the code it failed with.
// `d` with `field` (generation or length; any other name: the region id) set to `value`: a
// forged descriptor.
RemoteRegion tampered(const RemoteRegion& d, const std::string& field, std::uint64_t value);
Errc expect_failure(Result<Request> result, std::initializer_list<Errc> codes,
                    const std::string& what);
// A request that must finish, with an error in `codes`, within the bound.
Errc expect_request_failure(Request& request, std::initializer_list<Errc> codes,
                            const std::string& what);
// Whether a finished request failed with one of `codes`.
bool failed_with(const Request& request, std::initializer_list<Errc> codes);

// Messages with the context's transport. recv returns the size received.
Request isend(Context& c, const void* data, std::uint64_t bytes, int peer, int tag,
              const std::string& what);
Request irecv(Context& c, void* data, std::uint64_t bytes, int peer, int tag,
              const std::string& what);
void send(Context& c, const void* data, std::uint64_t bytes, int peer, int tag,
          const std::string& what);
std::uint64_t recv(Context& c, void* data, std::uint64_t bytes, int peer, int tag,
                   const std::string& what);
// One-byte handshakes on kControlTag + `step`, so that steps cannot be confused.
void signal_peer(Context& c, int peer, int step);
void await_peer(Context& c, int peer, int step);
void send_string(Context& c, const std::string& text, int peer, int step);
std::string recv_string(Context& c, int peer, int step);
void barrier(Context& c, const std::string& what);
// A control command to softverbs, the verbs library the engine loaded (RTLD_LOCAL: found by its
// name); fails the probe when it is not softverbs or the command is refused.
void softverbs_control(const std::string& command);

// Deterministic content: byte i of pattern `seed` (64-bit words of a SplitMix64 stream, so that
// different seeds, offsets and shifted copies all differ).
std::byte pattern_at(std::uint64_t seed, std::uint64_t index);
// p[k] = pattern_at(seed, start + k) for k < n.
void fill_pattern(std::byte* p, std::uint64_t n, std::uint64_t seed, std::uint64_t start = 0);
// Fails at the first k with p[k] != pattern_at(seed, start + k), naming the offset and both bytes.
void check_pattern(const std::byte* p, std::uint64_t n, std::uint64_t seed, const std::string& what,
                   std::uint64_t start = 0);
// Fails at the first k with actual[k] != expected[k].
void check_equal(const std::byte* actual, const std::byte* expected, std::uint64_t n,
                 const std::string& what);

// Scenarios, one per argv[1] value.
void scenario_putget(Context& c);
void scenario_unregister_busy(Context& c);
void scenario_killed_peer(Context& c);
void scenario_sender_left(Context& c);
void scenario_died_before_connecting(Context& c);
void scenario_crossed_exit(Context& c);

}  // namespace orbite::probe
