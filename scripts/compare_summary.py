#!/usr/bin/env python3
"""Summaries of scripts/compare-mpi.sh: medians over the rounds of the JSON rows the benchmarks
wrote, and the ratios OrbiTE/reference (above 1: OrbiTE is better).

  compare_summary.py p2p  OUT ROUNDS TRANSPORTS CORES MPI_VERSION MCA_SHM MCA_TCP FLAGS
  compare_summary.py coll OUT ROUNDS TRANSPORTS COLLS RANKS GLOO MCA_SHM MCA_TCP FLAGS

Prints the tables and writes OUT/summary.json (p2p) or OUT/summary-collectives.json (coll)."""
import json
import os
import statistics
import sys


def load(out, name):
    with open(os.path.join(out, "json", name)) as f:
        return json.load(f)


def by_size(docs, key):
    """size -> median over the rounds of `key` (rounds where it is null are left out)."""
    values = {}
    for doc in docs:
        for row in doc["rows"]:
            v = row.get(key)
            if v is not None:
                values.setdefault(int(row["size"]), []).append(v)
    return {s: statistics.median(v) for s, v in values.items()}


def fmt_size(n):
    for unit, suffix in ((1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")):
        if n >= unit and n % unit == 0:
            return f"{n // unit}{suffix}"
    return str(n)


def fmt(v):
    if v is None:
        return "N/A"
    # Small-message bandwidths would all read 0.00.
    return f"{v:.3g}" if 0 < abs(v) < 0.1 else f"{v:.2f}"


def ratio(a, b):
    return a / b if a and b else None


def p2p(out, rounds, transports, cores, mpi_version, mca_shm, mca_tcp, flags):
    rounds = int(rounds)
    transports = transports.split()
    mca = {"shm": mca_shm, "tcp": mca_tcp}
    # (test, metric label, JSON key, higher is better)
    metrics = [
        ("sendrecv", "sendrecv lat(us)", "lat_us", False),
        ("sendrecv", "sendrecv bw(GB/s)", "bw_gbps", True),
        ("putget", "put lat(us)", "put_lat_us", False),
        ("putget", "get lat(us)", "get_lat_us", False),
        ("putget", "put bw(GB/s)", "put_bw_gbps", True),
        ("putget", "get bw(GB/s)", "get_bw_gbps", True),
    ]

    summary = {"rounds": rounds, "cores": int(cores), "mpi": mpi_version, "flags": flags,
               "transports": {}, "reference": {}}
    print("#")
    print(f"# point to point, 2 ranks; benchmark flags: {flags}")
    for t in transports:
        docs = {(impl, test): [load(out, f"{impl}-{test}-{t}-r{r}.json") for r in range(1, rounds + 1)]
                for impl in ("orbite", "mpi") for test in ("sendrecv", "putget")}
        print("#")
        print(f"# transport {t}: OrbiTE --transport {t}; "
              f"Open MPI --mca pml ob1 --mca osc ^ucx {mca[t]}")
        print(f"# {'size':>8}  {'metric':<18} {'OrbiTE':>10} {'MPI':>10} {'ratio':>8}")
        medians = {}
        for test, label, key, _ in metrics:
            medians[label] = (by_size(docs[("orbite", test)], key), by_size(docs[("mpi", test)], key))
        sizes = sorted(set().union(*(set(o) | set(m) for o, m in medians.values())))
        rows = []
        for size in sizes:
            for test, label, key, higher_better in metrics:
                o, m = medians[label][0].get(size), medians[label][1].get(size)
                ratio = None
                if o and m:
                    ratio = o / m if higher_better else m / o
                rows.append({"size": size, "metric": key, "test": test, "orbite": o, "mpi": m,
                             "ratio": ratio})
                print(f"  {fmt_size(size):>8}  {label:<18} {fmt(o):>10} {fmt(m):>10} {fmt(ratio):>8}")
        summary["transports"][t] = rows

    ref = [load(out, f"memcpy-r{r}.json") for r in range(1, rounds + 1)]
    copy, tcp = by_size(ref, "memcpy_gbps"), by_size(ref, "tcp_gbps")
    print("#")
    print("# reference (one process): single-thread memcpy and a raw TCP loopback stream, GB/s")
    for size in sorted(copy):
        print(f"  {fmt_size(size):>8}  memcpy {fmt(copy.get(size)):>8}   tcp loopback "
              f"{fmt(tcp.get(size)):>8}")
        summary["reference"][str(size)] = {"memcpy_gbps": copy.get(size), "tcp_gbps": tcp.get(size)}

    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)


def coll(out, rounds, transports, colls, ranks_list, gloo, mca_shm, mca_tcp, flags):
    rounds = int(rounds)
    mca = {"shm": mca_shm, "tcp": mca_tcp}

    summary = {"rounds": rounds, "flags": flags, "collectives": []}
    print("#")
    print(f"# collectives; busbw in GB/s, time in us per collective; flags: {flags}")
    print("# ratio: OrbiTE busbw / MPI busbw out of place, the same as MPI time / OrbiTE time (one "
          "size, one factor); ip ratio: the same in place; Gloo's ratio is OrbiTE/Gloo likewise")
    for t in transports.split():
        for n in ranks_list.split():
            with_gloo = gloo == "1" and t == "tcp" and "all_reduce" in colls.split()
            print("#")
            print(f"# transport {t}, {n} ranks: OrbiTE --transport {t}; "
                  f"Open MPI --mca pml ob1 {mca[t]}"
                  + ("; Gloo ring all-reduce over TCP (unbound ranks)" if with_gloo else ""))
            print(f"# {'coll':<15}{'size':>7} {'OrbiTE bw':>10} {'MPI bw':>10} {'OrbiTE us':>10}"
                  f" {'MPI us':>10} {'ratio':>7} {'ip ratio':>8}" +
                  (f" {'Gloo bw':>9} {'Gloo us':>9} {'ratio':>7}" if with_gloo else ""))
            for c in colls.split():
                impls = ["orbite", "mpi"] + (["gloo"] if with_gloo and c == "all_reduce" else [])
                docs = {i: [load(out, f"coll-{i}-{c}-{t}-n{n}-r{r}.json")
                            for r in range(1, rounds + 1)] for i in impls}
                bw = {i: by_size(d, "busbw_gbps") for i, d in docs.items()}
                us = {i: by_size(d, "time_us") for i, d in docs.items()}
                ip_us = {i: by_size(d, "inplace_time_us") for i, d in docs.items()}
                for size in sorted(set().union(*(set(v) for v in bw.values()))):
                    get = lambda table, i: table.get(i, {}).get(size)
                    row = {"coll": c, "transport": t, "ranks": int(n), "size": size,
                           "orbite_busbw": get(bw, "orbite"), "mpi_busbw": get(bw, "mpi"),
                           "orbite_us": get(us, "orbite"), "mpi_us": get(us, "mpi"),
                           "ratio": ratio(get(us, "mpi"), get(us, "orbite")),
                           "orbite_inplace_us": get(ip_us, "orbite"),
                           "mpi_inplace_us": get(ip_us, "mpi"),
                           "inplace_ratio": ratio(get(ip_us, "mpi"), get(ip_us, "orbite")),
                           "gloo_busbw": get(bw, "gloo"), "gloo_us": get(us, "gloo"),
                           "gloo_ratio": ratio(get(us, "gloo"), get(us, "orbite"))}
                    summary["collectives"].append(row)
                    gloo_cells = (f" {fmt(row['gloo_busbw']):>9} {fmt(row['gloo_us']):>9}"
                                  f" {fmt(row['gloo_ratio']):>7}" if "gloo" in impls else "")
                    print(f"  {c:<15}{fmt_size(size):>7} {fmt(row['orbite_busbw']):>10}"
                          f" {fmt(row['mpi_busbw']):>10} {fmt(row['orbite_us']):>10}"
                          f" {fmt(row['mpi_us']):>10} {fmt(row['ratio']):>7}"
                          f" {fmt(row['inplace_ratio']):>8}{gloo_cells}")

    with open(os.path.join(out, "summary-collectives.json"), "w") as f:
        json.dump(summary, f, indent=2)


if __name__ == "__main__":
    commands = {"p2p": (p2p, 8), "coll": (coll, 9)}
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        sys.exit("usage: compare_summary.py p2p|coll ARGS... (see the docstring)")
    fn, nargs = commands[sys.argv[1]]
    if len(sys.argv) != nargs + 2:
        sys.exit(f"compare_summary.py {sys.argv[1]}: expected {nargs} arguments, got "
                 f"{len(sys.argv) - 2}")
    fn(*sys.argv[2:])
