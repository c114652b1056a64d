// One-way streaming bandwidth between two processes on one host, five ways in one run:
//   raw    a TCP stream over loopback with softverbs' socket settings (softverbs/src/nic.cpp
//          tune(): TCP_NODELAY, 4 MiB SO_SNDBUF/SO_RCVBUF), the ceiling softverbs is read against;
//   orbite OrbiTE isend/irecv over its tcp transport (shm and RDMA off), as sendrecv_perf streams;
//   o_rdma the same isend/irecv stream over OrbiTE's RDMA transport on the soft_* device (eager
//          frames, then rendezvous WRITEs), read against the raw WRITE beside it;
//   write  RDMA WRITE on an RC QP of a soft_* device, a window of selectively signaled WRs;
//   read   RDMA READ the same way, served by the target's NIC thread.
// Goal (softverbs issue): write and read at least 0.8x raw from 1 MiB, so that softverbs never
// becomes the bottleneck of the tests that run on it.
//
//   LD_LIBRARY_PATH=build/softverbs build/perf_tests/softverbs_bw [-b 4K] [-e 64M] [-f 4]
//       [-n 20] [-w 2] [--window 16] [--cq-events 0|1] [--json FILE]
//
// It forks (rank 0, the parent: sender, requester, clock; rank 1: receiver, target) instead of
// running under orbite-run: the raw stream and the QPs need two processes and a side channel
// anyway. The fork precedes every thread (OrbiTE's engine, softverbs' NIC threads). Linked to
// the system libibverbs like tests/softverbs/pingpong.cpp; without a soft_* device it exits 2.
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <orbite/communicator.h>
#include <orbite/store.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harness/harness.h"
#include "harness/orbite_bench.h"

namespace {

namespace perf = orbite::perf;

int g_rank = -1;  // for error messages; set right after the fork

[[noreturn]] void sys_fail(const std::string& what) {
  perf::fatal(g_rank, what + ": " + std::strerror(errno));
}

// Blocking whole-buffer I/O for the control channel and the raw stream. EOF means the other
// process died, which must end this one rather than hang it.
void io_all(bool out, int fd, char* p, std::uint64_t bytes, const char* what) {
  while (bytes > 0) {
    ssize_t n = out ? ::send(fd, p, bytes, MSG_NOSIGNAL) : ::recv(fd, p, bytes, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) perf::fatal(g_rank, std::string(what) + ": the other process went away");
    if (n < 0) sys_fail(what);
    p += n;
    bytes -= static_cast<std::uint64_t>(n);
  }
}
void write_all(int fd, const void* data, std::uint64_t bytes, const char* what) {
  io_all(true, fd, static_cast<char*>(const_cast<void*>(data)), bytes, what);  // send only reads
}
void read_all(int fd, void* data, std::uint64_t bytes, const char* what) {
  io_all(false, fd, static_cast<char*>(data), bytes, what);
}

// The socketpair between the two processes: start signals, QP details, check results.
struct Control {
  int fd = -1;
  void send_word(std::uint64_t v) const { write_all(fd, &v, sizeof v, "control send"); }
  std::uint64_t recv_word() const {
    std::uint64_t v = 0;
    read_all(fd, &v, sizeof v, "control receive");
    return v;
  }
  // Both processes leave together: each stream starts with its receiver ready.
  void sync() const {
    send_word(0);
    recv_word();
  }
};

// One registered buffer per process, four regions of the largest size: sources A and B, targets
// D and L. Every stream's last message comes from B (pattern 1) into L, cleared before the
// stream, and the rest from A (pattern 0) into D; checking L in full proves the data path moved
// the right bytes, and the last message cannot be mistaken for an earlier one or for leftovers.
struct Memory {
  explicit Memory(std::uint64_t largest) : region(largest), buf(4 * largest) {}
  std::byte* src_a() const { return buf.data(); }
  std::byte* src_b() const { return buf.data() + region; }
  std::byte* dst() const { return buf.data() + 2 * region; }
  std::byte* last() const { return buf.data() + 3 * region; }
  // Both processes hold the same sources, so READ (rank 1 the source) checks like WRITE.
  void fill(std::uint64_t size) const {
    perf::fill_pattern({src_a(), size}, {0, size, 0});
    perf::fill_pattern({src_b(), size}, {0, size, 1});
  }
  void clear_last(std::uint64_t size) const { std::memset(last(), 0, size); }
  std::uint64_t check_last(std::uint64_t size, const char* what) const {
    perf::Mismatch m = perf::check_pattern({last(), size}, {0, size, 1});
    if (m.wrong > 0) {
      perf::report_error(g_rank, std::string(what) + ", last message of " + std::to_string(size) +
                                     " bytes: " + perf::describe(m, size));
    }
    return m.wrong;
  }
  std::uint64_t region;
  perf::Buffer buf;
};

// ---- (a) raw TCP -------------------------------------------------------------------------------

void tune_socket(int fd) {
  int one = 1;
  int bytes = 4 << 20;  // softverbs/src/nic.cpp tune(): same buffers, same Nagle setting
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0 ||
      setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes) != 0 ||
      setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes) != 0) {
    sys_fail("setsockopt");
  }
}

// Rank 1 listens on a loopback port and tells rank 0, which connects: one connection per run.
int raw_connect(const Control& ctl) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  auto* sa = reinterpret_cast<sockaddr*>(&addr);
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) sys_fail("socket");
  tune_socket(fd);  // before listen/connect, so the window scale fits the buffers
  if (g_rank == 0) {
    addr.sin_port = htons(static_cast<std::uint16_t>(ctl.recv_word()));
    if (::connect(fd, sa, len) != 0) sys_fail("connect");
    return fd;
  }
  if (::bind(fd, sa, len) != 0 || ::listen(fd, 1) != 0 || ::getsockname(fd, sa, &len) != 0) {
    sys_fail("raw stream listener");
  }
  ctl.send_word(ntohs(addr.sin_port));
  int conn = ::accept(fd, nullptr, nullptr);
  if (conn < 0) sys_fail("accept");
  ::close(fd);
  tune_socket(conn);
  return conn;
}

// Rank 0 writes `count` messages back to back; rank 1 reads them and answers the last with one
// byte, which stops rank 0's clock (the time returned).
double raw_stream(int fd, const Memory& m, std::uint64_t size, int count, bool timed) {
  auto start = perf::PerfClock::now();
  char ack = 0;
  for (int i = 0; i < count; ++i) {
    bool last = timed && i == count - 1;
    if (g_rank == 0) {
      write_all(fd, last ? m.src_b() : m.src_a(), size, "raw stream send");
    } else {
      read_all(fd, last ? m.last() : m.dst(), size, "raw stream receive");
    }
  }
  g_rank == 0 ? read_all(fd, &ack, 1, "raw stream ack") : write_all(fd, &ack, 1, "raw stream ack");
  return perf::micros_since(start);
}

// ---- (b) OrbiTE over tcp -----------------------------------------------------------------------

constexpr int kTagStream = 1;
constexpr int kTagAck = 2;

// Rank 0 hosts the store; both connect to it and join a 2-rank communicator whose engine has
// shared memory off and either RDMA off (tcp is then the only transport) or RDMA on `device`
// alone (every message is forced onto it).
struct OrbiteSide {
  std::unique_ptr<orbite::TcpStoreServer> server;
  std::optional<orbite::Communicator> comm;
  orbite::TransferOptions topt;
  std::vector<orbite::Request> reqs;
};

void orbite_join(OrbiteSide& o, const Control& ctl, const std::string& rdma_device) {
  std::string address;
  if (g_rank == 0) {
    o.server = perf::value_or_die(g_rank, orbite::TcpStoreServer::start({}), "store server");
    address = o.server->address();
    ctl.send_word(o.server->port());
  } else {
    address = "127.0.0.1:" + std::to_string(ctl.recv_word());
  }
  orbite::TcpStoreClientOptions copt;
  copt.address = address;
  std::shared_ptr<orbite::Store> store =
      perf::value_or_die(g_rank, orbite::TcpStoreClient::connect(copt), "store client");
  auto bootstrap = perf::value_or_die(
      g_rank, orbite::Bootstrap::from_store(store, g_rank, 2, g_rank), "bootstrap");
  orbite::EngineConfig config =
      perf::value_or_die(g_rank, orbite::EngineConfig::load(), "engine config");
  config.shm.enable = false;
  if (rdma_device.empty()) {
    config.rdma.rdma_whitelist = {"softverbs_bw:no-rdma"};  // matches no device
  } else {
    config.rdma.enable = orbite::rdma::RdmaEnable::On;
    config.rdma.rdma_whitelist = {rdma_device};
  }
  o.comm.emplace(
      perf::value_or_die(g_rank, orbite::Communicator::create(bootstrap, config), "communicator"));
  o.topt.transport = rdma_device.empty() ? orbite::Transport::Tcp : orbite::Transport::Rdma;
}

// sendrecv_perf's stream: `windows` windows of W isends (rank 0) / irecvs (rank 1) waited
// together, then a 1-byte ack from rank 1. Returns rank 0's microseconds.
double orbite_stream(OrbiteSide& o, const Memory& m, std::uint64_t size, int windows, int window,
                     bool timed) {
  orbite::Communicator& comm = *o.comm;
  int peer = 1 - g_rank;
  auto start = perf::PerfClock::now();
  for (int it = 0; it < windows; ++it) {
    o.reqs.clear();
    for (int j = 0; j < window; ++j) {
      bool last = timed && it == windows - 1 && j == window - 1;
      auto r = g_rank == 0
                   ? comm.isend(last ? m.src_b() : m.src_a(), size, peer, kTagStream, o.topt)
                   : comm.irecv(last ? m.last() : m.dst(), size, peer, kTagStream, o.topt);
      if (!r.ok()) perf::fatal(g_rank, "orbite post: " + r.status().to_string());
      o.reqs.push_back(std::move(r).value());
    }
    perf::check_ok(g_rank, orbite::wait_all(o.reqs, perf::kOpTimeout), "orbite stream");
  }
  char ack = 0;
  if (g_rank == 0) {
    perf::recv_bytes(comm, &ack, 1, peer, kTagAck, o.topt, "orbite ack");
  } else {
    perf::send_bytes(comm, &ack, 1, peer, kTagAck, o.topt, "orbite ack");
  }
  return perf::micros_since(start);
}

// ---- (c, d) verbs ------------------------------------------------------------------------------

struct QpInfo {
  std::uint32_t qpn;
  ibv_gid gid;
  std::uint64_t addr;
  std::uint32_t rkey;
};

[[noreturn]] void verbs_fail(const char* what, int err) {
  perf::fatal(g_rank, std::string(what) + " failed: " + std::strerror(err));
}

// One device context, PD, MR over the whole Memory, CQ (with a completion channel for
// --cq-events) and RC QP, connected to the peer's as tests/softverbs/pingpong.cpp does.
struct Verbs {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_mr* mr = nullptr;
  ibv_comp_channel* channel = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  QpInfo peer{};
  bool events = true;  // --cq-events

  ~Verbs() {
    if (qp != nullptr) ibv_destroy_qp(qp);
    if (cq != nullptr) ibv_destroy_cq(cq);
    if (channel != nullptr) ibv_destroy_comp_channel(channel);
    if (mr != nullptr) ibv_dereg_mr(mr);
    if (pd != nullptr) ibv_dealloc_pd(pd);
    if (ctx != nullptr) ibv_close_device(ctx);
  }

  void open(const std::string& device, const Memory& m, int window, const Control& ctl) {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    for (int i = 0; list != nullptr && i < n && ctx == nullptr; ++i) {
      if (device == ibv_get_device_name(list[i])) ctx = ibv_open_device(list[i]);
    }
    if (list != nullptr) ibv_free_device_list(list);
    if (ctx == nullptr) verbs_fail("ibv_open_device", errno);
    if ((pd = ibv_alloc_pd(ctx)) == nullptr) verbs_fail("ibv_alloc_pd", errno);
    mr = ibv_reg_mr(pd, m.buf.data(), m.buf.size(),
                    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
    if (mr == nullptr) verbs_fail("ibv_reg_mr", errno);
    if ((channel = ibv_create_comp_channel(ctx)) == nullptr) verbs_fail("comp channel", errno);
    if ((cq = ibv_create_cq(ctx, 2 * window, nullptr, channel, 0)) == nullptr) {
      verbs_fail("ibv_create_cq", errno);
    }
    ibv_qp_init_attr ia{};
    ia.send_cq = ia.recv_cq = cq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap = {static_cast<std::uint32_t>(window), 1, 1, 1, 0};  // send WRs, recv WRs, SGEs
    if ((qp = ibv_create_qp(pd, &ia)) == nullptr) verbs_fail("ibv_create_qp", errno);

    QpInfo mine{qp->qp_num, {}, reinterpret_cast<std::uintptr_t>(m.buf.data()), mr->rkey};
    if (int e = ibv_query_gid(ctx, 1, 0, &mine.gid); e != 0) verbs_fail("ibv_query_gid", e);
    write_all(ctl.fd, &mine, sizeof mine, "QP info send");
    read_all(ctl.fd, &peer, sizeof peer, "QP info receive");

    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    modify(a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, "INIT");
    a = {};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_4096;
    a.dest_qp_num = peer.qpn;
    a.max_dest_rd_atomic = 16;  // READs in flight per QP, as many as the device allows
    a.min_rnr_timer = 12;
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid = peer.gid;
    a.ah_attr.grh.hop_limit = 64;
    a.ah_attr.port_num = 1;
    modify(a,
           IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
               IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
           "RTR");
    a = {};
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 16;
    modify(a,
           IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
               IBV_QP_MAX_QP_RD_ATOMIC,
           "RTS");
    ctl.sync();  // both RTS before the first request
  }

  void modify(ibv_qp_attr& a, int mask, const char* what) {
    if (int e = ibv_modify_qp(qp, &a, mask); e != 0) verbs_fail(what, e);
  }
};

// Waits for at least one completion; returns how many it got (into wc). Polling yields the core
// between empty polls: on a 2-core host the NIC threads of both processes need the CPUs.
int wait_completions(Verbs& v, ibv_wc* wc, int n) {
  for (;;) {
    int got = ibv_poll_cq(v.cq, n, wc);
    if (got != 0) return got;
    if (!v.events) {
      sched_yield();
      continue;
    }
    if (int e = ibv_req_notify_cq(v.cq, 0); e != 0) verbs_fail("ibv_req_notify_cq", e);
    got = ibv_poll_cq(v.cq, n, wc);  // one may have landed before the arming
    if (got != 0) return got;
    ibv_cq* cq = nullptr;
    void* context = nullptr;
    if (ibv_get_cq_event(v.channel, &cq, &context) != 0) verbs_fail("ibv_get_cq_event", errno);
    ibv_ack_cq_events(cq, 1);
  }
}

// Rank 0 keeps up to `window` WRs of `size` bytes in flight, `count` in all, signaling every
// window/4th and the last (an RC completion also completes every earlier WR). WRITEs go from A
// into the peer's D, READs from the peer's A into D; the timed stream's last uses B and L.
double verbs_stream(Verbs& v, const Memory& m, ibv_wr_opcode op, std::uint64_t size, int count,
                    int window, bool timed) {
  const int signal_every = std::max(1, window / 4);
  auto base = reinterpret_cast<std::uintptr_t>(m.buf.data());
  auto offset = [&](const std::byte* p) { return reinterpret_cast<std::uintptr_t>(p) - base; };
  int posted = 0;
  int done = 0;
  ibv_wc wc[16];
  auto start = perf::PerfClock::now();
  while (done < count) {
    while (posted < count && posted - done < window) {
      bool last = timed && posted == count - 1;
      const std::byte* local =
          op == IBV_WR_RDMA_WRITE ? (last ? m.src_b() : m.src_a()) : (last ? m.last() : m.dst());
      const std::byte* remote =
          op == IBV_WR_RDMA_WRITE ? (last ? m.last() : m.dst()) : (last ? m.src_b() : m.src_a());
      ibv_sge sge{reinterpret_cast<std::uintptr_t>(local), static_cast<std::uint32_t>(size),
                  v.mr->lkey};
      ibv_send_wr wr{};
      ibv_send_wr* bad = nullptr;
      wr.wr_id = static_cast<std::uint64_t>(posted);
      wr.sg_list = &sge;
      wr.num_sge = 1;
      wr.opcode = op;
      wr.send_flags =
          (posted + 1) % signal_every == 0 || posted == count - 1 ? IBV_SEND_SIGNALED : 0;
      wr.wr.rdma.remote_addr = v.peer.addr + offset(remote);
      wr.wr.rdma.rkey = v.peer.rkey;
      if (int e = ibv_post_send(v.qp, &wr, &bad); e != 0) verbs_fail("ibv_post_send", e);
      ++posted;
    }
    int got = wait_completions(v, wc, 16);
    if (got < 0) verbs_fail("ibv_poll_cq", EIO);
    for (int i = 0; i < got; ++i) {
      if (wc[i].status != IBV_WC_SUCCESS) {
        perf::fatal(g_rank, std::string(op == IBV_WR_RDMA_WRITE ? "WRITE: " : "READ: ") +
                                ibv_wc_status_str(wc[i].status));
      }
      done = std::max(done, static_cast<int>(wc[i].wr_id) + 1);
    }
  }
  return perf::micros_since(start);
}

// ---- the sweep ---------------------------------------------------------------------------------

struct Settings {
  perf::Options o;
  int window = 16;
  int cq_events = 1;
  std::string device;
};

enum Method { kRaw, kOrbite, kOrbiteRdma, kWrite, kRead, kMethods };

// Runs on both processes in lockstep; fills `micros` (rank 0) and returns the wrong bytes this
// process found. Each method: the checker clears L, both sync, a warm-up stream, the timed one.
std::uint64_t measure(const Settings& s, std::uint64_t size, const Memory& m, int raw_fd,
                      OrbiteSide& orb, OrbiteSide& orb_rdma, Verbs& verbs, const Control& ctl,
                      double micros[kMethods], int* messages) {
  const std::uint64_t window_bytes = size * static_cast<std::uint64_t>(s.window);
  const int windows = perf::scaled_iters(s.o.iters, window_bytes, perf::kMinTimedIters);
  const int warm_windows = perf::scaled_iters(s.o.warmup_iters, window_bytes, 1);
  const int count = windows * s.window;
  const int warm = warm_windows * s.window;
  *messages = count;
  std::uint64_t wrong = 0;
  m.fill(size);

  // Before each stream the process that checks clears L, and both leave together.
  auto begin = [&](int checker) {
    if (g_rank == checker) m.clear_last(size);
    ctl.sync();
  };
  begin(1);
  raw_stream(raw_fd, m, size, warm, false);
  micros[kRaw] = raw_stream(raw_fd, m, size, count, true);
  if (g_rank == 1) wrong += m.check_last(size, "raw tcp");

  begin(1);
  orbite_stream(orb, m, size, warm_windows, s.window, false);
  micros[kOrbite] = orbite_stream(orb, m, size, windows, s.window, true);
  if (g_rank == 1) wrong += m.check_last(size, "orbite tcp");

  begin(1);
  orbite_stream(orb_rdma, m, size, warm_windows, s.window, false);
  micros[kOrbiteRdma] = orbite_stream(orb_rdma, m, size, windows, s.window, true);
  if (g_rank == 1) wrong += m.check_last(size, "orbite rdma");

  // One-sided: rank 1 makes no call and only waits on the control channel for the end.
  for (ibv_wr_opcode op : {IBV_WR_RDMA_WRITE, IBV_WR_RDMA_READ}) {
    const bool write = op == IBV_WR_RDMA_WRITE;
    const int checker = write ? 1 : 0;  // the process whose L the last message lands in
    begin(checker);
    if (g_rank == 0) {
      verbs_stream(verbs, m, op, size, warm, s.window, false);
      micros[write ? kWrite : kRead] = verbs_stream(verbs, m, op, size, count, s.window, true);
    }
    ctl.sync();
    if (g_rank == checker)
      wrong += m.check_last(size, write ? "softverbs WRITE" : "softverbs READ");
  }
  ctl.sync();
  return wrong;
}

int run_rank(const Settings& s, int ctl_fd) {
  Control ctl{ctl_fd};
  const std::vector<std::uint64_t> sizes = perf::size_list(s.o);
  Memory m(sizes.back());
  int raw_fd = raw_connect(ctl);
  OrbiteSide orb;
  orbite_join(orb, ctl, "");
  OrbiteSide orb_rdma;
  orbite_join(orb_rdma, ctl, s.device);
  std::optional<Verbs> verbs(std::in_place);
  verbs->events = s.cq_events != 0;
  verbs->open(s.device, m, s.window, ctl);

  std::optional<perf::Report> report;
  if (g_rank == 0) {
    perf::RunInfo info{
        .program = "softverbs_bw",
        .implementation = "softverbs",
        .ranks = 2,
        .transport = "tcp loopback; verbs on " + s.device,
        .config = {{"window", s.window}, {"cq_events", s.cq_events}},
        .notes = {"rank 0 -> rank 1 (READ: rank 0 pulls); GB/s: bytes / rank 0's time. raw, "
                  "orbite and o_rdma end with a 1-byte ack",
                  "o_rdma: OrbiTE isend/irecv over its RDMA transport on the same soft_* device; "
                  "o_rdma/write is its ratio to the raw WRITE stream",
                  "orbite: windows of W isends waited together; write/read: up to W WRs in "
                  "flight, every W/4th signaled",
                  "the last message of every timed stream is checked byte for byte (#wrong)"}};
    std::vector<perf::Column> cols{{"size(B)", "size", 0}};
    for (std::string k : {"raw", "orbite", "o_rdma", "write", "read"}) {
      cols.push_back({k, k + "_gbps", 2, true, 0, {}, "GB/s"});
    }
    for (std::string k : {"write", "read", "orbite"}) {
      cols.push_back({k, k + "_ratio", 2, true, 0, {}, "ratio to raw"});
    }
    cols.push_back({"o_rdma/write", "o_rdma_write_ratio", 2, true, 0, {}, "ratio to write"});
    cols.push_back({"#wrong", "wrong", 0});
    cols.push_back({"messages", "messages", 0, false});
    report.emplace(std::move(info), s.o, std::move(cols));
    report->print_header();
  }
  std::uint64_t wrong = 0;
  for (std::uint64_t size : sizes) {
    double micros[kMethods] = {};
    int messages = 0;
    std::uint64_t w = measure(s, size, m, raw_fd, orb, orb_rdma, *verbs, ctl, micros, &messages);
    if (g_rank == 1) {
      ctl.send_word(w);
      continue;
    }
    w += ctl.recv_word();
    wrong += w;
    double gb[kMethods];
    for (int k = 0; k < kMethods; ++k)
      gb[k] = perf::gbps(static_cast<double>(size) * messages, micros[k]);
    auto r = [&](int k) { return gb[kRaw] > 0 ? gb[k] / gb[kRaw] : 0.0; };
    report->add_row({static_cast<double>(size), gb[kRaw], gb[kOrbite], gb[kOrbiteRdma], gb[kWrite],
                     gb[kRead], r(kWrite), r(kRead), r(kOrbite),
                     gb[kWrite] > 0 ? gb[kOrbiteRdma] / gb[kWrite] : 0.0, static_cast<double>(w),
                     static_cast<double>(messages)});
  }
  perf::check_ok(g_rank, orb.comm->store_barrier(), "final barrier");
  perf::check_ok(g_rank, orb_rdma.comm->store_barrier(), "final barrier (rdma)");
  bool ok = true;
  if (report) {
    report->add_summary("engine (rank 0)", perf::describe_engine(orb.comm->engine()));
    report->add_summary("rdma engine (rank 0)", perf::describe_engine(orb_rdma.comm->engine()));
    ok = report->finish(wrong);
  }
  // Teardown in step, so that neither process loses a peer it still talks to: the QPs first,
  // then the communicators, then (rank 0) the store server they used.
  ::close(raw_fd);
  verbs.reset();
  ctl.sync();
  orb.comm.reset();
  orb_rdma.comm.reset();
  ctl.sync();
  orb.server.reset();
  orb_rdma.server.reset();
  return ok && wrong == 0 ? 0 : 1;
}

// The first soft_* device, or "" (the loader found rdma-core's library or no device at all).
std::string find_soft_device() {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);  // n stays 0 on failure
  std::string name;
  for (int i = 0; i < n && name.empty(); ++i) {
    if (std::string d = ibv_get_device_name(list[i]); d.starts_with("soft_")) name = d;
  }
  if (list != nullptr) ibv_free_device_list(list);
  return name;
}

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  perf::Program program{
      "softverbs_bw",
      "Streaming bandwidth between two forked processes: raw TCP, OrbiTE tcp, OrbiTE rdma,\n"
      "softverbs RDMA WRITE and READ. Run with LD_LIBRARY_PATH=<build>/softverbs.",
      {perf::int_flag("--window", "messages in flight per stream (default 16)", &s.window, 1, 256),
       perf::int_flag("--cq-events",
                      "1: wait for completions on a completion channel (default);\n"
                      "0: poll the CQ, yielding the core between empty polls",
                      &s.cq_events, 0, 1)},
      "ignored: the last message of every timed stream is always checked",
      "not accepted: the OrbiTE columns measure tcp and rdma"};
  perf::Options defaults;
  defaults.min_bytes = 4 * perf::kKiB;
  defaults.max_bytes = 64 * perf::kMiB;
  defaults.step_factor = 4;
  defaults.iters = 20;
  defaults.warmup_iters = 2;
  defaults.check = true;
  s.o = perf::parse_options(argc, argv, program, true, defaults);
  s.o.check = true;  // the header then says so, and finish() reports the wrong bytes
  if (!s.o.transports.empty()) {
    perf::usage_error(program, true, "--transport: the OrbiTE columns always measure tcp and rdma");
  }
  if (perf::size_list(s.o).back() > (1ULL << 30)) {
    perf::usage_error(program, true, "messages above 1 GiB exceed softverbs' max_msg_sz");
  }

  s.device = find_soft_device();
  if (s.device.empty()) {
    std::fprintf(stderr,
                 "softverbs_bw: no soft_* verbs device. Run it on softverbs: "
                 "LD_LIBRARY_PATH=<build>/softverbs %s ...\n",
                 argv[0]);
    return 2;
  }

  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) sys_fail("socketpair");
  std::fflush(nullptr);  // the child must not print the parent's buffered output again
  pid_t pid = ::fork();
  if (pid < 0) sys_fail("fork");
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive a parent that died
    ::close(sv[0]);
    g_rank = 1;
    int rc = run_rank(s, sv[1]);
    std::fflush(nullptr);
    ::_exit(rc);
  }
  ::close(sv[1]);
  g_rank = 0;
  int rc = run_rank(s, sv[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  bool child_ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (!child_ok) perf::report_error(1, "the child process failed");
  return rc == 0 && child_ok ? 0 : 1;
}
