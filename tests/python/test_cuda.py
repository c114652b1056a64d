"""Device memory from Python under orbite-run -n 2, on softcuda (or NVIDIA's driver): the
orbite.cuda buffers, registration of device memory by __cuda_array_interface__ and by raw
address, a device KV cache moved between the two processes with orbite.kv (over CUDA IPC: the
route is checked), and send/recv of device buffers. SPMD: every rank runs these tests in order."""

import struct

import numpy as np
import pytest

import orbite
import orbite.cuda
import orbite.kv
from conftest import WAIT, peer_of
from test_engine import exchange, pattern

BLOCK = 64 * 1024


def device_with(data):
    buf = orbite.cuda.DeviceBuffer(len(data))
    buf.copy_from_host(data)
    return buf


def test_device_and_pinned_buffers_move_bytes_through_the_driver(comm):
    assert orbite.cuda.device_count() >= 1
    data = pattern(3 * BLOCK + 5, 7)
    buf = device_with(data)
    cai = buf.__cuda_array_interface__
    assert cai["data"] == (buf.ptr, False) and cai["shape"] == (buf.nbytes,)
    assert cai["typestr"] == "|u1" and cai["version"] == 3
    np.testing.assert_array_equal(np.frombuffer(buf.copy_to_host(), dtype=np.uint8), data)
    assert buf.copy_to_host(10, 5) == data[10:15].tobytes()
    buf.fill(0xAB, 100, 7)
    assert buf.copy_to_host(99, 9) == bytes([data[99]]) + b"\xab" * 7 + bytes([data[107]])
    with pytest.raises(orbite.InvalidArgumentError, match="exceed"):
        buf.copy_to_host(buf.nbytes - 1, 2)
    with pytest.raises(orbite.InvalidArgumentError, match="nbytes is 0"):
        orbite.cuda.DeviceBuffer(0)
    pinned = orbite.cuda.PinnedBuffer(4096)
    view = np.frombuffer(pinned, dtype=np.uint8)
    view[:] = 3
    assert memoryview(pinned).nbytes == 4096 and bytes(memoryview(pinned)[:2]) == b"\x03\x03"


def test_a_device_kv_cache_moves_between_processes_over_cuda_ipc(comm):
    engine = comm.engine
    before = engine.stats()
    kv = orbite.kv.TransferEngine(engine)
    blocks = device_with(np.concatenate([pattern(BLOCK, 100 * comm.rank + i) for i in range(8)]))
    scratch = orbite.cuda.DeviceBuffer(4 * BLOCK)
    scratch.fill(0)
    base = kv.register_memory(blocks)
    assert base == blocks.ptr
    scratch_base = kv.register_memory(scratch.ptr, scratch.nbytes)  # a raw device address
    peer = kv.add_peer(exchange(comm, kv.get_metadata()))
    their_base, their_scratch = struct.unpack("<QQ", exchange(comm, struct.pack(
        "<QQ", base, scratch_base)))
    other = peer_of(comm)
    # Read the peer's blocks 2 and 5 into scratch slots 0 and 1; write block 7 into its slot 3.
    kv.batch_transfer_sync_read(peer, [scratch_base, scratch_base + BLOCK],
                                [their_base + 2 * BLOCK, their_base + 5 * BLOCK], [BLOCK, BLOCK])
    kv.transfer_sync_write(peer, base + 7 * BLOCK, their_scratch + 3 * BLOCK, BLOCK)
    comm.barrier().wait(WAIT)
    got = np.frombuffer(scratch.copy_to_host(), dtype=np.uint8)
    np.testing.assert_array_equal(got[:BLOCK], pattern(BLOCK, 100 * other + 2))
    np.testing.assert_array_equal(got[BLOCK:2 * BLOCK], pattern(BLOCK, 100 * other + 5))
    np.testing.assert_array_equal(got[3 * BLOCK:], pattern(BLOCK, 100 * other + 7))
    after = engine.stats()
    moved = (after["transports"]["nvlink"]["bytes_received"] -
             before["transports"]["nvlink"]["bytes_received"])
    assert moved == 2 * BLOCK, after["transports"]
    assert after["transports"]["nvlink"]["bytes_sent"] - before["transports"]["nvlink"][
        "bytes_sent"] == BLOCK
    assert after["staging_loans"] == before["staging_loans"], "device memory was staged"
    comm.barrier().wait(WAIT)
    kv.unregister_memory(base)
    kv.unregister_memory(scratch_base)


def test_the_nixl_agent_takes_vram_descriptors(comm):
    agent = orbite.kv.Agent(f"agent{comm.rank}", comm.engine)
    mine = device_with(pattern(2 * BLOCK, 50 + comm.rank))
    registered = agent.register_memory([(mine.ptr, mine.nbytes, 0)], "VRAM")
    name = agent.add_remote_agent(exchange(comm, agent.get_agent_metadata()))
    theirs, = struct.unpack("<Q", exchange(comm, struct.pack("<Q", mine.ptr)))
    landing = orbite.cuda.DeviceBuffer(BLOCK)
    local = agent.register_memory([(landing.ptr, BLOCK, 0)], "VRAM")
    handle = agent.initialize_xfer("READ", [(landing.ptr, BLOCK, 0)],
                                   [(theirs + BLOCK, BLOCK, 0)], name)
    agent.transfer(handle)
    handle.batch.wait(WAIT)
    assert agent.check_xfer_state(handle) == orbite.kv.DONE
    np.testing.assert_array_equal(np.frombuffer(landing.copy_to_host(), dtype=np.uint8),
                                  pattern(2 * BLOCK, 50 + peer_of(comm))[BLOCK:])
    with pytest.raises(orbite.UnavailableError, match="'HBM'"):
        agent.register_memory([(mine.ptr, mine.nbytes, 0)], "HBM")
    comm.barrier().wait(WAIT)
    agent.deregister_memory(local)
    agent.deregister_memory(registered)


def test_device_buffers_are_sent_and_received(comm):
    n = 3 * BLOCK + 1
    if comm.rank == 0:
        comm.isend(device_with(pattern(n, 9)), 1, tag=5).wait(WAIT)
    else:
        got = orbite.cuda.DeviceBuffer(n)
        comm.irecv(got, 0, tag=5).wait(WAIT)
        np.testing.assert_array_equal(np.frombuffer(got.copy_to_host(), dtype=np.uint8),
                                      pattern(n, 9))
    comm.barrier().wait(WAIT)
