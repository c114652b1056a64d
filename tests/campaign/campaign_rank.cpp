// One rank of the fault campaign (scripts/fault_campaign.py, docs/reliability.md): a random but
// reproducible workload, the same on every rank (CAMPAIGN_SEED, CAMPAIGN_OPS), of ring sends,
// ring puts and gets, all_reduce and broadcast over one transport (CAMPAIGN_TRANSPORT: tcp, shm
// or rdma) while the driver kills ranks and injects softverbs faults. Every byte is checked and
// every wait bounded. The exit status is what the driver judges:
//   0 every operation succeeded with the right bytes and close() proved everything finished
//     ("rank R: DONE ..." names the retained-object count)
//   2 an operation failed with an error: the failure was reported ("rank R: FAILED ...")
//   3 an operation succeeded with a wrong byte ("rank R: WRONG ...")       (an invariant broken)
//   4 a wait reached its bound with the operation still running ("HANG") (an invariant broken)
//   5 close() could not prove the engine quiet after a clean run ("CLOSE ...")
// A rank that reports a failure closes its engine, within a bound (as an application would), then
// exits without unwinding (_exit), as the probes do: a wedged engine must not turn a reported
// failure into a hang in destructors. Its close must leave no name in /dev/shm.
#include <orbite/bootstrap.h>
#include <orbite/communicator.h>
#include <orbite/rdma.h>
#include <orbite/status.h>
#include <orbite/transfer.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using orbite::Errc;
using orbite::Request;
using orbite::Status;

constexpr auto kBound = std::chrono::seconds(30);  // every single wait
constexpr std::uint64_t kMaxBytes = 4ULL << 20;
constexpr auto kCloseBound = std::chrono::seconds(10);  // close() after a reported failure
int g_rank = -1;
std::uint64_t g_op = 0;
orbite::TransferEngine* g_engine = nullptr;  // set once the communicator is up

[[noreturn]] void leave(int code, const char* word, const std::string& detail) {
  std::printf("rank %d: %s op %llu: %s\n", g_rank, word, static_cast<unsigned long long>(g_op),
              detail.c_str());
  std::fflush(stdout);
  if (code == 2 && g_engine != nullptr) {
    const Status closed = g_engine->close(kCloseBound);
    std::printf("rank %d: closed after the failure: %s\n", g_rank, closed.to_string().c_str());
    std::fflush(stdout);
  }
  ::_exit(code);
}

std::uint64_t env_u64(const char* name, std::uint64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::strtoull(v, nullptr, 0) : fallback;
}

// SplitMix64: the op sequence (same seed on every rank) and the byte patterns.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

void fill(std::byte* p, std::uint64_t n, std::uint64_t seed) {
  for (std::uint64_t i = 0; i < n; i += 8) {
    const std::uint64_t w = mix(seed + i);
    std::memcpy(p + i, &w, std::min<std::uint64_t>(8, n - i));
  }
}

// The first differing byte, or -1.
std::int64_t differs(const std::byte* p, std::uint64_t n, std::uint64_t seed) {
  std::vector<std::byte> want(n);
  fill(want.data(), n, seed);
  for (std::uint64_t i = 0; i < n; ++i) {
    if (p[i] != want[i]) return static_cast<std::int64_t>(i);
  }
  return -1;
}

Request submitted(orbite::Result<Request> r, const char* what) {
  if (!r.ok()) leave(2, "FAILED", std::string(what) + " refused: " + r.status().to_string());
  return *r;
}

void wait(Request& q, const char* what) {
  const Status st = q.wait(kBound);
  if (st.ok()) return;
  if (!q.done()) leave(4, "HANG", std::string(what) + " still running after the bound");
  leave(2, "FAILED", std::string(what) + ": " + st.to_string());
}

std::uint64_t g_seed = 1;
int g_size = 1;

// Whose bytes a wrong word at offset `at` is: the pattern of which op and rank, if any (for the
// report: a late or misdirected write names its source).
std::string whose(const std::byte* p, std::uint64_t at) {
  const std::uint64_t word_at = at & ~std::uint64_t{7};
  std::uint64_t got = 0;
  std::memcpy(&got, p + word_at, 8);
  for (std::uint64_t op = 0; op <= g_op + 1; ++op) {
    const std::uint64_t base = mix(mix(g_seed * 1000003 + op) + 2);
    for (int r = 0; r < g_size; ++r) {
      const std::uint64_t pattern = base + static_cast<std::uint64_t>(r) * 0x1000193;
      if (mix(pattern + word_at) == got) {
        return "the bytes of op " + std::to_string(op) + " rank " + std::to_string(r);
      }
    }
  }
  return "bytes of no op";
}

void check_bytes(const std::byte* p, std::uint64_t n, std::uint64_t seed, const char* what) {
  if (const std::int64_t at = differs(p, n, seed); at >= 0) {
    const auto off = static_cast<std::uint64_t>(at);
    leave(3, "WRONG",
          std::string(what) + ": byte " + std::to_string(at) + " of " + std::to_string(n) +
              " differs (" + (off + 8 <= n ? whose(p, off) : std::string("a tail word")) + ")");
  }
}

orbite::Transport transport_named(const char* name) {
  const std::string t = name != nullptr ? name : "";
  if (t == "tcp") return orbite::Transport::Tcp;
  if (t == "shm") return orbite::Transport::Shm;
  if (t == "rdma") return orbite::Transport::Rdma;
  std::fprintf(stderr, "CAMPAIGN_TRANSPORT must be tcp, shm or rdma, not '%s'\n", t.c_str());
  std::exit(64);
}

}  // namespace

int main() {
  if (const char* r = std::getenv("ORBITE_RANK")) g_rank = std::atoi(r);
  const std::uint64_t seed = env_u64("CAMPAIGN_SEED", 1);
  const std::uint64_t ops = env_u64("CAMPAIGN_OPS", 20);
  orbite::TransferOptions options;
  options.transport = transport_named(std::getenv("CAMPAIGN_TRANSPORT"));

  auto boot = orbite::Bootstrap::from_env();
  if (!boot.ok()) leave(2, "FAILED", "bootstrap: " + boot.status().to_string());
  auto made = orbite::Communicator::create(*boot);
  if (!made.ok()) leave(2, "FAILED", "communicator: " + made.status().to_string());
  orbite::Communicator& comm = *made;
  orbite::TransferEngine& engine = comm.engine();
  g_engine = &engine;
  g_rank = comm.rank();
  g_seed = seed;
  g_size = comm.size();
  const int n = comm.size();
  const int next = (g_rank + 1) % n;
  const int prev = (g_rank + n - 1) % n;

  // One registered region per rank; every rank imports the next one's descriptor (over the
  // transport under test: a send of its bytes).
  std::vector<std::byte> region(kMaxBytes);
  std::vector<std::byte> scratch(kMaxBytes);
  // Ring messages land here, not in the region: a peer's put of the next op may reach the region
  // before this rank has checked a message in it (no barrier ends a send/recv op).
  std::vector<std::byte> inbox(kMaxBytes);
  auto reg = engine.register_memory(region.data(), region.size());
  if (!reg.ok()) leave(2, "FAILED", "register: " + reg.status().to_string());
  auto local = engine.register_memory(scratch.data(), scratch.size());
  if (!local.ok()) leave(2, "FAILED", "register: " + local.status().to_string());
  orbite::RemoteRegion next_region;
  {
    const std::string mine = reg->export_descriptor().bytes();
    std::uint64_t len = mine.size();
    std::uint64_t their_len = 0;
    Request a = submitted(comm.isend(&len, 8, prev, 1, options), "descriptor size");
    Request b = submitted(comm.irecv(&their_len, 8, next, 1, options), "descriptor size");
    wait(a, "descriptor size");
    wait(b, "descriptor size");
    std::string theirs(their_len, '\0');
    Request c = submitted(comm.isend(mine.data(), len, prev, 2, options), "descriptor");
    Request d = submitted(comm.irecv(theirs.data(), their_len, next, 2, options), "descriptor");
    wait(c, "descriptor");
    wait(d, "descriptor");
    auto imported = orbite::RemoteRegion::from_bytes(theirs);
    if (!imported.ok()) leave(2, "FAILED", "import: " + imported.status().to_string());
    next_region = *imported;
  }

  for (g_op = 0; g_op < ops; ++g_op) {
    const std::uint64_t h = mix(seed * 1000003 + g_op);
    const int kind = static_cast<int>(h % 5);
    // Sizes from 0 to 4 MiB, spread over the orders of magnitude.
    const std::uint64_t bytes =
        std::min<std::uint64_t>(kMaxBytes, (mix(h) % 4097) << (static_cast<int>(mix(h + 1) % 11)));
    const std::uint64_t base = mix(h + 2);
    auto pattern = [&](int rank) { return base + static_cast<std::uint64_t>(rank) * 0x1000193; };
    const int tag = 100 + static_cast<int>(g_op);
    switch (kind) {
      case 0: {  // ring send/recv
        fill(scratch.data(), bytes, pattern(g_rank));
        Request r = submitted(comm.irecv(inbox.data(), bytes, prev, tag, options), "recv");
        Request s = submitted(comm.isend(scratch.data(), bytes, next, tag, options), "send");
        wait(s, "send");
        wait(r, "recv");
        check_bytes(inbox.data(), bytes, pattern(prev), "recv");
        break;
      }
      case 1: {  // ring put, checked by the target after a barrier
        fill(scratch.data(), bytes, pattern(g_rank));
        Request p = submitted(engine.put(*local, 0, next_region, 0, bytes, options), "put");
        wait(p, "put");
        Request b = submitted(comm.barrier(), "barrier");
        wait(b, "barrier after put");
        check_bytes(region.data(), bytes, pattern(prev), "put");
        Request b2 = submitted(comm.barrier(), "barrier");
        wait(b2, "barrier after check");
        break;
      }
      case 2: {  // ring get of the next rank's region
        fill(region.data(), bytes, pattern(g_rank));
        Request b = submitted(comm.barrier(), "barrier");
        wait(b, "barrier before get");
        Request g = submitted(engine.get(*local, 0, next_region, 0, bytes, options), "get");
        wait(g, "get");
        check_bytes(scratch.data(), bytes, pattern(next), "get");
        Request b2 = submitted(comm.barrier(), "barrier");
        wait(b2, "barrier after get");
        break;
      }
      case 3: {  // all_reduce (sum of u64): the expected sum is computable on every rank
        const std::uint64_t count = bytes / 8;
        std::vector<std::uint64_t> v(count), want(count, 0);
        for (std::uint64_t j = 0; j < count; ++j) {
          v[j] = mix(pattern(g_rank) + j);
          for (int r = 0; r < n; ++r) want[j] += mix(pattern(r) + j);
        }
        Request a = submitted(comm.all_reduce(v.data(), v.data(), count, orbite::DataType::Uint64,
                                              orbite::ReduceOp::Sum),
                              "all_reduce");
        wait(a, "all_reduce");
        if (v != want) leave(3, "WRONG", "all_reduce of " + std::to_string(count) + " words");
        break;
      }
      default: {  // broadcast from a rotating root
        const int root = static_cast<int>(g_op % static_cast<std::uint64_t>(n));
        if (g_rank == root) fill(scratch.data(), bytes, pattern(root));
        Request a = submitted(
            comm.broadcast(scratch.data(), scratch.data(), bytes, orbite::DataType::Uint8, root),
            "broadcast");
        wait(a, "broadcast");
        check_bytes(scratch.data(), bytes, pattern(root), "broadcast");
        break;
      }
    }
  }
  Request b = submitted(comm.barrier(), "final barrier");
  wait(b, "final barrier");
  const Status closed = engine.close(std::chrono::seconds(30));
  if (!closed.ok()) leave(5, "CLOSE", closed.to_string());
  std::printf("rank %d: DONE ops %llu retained %llu\n", g_rank,
              static_cast<unsigned long long>(ops),
              static_cast<unsigned long long>(engine.rdma_stats().retained));
  std::fflush(stdout);
  return 0;
}
