// orbite-p2p-probe's put/get scenarios (see p2p_probe.cpp). Rank 1 owns registered memory and
// ships its descriptors to rank 0, which writes and reads it; descriptors and handshakes travel as
// messages. Rank 1 checks its own memory byte for byte against what rank 0 was allowed to write.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "p2p_probe.h"

namespace orbite::probe {
namespace {

// putget: rank 1's region, with guard bytes on both sides outside the registration, and a
// read-only region. Rank 0 registers a buffer whose first half is the put source and whose second
// half receives gets.
constexpr std::uint64_t kRegion = kMiB;
constexpr std::uint64_t kRmaGuard = 64;
constexpr std::uint64_t kReadOnly = 64 * kKiB;
constexpr std::uint64_t kLocal = 4 * kMiB;
constexpr std::uint64_t kDst = 2 * kMiB;

constexpr std::uint64_t kInitSeed = 0xA000;
constexpr std::uint64_t kSourceSeed = 0xA001;
constexpr std::uint64_t kReadOnlySeed = 0xA002;
constexpr std::uint64_t kRmaGuardSeed = 0xA003;
constexpr std::uint64_t kAfterSeed = 0xA004;

// Every put that must succeed, in order: single puts, then one batch. Rank 0 issues them and rank
// 1 derives the contents it must end up with from the same list. Source byte i of rank 0 is
// pattern_at(kSourceSeed, i).
std::vector<TransferRange> single_puts() {
  constexpr std::uint64_t kSizes[] = {1, 17, 4095, 65537};
  std::vector<TransferRange> out;
  for (std::uint64_t i = 0; i < 4; ++i) {
    for (std::uint64_t odd : {1, 3}) {
      const std::uint64_t length = kSizes[i];
      out.push_back({odd + 8 * i, (i * 250000 + odd * 1001) % (kRegion - length), length});
    }
  }
  out.push_back({5, 0, 4095});               // the first byte of the region
  out.push_back({7, kRegion - 4095, 4095});  // the last byte of the region
  return out;
}

std::vector<TransferRange> batch_puts() {
  // Disjoint on the remote side: the order within a batch is not defined.
  return {{5, 300001, 1000}, {70001, 400003, 65537}, {9, 17, 17}, {123, kRegion - 1, 1}};
}

// A batch with one range past the end: nothing of it may be written.
std::vector<TransferRange> bad_batch() {
  return {{100, 700001, 100}, {200, kRegion - 10, 11}, {300, 900001, 100}};
}

// After the re-registration: a stale put (must write nothing) and a put through the new
// descriptor (must land).
constexpr TransferRange kStalePut{12345, 100, 4096};
constexpr TransferRange kFreshPut{777, 50, 10};

void apply(Bytes& model, const TransferRange& w) {
  for (std::uint64_t k = 0; k < w.length; ++k) {
    model[w.remote_offset + k] = pattern_at(kSourceSeed, w.local_offset + k);
  }
}

Bytes initial_region() {
  Bytes model(kRegion);
  fill_pattern(model.data(), kRegion, kInitSeed);
  return model;
}

std::string range_text(const TransferRange& w) {
  return sz(w.length) + " bytes at remote +" + sz(w.remote_offset) + " from local +" +
         sz(w.local_offset);
}

RemoteRegion import(const std::string& bytes, const std::string& what) {
  auto remote = RemoteRegion::from_bytes(bytes);
  check_ok(remote.status(), "import " + what);
  // A truncated descriptor is refused (its form is versioned and checked).
  check(!RemoteRegion::from_bytes(bytes.substr(0, bytes.size() / 2)).ok(),
        "a truncated " + what + " descriptor was accepted");
  return *remote;
}

// rank 0's side of putget.
class Initiator {
 public:
  explicit Initiator(Context& c) : c_(c), engine_(c.comm.engine()), local_(kLocal) {
    fill_pattern(local_.data(), kDst, kSourceSeed);
    auto reg = engine_.register_memory(local_.data(), kLocal);
    check_ok(reg.status(), "register rank 0's buffer");
    reg_ = std::move(reg).value();
  }

  void put(const RemoteRegion& remote, const TransferRange& w, Bytes& model) {
    Request r =
        accepted(engine_.put(reg_, w.local_offset, remote, w.remote_offset, w.length, c_.options),
                 "put " + range_text(w));
    wait_ok(r, "put " + range_text(w));
    apply(model, w);
  }

  // Gets [remote_offset, +length) to an odd local offset, fenced by guard bytes, and compares it
  // with `expected`.
  void get_and_compare(const RemoteRegion& remote, std::uint64_t remote_offset,
                       std::uint64_t length, const std::byte* expected, const std::string& what) {
    const std::uint64_t at = kDst + 1 + remote_offset % 5;
    fill_pattern(local_.data() + at, length + kRmaGuard, kRmaGuardSeed);
    Request r =
        accepted(engine_.get(reg_, at, remote, remote_offset, length, c_.options), "get " + what);
    wait_ok(r, "get " + what);
    check_equal(local_.data() + at, expected, length, "get " + what);
    check_pattern(local_.data() + at + length, kRmaGuard, kRmaGuardSeed,
                  "get " + what + ": bytes after", length);
  }

  TransferEngine& engine() { return engine_; }
  MemoryRegion& reg() { return reg_; }

 private:
  Context& c_;
  TransferEngine& engine_;
  Bytes local_;
  MemoryRegion reg_;
};

void putget_initiator(Context& c) {
  const RemoteRegion remote = import(recv_string(c, 1, 1), "region");
  const RemoteRegion read_only = import(recv_string(c, 1, 2), "read-only region");
  check(remote.length() == kRegion, "region descriptor length " + sz(remote.length()));
  check(remote.access().read && remote.access().write, "region descriptor is not read-write");
  check(read_only.length() == kReadOnly, "read-only descriptor length " + sz(read_only.length()));
  check(read_only.access().read && !read_only.access().write,
        "read-only descriptor does not say read-only");

  Initiator init(c);
  TransferEngine& engine = init.engine();
  const TransferOptions& o = c.options;
  Bytes model = initial_region();
  init.get_and_compare(remote, 0, kRegion, model.data(), "the whole region before any put");

  for (const TransferRange& w : single_puts()) {
    init.put(remote, w, model);
    init.get_and_compare(remote, w.remote_offset, w.length, model.data() + w.remote_offset,
                         "back " + range_text(w));
  }

  // Bounds. A rejected put writes nothing: rank 1 compares its memory with `model` later.
  expect_failure(engine.put(init.reg(), 0, remote, kRegion - 1, 2, o), {Errc::InvalidArgument},
                 "put of 2 bytes at length - 1");
  Request empty = accepted(engine.put(init.reg(), 0, remote, kRegion, 0, o), "empty put at end");
  wait_ok(empty, "empty put at the end of the region");
  expect_failure(engine.get(init.reg(), kDst, remote, kRegion, 1, o), {Errc::InvalidArgument},
                 "get of 1 byte at the end");
  expect_failure(engine.get(init.reg(), kDst, remote, kRegion + 1, 1, o), {Errc::InvalidArgument},
                 "get past the end");
  expect_failure(engine.put(init.reg(), 0, remote, std::numeric_limits<std::uint64_t>::max(), 2, o),
                 {Errc::InvalidArgument}, "put whose remote range wraps around");
  expect_failure(engine.put(init.reg(), kLocal - 1, remote, 0, 2, o), {Errc::InvalidArgument},
                 "put whose local range is past the local region");
  expect_failure(engine.put(init.reg(), 0, read_only, 0, 16, o), {Errc::InvalidArgument},
                 "put into the read-only region");

  // The read-only region can be read.
  Bytes ro_expected(kReadOnly);
  fill_pattern(ro_expected.data(), kReadOnly, kReadOnlySeed);
  init.get_and_compare(read_only, 0, kReadOnly, ro_expected.data(), "the read-only region");
  init.get_and_compare(read_only, 3, 4095, ro_expected.data() + 3, "4095 read-only bytes at +3");

  // One request for several ranges; read back with one batched get.
  const std::vector<TransferRange> batch = batch_puts();
  Request batched = accepted(engine.put(init.reg(), remote, batch, o), "batch put");
  wait_ok(batched, "batch put");
  for (const TransferRange& w : batch) apply(model, w);
  std::vector<TransferRange> back;
  std::uint64_t at = kDst + 1;
  for (const TransferRange& w : batch) {
    back.push_back({at, w.remote_offset, w.length});
    at += w.length + 3;
  }
  Request batched_get = accepted(engine.get(init.reg(), remote, back, o), "batch get");
  wait_ok(batched_get, "batch get");
  const std::byte* local = static_cast<const std::byte*>(init.reg().data());
  for (const TransferRange& r : back) {
    check_equal(local + r.local_offset, model.data() + r.remote_offset, r.length,
                "batch get of " + sz(r.length) + " bytes at +" + sz(r.remote_offset));
  }

  expect_failure(engine.put(init.reg(), remote, bad_batch(), o), {Errc::InvalidArgument},
                 "batch put with a range past the end");
  for (const TransferRange& w : bad_batch()) {
    const std::uint64_t length = std::min(w.length, kRegion - w.remote_offset);
    init.get_and_compare(remote, w.remote_offset, length, model.data() + w.remote_offset,
                         "range of the rejected batch");
  }

  // Rank 1 checks its memory, then unregisters and registers the same range again.
  signal_peer(c, 1, 3);
  const RemoteRegion fresh = import(recv_string(c, 1, 4), "re-registered region");
  check(fresh.region_id() != remote.region_id() || fresh.generation() != remote.generation(),
        "the re-registration has the old region id and generation");
  expect_failure(engine.put(init.reg(), kStalePut.local_offset, remote, kStalePut.remote_offset,
                            kStalePut.length, o),
                 {Errc::InvalidArgument}, "put through the unregistered descriptor");
  expect_failure(engine.get(init.reg(), kDst, remote, 0, 64, o), {Errc::InvalidArgument},
                 "get through the unregistered descriptor");
  init.put(fresh, kFreshPut, model);
  init.get_and_compare(fresh, 0, kRegion, model.data(), "the whole re-registered region");
  signal_peer(c, 1, 5);
  check_ok(init.reg().unregister(), "unregister rank 0's buffer");
}

void putget_owner(Context& c) {
  TransferEngine& engine = c.comm.engine();
  Bytes memory(kRmaGuard + kRegion + kRmaGuard);
  fill_pattern(memory.data(), memory.size(), kRmaGuardSeed);
  std::byte* region = memory.data() + kRmaGuard;
  fill_pattern(region, kRegion, kInitSeed);
  Bytes read_only_memory(kReadOnly);
  fill_pattern(read_only_memory.data(), kReadOnly, kReadOnlySeed);

  auto reg = engine.register_memory(region, kRegion);
  check_ok(reg.status(), "register the region");
  auto ro = engine.register_memory(read_only_memory.data(), kReadOnly, MemoryKind::Host,
                                   Access{true, false});
  check_ok(ro.status(), "register the read-only region");
  send_string(c, reg->export_descriptor().bytes(), 0, 1);
  send_string(c, ro->export_descriptor().bytes(), 0, 2);

  std::vector<TransferRange> writes = single_puts();
  for (const TransferRange& w : batch_puts()) writes.push_back(w);
  auto verify = [&](const std::string& when) {
    Bytes model = initial_region();
    for (const TransferRange& w : writes) apply(model, w);
    check_equal(region, model.data(), kRegion, "region " + when);
    check_pattern(memory.data(), kRmaGuard, kRmaGuardSeed, "guard before the region " + when);
    check_pattern(region + kRegion, kRmaGuard, kRmaGuardSeed, "guard after the region " + when,
                  kRmaGuard + kRegion);
    check_pattern(read_only_memory.data(), kReadOnly, kReadOnlySeed, "read-only region " + when);
  };

  await_peer(c, 0, 3);
  verify("after the puts");
  check_ok(reg->unregister(), "unregister the region");
  auto again = engine.register_memory(region, kRegion);
  check_ok(again.status(), "register the region again");
  send_string(c, again->export_descriptor().bytes(), 0, 4);
  await_peer(c, 0, 5);
  writes.push_back(kFreshPut);
  verify("after the stale put");
  check_ok(again->unregister(), "unregister the re-registered region");
  check_ok(ro->unregister(), "unregister the read-only region");
}

}  // namespace

void scenario_putget(Context& c) {
  if (c.rank == 0) {
    putget_initiator(c);
  } else {
    putget_owner(c);
  }
}

// unregister_busy: rank 0 streams 1 MiB puts (8 in flight) into rank 1's 8 MiB region; once 20
// have succeeded it tells rank 1, which unregisters the region while puts keep coming and then
// fills it with a pattern. Puts that finish before the signal must succeed; later ones may fail
// (InvalidArgument or Cancelled); puts issued after rank 1 reported the unregistration must fail
// with InvalidArgument. After every put has finished, rank 1's pattern must be intact.
void scenario_unregister_busy(Context& c) {
  constexpr std::uint64_t kBusy = 8 * kMiB;
  constexpr std::uint64_t kChunk = kMiB;
  constexpr int kWindow = 8;
  constexpr int kMinPuts = 200;
  constexpr int kAfterNotice = 8;
  if (c.rank == 1) {
    Bytes memory(kRmaGuard + kBusy + kRmaGuard);
    fill_pattern(memory.data(), memory.size(), kRmaGuardSeed);
    std::byte* region = memory.data() + kRmaGuard;
    auto reg = c.comm.engine().register_memory(region, kBusy);
    check_ok(reg.status(), "register the region");
    send_string(c, reg->export_descriptor().bytes(), 0, 10);
    await_peer(c, 0, 11);
    check_ok(reg->unregister(std::chrono::seconds(30)), "unregister while puts stream in");
    fill_pattern(region, kBusy, kAfterSeed);
    signal_peer(c, 0, 12);
    await_peer(c, 0, 13);
    // Every put has finished at rank 0; a write the engine still let through would land now.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    check_pattern(region, kBusy, kAfterSeed, "region written after unregister returned");
    check_pattern(memory.data(), kRmaGuard, kRmaGuardSeed, "guard before the region");
    check_pattern(region + kBusy, kRmaGuard, kRmaGuardSeed, "guard after the region",
                  kRmaGuard + kBusy);
    return;
  }

  TransferEngine& engine = c.comm.engine();
  const RemoteRegion remote = import(recv_string(c, 1, 10), "busy region");
  Bytes source(kChunk);
  fill_pattern(source.data(), kChunk, kSourceSeed);
  auto reg = engine.register_memory(source.data(), kChunk);
  check_ok(reg.status(), "register the source");

  std::byte notice_byte{0};
  Request notice = irecv(c, &notice_byte, 1, 1, kControlTag + 12, "unregistration notice");
  struct Put {
    Request request;
    int index;
    bool after_notice;
  };
  std::deque<Put> window;
  bool signalled = false;
  bool noticed = false;
  int succeeded = 0;
  int failed = 0;
  int after_notice = 0;
  auto retire = [&](Put& p) {
    const std::string what = "put " + sz(p.index);
    Status s = p.request.wait(kWait);
    check(p.request.done(), what + ": still running after the bound");
    if (s.ok()) {
      check(!p.after_notice, what + " was issued after the unregistration and succeeded");
      ++succeeded;
      return;
    }
    check(signalled, what + " failed before the unregistration began: " + s.to_string());
    if (p.after_notice) {
      check(s.code() == Errc::InvalidArgument,
            what + " (after the unregistration): expected InvalidArgument, got " + s.to_string());
    } else {
      check(s.code() == Errc::InvalidArgument || s.code() == Errc::Cancelled,
            what + ": expected InvalidArgument or Cancelled, got " + s.to_string());
    }
    ++failed;
  };

  // Bounds the whole stream (hundreds of MiB), not one wait.
  const auto deadline = Clock::now() + 2 * kWait;
  for (int i = 0; !(noticed && after_notice >= kAfterNotice && i >= kMinPuts); ++i) {
    check(Clock::now() < deadline, "no unregistration notice from rank 1 within the bound");
    if (!noticed && notice.test()) {
      check_ok(notice.status().value_or(Status()), "unregistration notice");
      noticed = true;
    }
    while (window.size() >= kWindow) {
      retire(window.front());
      window.pop_front();
    }
    if (!signalled && succeeded >= 20) {
      signal_peer(c, 1, 11);
      signalled = true;
    }
    const std::uint64_t offset = static_cast<std::uint64_t>(i % 8) * kChunk;
    auto put = engine.put(*reg, 0, remote, offset, kChunk, c.options);
    if (noticed) ++after_notice;
    if (!put.ok()) {
      // Rejected at submission: allowed only once the unregistration may have begun.
      check(signalled, "put " + sz(i) +
                           " refused before the unregistration began: " + put.status().to_string());
      check(put.status().code() == Errc::InvalidArgument ||
                (!noticed && put.status().code() == Errc::Cancelled),
            "put " + sz(i) + " refused: " + put.status().to_string());
      ++failed;
      continue;
    }
    window.push_back({std::move(put).value(), i, noticed});
  }
  while (!window.empty()) {
    retire(window.front());
    window.pop_front();
  }
  check(failed >= kAfterNotice, "only " + sz(failed) + " puts failed");
  std::printf("rank 0: %d puts succeeded, %d failed\n", succeeded, failed);
  std::fflush(stdout);
  signal_peer(c, 1, 13);
  check_ok(reg->unregister(), "unregister the source");
}

}  // namespace orbite::probe
