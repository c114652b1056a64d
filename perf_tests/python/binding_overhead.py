"""The Python binding's overhead on a small put: the same put + wait loop from Python and from
C++ (orbite._core._timed_put_loop, the GIL released), in one run, alternating.

    build/bin/orbite-run -n 2 -- env PYTHONPATH=build/python /usr/bin/python3 \\
        perf_tests/python/binding_overhead.py [--size 64] [--iterations 20000]

Rank 1 registers memory and hands its descriptor over; rank 0 puts into it. The overhead is
(Python's time per call) - (C++'s time per call): argument conversion, the Request object, the
GIL released and taken again around the wait.
"""

import argparse
import time

import numpy as np

import orbite


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--iterations", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    comm = orbite.Communicator()
    engine = comm.engine
    memory = np.zeros(max(args.size, 1), dtype=np.uint8)
    region = engine.register_memory(memory)
    if comm.rank == 1:
        descriptor = region.descriptor()
        comm.send(np.array([len(descriptor)], dtype=np.uint64), 0, tag=1, timeout=60)
        comm.send(descriptor, 0, tag=2, timeout=60)
        comm.barrier().wait(600)
        return
    size = np.zeros(1, dtype=np.uint64)
    comm.recv(size, 1, tag=1, timeout=60)
    raw = bytearray(int(size[0]))
    comm.recv(raw, 1, tag=2, timeout=60)
    remote = orbite.RemoteRegion(bytes(raw))
    src = engine.register_memory(np.ones(max(args.size, 1), dtype=np.uint8))
    put = engine.put
    for _ in range(1000):  # warm-up: the connection and both loops
        put(src, 0, remote, 0, args.size).wait(60)
    orbite._core._timed_put_loop(engine, src, remote, args.size, 1000)
    py_best, cpp_best = float("inf"), float("inf")
    for _ in range(args.rounds):
        start = time.perf_counter()
        for _ in range(args.iterations):
            put(src, 0, remote, 0, args.size).wait(60)
        py_best = min(py_best, (time.perf_counter() - start) / args.iterations)
        took = orbite._core._timed_put_loop(engine, src, remote, args.size, args.iterations)
        cpp_best = min(cpp_best, took / args.iterations)
    print(f"# put of {args.size} B + wait, {args.iterations} calls x {args.rounds} rounds "
          f"(best round), both with the default transport (shm between ranks of one host)")
    print(f"python {py_best * 1e6:.2f} us/call, c++ {cpp_best * 1e6:.2f} us/call, "
          f"binding overhead {(py_best - cpp_best) * 1e6:.2f} us/call "
          f"(ratio {py_best / cpp_best:.2f})")
    comm.barrier().wait(600)


if __name__ == "__main__":
    main()
