// softverbs internals: the configuration, the objects behind the verbs structs, and the
// emulated NIC. Every verbs struct handed to an application is the first member of a box
// (CtxBox, CqBox, QpBox, ...) so the inline verbs of <infiniband/verbs.h> work unchanged and
// the library finds its own state from the pointer the application passes back.
#pragma once

#include <infiniband/verbs.h>
#include <sys/uio.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "token_bucket.h"

namespace softverbs {

// ---- configuration (config.cpp) ----

struct DeviceConfig {
  std::string name;                // soft_<index>
  std::string bind = "127.0.0.1";  // IPv4 address the NIC listens on
  uint32_t bind_ip = 0;            // network byte order
  double rate_gbps = 100.0;
  int numa_node = -1;
  std::string pci_bus_id;
  ibv_port_state port_state = IBV_PORT_ACTIVE;
  std::vector<ibv_gid> gids;  // index 0 is always the IPv4-mapped bind address
  uint16_t port_base = 0;     // top-level setting: NICs listen on port_base + slot
  uint8_t active_speed = 0;   // IB speed and width codes that multiply to rate_gbps
  uint8_t active_width = 0;
  uint64_t guid = 0;       // host order
  std::string sysfs_path;  // fake ibdev_path (class/infiniband/<name>) or empty
  std::string netns;       // network namespace of the bind address ("" = the process's own)
  std::vector<std::string> faults;  // control commands applied when the device is first used
  bool mw_strict = true;            // a window's bind keeps its index bits (mw.cpp)
  uint32_t mw_index_limit = 0;      // window indices per context (0: kMwIndexCount)
  uint32_t max_inline_data = 256;   // inline bytes a send WR may carry (ibv_create_qp's cap)
};

// Every opened context runs one NIC, which listens on bind:(port_base + slot) with the first
// free slot; its QP numbers are slot << kQpIndexBits | index, so a peer finds the NIC of a QP
// from its GID (the IPv4 address) and its QP number (the port).
inline constexpr int kSlots = 1024;
inline constexpr uint32_t kQpIndexBits = 14;

// The devices, loaded once from SOFTVERBS_CONFIG (or the default). On a bad file the list is
// empty and the reason is printed once on stderr.
const std::vector<DeviceConfig>& devices();
// The IB speed and width codes whose product is the rate (or the largest product below it).
void encode_rate(double gbps, uint8_t* speed, uint8_t* width);
// IPv4-mapped GID (::ffff:a.b.c.d) of an address in network byte order.
ibv_gid ipv4_gid(uint32_t ip_be);
// The IPv4 address (network order) inside an IPv4-mapped GID; false for any other GID.
bool gid_to_ipv4(const ibv_gid& gid, uint32_t* ip_be);

// ---- wire format (nic.cpp, datapath.cpp) ----

enum class Op : uint8_t {
  kHello = 1,  // qpn = destination QP, imm = source QP
  kWrite,      // raddr, rkey, len bytes follow
  kWriteImm,   // as kWrite, plus imm and a receive consumed at the target
  kReadReq,    // raddr, rkey, len requested; no body
  kSend,       // len bytes follow
  kSendImm,    // as kSend, plus imm
  kAck,        // seq acknowledged
  kNak,        // status = ibv_wc_status for the requester
  kReadResp,   // len bytes follow
  kSendInv,    // as kSend, plus rkey: the target's window to invalidate
};

struct WireHdr {
  uint32_t magic;
  uint8_t op;
  uint8_t status;
  uint16_t reserved;
  uint32_t qpn;  // destination QP number
  uint32_t imm;  // immediate (network order as posted)
  uint32_t rkey;
  uint32_t len;
  uint64_t raddr;
  uint64_t seq;  // requester's sequence number, echoed by the response
};
inline constexpr uint32_t kMagic = 0x53565231;  // "SVR1"

// ---- objects ----

struct Device;
struct Qp;
struct Conn;

struct CtxBox {
  verbs_context v;  // v.context is the ibv_context the application sees
  Device* dev;
};

struct MrBox {
  ibv_mr ibv;
  int access;
};

// Device memory an MR reaches (gpu_memory.cpp): softverbs' own shadow mapping of softcuda's
// backing, made at registration and unmapped when the MR is deregistered.
struct GpuMapping {
  void* base = nullptr;  // the mapping (nullptr: host memory)
  size_t span = 0;
  char* host = nullptr;  // where the registered range starts in it
};
// 0 or an errno value: EBADF for fd -1 (NCCL's probe), EINVAL for an fd that is not a dma-buf of
// softcuda's or a range outside it.
int map_dmabuf(int fd, uint64_t offset, size_t length, GpuMapping* out);
// 0; ENOENT when addr is not device memory (register it as host memory); EFAULT for device
// memory whose device has no peermem (as get_user_pages fails on it).
int map_peermem(const void* addr, size_t length, GpuMapping* out);
void unmap_gpu(const GpuMapping& m);

struct MrInfo {
  uint64_t iova = 0;  // addresses in SGEs and remote requests are in this space
  char* host = nullptr;
  size_t length = 0;
  int access = 0;
  ibv_pd* pd = nullptr;
  GpuMapping gpu;  // device memory (dma-buf or peermem); owned by the MR
  // The application's handle (an MrBox): reachable from the device for as long as the MR exists,
  // as a kernel driver keeps its MR object, also after a failed ibv_dereg_mr left it registered.
  const void* box = nullptr;
};

// A type-2B memory window (mw.cpp). Its index is fixed at allocation: the lowest free one from
// kMwIndexBase (freed indices are reused), at most the device's mw_index_limit of them. Its
// rkey is index << 8 | a key byte. With mw_strict (the default) a bind's rkey must keep the
// index (rkey >> 8 == index, as ibv_inc_rkey does), as on hardware; without it, any value not
// in use by another window or a region (rdma-unit-test's MwType2 cases choose their own).
inline constexpr uint32_t kMwIndexBase = 0x800000;
inline constexpr uint32_t kMwIndexCount = 0x800000;  // indices kMwIndexBase .. 0xffffff
struct MwInfo {
  ibv_pd* pd = nullptr;
  bool bound = false;
  uint32_t rkey = 0;  // the current key; only this exact value is accepted
  uint32_t qpn = 0;   // the QP it was bound through: the only one remote requests may use
  uint64_t iova = 0;
  uint64_t length = 0;
  int access = 0;
  uint32_t mr_key = 0;
};

struct ChannelBox {
  ibv_comp_channel ibv;  // ibv.fd is the read end of a pipe of ibv_cq pointers
  int write_fd;
};

struct Cq {
  ibv_cq* ibv = nullptr;
  Device* dev = nullptr;
  std::mutex mu;
  std::deque<ibv_wc> entries;
  size_t capacity = 0;
  bool armed = false;
  bool solicited_only = false;
  bool overflowed = false;
  std::atomic<int> users{0};  // QPs using this CQ
  uint64_t serial = 0;        // the device's CQs in creation order ("fail_poll" picks by it)
  // Completions held back by a "delay" fault: (due time in steady-clock ns, entry), in order.
  std::deque<std::pair<uint64_t, ibv_wc>> delayed;
};

struct CqBox {
  ibv_cq ibv;
  Cq* cq;
};

struct SendWr {
  uint64_t seq = 0;
  uint64_t wr_id = 0;
  ibv_wc_opcode opcode = IBV_WC_SEND;
  bool signaled = false;
  uint32_t byte_len = 0;
  std::vector<iovec> local;  // RDMA_READ: where the response lands
  int pre_status = -1;       // >= 0: completes with this status without going on the wire
};

struct RecvWr {
  uint64_t wr_id = 0;
  std::vector<ibv_sge> sges;
};

struct Qp {
  ibv_qp* ibv = nullptr;
  Device* dev = nullptr;
  Cq* send_cq = nullptr;
  Cq* recv_cq = nullptr;
  std::mutex mu;  // order: Qp::mu before Cq::mu
  ibv_qp_state state = IBV_QPS_RESET;
  ibv_qp_cap cap{};
  bool sq_sig_all = false;
  int access_flags = 0;
  uint16_t pkey_index = 0;
  uint8_t port_num = 1;
  ibv_qp_attr attr{};  // everything last set by modify_qp, returned by query_qp
  uint32_t dest_qpn = 0;
  uint32_t dest_ip = 0;
  uint16_t dest_port = 0;
  uint64_t next_seq = 1;
  bool sq_blocked = false;  // a locally failed WR is queued: later WRs must not go out
  std::deque<SendWr> inflight;
  std::deque<RecvWr> rq;
  std::shared_ptr<Conn> out;  // requester connection (to the peer's NIC)
  int connect_error = 0;
  bool destroyed = false;
};

struct QpBox {
  ibv_qp ibv;
  std::shared_ptr<Qp> qp;
};

// One message to write: a header (and small or copied bodies) in head, then body: iovecs that
// point into the application's registered memory (large WRITE/SEND payloads, sent without a
// copy; the WR cannot complete before they are written, and abort() drops them first).
struct OutMsg {
  std::unique_ptr<char[]> head;
  size_t head_len = 0;
  std::vector<iovec> body;
  size_t size = 0;  // head_len + body bytes
};
OutMsg make_out(size_t head_len);

// One connection of the NIC. Outgoing ones carry this side's requests and the peer's
// responses; incoming ones carry the peer's requests and this side's responses.
struct Conn {
  int fd = -1;
  bool incoming = false;
  std::shared_ptr<Qp> qp;  // the local QP (bound by HELLO for incoming connections)
  // Input state, touched by the NIC thread only.
  WireHdr hdr{};
  size_t hdr_got = 0;
  bool in_body = false;
  bool blocked = false;  // a request waits for a receive WR or for the QP to reach RTR
  std::vector<iovec> dst;
  size_t dst_i = 0;
  uint64_t dst_gen = 0;      // Device::dereg_gen when dst was resolved
  size_t discard = 0;        // body bytes to drop after dst
  std::vector<char> staged;  // small bodies kept until the message ends (SEND scatter)
  // Output: pending is filled under Nic::mu by any thread, out by the NIC thread (under
  // Nic::io_mu while it writes, so that abort() can take back references to user memory).
  std::deque<OutMsg> pending;
  std::deque<OutMsg> out;
  size_t out_off = 0;
  bool closing = false;
  bool aborted = false;  // output discarded; the NIC thread drops the connection
};

class Nic {
 public:
  explicit Nic(Device* dev) : dev_(dev) {}
  ~Nic();
  // Binds the first free port in [port_base, port_base + kSlots) and starts the thread.
  int start();
  // Stops and joins the thread (idempotent); the Nic stays valid for the thread until then.
  void stop();
  uint32_t slot() const { return slot_; }
  // Blocking connect from an application thread; sends HELLO, then hands the socket over.
  int connect(const std::shared_ptr<Qp>& qp, std::shared_ptr<Conn>* conn);
  void send(Conn& conn, OutMsg msg);
  // Graceful: closed once its output has gone out.
  void close(const std::shared_ptr<Conn>& conn);
  // Abortive: the output is discarded before this returns (so no reference to user memory is
  // left), and the NIC thread drops the connection, failing its in-flight WRs.
  void abort(const std::shared_ptr<Conn>& conn);
  // Aborts every connection whose unsent output points into [lo, lo + len): the memory of a
  // region being deregistered (ibv_dereg_mr, under Device::dma_mu held exclusively). Output
  // that lies wholly inside one of `still_registered` (the device's other MRs) is kept: its
  // pages stay registered, as two MRs over one buffer are on hardware.
  void forget_range(const char* lo, size_t len,
                    const std::vector<std::pair<const char*, size_t>>& still_registered);
  void wake();

 private:
  void run();
  void accept_one();
  bool read_some(const std::shared_ptr<Conn>& c);
  bool write_some(Conn& c, uint64_t now_ns);
  void drop(const std::shared_ptr<Conn>& c);
  // Periodic duties: the link check, delayed completions; returns ns until the next one.
  uint64_t housekeeping(uint64_t now_ns);

  Device* dev_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;
  uint32_t slot_ = 0;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::mutex io_mu_;              // held while writing from OutMsg bodies
  uint64_t throttled_until_ = 0;  // the device's token bucket is empty until then
  uint64_t next_link_check_ = 0;
  std::vector<std::shared_ptr<Conn>> added_;  // handed over, not yet polled
  std::vector<std::shared_ptr<Conn>> conns_;  // changed by the NIC thread under mu_
};

// ---- live device state (port.cpp, control.cpp) ----

// A fault armed by "fail_wr": the countdown-th send WR posted on QP qpn (0: any QP of the
// device) completes with status instead of executing.
struct WrFault {
  uint32_t qpn = 0;
  uint64_t countdown = 1;
  ibv_wc_status status = IBV_WC_GENERAL_ERR;
};

// A fault armed by "fail_post": the countdown-th ibv_post_send call on QP qpn (0: any QP of the
// device) posts the WRs before index `at` and fails with err, its bad_wr at WR `at`; at < 0
// posts every WR of the call and answers err with a null bad_wr (an unknown result).
struct PostFault {
  uint32_t qpn = 0;
  uint64_t countdown = 1;
  int err = ENOMEM;
  int at = -1;
};

// A fault armed by "fail_destroy": the countdown-th ibv_destroy_qp call on QP qpn (0: any QP of
// the device) fails with err and leaves the QP as it was.
struct DestroyFault {
  uint32_t qpn = 0;
  uint64_t countdown = 1;
  int err = EBUSY;
};

// A fault armed by "fail_poll": the countdown-th ibv_poll_cq call on a CQ of the device that
// existed when it was armed (serial below cq_limit), and the remaining - 1 calls after it, fail
// (a negative return) and take no completion. A CQ created later polls normally, as a consumer
// that replaces a failing CQ expects.
struct PollFault {
  uint64_t countdown = 1;
  uint64_t remaining = 1;
  uint64_t cq_limit = 0;
};

// What can change while a device is in use, shared by every context opened on it in this
// process: the port, the GID table, the rate (and its token bucket) and the armed faults.
struct DeviceState {
  int index = 0;
  const DeviceConfig* cfg = nullptr;
  // Lock order: mu before Device::qp_mu, Qp::mu and the NIC's locks; gid_mu and fault_mu are
  // leaves (taken under Qp::mu by modify_qp and post_send).
  std::mutex mu;  // admin_state, link_up, rate, open, ifname, link_fd
  ibv_port_state admin_state = IBV_PORT_ACTIVE;  // config or control ("port up/down")
  bool link_up = true;                           // the bind address's interface is up
  std::atomic<bool> active{true};                // admin ACTIVE and link up
  std::mutex gid_mu;
  std::vector<ibv_gid> gids;
  double rate_gbps = 0;
  uint8_t active_speed = 0;
  uint8_t active_width = 0;
  std::atomic<bool> mw_disabled{false};
  std::atomic<bool> send_inv_disabled{false};
  std::atomic<bool> mw_strict{true};        // "mw_strict DEV on|off"
  std::atomic<uint32_t> mw_index_limit{0};  // "mw_index_limit DEV N"; 0: kMwIndexCount
  std::atomic<uint64_t> delay_ns{0};
  // "hold_flush DEV on|off": while on, send WRs flushed by their QP's move to ERR get no
  // completion at all (until the QP is destroyed, after which none can come): a device whose
  // flush CQEs are late beyond any bound, for the consumer's destruction window.
  std::atomic<bool> hold_flushes{false};
  std::atomic<uint64_t> flushes_held{0};
  std::mutex fault_mu;
  std::vector<WrFault> wr_faults;
  std::atomic<bool> have_wr_faults{false};
  std::vector<PostFault> post_faults;  // guarded by fault_mu
  std::atomic<bool> have_post_faults{false};
  std::vector<DestroyFault> destroy_faults;  // guarded by fault_mu
  std::vector<DestroyFault> dereg_faults;    // "fail_dereg" (qpn unused); guarded by fault_mu
  std::vector<PollFault> poll_faults;        // guarded by fault_mu
  std::atomic<bool> have_poll_faults{false};
  std::atomic<uint64_t> polls_failed{0};  // shown as "polls_failed N"
  std::atomic<uint64_t> next_cq_serial{0};
  std::vector<Device*> open;  // contexts to notify of port and GID changes
  std::string ifname;         // interface holding the bind address ("" until found)
  int link_fd = -1;           // a socket in the device's namespace, for SIOCGIFFLAGS
  bool link_probed = false;
  TokenBucket bucket;

  ibv_port_state port_state() {
    std::lock_guard lock(mu);
    return link_up ? admin_state : IBV_PORT_DOWN;
  }
};

// The state of configured device index (created on first use, with the config's faults).
DeviceState& device_state(int index);
uint64_t now_ns();
// Port changes (port.cpp): raise PORT_ERR/PORT_ACTIVE on every open context; going down fails
// in-flight WRs with RETRY_EXC_ERR (their QPs go to ERR) and aborts their connections.
void set_admin_state(DeviceState& st, ibv_port_state state);
void set_link_up(DeviceState& st, bool up);
// Re-reads the interface flags of the bind address (NIC threads call it periodically).
void check_link(DeviceState& st);
// Creates a socket in the device's network namespace (errno-style error as -errno).
int device_socket(const DeviceConfig& cfg, int type);
// An armed fail_wr fault for a WR of qpn: the status to complete it with, or -1.
int take_wr_fault(DeviceState& st, uint32_t qpn);
// An armed fail_post fault for a post_send call on qpn, or false.
bool take_post_fault(DeviceState& st, uint32_t qpn, PostFault* out);
// An armed fail_destroy fault for an ibv_destroy_qp call on qpn: its errno, or 0.
int take_destroy_fault(DeviceState& st, uint32_t qpn);
// An armed fail_dereg fault for an ibv_dereg_mr call: its errno, or 0.
int take_dereg_fault(DeviceState& st);
// Whether an armed fail_poll fault fails this ibv_poll_cq call on the CQ numbered cq_serial.
bool take_poll_fault(DeviceState& st, uint64_t cq_serial);
// Validates a control command (without running it); "" when it is well formed.
std::string check_command(const std::string& command);
// Runs a control command; 0 with "ok..." in reply, or an errno value with "error: ...".
int run_command(const std::string& command, std::string* reply);

struct Device {
  const DeviceConfig* cfg = nullptr;
  DeviceState* st = nullptr;
  CtxBox* box = nullptr;
  int async_write_fd = -1;
  // Shared while output that points into registered memory is queued (zero-copy WRITE/SEND
  // payloads, READ responses); exclusive in ibv_dereg_mr, which then drops such output.
  std::shared_mutex dma_mu;
  std::atomic<uint64_t> dereg_gen{0};  // ibv_dereg_mr calls so far (see Conn::dst_gen)
  std::shared_mutex mr_mu;
  std::unordered_map<uint32_t, MrInfo> mrs;  // key: lkey == rkey
  uint32_t next_mr_index = 1;
  std::unordered_map<uint32_t, MwInfo> mws;         // by index, under mr_mu as well
  std::unordered_map<uint32_t, uint32_t> mw_rkeys;  // rkey of a bound window -> index
  uint32_t next_mw_index = kMwIndexBase;            // above every index handed out so far
  std::map<uint32_t, uint8_t> free_mws;             // freed indices below it -> their last key byte
  std::mutex qp_mu;
  std::unordered_map<uint32_t, std::shared_ptr<Qp>> qps;
  uint32_t next_qp_index = 0x10;
  std::unique_ptr<Nic> nic;
  std::mutex delay_mu;
  std::vector<Cq*> delayed_cqs;  // CQs holding delayed completions

  void async_event(ibv_event_type type, ibv_qp* qp, ibv_cq* cq);
  bool lookup_mr(uint32_t key, MrInfo* out);
  std::shared_ptr<Qp> find_qp(uint32_t qpn);
};

Device* device_of(ibv_context* ctx);
inline Cq* cq_of(ibv_cq* cq) {
  return reinterpret_cast<CqBox*>(cq)->cq;
}
inline std::shared_ptr<Qp> qp_of(ibv_qp* qp) {
  return reinterpret_cast<QpBox*>(qp)->qp;
}

// ---- memory windows (mw.cpp) ----

// True when rkey names a bound window (then resolve_mw decides); false for anything else.
bool is_mw_key(Device& dev, uint32_t rkey);
ibv_mw* alloc_mw(ibv_pd* pd, ibv_mw_type type);
// Busy checks of dereg_mr (caller holds mr_mu) and destroy_qp (MwType2 DeregMrWhenBound,
// DestroyWithType2Bound: EBUSY).
bool mr_has_bound_window(Device& dev, uint32_t mr_key);
bool qp_has_bound_window(Device& dev, uint32_t qpn);
int dealloc_mw(ibv_mw* mw);
int bind_mw_type1(ibv_qp* qp, ibv_mw* mw, ibv_mw_bind* bind);
// Executes an IBV_WR_BIND_MW of qp (caller holds qp.mu); the status is the WR's completion.
ibv_wc_status bind_now(Qp& qp, const ibv_send_wr& wr);
// Invalidates the window named by rkey if it is bound through QP qpn of PD pd (type 2B).
bool invalidate(Device& dev, const ibv_pd* pd, uint32_t qpn, uint32_t rkey);
// A remote request's [addr, addr + len) through a window: bound, exact key, same PD, bound
// through QP qpn, rights, range; then translated through the window's MR.
bool resolve_mw(Device& dev, uint32_t key, uint64_t addr, uint64_t len, int need, const ibv_pd* pd,
                uint32_t qpn, char** host);

// ---- data path (datapath.cpp) ----

// The emulated DMA of the NIC thread on registered memory. The application may touch that
// memory at any time, as with hardware; it learns that bytes are there from a completion or
// from its peer (through a socket, another process), an order ThreadSanitizer cannot see. So
// under ThreadSanitizer these accesses are not tracked, as a device's DMA would not be.
ssize_t dma_recv(int fd, void* dst, size_t n);
void dma_read(void* dst, const void* src, size_t n);

#if defined(__SANITIZE_THREAD__)
#define SOFTVERBS_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SOFTVERBS_TSAN 1
#endif
#endif

inline constexpr uint32_t kMaxMsg = 1U << 30;  // ibv_port_attr::max_msg_sz
// Payloads from this size on are sent from registered memory without a copy.
inline constexpr uint64_t kZeroCopyMin = 16 << 10;

// A message whose head holds the header and room for a copied body of `body` bytes.
OutMsg header(Op op, uint8_t status, uint32_t qpn, uint64_t seq, size_t body);
// Resolves [addr, addr + len) of a key to host memory, with the rights and the PD checked.
bool resolve(Device& dev, uint32_t key, uint64_t addr, uint64_t len, int need, ibv_pd* pd,
             char** host);
// Completes a receive (h: the message, for immediates and invalidations; may be null).
void complete_recv(Qp& qp, const RecvWr& r, ibv_wc_status status, uint32_t len, const WireHdr* h);
// Appends a completion (after the device's "delay", if any); a full CQ marks overflow and
// raises IBV_EVENT_CQ_ERR.
void push_completion(Cq* cq, const ibv_wc& wc);
// Moves a CQ's delayed completions that are due into it (caller holds cq->mu); returns the
// due time of the next one, or 0.
uint64_t release_due(Cq* cq, uint64_t now);
// Moves the QP to ERR and flushes both queues in order (caller holds qp.mu).
void enter_error(Qp& qp);
// Completes the send WRs at the head of the queue that need no response (caller holds qp.mu).
void drain_local(Qp& qp);
// NIC thread: a header was read. Sets c.dst/c.discard, or c.blocked to retry later.
void begin_message(Device& dev, Conn& c);
// NIC thread, under Device::dma_mu (shared): a region was deregistered since c.dst was
// resolved; the rest of the body is discarded, and the message fails, unless c.dst still lies
// in registered memory.
void revalidate_dst(Device& dev, Conn& c);
// NIC thread: the whole body has arrived.
void end_message(Device& dev, Conn& c);
// NIC thread: the connection broke; its in-flight WRs fail with RETRY_EXC_ERR.
void connection_lost(Conn& c);
// The oldest WR on the wire completes with RETRY_EXC_ERR (its retries ran out: the peer or the
// port is gone), the QP goes to ERR and the rest flush; nothing when none is on the wire
// (caller holds qp.mu).
void fail_oldest_on_wire(Qp& qp);

int post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad);
int post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad);
int poll_cq(ibv_cq* cq, int n, ibv_wc* wc);
int req_notify_cq(ibv_cq* cq, int solicited_only);

}  // namespace softverbs
