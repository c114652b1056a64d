"""orbite.kv (KV-cache transfers by address, Mooncake-like and NIXL-like) under orbite-run -n 2
(SPMD: every rank runs these tests in the same order; see conftest.py)."""

import struct
import time

import numpy as np
import pytest

import orbite
import orbite.kv
from conftest import WAIT
from test_engine import exchange, pattern

BLOCK = 4096


def address_of(array):
    return array.__array_interface__["data"][0]


def poll(state_of, handle):
    deadline = time.monotonic() + WAIT
    state = state_of(handle)
    while state == orbite.kv.PROC and time.monotonic() < deadline:
        time.sleep(0.001)
        state = state_of(handle)
    return state


def test_mooncake_like_reads_and_writes_by_the_peers_addresses(comm):
    kv = orbite.kv.TransferEngine(comm.engine)
    blocks = np.stack([pattern(BLOCK, 100 * comm.rank + i) for i in range(8)])  # 8 KV blocks
    base = kv.register_memory(blocks)
    assert base == address_of(blocks)
    scratch = np.zeros(4 * BLOCK, dtype=np.uint8)
    scratch_base = kv.register_memory(address_of(scratch), scratch.nbytes)  # by address
    peer = kv.add_peer(exchange(comm, kv.get_metadata()))
    assert peer != kv.name and len(peer) == 32  # the peer engine's id
    their_base, their_scratch = struct.unpack("<QQ", exchange(comm, struct.pack(
        "<QQ", base, scratch_base)))
    other = 1 - comm.rank
    # Read blocks 2 and 5 of the peer into scratch slots 0 and 1, one call each.
    kv.transfer_sync_read(peer, scratch_base, their_base + 2 * BLOCK, BLOCK)
    kv.transfer_sync_read(peer, scratch_base + BLOCK, their_base + 5 * BLOCK, BLOCK)
    np.testing.assert_array_equal(scratch[:BLOCK], pattern(BLOCK, 100 * other + 2))
    np.testing.assert_array_equal(scratch[BLOCK:2 * BLOCK], pattern(BLOCK, 100 * other + 5))
    # A batch of partial ranges, then a write of our block 7 into the peer's scratch slot 3.
    kv.batch_transfer_sync_read(peer, [scratch_base + 2 * BLOCK, scratch_base + 2 * BLOCK + 100],
                                [their_base + 10, their_base + 7 * BLOCK + 1], [100, 50])
    np.testing.assert_array_equal(scratch[2 * BLOCK:2 * BLOCK + 100],
                                  pattern(BLOCK, 100 * other)[10:110])
    np.testing.assert_array_equal(scratch[2 * BLOCK + 100:2 * BLOCK + 150],
                                  pattern(BLOCK, 100 * other + 7)[1:51])
    handle = kv.transfer_submit_write(peer, [base + 7 * BLOCK], [their_scratch + 3 * BLOCK],
                                      [BLOCK])
    assert poll(kv.transfer_check_status, handle) == orbite.kv.DONE
    assert kv.transfer_error(handle) is None
    kv.release_transfer(handle)
    comm.barrier().wait(WAIT)
    np.testing.assert_array_equal(scratch[3 * BLOCK:], pattern(BLOCK, 100 * other + 7))
    comm.barrier().wait(WAIT)
    kv.unregister_memory(base)
    kv.unregister_memory(scratch_base)


def test_addresses_outside_the_regions_and_bad_metadata_are_clear_errors(comm):
    kv = orbite.kv.TransferEngine(comm.engine)
    a = np.zeros(2 * BLOCK, dtype=np.uint8)
    base = kv.register_memory(a)
    peer = kv.add_peer(exchange(comm, kv.get_metadata()))
    their_base, = struct.unpack("<Q", exchange(comm, struct.pack("<Q", base)))
    with pytest.raises(orbite.InvalidArgumentError, match="outside every registered region"):
        kv.transfer_sync_write(peer, base, their_base + 10 * BLOCK, 16)
    with pytest.raises(orbite.InvalidArgumentError, match="runs past the end"):
        kv.transfer_sync_write(peer, base, their_base + 2 * BLOCK - 8, 16)
    with pytest.raises(orbite.InvalidArgumentError, match="local memory.*outside"):
        kv.transfer_sync_write(peer, base - 64, their_base, 16)
    with pytest.raises(orbite.NotFoundError, match="unknown"):
        kv.transfer_sync_read("nobody", base, their_base, 16)
    with pytest.raises(orbite.NotFoundError):
        kv.transfer_check_status(12345)
    with pytest.raises(orbite.InvalidArgumentError, match="overlaps"):
        kv.register_memory(base + 8, 16)
    spare = np.zeros(64, dtype=np.uint8)
    before = comm.engine.stats()["regions_registered"]
    with pytest.raises(orbite.InvalidArgumentError, match="overlaps"):  # all or none
        kv.batch_register_memory([address_of(spare), base + 16], [64, 16])
    assert comm.engine.stats()["regions_registered"] == before
    kv.register_memory(address_of(spare), 64)  # it was forgotten, so it registers again
    kv.unregister_memory(address_of(spare))
    good = kv.get_metadata()
    with pytest.raises(orbite.InvalidArgumentError, match="magic"):
        kv.add_peer(b"XXXX" + good[4:])
    with pytest.raises(orbite.InvalidArgumentError, match="truncated"):
        kv.add_peer(good[:-3])
    with pytest.raises(orbite.InvalidArgumentError, match="after the last region"):
        kv.add_peer(good + b"\x00")
    with pytest.raises(orbite.InvalidArgumentError, match="from_bytes"):
        kv.add_peer(orbite.kv.encode_metadata("forger", [(base, b"not a descriptor")]))
    # A well-formed descriptor claiming more than the owner registered: the translation lets it
    # through, the owner refuses the access.
    theirs = orbite.kv.decode_metadata(exchange(comm, kv.get_metadata()))[1][0][1].bytes()
    at = theirs.rindex(struct.pack("<Q", 2 * BLOCK))
    bigger = theirs[:at] + struct.pack("<Q", 16 * BLOCK) + theirs[at + 8:]
    forger = kv.add_peer(orbite.kv.encode_metadata("forger", [(their_base, bigger)]))
    with pytest.raises(orbite.Error) as caught:
        kv.transfer_sync_read(forger, base, their_base + 4 * BLOCK, 16)
    assert caught.value.code in ("InvalidArgument", "PermissionDenied", "NotFound")
    comm.barrier().wait(WAIT)
    kv.unregister_memory(base)


def test_a_transfer_into_memory_the_peer_unregistered_ends_in_err(comm):
    kv = orbite.kv.TransferEngine(comm.engine)
    a = np.zeros(BLOCK, dtype=np.uint8)
    local = np.ones(BLOCK, dtype=np.uint8)
    base = kv.register_memory(a)
    local_base = kv.register_memory(local)
    peer = kv.add_peer(exchange(comm, kv.get_metadata()))
    their_base, = struct.unpack("<Q", exchange(comm, struct.pack("<Q", base)))
    comm.barrier().wait(WAIT)
    kv.unregister_memory(base)
    comm.barrier().wait(WAIT)
    handle = kv.transfer_submit_write(peer, [local_base], [their_base], [BLOCK])
    assert poll(kv.transfer_check_status, handle) == orbite.kv.ERR
    assert kv.transfer_error(handle) is not None
    with pytest.raises(orbite.Error):
        kv.transfer_wait(handle, WAIT)
    comm.barrier().wait(WAIT)
    assert not a.any()


def test_nixl_like_agent_moves_descriptor_lists(comm):
    agent = orbite.kv.Agent(f"agent-{comm.rank}", comm.engine)
    tensors = [pattern(BLOCK, 10 * comm.rank + i) for i in range(4)]
    registered = agent.register_memory(tensors)
    assert [n for _, n in registered] == [BLOCK] * 4
    sink = np.zeros((4, BLOCK), dtype=np.uint8)
    agent.register_memory(sink)
    name = agent.add_remote_agent(exchange(comm, agent.get_agent_metadata()))
    assert name == f"agent-{1 - comm.rank}"
    their = np.frombuffer(exchange(comm, np.array(
        [[address_of(t), BLOCK, 0] for t in tensors] + [[address_of(sink), 4 * BLOCK, 0]],
        dtype=np.uint64).tobytes()), dtype=np.uint64).reshape(5, 3)
    # READ the peer's tensors 3 and 1 into our sink rows 0 and 1: descriptors as an (N, 3) array.
    local = agent.get_xfer_descs([(address_of(sink), BLOCK, 0),
                                  (address_of(sink) + BLOCK, BLOCK, 0)])
    handle = agent.initialize_xfer("READ", local, their[[3, 1]], name)
    assert agent.transfer(handle) in (orbite.kv.PROC, orbite.kv.DONE)
    assert poll(agent.check_xfer_state, handle) == orbite.kv.DONE
    np.testing.assert_array_equal(sink[0], pattern(BLOCK, 10 * (1 - comm.rank) + 3))
    np.testing.assert_array_equal(sink[1], pattern(BLOCK, 10 * (1 - comm.rank) + 1))
    # WRITE our tensor 0 (a tensor as its own descriptor) into the peer's sink row 3.
    handle = agent.initialize_xfer("WRITE", [tensors[0]],
                                   [(int(their[4][0]) + 3 * BLOCK, BLOCK, 0)], name)
    agent.transfer(handle)
    assert poll(agent.check_xfer_state, handle) == orbite.kv.DONE
    agent.release_xfer_handle(handle)
    comm.barrier().wait(WAIT)
    np.testing.assert_array_equal(sink[3], pattern(BLOCK, 10 * (1 - comm.rank)))
    with pytest.raises(orbite.InvalidArgumentError, match="neither 'WRITE' nor 'READ'"):
        agent.initialize_xfer("COPY", local, their[[3, 1]], name)
    with pytest.raises(orbite.InvalidArgumentError, match="bytes at the peer"):
        agent.initialize_xfer("READ", local[:1], [(int(their[0][0]), 10, 0)], name)
    with pytest.raises(orbite.InvalidArgumentError, match="more than 4096"):
        agent.initialize_xfer("READ", local, their[[3, 1]], name, notif_msg=bytes(4096))
    with pytest.raises(orbite.UnavailableError, match="FILE"):
        agent.register_memory(tensors, mem_type="FILE")
    comm.barrier().wait(WAIT)
    agent.deregister_memory(registered)


def wait_for(predicate):
    deadline = time.monotonic() + WAIT
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.001)


def test_nixl_like_notifications_arrive_after_the_bytes(comm):
    agent = orbite.kv.Agent(f"notifier-{comm.rank}", comm.engine)
    first = pattern(2 * BLOCK, 40 + comm.rank)
    second = pattern(BLOCK, 50 + comm.rank)
    agent.register_memory([first, second])
    sink = np.zeros((4, BLOCK), dtype=np.uint8)
    agent.register_memory(sink)
    name = agent.add_remote_agent(exchange(comm, agent.get_agent_metadata()))
    their_sink = struct.unpack("<Q", exchange(comm, struct.pack("<Q", address_of(sink))))[0]
    other = 1 - comm.rank
    # Rank 0 WRITEs two blocks of one region into rows 0 and 2 of rank 1's sink (one request,
    # which carries the notification); rank 1 looks only at the notification, then at the bytes.
    if comm.rank == 0:
        handle = agent.initialize_xfer(
            "WRITE", [(address_of(first), BLOCK, 0), (address_of(first) + BLOCK, BLOCK, 0)],
            [(their_sink, BLOCK, 0), (their_sink + 2 * BLOCK, BLOCK, 0)], name,
            notif_msg=b"req-7 written")
        agent.transfer(handle)
        assert poll(agent.check_xfer_state, handle) == orbite.kv.DONE
    else:
        wait_for(lambda: agent.check_remote_xfer_done(name, b"req-7"))
        np.testing.assert_array_equal(sink[0], pattern(2 * BLOCK, 40 + other)[:BLOCK])
        np.testing.assert_array_equal(sink[2], pattern(2 * BLOCK, 40 + other)[BLOCK:])
        assert not agent.check_remote_xfer_done(name, b"req-7"), "consumed once"
    comm.barrier().wait(WAIT)
    # Rank 1 READs from two of rank 0's regions (two requests): the notification follows both.
    theirs = struct.unpack("<QQ", exchange(comm, struct.pack("<QQ", address_of(first),
                                                             address_of(second))))
    if comm.rank == 1:
        handle = agent.initialize_xfer(
            "READ", [(address_of(sink) + BLOCK, BLOCK, 0), (address_of(sink) + 3 * BLOCK, BLOCK, 0)],
            [(theirs[0], BLOCK, 0), (theirs[1], BLOCK, 0)], name, notif_msg="req-8 read")
        agent.transfer(handle)
        assert poll(agent.check_xfer_state, handle) == orbite.kv.DONE
        np.testing.assert_array_equal(sink[1], pattern(2 * BLOCK, 40 + other)[:BLOCK])
        np.testing.assert_array_equal(sink[3], pattern(BLOCK, 50 + other))
    else:
        got = {}
        wait_for(lambda: got.update(agent.get_new_notifs()) or got)
        assert got == {name: [b"req-8 read"]}
    # A notification alone, and the engine's count of them (read before the barrier: the peer's
    # may arrive as soon as it left it).
    before = comm.engine.stats()["notifications_received"]
    comm.barrier().wait(WAIT)
    agent.send_notif(name, f"hello from {comm.rank}".encode())
    kept = {}
    wait_for(lambda: kept.update(agent.get_new_notifs()) or kept)
    assert kept == {name: [f"hello from {other}".encode()]}
    assert comm.engine.stats()["notifications_received"] == before + 1
    with pytest.raises(orbite.NotFoundError, match="unknown"):
        agent.send_notif("nobody", b"x")
    comm.barrier().wait(WAIT)
