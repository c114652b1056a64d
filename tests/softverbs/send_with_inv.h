// Posts one signaled IBV_WR_SEND_WITH_INV of [addr, addr + len) that invalidates rkey at the
// receiver: the remote invalidation step several window tests share. Returns post_send's value.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

namespace softverbs_test {

inline int post_send_with_inv(ibv_qp* qp, uint64_t addr, uint32_t len, uint32_t lkey, uint32_t rkey,
                              uint64_t wr_id) {
  ibv_sge sge{addr, len, lkey};
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND_WITH_INV;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.invalidate_rkey = rkey;
  ibv_send_wr* bad = nullptr;
  return ibv_post_send(qp, &wr, &bad);
}

}  // namespace softverbs_test
