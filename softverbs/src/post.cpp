// The application side of the data path, reached through the context's ops by the inline
// verbs: post_send (local checks, memory window operations, faults, the message to the NIC),
// post_recv, poll_cq and req_notify_cq.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <shared_mutex>

#include "internal.h"

namespace softverbs {

int post_send(ibv_qp* ibqp, ibv_send_wr* wr, ibv_send_wr** bad) {
  std::shared_ptr<Qp> sp = qp_of(ibqp);
  Qp& qp = *sp;
  Device& dev = *qp.dev;
  std::lock_guard lock(qp.mu);
  std::shared_lock dma(dev.dma_mu);  // zero-copy payloads: see ibv_dereg_mr
  if (qp.state != IBV_QPS_RTS && qp.state != IBV_QPS_ERR) {
    *bad = wr;
    return EINVAL;
  }
  // A refused WR: the WRs before it stay posted, and those the SQ already executed (binds,
  // invalidations, local errors: no message) must still complete.
  auto refuse = [&](ibv_send_wr* w, int err) {
    *bad = w;
    drain_local(qp);
    return err;
  };
  // An armed fail_post fault: this call fails at WR `at` (or, at < 0, after posting them all,
  // with a null bad_wr: the caller cannot know what was accepted).
  PostFault post_fault;
  const bool post_failing = take_post_fault(*dev.st, ibqp->qp_num, &post_fault);
  for (int index = 0; wr != nullptr; wr = wr->next, ++index) {
    if (post_failing && index == post_fault.at) return refuse(wr, post_fault.err);
    if (wr->num_sge < 0 || static_cast<uint32_t>(wr->num_sge) > qp.cap.max_send_sge) {
      return refuse(wr, EINVAL);
    }
    if (qp.inflight.size() >= qp.cap.max_send_wr) {
      return refuse(wr, ENOMEM);
    }
    SendWr w;
    w.wr_id = wr->wr_id;
    w.seq = qp.next_seq++;
    w.signaled = qp.sq_sig_all || (wr->send_flags & IBV_SEND_SIGNALED);
    Op op;
    switch (wr->opcode) {
      case IBV_WR_RDMA_WRITE:
        op = Op::kWrite;
        w.opcode = IBV_WC_RDMA_WRITE;
        break;
      case IBV_WR_RDMA_WRITE_WITH_IMM:
        op = Op::kWriteImm;
        w.opcode = IBV_WC_RDMA_WRITE;
        break;
      case IBV_WR_SEND:
        op = Op::kSend;
        w.opcode = IBV_WC_SEND;
        break;
      case IBV_WR_SEND_WITH_IMM:
        op = Op::kSendImm;
        w.opcode = IBV_WC_SEND;
        break;
      case IBV_WR_RDMA_READ:
        op = Op::kReadReq;
        w.opcode = IBV_WC_RDMA_READ;
        break;
      case IBV_WR_SEND_WITH_INV:
        op = Op::kSendInv;
        w.opcode = IBV_WC_SEND;
        break;
      case IBV_WR_BIND_MW:  // local operations: no message
        op = Op::kAck;
        w.opcode = IBV_WC_BIND_MW;
        break;
      case IBV_WR_LOCAL_INV:
        op = Op::kAck;
        w.opcode = IBV_WC_LOCAL_INV;
        break;
      default: return refuse(wr, EINVAL);
    }
    // Features a provider may lack (config or control "disable"): refused as EFA refuses them.
    if (((wr->opcode == IBV_WR_BIND_MW || wr->opcode == IBV_WR_LOCAL_INV) &&
         dev.st->mw_disabled.load()) ||
        (wr->opcode == IBV_WR_SEND_WITH_INV && dev.st->send_inv_disabled.load())) {
      return refuse(wr, EINVAL);
    }
    // An armed fail_wr fault: this WR completes with the fault's status, as a local error.
    if (const int fault = take_wr_fault(*dev.st, ibqp->qp_num); fault >= 0) {
      w.pre_status = qp.state == IBV_QPS_ERR || qp.sq_blocked ? IBV_WC_WR_FLUSH_ERR : fault;
      qp.sq_blocked = true;
      qp.inflight.push_back(std::move(w));
      continue;
    }
    if (wr->opcode == IBV_WR_BIND_MW || wr->opcode == IBV_WR_LOCAL_INV) {
      // Executed by the SQ itself: applied now, completed in order after the WRs before it.
      if (qp.state == IBV_QPS_ERR || qp.sq_blocked) {
        w.pre_status = IBV_WC_WR_FLUSH_ERR;
      } else if (wr->opcode == IBV_WR_BIND_MW) {
        w.pre_status = bind_now(qp, *wr);
      } else {  // type 2B: only through the QP the window is bound to (MwType2 oracle)
        w.pre_status = invalidate(dev, ibqp->pd, ibqp->qp_num, wr->invalidate_rkey)
                           ? IBV_WC_SUCCESS
                           : IBV_WC_MW_BIND_ERR;
      }
      if (w.pre_status != IBV_WC_SUCCESS) qp.sq_blocked = true;
      qp.inflight.push_back(std::move(w));
      continue;
    }
    const bool inl = (wr->send_flags & IBV_SEND_INLINE) != 0 && op != Op::kReadReq;
    uint64_t total = 0;
    for (int i = 0; i < wr->num_sge; ++i) total += wr->sg_list[i].length;
    if (inl && total > qp.cap.max_inline_data) {
      return refuse(wr, EINVAL);
    }
    w.byte_len = static_cast<uint32_t>(total);
    if (qp.state == IBV_QPS_ERR || qp.sq_blocked) {
      w.pre_status = IBV_WC_WR_FLUSH_ERR;
    } else if (total > kMaxMsg) {
      w.pre_status = IBV_WC_LOC_LEN_ERR;
    } else if (qp.connect_error != 0 || !qp.out || !dev.st->active.load()) {
      w.pre_status = IBV_WC_RETRY_EXC_ERR;  // no peer, or the port is down: retries run out
    }
    std::vector<iovec> local;
    const int need = op == Op::kReadReq ? IBV_ACCESS_LOCAL_WRITE : 0;
    for (int i = 0; i < wr->num_sge && w.pre_status < 0; ++i) {
      const ibv_sge& s = wr->sg_list[i];
      char* host = reinterpret_cast<char*>(s.addr);
      if (s.length == 0) continue;
      if (!inl && !resolve(dev, s.lkey, s.addr, s.length, need, ibqp->pd, &host)) {
        w.pre_status = IBV_WC_LOC_PROT_ERR;
      }
      local.push_back({host, s.length});
    }
    if (w.pre_status >= 0) {
      qp.sq_blocked = true;
      qp.inflight.push_back(std::move(w));
      continue;
    }
    const bool zero_copy = op != Op::kReadReq && !inl && total >= kZeroCopyMin;
    const size_t copied = op == Op::kReadReq || zero_copy ? 0 : total;
    OutMsg b = header(op, 0, qp.dest_qpn, w.seq, copied);
    auto* h = reinterpret_cast<WireHdr*>(b.head.get());
    h->len = static_cast<uint32_t>(total);
    h->imm = wr->imm_data;
    if (op == Op::kWrite || op == Op::kWriteImm || op == Op::kReadReq) {
      h->raddr = wr->wr.rdma.remote_addr;
      h->rkey = wr->wr.rdma.rkey;
    }
    if (op == Op::kSendInv) h->rkey = wr->invalidate_rkey;
    if (op == Op::kReadReq) {
      w.local = std::move(local);
    } else if (zero_copy) {
      b.body = std::move(local);
      b.size += total;
    } else {
      char* p = b.head.get() + sizeof(WireHdr);
      for (const iovec& v : local) {
        std::memcpy(p, v.iov_base, v.iov_len);
        p += v.iov_len;
      }
    }
    qp.inflight.push_back(std::move(w));
    dev.nic->send(*qp.out, std::move(b));
  }
  if (post_failing) return refuse(nullptr, post_fault.err);
  drain_local(qp);
  return 0;
}

int post_recv(ibv_qp* ibqp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  std::shared_ptr<Qp> sp = qp_of(ibqp);
  Qp& qp = *sp;
  {
    std::lock_guard lock(qp.mu);
    if (qp.state == IBV_QPS_RESET) {
      *bad = wr;
      return EINVAL;
    }
    for (; wr != nullptr; wr = wr->next) {
      if (wr->num_sge < 0 || static_cast<uint32_t>(wr->num_sge) > qp.cap.max_recv_sge) {
        *bad = wr;
        return EINVAL;
      }
      if (qp.rq.size() >= qp.cap.max_recv_wr) {
        *bad = wr;
        return ENOMEM;
      }
      RecvWr r;
      r.wr_id = wr->wr_id;
      r.sges.assign(wr->sg_list, wr->sg_list + wr->num_sge);
      if (qp.state == IBV_QPS_ERR) {
        complete_recv(qp, r, IBV_WC_WR_FLUSH_ERR, 0, nullptr);
      } else {
        qp.rq.push_back(std::move(r));
      }
    }
  }
  qp.dev->nic->wake();  // a SEND may be waiting for this receive
  return 0;
}

int poll_cq(ibv_cq* ibcq, int n, ibv_wc* wc) {
  Cq* cq = cq_of(ibcq);
  // A provider's poll fails with a negative value (a CQ error); what the CQ holds stays there.
  if (take_poll_fault(*cq->dev->st, cq->serial)) return -1;
  std::lock_guard lock(cq->mu);
  if (!cq->delayed.empty()) release_due(cq, now_ns());
  int got = 0;
  while (got < n && !cq->entries.empty()) {
    wc[got++] = cq->entries.front();
    cq->entries.pop_front();
  }
  return got;
}

int req_notify_cq(ibv_cq* ibcq, int solicited_only) {
  Cq* cq = cq_of(ibcq);
  std::lock_guard lock(cq->mu);
  cq->armed = true;
  cq->solicited_only = solicited_only != 0;
  return 0;
}

}  // namespace softverbs
