"""All-reduce of a numpy array on every rank, checked against the sum computed locally.

    build/bin/orbite-run -n 4 -- env PYTHONPATH=build/python /usr/bin/python3 \
        examples/python/all_reduce.py
"""

import numpy as np

import orbite

comm = orbite.Communicator()
n = 1 << 20
mine = np.arange(n, dtype=np.float32) * (comm.rank + 1)
total = np.empty_like(mine)
comm.all_reduce(mine, total, op="sum").wait(timeout=60)

expected = np.arange(n, dtype=np.float32) * (comm.size * (comm.size + 1) / 2)
wrong = int(np.count_nonzero(total != expected))
print(f"rank {comm.rank}/{comm.size}: all_reduce of {n} float32: {wrong} wrong elements")
if wrong:
    raise SystemExit(1)
