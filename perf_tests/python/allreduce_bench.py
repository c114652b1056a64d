"""torch.distributed.all_reduce on the "orbite" backend beside "gloo", in one run.

    build/bin/orbite-run -n 2 -- env PYTHONPATH=build/python /usr/bin/python3 \\
        perf_tests/python/allreduce_bench.py [-b 8] [-e 64M] [--json FILE]

Both groups hold the same ranks; at each size the two backends alternate, each timing its own
loop of all_reduce calls (float32, sum, in place). busbw counts as nccl-tests does:
algbw * 2 (n - 1) / n. The ratio is orbite's busbw over gloo's.
"""

import argparse
import datetime
import json
import time

import torch
import torch.distributed as dist

import orbite.torch


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1].upper()] if text[-1].upper() in units else int(text)


def timed(group, tensor, iterations):
    dist.barrier(group=group)
    start = time.perf_counter()
    for _ in range(iterations):
        dist.all_reduce(tensor, group=group)
    took = time.perf_counter() - start
    # The slowest rank's time is the collective's.
    slowest = torch.tensor([took], dtype=torch.float64)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX, group=group)
    return slowest.item() / iterations


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("-b", default="8")
    parser.add_argument("-e", default="64M")
    parser.add_argument("--rounds", type=int, default=3, help="alternations per size (best kept)")
    parser.add_argument("--json")
    args = parser.parse_args()
    orbite.torch.init_process_group(timeout=datetime.timedelta(seconds=300))
    rank, size = dist.get_rank(), dist.get_world_size()
    groups = {"orbite": dist.group.WORLD, "gloo": dist.new_group(backend="gloo")}
    rows = []
    if rank == 0:
        print(f"# torch.distributed.all_reduce, float32 sum in place, {size} ranks, "
              f"torch {torch.__version__}")
        print(f"# {'size':>10} {'count':>10} | {'orbite us':>10} {'busbw':>7} | "
              f"{'gloo us':>10} {'busbw':>7} | {'ratio':>6}")
    n = parse_size(args.b)
    while n <= parse_size(args.e):
        count = max(1, n // 4)
        tensor = torch.ones(count)
        iterations = max(3, min(200, (64 << 20) // max(n, 1) // 8))
        best = {}
        for name, group in groups.items():  # warm-up: connections, scratch
            timed(group, tensor, 2)
        for _ in range(args.rounds):
            for name, group in groups.items():
                t = timed(group, tensor, iterations)
                best[name] = min(best.get(name, t), t)
        bus = {k: count * 4 / v * 2 * (size - 1) / size / 1e9 for k, v in best.items()}
        row = {"bytes": count * 4, "count": count,
               "orbite_us": best["orbite"] * 1e6, "orbite_busbw": bus["orbite"],
               "gloo_us": best["gloo"] * 1e6, "gloo_busbw": bus["gloo"],
               "ratio": bus["orbite"] / bus["gloo"]}
        rows.append(row)
        if rank == 0:
            print(f"  {row['bytes']:>10} {count:>10} | {row['orbite_us']:>10.1f} "
                  f"{row['orbite_busbw']:>7.3f} | {row['gloo_us']:>10.1f} "
                  f"{row['gloo_busbw']:>7.3f} | {row['ratio']:>6.2f}", flush=True)
        n *= 2
    if rank == 0 and args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
