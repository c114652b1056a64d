// A tiny RDMA WRITE ping-pong in plain verbs. It knows nothing of OrbiTE or softverbs: it is
// linked against the system's libibverbs and runs on whatever libibverbs.so.1 the loader finds
// (LD_LIBRARY_PATH=build/softverbs for softverbs, an RNIC's rdma-core otherwise).
//
//   softverbs_pingpong [iterations] [bytes] [device]
//
// Forks: parent and child each open the device, swap (QPN, GID, address, rkey) over a
// socketpair, then bounce a buffer: each side WRITEs into the other's buffer, and the other
// sees the write land by watching the buffer's last byte. Exit status 0 on success.
#include <infiniband/verbs.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Info {
  uint32_t qpn;
  ibv_gid gid;
  uint64_t addr;
  uint32_t rkey;
};

#define CHECK(cond, what)                                  \
  do {                                                     \
    if (!(cond)) {                                         \
      std::fprintf(stderr, "pingpong: %s failed\n", what); \
      return 1;                                            \
    }                                                      \
  } while (0)

int run(int sock, bool starter, int iters, size_t bytes, const char* want) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  CHECK(list != nullptr && n > 0, "ibv_get_device_list");
  ibv_device* dev = list[0];
  for (int i = 0; want != nullptr && i < n; ++i) {
    if (std::strcmp(ibv_get_device_name(list[i]), want) == 0) dev = list[i];
  }
  ibv_context* ctx = ibv_open_device(dev);
  CHECK(ctx != nullptr, "ibv_open_device");
  ibv_free_device_list(list);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  CHECK(pd != nullptr, "ibv_alloc_pd");
  // The first half receives the peer's WRITEs, the second is the source of ours.
  std::vector<unsigned char> buf(2 * bytes, 0);
  unsigned char* src = buf.data() + bytes;
  ibv_mr* mr =
      ibv_reg_mr(pd, buf.data(), 2 * bytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  CHECK(mr != nullptr, "ibv_reg_mr");
  ibv_cq* cq = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
  CHECK(cq != nullptr, "ibv_create_cq");
  ibv_qp_init_attr ia{};
  ia.send_cq = cq;
  ia.recv_cq = cq;
  ia.qp_type = IBV_QPT_RC;
  ia.cap.max_send_wr = 4;
  ia.cap.max_recv_wr = 1;
  ia.cap.max_send_sge = 1;
  ia.cap.max_recv_sge = 1;
  ibv_qp* qp = ibv_create_qp(pd, &ia);
  CHECK(qp != nullptr, "ibv_create_qp");

  Info mine{qp->qp_num, {}, reinterpret_cast<uintptr_t>(buf.data()), mr->rkey};
  CHECK(ibv_query_gid(ctx, 1, 0, &mine.gid) == 0, "ibv_query_gid");
  Info peer{};
  CHECK(write(sock, &mine, sizeof(mine)) == static_cast<ssize_t>(sizeof(mine)), "write info");
  CHECK(read(sock, &peer, sizeof(peer)) == static_cast<ssize_t>(sizeof(peer)), "read info");

  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  CHECK(ibv_modify_qp(qp, &a,
                      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0,
        "INIT");
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_4096;
  a.dest_qp_num = peer.qpn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.dgid = peer.gid;
  a.ah_attr.grh.hop_limit = 64;
  a.ah_attr.port_num = 1;
  CHECK(ibv_modify_qp(qp, &a,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) == 0,
        "RTR");
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 1;
  CHECK(ibv_modify_qp(qp, &a,
                      IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                          IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) == 0,
        "RTS");
  char go = 0;  // both sides are RTS before the first WRITE
  CHECK(write(sock, &go, 1) == 1 && read(sock, &go, 1) == 1, "sync");

  volatile unsigned char* last = buf.data() + bytes - 1;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 1; i <= iters; ++i) {
    const auto tag = static_cast<unsigned char>(i % 255 + 1);
    const auto prev = static_cast<unsigned char>((i - 1) % 255 + 1);
    if (!starter) {
      while (*last != tag) sched_yield();
    } else if (i > 1) {
      while (*last != prev) sched_yield();
    }
    std::memset(src, tag, bytes);
    ibv_sge sge{reinterpret_cast<uintptr_t>(src), static_cast<uint32_t>(bytes), mr->lkey};
    ibv_send_wr wr{};
    ibv_send_wr* bad = nullptr;
    wr.wr_id = static_cast<uint64_t>(i);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = peer.addr;
    wr.wr.rdma.rkey = peer.rkey;
    CHECK(ibv_post_send(qp, &wr, &bad) == 0, "ibv_post_send");
    ibv_wc wc{};
    int got = 0;
    while ((got = ibv_poll_cq(cq, 1, &wc)) == 0) sched_yield();
    if (got < 0 || wc.status != IBV_WC_SUCCESS) {
      std::fprintf(stderr, "pingpong: completion %s\n", ibv_wc_status_str(wc.status));
      return 1;
    }
  }
  if (starter) {  // the last WRITE of the peer
    while (*last != static_cast<unsigned char>(iters % 255 + 1)) sched_yield();
  }
  const double us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  if (starter) {
    std::printf("%d iterations of %zu bytes on %s: %.2f us per round trip\n", iters, bytes,
                ibv_get_device_name(ctx->device), 2 * us / iters);
  }
  CHECK(write(sock, &go, 1) == 1 && read(sock, &go, 1) == 1, "final sync");
  ibv_destroy_qp(qp);
  ibv_destroy_cq(cq);
  ibv_dereg_mr(mr);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 1000;
  const size_t bytes = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 64;
  const char* device = argc > 3 ? argv[3] : nullptr;
  if (iters < 1 || bytes < 1) {
    std::fprintf(stderr, "usage: %s [iterations>=1] [bytes>=1] [device]\n", argv[0]);
    return 2;
  }
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return 1;
  const pid_t pid = fork();
  if (pid == 0) {
    close(sv[0]);
    _exit(run(sv[1], false, iters, bytes, device));
  }
  close(sv[1]);
  const int rc = run(sv[0], true, iters, bytes, device);
  int status = 0;
  waitpid(pid, &status, 0);
  const bool child_ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (rc == 0 && child_ok) std::printf("pingpong: OK\n");
  return rc == 0 && child_ok ? 0 : 1;
}
