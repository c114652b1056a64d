#include "p2p/rdma/verbs.h"

namespace orbite::rdma::verbs {

const char* wc_status_name(int status) {
  switch (status) {
    case IBV_WC_SUCCESS: return "SUCCESS";
    case IBV_WC_LOC_LEN_ERR: return "LOC_LEN_ERR";
    case IBV_WC_LOC_QP_OP_ERR: return "LOC_QP_OP_ERR";
    case IBV_WC_LOC_EEC_OP_ERR: return "LOC_EEC_OP_ERR";
    case IBV_WC_LOC_PROT_ERR: return "LOC_PROT_ERR";
    case IBV_WC_WR_FLUSH_ERR: return "WR_FLUSH_ERR";
    case IBV_WC_MW_BIND_ERR: return "MW_BIND_ERR";
    case IBV_WC_BAD_RESP_ERR: return "BAD_RESP_ERR";
    case IBV_WC_LOC_ACCESS_ERR: return "LOC_ACCESS_ERR";
    case IBV_WC_REM_INV_REQ_ERR: return "REM_INV_REQ_ERR";
    case IBV_WC_REM_ACCESS_ERR: return "REM_ACCESS_ERR";
    case IBV_WC_REM_OP_ERR: return "REM_OP_ERR";
    case IBV_WC_RETRY_EXC_ERR: return "RETRY_EXC_ERR";
    case IBV_WC_RNR_RETRY_EXC_ERR: return "RNR_RETRY_EXC_ERR";
    case IBV_WC_LOC_RDD_VIOL_ERR: return "LOC_RDD_VIOL_ERR";
    case IBV_WC_REM_INV_RD_REQ_ERR: return "REM_INV_RD_REQ_ERR";
    case IBV_WC_REM_ABORT_ERR: return "REM_ABORT_ERR";
    case IBV_WC_INV_EECN_ERR: return "INV_EECN_ERR";
    case IBV_WC_INV_EEC_STATE_ERR: return "INV_EEC_STATE_ERR";
    case IBV_WC_FATAL_ERR: return "FATAL_ERR";
    case IBV_WC_RESP_TIMEOUT_ERR: return "RESP_TIMEOUT_ERR";
    case IBV_WC_GENERAL_ERR: return "GENERAL_ERR";
    default: return "unknown status";
  }
}

const char* wc_opcode_name(int opcode) {
  switch (opcode) {
    case IBV_WC_SEND: return "SEND";
    case IBV_WC_RDMA_WRITE: return "RDMA_WRITE";
    case IBV_WC_RDMA_READ: return "RDMA_READ";
    case IBV_WC_BIND_MW: return "BIND_MW";
    case IBV_WC_LOCAL_INV: return "LOCAL_INV";
    case IBV_WC_RECV: return "RECV";
    case IBV_WC_RECV_RDMA_WITH_IMM: return "RECV_RDMA_WITH_IMM";
    default: return "other opcode";
  }
}

}  // namespace orbite::rdma::verbs
