"""orbite._core's TransferEngine, registered memory, stores and all_to_allv, under orbite-run -n 2
(SPMD: every rank runs these tests in the same order; see conftest.py)."""

import os
import struct
import sys
import time

import numpy as np
import pytest

import orbite
from conftest import WAIT, peer_of

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from free_ports import free_port_pair  # noqa: E402


def exchange(comm, mine: bytes) -> bytes:
    """Swaps a byte string with the peer (what a KV-cache layer does with descriptors)."""
    peer = peer_of(comm)
    size = np.zeros(1, dtype=np.uint64)
    comm.isend(np.array([len(mine)], dtype=np.uint64), peer, tag=900)
    comm.irecv(size, peer, tag=900).wait(WAIT)
    theirs = bytearray(int(size[0]))
    r = comm.irecv(theirs, peer, tag=901)
    comm.isend(mine, peer, tag=901).wait(WAIT)
    r.wait(WAIT)
    return bytes(theirs)


TRANSPORTS = ("tcp", "shm", "rdma", "nvlink")


def moved_since(comm, before):
    """Payload bytes each transport carried since `before`, sent and received, over both ranks."""
    after = comm.engine.stats()["transports"]
    mine = np.array([after[t]["bytes_sent"] - before[t]["bytes_sent"] + after[t]["bytes_received"]
                     - before[t]["bytes_received"] for t in TRANSPORTS], dtype=np.int64)
    total = np.zeros_like(mine)
    comm.all_reduce(mine, total).wait(WAIT)
    return dict(zip(TRANSPORTS, total.tolist()))


def pattern(n, seed):
    return ((np.arange(n, dtype=np.uint64) * 2654435761 + seed) % 251).astype(np.uint8)


def test_put_and_get_move_the_bytes_over_each_transport(comm):
    engine = comm.engine
    n = 1 << 20
    memory = np.zeros(n, dtype=np.uint8)
    region = engine.register_memory(memory)
    assert region.registered and region.length == n and region.access == "rw"
    assert region.address == memory.__array_interface__["data"][0]
    remote = orbite.RemoteRegion(exchange(comm, region.descriptor()))
    assert remote.length == n and remote.access == "rw" and "tcp" in remote.transports
    src = engine.register_memory(pattern(n, comm.rank), access="r")
    for transport, offset in (("tcp", 0), ("shm", 65536), ("unspec", 131072)):
        before = engine.stats()["transports"]  # before the barrier: the owner's copy may
        comm.barrier().wait(WAIT)               # start as soon as the peer has left it
        if comm.rank == 0:
            engine.put(src, 0, remote, offset, 65536, transport=transport).wait(WAIT)
        comm.barrier().wait(WAIT)
        moved = moved_since(comm, before)
        # The route taken: the forced transport carried the payload (a byte copied by one side
        # counts once, through frames on both); unspec picks shm between ranks of one host.
        used = "shm" if transport == "unspec" else transport
        assert moved[used] >= 65536, (transport, moved)
        assert all(moved[t] < 4096 for t in moved if t != used), (transport, moved)
    if comm.rank == 0:
        got = np.zeros(65536, dtype=np.uint8)
        back = engine.register_memory(got)
        engine.get(back, 0, remote, 65536, 65536, transport="tcp").wait(WAIT)
        np.testing.assert_array_equal(got, pattern(n, 0)[:65536])
    comm.barrier().wait(WAIT)
    if comm.rank == 1:
        for offset in (0, 65536, 131072):
            np.testing.assert_array_equal(memory[offset:offset + 65536], pattern(n, 0)[:65536])
        assert not memory[196608:].any()
    comm.barrier().wait(WAIT)
    region.unregister()
    assert not region.registered
    src.unregister()


def test_get_reads_what_the_owner_wrote_and_batches_take_lists_and_arrays(comm):
    engine = comm.engine
    n = 64 * 1024
    owned = pattern(n, 7 + comm.rank)
    region = engine.register_memory(owned, access="r")
    remote = orbite.RemoteRegion(exchange(comm, region.descriptor()))
    assert remote.access == "r"
    local = bytearray(n)
    mine = engine.register_memory(local)
    engine.get(mine, 0, remote, 0, n).wait(WAIT)
    assert bytes(local) == pattern(n, 7 + peer_of(comm)).tobytes()
    # A batch as a list of (local_offset, remote_offset, length), then as an (N, 3) array.
    local[:] = bytes(n)
    engine.get_batch(mine, remote, [(0, 100, 10), (1000, 5000, 300)]).wait(WAIT)
    theirs = pattern(n, 7 + peer_of(comm))
    assert bytes(local[:10]) == theirs[100:110].tobytes()
    assert bytes(local[1000:1300]) == theirs[5000:5300].tobytes()
    rows = np.array([[i * 512, i * 512 + 3, 500] for i in range(64)], dtype=np.uint64)
    engine.get_batch(mine, remote, rows).wait(WAIT)
    for i in range(64):
        assert bytes(local[i * 512:i * 512 + 500]) == theirs[i * 512 + 3:i * 512 + 503].tobytes()
    with pytest.raises(orbite.InvalidArgumentError, match="not \\(N, 3\\) triples"):
        engine.get_batch(mine, remote, np.zeros(4, dtype=np.uint64))
    with pytest.raises(orbite.InvalidArgumentError, match="item 1 is not"):
        engine.get_batch(mine, remote, [(0, 0, 1), (0, -1, 1)])
    comm.barrier().wait(WAIT)
    region.unregister()


def test_bad_accesses_fail_clearly_and_move_nothing(comm):
    engine = comm.engine
    owned = np.full(4096, 0xAB, dtype=np.uint8)
    region = engine.register_memory(owned, access="r")  # peers may read, not write
    remote = orbite.RemoteRegion(exchange(comm, region.descriptor()))
    src = engine.register_memory(np.zeros(8192, dtype=np.uint8))
    with pytest.raises(orbite.InvalidArgumentError):
        engine.get(src, 0, remote, 4000, 200).wait(WAIT)  # past the region's end
    with pytest.raises(orbite.Error) as caught:
        engine.put(src, 0, remote, 0, 16).wait(WAIT)  # no write right
    assert caught.value.code in ("PermissionDenied", "InvalidArgument")
    # Forged descriptors: a malformed one is refused on import; a well-formed one that claims
    # more length or rights than the owner granted is refused by the owner, moving nothing.
    theirs = remote.bytes()
    with pytest.raises(orbite.InvalidArgumentError, match="from_bytes"):
        orbite.RemoteRegion(theirs[:-1])
    with pytest.raises(orbite.InvalidArgumentError, match="from_bytes"):
        orbite.RemoteRegion(b"XXXX" + theirs[4:])
    at = theirs.rindex(struct.pack("<Q", 4096))  # the length field, followed by the rights byte
    forged = orbite.RemoteRegion(theirs[:at] + struct.pack("<QB", 1 << 20, 3) + theirs[at + 9:])
    assert forged.length == 1 << 20 and forged.access == "rw"
    with pytest.raises(orbite.Error) as caught:
        engine.get(src, 0, forged, 4096, 64).wait(WAIT)
    assert caught.value.code in ("PermissionDenied", "InvalidArgument", "NotFound")
    with pytest.raises(orbite.Error) as caught:
        engine.put(src, 0, forged, 0, 16).wait(WAIT)
    assert caught.value.code in ("PermissionDenied", "InvalidArgument", "NotFound")
    with pytest.raises(orbite.InvalidArgumentError, match="expected an orbite.MemoryRegion"):
        engine.put(b"not a region", 0, remote, 0, 1)
    with pytest.raises(orbite.InvalidArgumentError, match="access 'x'"):
        engine.register_memory(bytearray(8), access="x")
    with pytest.raises(orbite.InvalidArgumentError, match="writable"):
        engine.register_memory(b"read-only but peers may write", access="w")
    with pytest.raises(orbite.InvalidArgumentError, match="address 0 with length"):
        engine.register_memory((0, 10))
    frozen = b"\x00" * 64  # peers may read it; a local get must not write into it
    readonly = engine.register_memory(frozen, access="r")
    with pytest.raises(orbite.InvalidArgumentError, match="read-only"):
        engine.get(readonly, 0, remote, 0, 64)
    with pytest.raises(orbite.InvalidArgumentError, match="read-only"):
        engine.get_batch(readonly, remote, [(0, 0, 8)])
    assert frozen == b"\x00" * 64
    readonly.unregister()
    comm.barrier().wait(WAIT)
    np.testing.assert_array_equal(owned, np.full(4096, 0xAB, dtype=np.uint8))
    region.unregister()
    with pytest.raises(orbite.InvalidArgumentError, match="no longer registered"):
        region.descriptor()
    with pytest.raises(orbite.Error):
        engine.put(region, 0, remote, 0, 1)  # an unregistered local region


def test_raw_address_registration_and_all_or_nothing_lists(comm):
    engine = comm.engine
    backing = np.zeros(3 * 4096, dtype=np.uint8)
    base = backing.__array_interface__["data"][0]
    regions = engine.register_memory([(base, 4096), (base + 4096, 4096), bytearray(100)])
    assert [r.address for r in regions[:2]] == [base, base + 4096]
    with pytest.raises(orbite.InvalidArgumentError, match=r"memory\[1\]"):
        engine.register_memory([bytearray(8), b"read-only"], access="rw")
    before = engine.stats()["regions_registered"]
    with pytest.raises(orbite.InvalidArgumentError):
        engine.register_memory([(base + 8192, 64), (0, 64)])
    assert engine.stats()["regions_registered"] == before  # nothing stayed registered
    for r in regions:
        r.unregister()


class DlpackOnly:
    """An object offering memory through __dlpack__ only (as a torch tensor does)."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, stream=None):
        return self.array.__dlpack__()


@pytest.mark.skipif(not orbite._core.HAS_DLPACK, reason="built without libdlpack-dev")
def test_dlpack_buffers_carry_their_element_type(comm):
    data = DlpackOnly(np.full(1000, comm.rank + 1.5, dtype=np.float32))
    out = DlpackOnly(np.zeros(1000, dtype=np.float32))
    comm.all_reduce(data, out).wait(WAIT)
    np.testing.assert_array_equal(out.array, np.full(1000, 4.0, dtype=np.float32))
    with pytest.raises(orbite.InvalidArgumentError, match="C-contiguous"):
        comm.isend(DlpackOnly(np.arange(10.0)[::2]), peer_of(comm))


def test_a_put_request_keeps_its_region_alive(comm):
    engine = comm.engine
    region = engine.register_memory(np.zeros(1 << 16, dtype=np.uint8))
    remote = orbite.RemoteRegion(exchange(comm, region.descriptor()))
    r = engine.put(engine.register_memory(pattern(1 << 16, 3)), 0, remote, 0, 1 << 16)
    r.wait(WAIT)  # the source region has no other reference
    comm.barrier().wait(WAIT)
    region.unregister()


def test_a_deadline_already_past_moves_nothing(comm):
    engine = comm.engine
    owned = np.zeros(4096, dtype=np.uint8)
    region = engine.register_memory(owned)
    remote = orbite.RemoteRegion(exchange(comm, region.descriptor()))
    src = engine.register_memory(np.ones(4096, dtype=np.uint8))
    with pytest.raises(orbite.TimeoutError):
        engine.put(src, 0, remote, 0, 4096, deadline=0).wait(WAIT)
    with pytest.raises(orbite.InvalidArgumentError, match="deadline"):
        engine.put(src, 0, remote, 0, 4096, deadline=-1)
    comm.barrier().wait(WAIT)
    assert not owned.any()
    region.unregister()


def test_a_closed_engine_refuses_work(comm):
    engine = orbite.TransferEngine(config={"shm": {"enable": False}})
    assert len(engine.id) == 32 and ":" in engine.control_address
    region = engine.register_memory(bytearray(64))
    region.unregister()
    engine.close(timeout=10)
    with pytest.raises(orbite.Error) as caught:
        engine.register_memory(bytearray(64))
    assert "clos" in str(caught.value)


def test_directional_closes_refuse_one_role_each(comm):
    # Engines of their own: the communicator's engine stays open for the tests after this one.
    engine = orbite.TransferEngine(config={"shm": {"enable": False}})
    n = 4096
    memory = np.zeros(n, dtype=np.uint8)
    region = engine.register_memory(memory)
    remote = orbite.RemoteRegion(exchange(comm, region.descriptor()))
    src = engine.register_memory(pattern(n, comm.rank + 40), access="r")
    comm.barrier().wait(WAIT)
    if comm.rank == 1:
        engine.close_source(timeout=10)
    comm.barrier().wait(WAIT)
    if comm.rank == 0:
        with pytest.raises(orbite.CancelledError, match="close_source"):
            engine.put(src, 0, remote, 0, n).wait(WAIT)
    else:
        # Its own puts still go: its requester role is open.
        engine.put(src, 0, remote, 0, n).wait(WAIT)
        engine.close_requester(timeout=10)
        with pytest.raises(orbite.CancelledError, match="close_requester"):
            engine.put(src, 0, remote, 0, n)
    comm.barrier().wait(WAIT)
    if comm.rank == 0:
        assert np.array_equal(memory, pattern(n, 41))
    else:
        assert not memory.any()
    region.unregister()
    src.unregister()
    comm.barrier().wait(WAIT)
    engine.close(timeout=10, cancel=False)


def test_all_to_allv_with_uneven_counts(comm):
    me, size = comm.rank, comm.size
    # Rank r sends r + j + 1 elements to rank j.
    send_counts = [me + j + 1 for j in range(size)]
    recv_counts = [j + me + 1 for j in range(size)]
    send = np.concatenate([np.full(c, 10 * me + j, dtype=np.int64)
                           for j, c in enumerate(send_counts)])
    recv = np.zeros(sum(recv_counts), dtype=np.int64)
    comm.all_to_allv(send, send_counts, recv, recv_counts).wait(WAIT)
    want = np.concatenate([np.full(c, 10 * j + me, dtype=np.int64)
                           for j, c in enumerate(recv_counts)])
    np.testing.assert_array_equal(recv, want)
    with pytest.raises(orbite.InvalidArgumentError, match="all_to_allv recv"):
        comm.all_to_allv(send, send_counts, np.zeros(2, np.int64), recv_counts)


def test_a_bootstrap_from_a_store_makes_a_communicator(comm):
    default = orbite.Bootstrap.default()
    if comm.rank == 0:
        server = orbite.TcpStoreServer(token="s3cret")
        default.store.set("test/store-address", server.address.encode())
    address = default.store.get("test/store-address", WAIT).decode()
    store = orbite.TcpStore(address, token="s3cret", connect_timeout=WAIT)
    assert store.add("test/counter", 1) in (1, 2)
    boot = orbite.Bootstrap.from_store(store, comm.rank, comm.size, timeout=WAIT)
    assert (boot.rank, boot.world_size) == (comm.rank, comm.size)
    other = orbite.Communicator(bootstrap=boot)
    data = np.full(16, comm.rank + 1, dtype=np.int32)
    other.all_reduce(data, data).wait(WAIT)
    assert data.tolist() == [3] * 16
    assert store.check(["test/counter", "test/absent"]) == [True, False]
    with pytest.raises(orbite.TimeoutError):
        store.get("test/absent", timeout=0.05)
    store.barrier("test/done", comm.rank, comm.size, timeout=WAIT)
    del other
    comm.barrier().wait(WAIT)
    if comm.rank == 0:
        time.sleep(0.5)  # rank 1's connections close first
        server.stop()


def test_a_put_with_a_notification_and_notify_reach_the_owner(comm):
    engine = comm.engine
    memory = np.zeros(65536, dtype=np.uint8)
    region = engine.register_memory(memory)
    remote = orbite.RemoteRegion(exchange(comm, region.descriptor()))
    src = engine.register_memory(pattern(65536, comm.rank), access="r")
    sender = exchange(comm, engine.id.encode()).decode()
    if comm.rank == 0:
        engine.put(src, 0, remote, 0, 65536, notification=b"block 0").wait(WAIT)
        # Ranges that keep each byte at its own offset: rank 1's check below holds whenever it
        # runs, before or after this batch lands.
        engine.put_batch(src, remote, [(0, 0, 10), (200, 200, 10)],
                         notification="batch").wait(WAIT)
        engine.notify(remote, b"alone").wait(WAIT)
        with pytest.raises(orbite.InvalidArgumentError, match="4097 bytes"):
            engine.put(src, 0, remote, 0, 1, notification=bytes(4097))
        with pytest.raises(orbite.InvalidArgumentError, match="notification"):
            engine.notify(remote, 5)
    else:
        got = engine.notifications(timeout=WAIT)
        assert got[0] == (sender, b"block 0")
        # By then the bytes were in place.
        np.testing.assert_array_equal(memory, pattern(65536, 0))
        deadline = time.monotonic() + WAIT
        while len(got) < 3 and time.monotonic() < deadline:
            got += engine.notifications(timeout=1.0)
        assert [m for _, m in got] == [b"block 0", b"batch", b"alone"]
        assert engine.stats()["notifications_received"] == 3
        assert engine.notifications() == []
    comm.barrier().wait(WAIT)
    region.unregister()
    src.unregister()


def test_the_metrics_exporter_serves_the_process_engines_on_the_local_rank_port(comm):
    import urllib.request
    base = np.array([free_port_pair() if comm.rank == 0 else 0], dtype=np.int64)
    comm.broadcast(base, root=0).wait(WAIT)
    port = int(base[0])
    engine = orbite.TransferEngine(config={"metrics": {"listen": f"127.0.0.1:{port}"}})
    # orbite-run's ranks share a host: rank r listens on the base port + its local rank.
    assert engine.metrics_endpoint == f"127.0.0.1:{port + comm.rank}"
    assert comm.engine.metrics_endpoint == engine.metrics_endpoint
    with pytest.raises(orbite.TimeoutError):
        engine.put(engine.register_memory(bytearray(8)), 0,
                   orbite.RemoteRegion(engine.register_memory(bytearray(8)).descriptor()), 0, 8,
                   deadline=0).wait(WAIT)
    assert engine.stats()["failures_by_code"] == {"Timeout": 1}
    with urllib.request.urlopen(f"http://{engine.metrics_endpoint}/metrics", timeout=WAIT) as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = r.read().decode()
    # Both engines of this process, each sample labelled with this rank.
    assert text.count("# TYPE orbite_requests_submitted_total counter") == 1
    samples = [line for line in text.splitlines()
               if line.startswith("orbite_requests_submitted_total{")]
    assert len(samples) == 2 and all(f'rank="{comm.rank}"' in s for s in samples), samples
    assert 'code="Timeout"} 1' in text
    mine = [line for line in engine.metrics().splitlines() if not line.startswith("#")]
    assert any(line.startswith("orbite_requests_failed_total{") and 'code="Timeout"' in line
               and line.endswith(" 1") for line in mine)
    # An engine that asked for no endpoint is labelled with the launcher's rank too.
    plain = orbite.TransferEngine()
    assert f'rank="{comm.rank}"' in plain.metrics()
    assert plain.metrics_endpoint == engine.metrics_endpoint
    plain.close(timeout=10)
    engine.close(timeout=10)
    assert comm.engine.metrics_endpoint == ""
    comm.barrier().wait(WAIT)
