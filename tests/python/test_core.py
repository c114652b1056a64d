"""orbite._core under orbite-run: every rank runs these tests in the same order (SPMD).

    build/bin/orbite-run -n 2 --tag-output -- env PYTHONPATH=build/python \
        /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/python

Every wait is bounded; pytest-timeout (--timeout) ends a test whose peer failed alone.
"""

import numpy as np
import pytest

import orbite
from conftest import WAIT, peer_of


def test_ranks_are_distinct_and_ordered(comm):
    mine = np.array([comm.rank], dtype=np.int64)
    everyone = np.empty(comm.size, dtype=np.int64)
    comm.all_gather(mine, everyone).wait(WAIT)
    assert everyone.tolist() == list(range(comm.size))


REDUCTIONS = {
    "sum": lambda xs: sum(xs),
    "prod": lambda xs: np.prod(np.stack(xs), axis=0),
    "min": lambda xs: np.min(np.stack(xs), axis=0),
    "max": lambda xs: np.max(np.stack(xs), axis=0),
}


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32", "uint32", "int64", "uint64",
                                   "float16", "float32", "float64"])
@pytest.mark.parametrize("op", sorted(REDUCTIONS))
def test_all_reduce_matches_a_local_reference(comm, dtype, op):
    n = 1000
    per_rank = [((np.arange(n) % 5) + r + 1).astype(dtype) for r in range(comm.size)]
    out = np.empty(n, dtype=dtype)
    comm.all_reduce(per_rank[comm.rank], out, op=op).wait(WAIT)
    want = REDUCTIONS[op](per_rank).astype(dtype)
    np.testing.assert_array_equal(out, want)


def test_all_reduce_avg_and_in_place(comm):
    data = np.full(257, float(comm.rank + 1), dtype=np.float64)
    comm.all_reduce(data, data, op="avg").wait(WAIT)
    np.testing.assert_array_equal(data, np.full(257, 1.5))


def test_send_and_recv_numpy_bytearray_and_memoryview(comm):
    peer = peer_of(comm)
    for n in (0, 1, 4096, 100_000, 3 << 20):
        sent = (np.arange(n, dtype=np.uint64) * 7 + 3).astype(np.uint8)
        if comm.rank == 0:
            comm.isend(sent, peer, tag=5).wait(WAIT)
            back = bytearray(n)
            r = comm.irecv(back, peer, tag=6)
            r.wait(WAIT)
            assert r.bytes == n and bytes(back) == sent.tobytes()
        else:
            got = np.zeros(n, dtype=np.uint8)
            r = comm.irecv(memoryview(got), peer, tag=5)
            r.wait(WAIT)
            assert r.done and r.bytes == n and r.status() == ("OK", "")
            np.testing.assert_array_equal(got, sent)
            comm.isend(bytes(got), peer, tag=6).wait(WAIT)


def test_state_report_names_a_posted_receive_until_it_is_matched(comm):
    peer = peer_of(comm)
    got = np.zeros(64, dtype=np.uint8)
    r = comm.irecv(got, peer, tag=77)
    report = comm.engine.state_report()
    assert "tag 77 from rank %d" % peer in report, report
    assert "communicator" in report and "rank %d of 2" % comm.rank in report
    comm.barrier().wait(WAIT)  # neither rank sends before both took their report
    comm.isend(np.full(64, 5, dtype=np.uint8), peer, tag=77).wait(WAIT)
    r.wait(WAIT)
    assert (got == 5).all()
    assert "tag 77 from rank" not in comm.engine.state_report()


def test_any_source_receives_and_probes(comm):
    peer = peer_of(comm)
    if comm.rank == 1:
        comm.isend(np.arange(10, dtype=np.uint8), peer, tag=31).wait(WAIT)
        comm.isend(bytes(3), peer, tag=32).wait(WAIT)
    else:
        source, tag, size = comm.probe(orbite.ANY_SOURCE, 31, timeout=30)
        assert (source, tag, size) == (peer, 31, 10)
        assert comm.iprobe(peer, 31) == (peer, 31, 10)  # still there: a probe takes nothing
        got = np.zeros(10, dtype=np.uint8)
        r = comm.irecv(got, orbite.ANY_SOURCE, orbite.ANY_TAG)
        r.wait(WAIT)
        assert (r.source, r.tag, r.bytes) == (peer, 31, 10)
        np.testing.assert_array_equal(got, np.arange(10, dtype=np.uint8))
        assert comm.recv(bytearray(3), orbite.ANY_SOURCE, 32, timeout=30) == 3
        assert comm.iprobe() is None
        with pytest.raises(orbite.TimeoutError):
            comm.probe(tag=99, timeout=0.01)
    comm.barrier().wait(WAIT)


def test_broadcast_and_barrier(comm):
    data = np.arange(1 << 16, dtype=np.int32) if comm.rank == 1 else np.zeros(1 << 16, np.int32)
    comm.broadcast(data, root=1).wait(WAIT)
    np.testing.assert_array_equal(data, np.arange(1 << 16, dtype=np.int32))
    comm.barrier().wait(WAIT)


def test_a_wait_that_runs_out_raises_timeout_and_the_request_goes_on(comm):
    peer = peer_of(comm)
    box = np.zeros(4, dtype=np.int32)
    r = comm.irecv(box, peer, tag=40 + comm.rank)
    with pytest.raises(orbite.TimeoutError) as caught:
        r.wait(timeout=0.05)
    assert isinstance(caught.value, TimeoutError) and caught.value.code == "Timeout"
    assert not r.done and r.status() is None
    comm.barrier().wait(WAIT)  # both timed out before either sends
    comm.isend(np.full(4, 9, dtype=np.int32), peer, tag=40 + peer).wait(WAIT)
    r.wait(WAIT)
    assert box.tolist() == [9, 9, 9, 9]


def test_a_request_keeps_its_buffer_alive(comm):
    peer = peer_of(comm)
    if comm.rank == 0:
        r = comm.irecv(np.zeros(1 << 20, dtype=np.uint8), peer, tag=50)  # no other reference
        comm.barrier().wait(WAIT)
        r.wait(WAIT)
        assert r.bytes == 1 << 20
    else:
        comm.barrier().wait(WAIT)
        comm.isend(np.ones(1 << 20, dtype=np.uint8), peer, tag=50).wait(WAIT)


def test_bad_buffers_are_refused_naming_the_argument(comm):
    peer = peer_of(comm)
    with pytest.raises(orbite.InvalidArgumentError, match="irecv data.*writable") as caught:
        comm.irecv(b"read-only", peer)
    assert isinstance(caught.value, ValueError) and caught.value.code == "InvalidArgument"
    with pytest.raises(orbite.InvalidArgumentError, match="C-contiguous"):
        comm.isend(np.arange(10)[::2], peer)
    with pytest.raises(orbite.InvalidArgumentError, match="no buffer protocol"):
        comm.isend([1, 2, 3], peer)
    with pytest.raises(orbite.InvalidArgumentError, match="differs from recv"):
        comm.all_reduce(np.zeros(4, np.float32), np.zeros(4, np.float64))
    with pytest.raises(orbite.InvalidArgumentError, match="element format"):
        comm.all_reduce(np.zeros(4, np.complex64), np.zeros(4, np.complex64))
    with pytest.raises(orbite.InvalidArgumentError, match="3 elements, 4 needed"):
        comm.all_reduce(np.zeros(3, np.float32), np.zeros(4, np.float32))
    with pytest.raises(orbite.Error) as caught:
        comm.all_reduce(np.zeros(4, np.float32), np.zeros(4, np.float32), op="xor")
    assert "xor" in str(caught.value)


def test_a_bad_peer_is_an_invalid_argument_with_orbites_message(comm):
    with pytest.raises(orbite.InvalidArgumentError) as caught:
        comm.isend(bytearray(8), 7)
    assert "7" in str(caught.value)
    assert issubclass(orbite.ConnectionLostError, ConnectionError)
    assert all(issubclass(getattr(orbite, n), orbite.Error) for n in orbite.__all__
               if n.endswith("Error"))


def test_configuration_from_a_dict_and_its_errors(comm):
    with pytest.raises(orbite.Error, match="no_such_field"):
        orbite.Communicator(config={"tcp": {"no_such_field": 1}})
    with pytest.raises(orbite.InvalidArgumentError, match="expected a dict or a JSON string"):
        orbite.Communicator(config=42)
    second = orbite.Communicator(config={"shm": {"enable": False}})
    data = np.full(8, comm.rank + 1, dtype=np.int64)
    second.all_reduce(data, data).wait(WAIT)
    assert data.tolist() == [3] * 8


def test_reduce_gather_scatter_reduce_scatter_and_all_to_all(comm):
    n, size, me = 6, comm.size, comm.rank
    mine = np.arange(n, dtype=np.int32) + 10 * me
    out = np.zeros(n, dtype=np.int32)
    comm.reduce(mine, out, op="sum", root=1).wait(WAIT)
    if me == 1:
        np.testing.assert_array_equal(out, sum(np.arange(n) + 10 * r for r in range(size)))
    gathered = np.zeros(n * size, dtype=np.int32)
    comm.gather(mine, gathered, root=0).wait(WAIT)
    if me == 0:
        np.testing.assert_array_equal(
            gathered, np.concatenate([np.arange(n) + 10 * r for r in range(size)]))
    blocks = np.arange(n * size, dtype=np.float64) if me == 1 else np.zeros(n * size)
    part = np.zeros(n, dtype=np.float64)
    comm.scatter(blocks, part, root=1).wait(WAIT)
    np.testing.assert_array_equal(part, np.arange(n * size, dtype=np.float64)[me * n:(me + 1) * n])
    everything = np.arange(n * size, dtype=np.int64) * (me + 1)
    mine_reduced = np.zeros(n, dtype=np.int64)
    comm.reduce_scatter(everything, mine_reduced, op="sum").wait(WAIT)
    total = sum(np.arange(n * size, dtype=np.int64) * (r + 1) for r in range(size))
    np.testing.assert_array_equal(mine_reduced, total[me * n:(me + 1) * n])
    send = np.arange(n * size, dtype=np.uint8) + 100 * me
    recv = np.zeros(n * size, dtype=np.uint8)
    comm.all_to_all(send, recv).wait(WAIT)
    want = np.concatenate([(np.arange(n * size) + 100 * r)[me * n:(me + 1) * n] for r in range(size)])
    np.testing.assert_array_equal(recv, want.astype(np.uint8))
    with pytest.raises(orbite.InvalidArgumentError, match="not a multiple of the size"):
        comm.all_to_all(np.zeros(5, np.uint8), np.zeros(5, np.uint8))


def test_split_and_dup_keep_their_traffic_apart(comm):
    alone = comm.split(comm.rank, 0)  # every rank its own colour: communicators of one
    assert alone.size == 1 and alone.rank == 0
    data = np.full(4, comm.rank + 1, dtype=np.int32)
    alone.all_reduce(data, data).wait(WAIT)
    assert data.tolist() == [comm.rank + 1] * 4
    part = comm.split(orbite.UNDEFINED if comm.rank == 0 else 5, 0)
    if comm.rank == 0:
        assert part is None
    else:
        assert (part.rank, part.size) == (0, 1)
    twin = comm.dup()
    assert (twin.rank, twin.size) == (comm.rank, comm.size)
    a = np.full(3, comm.rank, dtype=np.int64)
    twin.all_reduce(a, a, op="max").wait(WAIT)
    assert a.tolist() == [comm.size - 1] * 3


def test_a_request_dropped_while_running_does_not_hang(comm):
    import time

    peer = peer_of(comm)
    started = time.monotonic()
    comm.irecv(np.zeros(16, dtype=np.uint8), peer, tag=77)  # dropped at once, never matched
    waited = time.monotonic() - started
    assert waited < 30, f"dropping a running request waited {waited:.1f} s"
    comm.barrier().wait(WAIT)
    # The posted receive still matches the next message with its tag: it takes this one.
    comm.isend(np.ones(16, dtype=np.uint8), peer, tag=77).wait(WAIT)
    comm.barrier().wait(WAIT)


def test_blocking_send_recv_with_a_transport_and_their_errors(comm):
    peer = peer_of(comm)
    for transport in ("unspec", "tcp", "shm"):
        data = np.arange(70_000, dtype=np.uint16)
        if comm.rank == 0:
            comm.send(data, peer, tag=80, timeout=WAIT, transport=transport)
        else:
            got = np.zeros_like(data)
            assert comm.recv(got, peer, tag=80, timeout=WAIT, transport=transport) == data.nbytes
            np.testing.assert_array_equal(got, data)
    with pytest.raises(orbite.InvalidArgumentError, match="transport 'carrier-pigeon'"):
        comm.isend(bytearray(4), peer, transport="carrier-pigeon")
    with pytest.raises(orbite.InvalidArgumentError, match="priority 'urgent'"):
        comm.irecv(bytearray(4), peer, priority="urgent")
    box = bytearray(4)
    with pytest.raises(orbite.TimeoutError):
        comm.recv(box, peer, tag=81, timeout=0.05)  # stays posted, keeping box
    comm.barrier().wait(WAIT)
    comm.isend(b"\x01\x02\x03\x04", peer, tag=81).wait(WAIT)
    comm.barrier().wait(WAIT)
    deadline = __import__("time").monotonic() + WAIT
    # The engine's lanes complete the posted receive; a collective per loop would run a
    # different number of them on each rank.
    while bytes(box) != b"\x01\x02\x03\x04" and __import__("time").monotonic() < deadline:
        __import__("time").sleep(0.001)
    assert bytes(box) == b"\x01\x02\x03\x04"
