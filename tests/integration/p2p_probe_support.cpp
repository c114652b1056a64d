// Helpers of orbite-p2p-probe (declared in p2p_probe.h): checks that end the process at the first
// failure, bounded request helpers, handshakes and byte patterns.
#include "p2p_probe.h"

#include <dlfcn.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>

namespace orbite::probe {

namespace {
int g_rank = -1;

std::string hex_byte(std::byte b) {
  char text[8];
  std::snprintf(text, sizeof text, "0x%02x", static_cast<unsigned>(b));
  return text;
}

std::uint64_t mix(std::uint64_t seed, std::uint64_t word) {
  std::uint64_t x = seed * 0x9E3779B97F4A7C15ULL + word * 0xD1B54A32D192ED03ULL + 1;
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ULL;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBULL;
  x ^= x >> 31;
  return x;
}

std::string bound_text() {
  return std::to_string(std::chrono::duration_cast<std::chrono::seconds>(kWait).count()) + " s";
}

std::string codes_text(std::initializer_list<Errc> codes) {
  std::string out;
  for (Errc code : codes) out += (out.empty() ? "" : " or ") + std::string(errc_name(code));
  return out;
}
}  // namespace

void set_rank_for_messages(int rank) {
  g_rank = rank;
}

void fail(const std::string& detail) {
  std::printf("rank %d: FAIL %s\n", g_rank, detail.c_str());
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(1);
}

void check(bool condition, const std::string& what) {
  if (!condition) fail(what);
}

void check_ok(const Status& status, const std::string& what) {
  if (!status.ok()) fail(what + ": " + status.to_string());
}

Request accepted(Result<Request> result, const std::string& what) {
  if (!result.ok()) fail(what + ": submission failed: " + result.status().to_string());
  return std::move(result).value();
}

void wait_ok(Request& request, const std::string& what) {
  Status s = request.wait(kWait);
  if (!request.done()) fail(what + ": still running after " + bound_text());
  check_ok(s, what);
}

void wait_all_ok(std::vector<Request>& requests, const std::string& what) {
  Status s = wait_all(std::span<Request>(requests), kWait);
  if (s.ok()) return;
  for (size_t i = 0; i < requests.size(); ++i) {
    if (!requests[i].done()) {
      fail(what + ": request " + std::to_string(i) + " of " + std::to_string(requests.size()) +
           " still running after " + bound_text());
    }
    auto st = requests[i].status();
    if (st && !st->ok()) {
      fail(what + ": request " + std::to_string(i) + " of " + std::to_string(requests.size()) +
           ": " + st->to_string());
    }
  }
  fail(what + ": wait_all: " + s.to_string() + " though every request succeeded");
}

Errc expect_request_failure(Request& request, std::initializer_list<Errc> codes,
                            const std::string& what) {
  Status s = request.wait(kWait);
  if (!request.done()) {
    fail(what + ": still running after " + bound_text() + " (expected " + codes_text(codes) + ")");
  }
  for (Errc code : codes) {
    if (s.code() == code) return code;
  }
  fail(what + ": expected " + codes_text(codes) + ", got " + s.to_string());
}

Errc expect_failure(Result<Request> result, std::initializer_list<Errc> codes,
                    const std::string& what) {
  if (result.ok()) return expect_request_failure(result.value(), codes, what);
  for (Errc code : codes) {
    if (result.status().code() == code) return code;
  }
  fail(what + ": expected " + codes_text(codes) + " at submission, got " +
       result.status().to_string());
}

void softverbs_control(const std::string& command) {
  void* lib = ::dlopen("libibverbs.so.1", RTLD_NOW | RTLD_NOLOAD);
  check(lib != nullptr, "softverbs: libibverbs.so.1 is not loaded");
  using Fn = int (*)(const char*, char*, std::size_t);
  auto fn = reinterpret_cast<Fn>(::dlsym(lib, "softverbs_control"));
  ::dlclose(lib);  // only the reference RTLD_NOLOAD took: the engine keeps the library
  check(fn != nullptr, "softverbs: the loaded libibverbs.so.1 is not softverbs");
  char reply[1024] = {};
  const int rc = fn(command.c_str(), reply, sizeof(reply));
  check(rc == 0, "softverbs '" + command + "': " + reply);
}

bool failed_with(const Request& request, std::initializer_list<Errc> codes) {
  auto st = request.status();
  if (!st) return false;
  for (Errc code : codes) {
    if (st->code() == code) return true;
  }
  return false;
}

namespace {

// The probe's own messages go where its put/get go, except over cuda_ipc, which carries
// put/get only: shm beside it then.
TransferOptions message_options(const Context& c) {
  TransferOptions o = c.options;
  if (o.transport == Transport::Nvlink) o.transport = Transport::Shm;
  return o;
}

}  // namespace

Request isend(Context& c, const void* data, std::uint64_t bytes, int peer, int tag,
              const std::string& what) {
  return accepted(c.comm.isend(data, bytes, peer, tag, message_options(c)), what);
}

Request irecv(Context& c, void* data, std::uint64_t bytes, int peer, int tag,
              const std::string& what) {
  return accepted(c.comm.irecv(data, bytes, peer, tag, message_options(c)), what);
}

void send(Context& c, const void* data, std::uint64_t bytes, int peer, int tag,
          const std::string& what) {
  Request r = isend(c, data, bytes, peer, tag, what);
  wait_ok(r, what);
}

std::uint64_t recv(Context& c, void* data, std::uint64_t bytes, int peer, int tag,
                   const std::string& what) {
  Request r = irecv(c, data, bytes, peer, tag, what);
  wait_ok(r, what);
  return r.bytes();
}

void signal_peer(Context& c, int peer, int step) {
  const std::byte token{0x5A};
  send(c, &token, 1, peer, kControlTag + step, "signal step " + std::to_string(step));
}

void await_peer(Context& c, int peer, int step) {
  std::byte token{0};
  const std::string what = "await step " + std::to_string(step);
  std::uint64_t got = recv(c, &token, 1, peer, kControlTag + step, what);
  check(got == 1 && token == std::byte{0x5A}, what + ": bad token");
}

void send_string(Context& c, const std::string& text, int peer, int step) {
  send(c, text.data(), text.size(), peer, kControlTag + step,
       "send string step " + std::to_string(step));
}

std::string recv_string(Context& c, int peer, int step) {
  std::string text(64 * 1024, '\0');
  std::uint64_t got = recv(c, text.data(), text.size(), peer, kControlTag + step,
                           "receive string step " + std::to_string(step));
  text.resize(got);
  return text;
}

void barrier(Context& c, const std::string& what) {
  check_ok(c.comm.store_barrier(), "store barrier " + what);
}

std::byte pattern_at(std::uint64_t seed, std::uint64_t index) {
  return static_cast<std::byte>(mix(seed, index >> 3) >> ((index & 7) * 8));
}

void fill_pattern(std::byte* p, std::uint64_t n, std::uint64_t seed, std::uint64_t start) {
  for (std::uint64_t k = 0; k < n; ++k) p[k] = pattern_at(seed, start + k);
}

void check_pattern(const std::byte* p, std::uint64_t n, std::uint64_t seed, const std::string& what,
                   std::uint64_t start) {
  for (std::uint64_t k = 0; k < n; ++k) {
    std::byte expected = pattern_at(seed, start + k);
    if (p[k] != expected) {
      fail(what + ": byte at offset " + std::to_string(k) + " of " + std::to_string(n) + " is " +
           hex_byte(p[k]) + ", expected " + hex_byte(expected));
    }
  }
}

void check_equal(const std::byte* actual, const std::byte* expected, std::uint64_t n,
                 const std::string& what) {
  if (n == 0 || std::memcmp(actual, expected, n) == 0) return;
  for (std::uint64_t k = 0; k < n; ++k) {
    if (actual[k] != expected[k]) {
      fail(what + ": byte at offset " + std::to_string(k) + " of " + std::to_string(n) + " is " +
           hex_byte(actual[k]) + ", expected " + hex_byte(expected[k]));
    }
  }
}

RemoteRegion tampered(const RemoteRegion& d, const std::string& field, std::uint64_t value) {
  // docs/protocol.md: magic u32, version u8, three u32-prefixed strings, pid i64, then region id,
  // generation and length (u64 each).
  std::string bytes = d.bytes();
  std::size_t at = 4 + 1 + 4 + d.owner_id().size() + 4 + d.owner_address().size() + 4 +
                   d.owner_host_id().size() + 8;
  if (field == "generation") at += 8;
  if (field == "length") at += 16;
  for (int i = 0; i < 8; ++i) bytes[at + i] = static_cast<char>(value >> (8 * i));
  auto out = RemoteRegion::from_bytes(std::string_view(bytes));
  check_ok(out.status(), "decode the tampered descriptor");
  return *out;
}

}  // namespace orbite::probe
