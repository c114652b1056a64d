// The RDMA transport's test hooks (ORBITE_RDMA_TEST_HOOKS): misbehaviour on demand for the tests
// that prove the peers' checks. Parsed once per lane (lane.cpp) and read by the lane's parts.
#pragma once

namespace orbite::rdma {

// Misbehaviour on demand, for the tests that prove the source's checks (tests/integration/
// rdma_test.cpp): ORBITE_RDMA_TEST_HOOKS is a comma-separated list of these names. Each hook
// makes this engine forge as a requester, kill itself at a protocol phase, or drop one of its
// own connections; none weakens a check, so an engine that reads the variable is no less safe
// to its peers.
struct TestHooks {
  bool widen_write = false;          // each WRITE segment's last WR reaches 1 byte past its window
  bool replay_key = false;           // a parent's WRs use the key of the previous, receipted grant
  bool other_qp = false;             // a segment's WRs go on another QP of its array
  bool kill_after_payload = false;   // requester: SIGKILL once the first payload WRs are posted
  bool kill_before_receipt = false;  // requester: SIGKILL instead of posting a receipt
  bool kill_on_grant_request = false;  // source: SIGKILL when a GrantRequest arrives
  bool kill_after_grant = false;       // source: SIGKILL once a grant is published
  bool retire_source_once = false;     // source: the first GrantRequest finds its QP retired
  bool forge_nic_table = false;        // NicTables rename this engine's first NIC
  bool forge_rendezvous = false;       // a rendezvous GrantRequest names a receive never matched
  bool forge_connect_slot = false;     // QpConnects name a slot one link width past the real one
  bool withhold_receipt = false;       // requester: the first parent never posts its receipts
  // requester: no parent ever posts its receipts, and GrantRequests ignore
  // kMaxPendingGrantRequests (the source's deferred queue fills past its bound)
  bool flood_grant_requests = false;
  // requester: a granted parent with a deadline posts nothing until that deadline passed (so its
  // grant goes back with a GrantCancel)
  bool hold_granted = false;
  bool defer_deadlined = false;  // source: a GrantRequest with a deadline waits until it passes
  // requester: a granted parent with a deadline posts only its first segment until that deadline
  // passed (its other segments go back with status-1 receipts)
  bool hold_later_segments = false;
  // requester: GrantRequests claim the other grant path than the target's kind asks for (the
  // private path for host memory, an ordinary grant for device memory)
  bool flip_private_path = false;
  // requester: connecting the first private QP to its Grant fails (the grant goes back with a
  // GrantCancel)
  bool fail_private_connect = false;
  // Every rendezvous waits for the Cts (no RtsRma): the flow before 2026-12-06, for comparison.
  bool rts_cts = false;
  [[nodiscard]] bool any() const {
    return widen_write || replay_key || other_qp || kill_after_payload || kill_before_receipt ||
           kill_on_grant_request || kill_after_grant || retire_source_once || forge_nic_table ||
           forge_rendezvous || forge_connect_slot || withhold_receipt || flood_grant_requests ||
           hold_granted || defer_deadlined || hold_later_segments || flip_private_path ||
           fail_private_connect || rts_cts;
  }
  static TestHooks from_env();
};

}  // namespace orbite::rdma
