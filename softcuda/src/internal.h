// softcuda's state: the configured devices, contexts, the memory registry, streams, events and
// the copy engine that executes stream work. See docs/softcuda.md for what is emulated.
//
// One mutex (State::mu) guards every table below and the copy engine's queues; it is never held
// while bytes are copied, a host function runs or a caller waits. Lock order: State::mu is a
// leaf: no other softcuda lock is taken while it is held (the call sites' counters are atomics).
#pragma once

#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#define SC_API extern "C" __attribute__((visibility("default")))

namespace softcuda {

using Clock = std::chrono::steady_clock;

// ---------------------------------------------------------------------------------------------
// Configuration (config.cpp)

struct DeviceConfig {
  std::string name = "softcuda H200";
  std::string pci_bus_id;  // normalized "0000:4E:00.0"
  int pci_domain = 0, pci_bus = 0, pci_device = 0, pci_function = 0;
  int numa_node = -1;
  std::array<unsigned char, 16> uuid{};
  std::uint64_t memory_bytes = 80ull << 30;
  int cc_major = 9, cc_minor = 0;
  int sm_count = 132;
  // Capability switches.
  bool dma_buf = true;
  bool gpudirect = true;
  bool vmm = true;
  bool ipc = true;
  bool peermem = false;
};

struct Config {
  int driver_version = 13000;
  int copy_engines = 2;
  std::vector<DeviceConfig> devices;  // every configured device, before CUDA_VISIBLE_DEVICES
  std::vector<std::string> faults;    // control commands run at cuInit
};

// Parses SOFTCUDA_CONFIG (a file name, or the JSON text itself) over the defaults; false with a
// message naming the field and value.
bool load_config(Config* out, std::string* error);
// Applies CUDA_VISIBLE_DEVICES: the indices of the visible devices, in order.
std::vector<int> visible_devices(const Config& config, const char* env);
std::string format_uuid(const std::array<unsigned char, 16>& uuid);

// ---------------------------------------------------------------------------------------------
// Devices and contexts (device.cpp)

struct Context;
struct Stream;

struct Device {
  int ordinal = 0;  // as visible in this process
  DeviceConfig config;
  // The address arena device pointers come from (reserved PROT_NONE, never touched by the CPU).
  std::uintptr_t arena_base = 0;
  std::uint64_t arena_size = 0;
  std::uint64_t arena_next = 0;                  // bump offset
  std::map<std::uint64_t, std::uint64_t> freed;  // offset -> length, reused when the bump ends
  std::uint64_t used_bytes = 0;
  Context* primary = nullptr;  // created at the first retain, kept (inactive) afterwards
  unsigned primary_refs = 0;
  unsigned primary_flags = 0;
};

struct Context {
  std::uint64_t id = 0;
  Device* device = nullptr;
  unsigned flags = 0;
  bool primary = false;
  bool active = true;              // a released primary context is inactive until retained again
  CUresult sticky = CUDA_SUCCESS;  // an unrecoverable error: every later call on it fails
  Stream* legacy = nullptr;        // the legacy default stream (owned by State::streams)
  // Per-thread default streams of this context, by thread.
  std::map<std::thread::id, Stream*> per_thread;
};

// ---------------------------------------------------------------------------------------------
// Memory (memory.cpp, ipc.cpp)

enum class MemKind : std::uint8_t { Device, HostAlloc, HostRegistered, Managed, IpcImport, Vmm };

// Lifetime: shared by the registry and by the stream work that reads or writes it, so that a
// free with work pending never unmaps bytes a copy engine thread still touches.
struct Allocation {
  MemKind kind = MemKind::Device;
  std::uintptr_t base = 0;
  std::uint64_t size = 0;         // as requested
  std::uint64_t mapped_size = 0;  // rounded to pages
  Context* ctx = nullptr;         // null for VMM mappings
  int device = -1;
  std::uint64_t buffer_id = 0;
  unsigned flags = 0;  // host alloc / register flags
  bool sync_memops = false;
  int fd = -1;                  // the memfd behind device kinds
  std::byte* shadow = nullptr;  // where the copy engine reaches the bytes
  bool own_shadow = false;      // unmapped in the destructor
  bool host_mapping = false;    // HostAlloc/Managed: the application's own pages
  // IPC imports: the exporter and its buffer, and how often this process opened it.
  int exporter_pid = 0;
  std::uint64_t exporter_buffer = 0;
  unsigned opens = 0;
  // VMM mappings: the allocation handle, the offset into it, and whether access was set.
  std::uint64_t vmm_handle = 0;
  std::uint64_t vmm_offset = 0;
  bool accessible = true;
  ~Allocation();
};

// VMM physical allocations (cuMemCreate / import), by handle.
struct VmmHandle {
  std::uint64_t id = 0;
  int fd = -1;
  std::uint64_t size = 0;
  CUmemAllocationProp prop{};
  unsigned refs = 1;  // the handle itself plus retains
  unsigned mappings = 0;
  bool imported = false;  // from another handle's descriptor: not charged to this device
  ~VmmHandle();
};

struct Reservation {
  std::uintptr_t base = 0;
  std::uint64_t size = 0;
};

// ---------------------------------------------------------------------------------------------
// Streams, events and the copy engine (engine.cpp)

struct Op {
  enum Kind : std::uint8_t { Copy, Memset, Record, Wait, HostFunc, Kernel } kind = Copy;
  std::function<CUresult()> work;  // runs on a copy engine thread
  std::vector<std::shared_ptr<Op>> deps;
  std::vector<std::shared_ptr<Allocation>> holds;  // kept alive until the work ran
  Stream* stream = nullptr;
  enum State : std::uint8_t { Queued, Running, Done } state = Queued;
  CUresult result = CUDA_SUCCESS;
  std::uint64_t bytes = 0;  // copied or set, for the statistics
  // Faults armed when it was enqueued: wait for "release", or sleep, before running.
  bool hold = false;
  std::uint64_t hold_epoch = 0;  // the "release" count when it was held
  std::int64_t stall_ms = 0;
  Clock::time_point done_at{};
};

struct Stream {
  std::uint64_t id = 0;
  Context* ctx = nullptr;
  unsigned flags = 0;  // CU_STREAM_NON_BLOCKING
  int priority = 0;
  bool legacy = false;
  bool per_thread = false;
  bool destroyed = false;  // the handle is gone; the object lives until its work drained
  std::deque<std::shared_ptr<Op>> queue;  // not yet done, in order
  std::shared_ptr<Op> tail;               // the last op enqueued (perhaps done)
  // The first failure since the last event record, and since the last synchronization: each
  // reports it once (a sticky failure also poisons the context).
  CUresult error_since_record = CUDA_SUCCESS;
  CUresult error_since_sync = CUDA_SUCCESS;
  // Capture (enough to reject a capturing stream and to report it).
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  std::uint64_t capture_id = 0;
  std::uint64_t captured_ops = 0;
  [[nodiscard]] bool blocking() const { return !legacy && (flags & CU_STREAM_NON_BLOCKING) == 0; }
};

struct Event {
  std::uint64_t id = 0;
  Context* ctx = nullptr;
  unsigned flags = 0;
  std::shared_ptr<Op> last_record;
  std::uint64_t generation = 0;  // records made
  std::uint64_t syncs = 0;       // cuEventSynchronize calls
  bool captured = false;         // recorded into a capturing stream
};

struct Graph {
  std::uint64_t ops = 0;
};

// Test kernels (module.cpp): a module is the set of whitelisted entry names it contains.
struct Module {
  std::set<std::string> entries;
};
struct Function {
  Module* module = nullptr;
  std::string name;
};

// ---------------------------------------------------------------------------------------------
// Faults and statistics (control.cpp)

// One per exported entry point that counts its calls and can be told to fail.
struct CallSite {
  const char* name;
  std::atomic<std::uint64_t> calls{0};
  std::atomic<std::int64_t> fail_nth{0};    // fail the nth call from now (1-based), once
  std::atomic<std::int64_t> fail_every{0};  // fail every nth call from now
  std::atomic<std::int64_t> seen{0};        // calls since armed
  std::atomic<int> fail_error{0};
  explicit CallSite(const char* n);
  // The injected error of this call, or CUDA_SUCCESS.
  CUresult hit();
};

struct ExecFaults {
  std::int64_t copy_nth = 0;  // fail the nth executed copy from now
  std::int64_t copies_seen = 0;
  CUresult copy_error = CUDA_ERROR_UNKNOWN;
  bool copy_sticky = false;
  std::int64_t record_nth = 0;
  std::int64_t records_seen = 0;
  CUresult record_error = CUDA_ERROR_UNKNOWN;
  std::int64_t stall_ms = 0;     // the next op enqueued takes this long first
  bool hang = false;             // the next op enqueued waits for "release"
  int held = 0;                  // ops waiting for "release" now
  std::uint64_t releases = 0;    // "release" commands so far
  std::uint64_t oom_budget = 0;  // with oom: bytes still allowed
  bool oom = false;
};

// ---------------------------------------------------------------------------------------------
// The process-wide state

struct State {
  std::mutex mu;
  std::condition_variable cv;  // work enqueued, work done, release
  bool initialized = false;
  CUresult init_result = CUDA_ERROR_NOT_INITIALIZED;
  std::string init_error;
  Config config;
  std::vector<std::unique_ptr<Device>> devices;  // visible, by ordinal
  std::set<Context*> contexts;                   // live (primary ones stay once made)
  std::vector<std::unique_ptr<Context>> context_store;
  std::uint64_t next_id = 1;  // contexts, streams, events, buffers: never reused
  std::map<std::uintptr_t, std::shared_ptr<Allocation>> allocations;  // by base
  std::map<std::uint64_t, std::unique_ptr<VmmHandle>> vmm_handles;
  std::map<std::uintptr_t, Reservation> reservations;  // VMM address reservations
  std::uintptr_t vmm_arena_base = 0;
  std::uint64_t vmm_arena_size = 0, vmm_arena_next = 0;
  std::map<int, std::pair<std::uint64_t, std::uint64_t>> dmabufs;  // fd -> (fd offset, size)
  std::map<Stream*, std::unique_ptr<Stream>> streams;              // every stream object
  std::map<Event*, std::unique_ptr<Event>> events;
  std::map<Graph*, std::unique_ptr<Graph>> graphs;
  std::map<Module*, std::unique_ptr<Module>> modules;
  std::map<Function*, std::unique_ptr<Function>> functions;
  // Copy engine.
  std::vector<std::thread> engines;
  int engines_running = 0;  // engine threads that entered their loop
  bool stopping = false;
  std::uint64_t pending_ops = 0;
  // Bumped (under mu) whenever work is enqueued or finished; read without mu by a synchronising
  // thread that spins a little before it sleeps (engine.cpp's wait_op).
  std::atomic<std::uint64_t> work_epoch{0};
  std::uint64_t copies = 0, copy_bytes = 0;
  std::uint64_t event_syncs = 0, stream_syncs = 0, ctx_syncs = 0;
  ExecFaults faults;
  std::uint64_t live_bytes = 0;
};

State& state();

// Thread-local current-context stack.
std::vector<Context*>& ctx_stack();
// The calling thread's current context, or null.
Context* current_ctx();

// Entry-point prologue: counts the call, applies an armed fault, and (unless `before_init`)
// requires cuInit. Returns the error to return, or CUDA_SUCCESS.
CUresult enter(CallSite& site, bool needs_init = true);
#define SC_ENTER(name)                        \
  static ::softcuda::CallSite sc_site_(name); \
  if (CUresult sc_rc_ = ::softcuda::enter(sc_site_); sc_rc_ != CUDA_SUCCESS) return sc_rc_
#define SC_ENTER_ANYTIME(name)                \
  static ::softcuda::CallSite sc_site_(name); \
  if (CUresult sc_rc_ = ::softcuda::enter(sc_site_, false); sc_rc_ != CUDA_SUCCESS) return sc_rc_

// The current context, checked (INVALID_CONTEXT without one; its sticky error if it has one).
CUresult need_ctx(Context** out);
// A context handle from the application, checked.
CUresult check_ctx(CUcontext c, Context** out);
Device* device_of(CUdevice d);  // null when out of range (call with mu held or after init)

// Memory (memory.cpp). With mu held:
std::shared_ptr<Allocation> find_allocation(std::uintptr_t p);  // containing p, or null
bool in_device_arena(std::uintptr_t p);
// Reserves [base, base+len) of device address space and releases it.
std::uintptr_t arena_take(Device& d, std::uint64_t len, std::uint64_t align);
void arena_give(Device& d, std::uintptr_t base, std::uint64_t len);
void reserve_none(std::uintptr_t base, std::uint64_t len);  // back to PROT_NONE
std::uint64_t page_round(std::uint64_t n);
// A memfd named for its buffer (softcuda:<pid>:<buffer id>) of `len` bytes, mapped read/write
// for the copy engine.
CUresult make_backing(std::uint64_t buffer_id, std::uint64_t len, int* fd, std::byte** shadow);
CUresult oom_check(std::uint64_t bytes);  // the "oom" fault

// Where the copy engine reaches [p, p+len): a device range inside one allocation, or host
// memory (pinned when registered). Errors name nothing (CUresult), as the driver's do.
struct Span {
  std::byte* cpu = nullptr;
  bool device = false;
  bool pinned = false;  // host memory the driver knows (HostAlloc, registered, managed)
  std::shared_ptr<Allocation> alloc;
};
CUresult resolve_device(CUdeviceptr p, std::uint64_t len, Span* out);
CUresult resolve_host(const void* p, std::uint64_t len, Span* out);
CUresult resolve_any(std::uintptr_t p, std::uint64_t len, Span* out);  // unified addressing

// Streams and events (engine.cpp). With mu held unless stated:
// Starts the copy engine threads once, at the first context (no context, no work: a process
// that only queries devices has no thread of softcuda's), and returns once they run.
void start_engines();
// The stream a handle names: 0 and CU_STREAM_LEGACY/PER_THREAD resolve on the calling thread
// (`ptds`: the entry point is a per-thread-default-stream variant).
CUresult resolve_stream(CUstream h, bool ptds, Stream** out);
Stream* new_stream(Context* ctx, unsigned flags, int priority);
// Appends op to s (dependencies per the default-stream rules); captured (not run) while s is
// capturing. Returns the op (null when captured).
std::shared_ptr<Op> enqueue(Stream* s, std::shared_ptr<Op> op);
// Waits without mu held for op to finish (lock must own mu; it is released while waiting).
void wait_op(std::unique_lock<std::mutex>& lock, const std::shared_ptr<Op>& op);
// Waits for everything enqueued on s so far; returns and clears its pending error.
CUresult sync_stream(std::unique_lock<std::mutex>& lock, Stream* s);
CUresult sync_context(std::unique_lock<std::mutex>& lock, Context* ctx);
// Copies len bytes between spans on s, asynchronously unless the driver's rules for pageable
// memory say otherwise (`sync_call`: a non-Async entry point).
CUresult submit_copy(std::unique_lock<std::mutex>& lock, Stream* s, const Span& dst,
                     const Span& src, std::uint64_t len, bool sync_call);
CUresult submit_memset(std::unique_lock<std::mutex>& lock, Stream* s, const Span& dst,
                       std::uint32_t value, unsigned width, std::uint64_t count, bool sync_call);
Event* find_event(CUevent e);
void destroy_context_resources(std::unique_lock<std::mutex>& lock, Context* ctx);

// Control (control.cpp).
std::string run_control(const std::string& command);  // "ok..." or "error: ..."
CUresult error_from_name(const std::string& s, bool* ok);
const char* error_name(CUresult r);

}  // namespace softcuda
