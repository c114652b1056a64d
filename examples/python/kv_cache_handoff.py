"""A KV-cache hand-off between a prefill rank and a decode rank, by address.

    build/bin/orbite-run -n 2 -- env PYTHONPATH=build/python /usr/bin/python3 \\
        examples/python/kv_cache_handoff.py [--device]

Rank 0 (prefill) fills a paged KV cache of 32 blocks and registers it; it hands its metadata (its
engine's name and regions) and the cache's base address to rank 1. Rank 1 (decode) registers
its own cache and reads the blocks of one request, chosen by block table, straight into its
cache by the prefill rank's addresses: one batched read, no copy through the prefill side's CPU.

With --device both caches are device memory (orbite.cuda.DeviceBuffer; on a machine without a
GPU, LD_LIBRARY_PATH=build/softcuda): the read goes device to device over CUDA IPC, and the
route is printed from the engine's counters.
"""

import struct
import sys

import numpy as np

import orbite
import orbite.kv

BLOCKS, LAYERS, HEADS, TOKENS, HEAD_DIM = 32, 2, 4, 16, 64  # a block: K and V of 16 tokens
BLOCK_SHAPE = (LAYERS, 2, HEADS, TOKENS, HEAD_DIM)


def block_contents(i):
    """What prefill computes for block i (deterministic, so decode can check every byte)."""
    return (np.arange(np.prod(BLOCK_SHAPE), dtype=np.float32) * 0.001 + i).astype(
        np.float16).reshape(BLOCK_SHAPE)


class HostCache:
    def __init__(self):
        self.array = np.zeros((BLOCKS,) + BLOCK_SHAPE, dtype=np.float16)
        self.block_bytes = self.array[0].nbytes

    def memory(self):
        return self.array

    def write(self, i, block):
        self.array[i] = block

    def read(self, i):
        return self.array[i]


class DeviceCache:
    def __init__(self):
        import orbite.cuda
        self.block_bytes = int(np.prod(BLOCK_SHAPE)) * 2
        self.buffer = orbite.cuda.DeviceBuffer(BLOCKS * self.block_bytes)
        self.buffer.fill(0)

    def memory(self):
        return self.buffer

    def write(self, i, block):
        self.buffer.copy_from_host(block, i * self.block_bytes)

    def read(self, i):
        raw = self.buffer.copy_to_host(i * self.block_bytes, self.block_bytes)
        return np.frombuffer(raw, dtype=np.float16).reshape(BLOCK_SHAPE)


device = "--device" in sys.argv[1:]
comm = orbite.Communicator()
assert comm.size == 2, "run with orbite-run -n 2"
kv = orbite.kv.TransferEngine(comm.engine)
cache = DeviceCache() if device else HostCache()
base = kv.register_memory(cache.memory())
block_bytes = cache.block_bytes

if comm.rank == 0:  # prefill
    for i in range(BLOCKS):
        cache.write(i, block_contents(i))
    handoff = struct.pack("<QQ", base, block_bytes) + kv.get_metadata()
    comm.send(np.array([len(handoff)], dtype=np.uint64), 1, tag=1, timeout=60)
    comm.send(handoff, 1, tag=2, timeout=60)
    comm.recv(bytearray(1), 1, tag=3, timeout=60)  # decode has read what it needs
    print(f"prefill: {BLOCKS} blocks of {block_bytes} bytes registered and handed off")
else:  # decode
    size = np.zeros(1, dtype=np.uint64)
    comm.recv(size, 0, tag=1, timeout=60)
    handoff = bytearray(int(size[0]))
    comm.recv(handoff, 0, tag=2, timeout=60)
    prefill_base, prefill_block = struct.unpack_from("<QQ", handoff)
    prefill = kv.add_peer(bytes(handoff[16:]))
    block_table = [3, 7, 8, 12, 30]  # the request's blocks at the prefill rank
    slots = [0, 1, 2, 3, 4]          # where they go in decode's cache
    kv.batch_transfer_sync_read(prefill,
                                [base + s * block_bytes for s in slots],
                                [prefill_base + b * prefill_block for b in block_table],
                                [block_bytes] * len(slots))
    wrong = sum(int(np.count_nonzero(cache.read(s) != block_contents(b)))
                for s, b in zip(slots, block_table))
    comm.send(b"\x01", 0, tag=3, timeout=60)
    route = ""
    if device:
        carried = comm.engine.stats()["transports"]["nvlink"]["bytes_received"]
        route = f" (device to device, {carried} bytes over nvlink)"
    print(f"decode: read blocks {block_table} ({len(slots) * block_bytes} bytes) by address"
          f"{route}: {wrong} wrong elements")
    if wrong:
        raise SystemExit(1)
comm.barrier().wait(60)
kv.unregister_memory(base)
