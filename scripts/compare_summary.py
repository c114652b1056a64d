#!/usr/bin/env python3
"""Summaries of scripts/compare-mpi.sh: medians over the rounds of the JSON rows the benchmarks
wrote, and the ratios OrbiTE/reference (above 1: OrbiTE is better).

  compare_summary.py p2p  OUT ROUNDS TRANSPORTS CORES MPI_VERSION MCA_SHM MCA_TCP FLAGS [BEFORE...]
  compare_summary.py coll OUT ROUNDS TRANSPORTS COLLS RANKS GLOO MCA_SHM MCA_TCP FLAGS [BEFORE...]

BEFORE (--baseline): LABEL DIR TESTS, a baseline OrbiTE build (its JSON files named "before"
where the current build's are named "orbite") and the tests it ran ("sendrecv putget all_reduce",
the others are left out: N/A). It adds the columns before, before/mpi and orbite/before (above
1: the current build is better).

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


def baseline(before):
    """The baseline's LABEL DIR TESTS as a dict, or None without one."""
    if not before:
        return None
    label, path, tests = before
    return {"label": label, "dir": path, "tests": tests.split()}


def print_skipped(base, tests):
    """The note for the tests the baseline did not run (DIR lacks their benchmark)."""
    skipped = [t for t in tests if t not in base["tests"]]
    if skipped:
        names = ", ".join(f"{t}_perf" for t in skipped)
        print(f"# before: {base['dir']}/perf_tests has no {names}: N/A in its columns")


def better(a, b, higher_better):
    """a against b, above 1 when a is better: a/b for a bandwidth, b/a for a latency."""
    return ratio(a, b) if higher_better else ratio(b, a)


# (test, metric label, JSON key, higher is better)
P2P_METRICS = [
    ("sendrecv", "sendrecv lat(us)", "lat_us", False),
    ("sendrecv", "sendrecv bw(GB/s)", "bw_gbps", True),
    ("putget", "put lat(us)", "put_lat_us", False),
    ("putget", "get lat(us)", "get_lat_us", False),
    ("putget", "put bw(GB/s)", "put_bw_gbps", True),
    ("putget", "get bw(GB/s)", "get_bw_gbps", True),
]


def p2p(out, rounds, transports, cores, mpi_version, mca_shm, mca_tcp, flags, *before):
    base = baseline(before)
    if base:
        return p2p_baseline(out, rounds, transports, cores, mpi_version, mca_shm, mca_tcp, flags,
                            base)
    rounds = int(rounds)
    transports = transports.split()
    mca = {"shm": mca_shm, "tcp": mca_tcp}
    metrics = P2P_METRICS

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


def coll(out, rounds, transports, colls, ranks_list, gloo, mca_shm, mca_tcp, flags, *before):
    base = baseline(before)
    if base:
        return coll_baseline(out, rounds, transports, colls, ranks_list, gloo, mca_shm, mca_tcp,
                             flags, base)
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


def p2p_baseline(out, rounds, transports, cores, mpi_version, mca_shm, mca_tcp, flags, base):
    """p2p with the baseline's columns: orbite, before, mpi and the three ratios."""
    rounds = int(rounds)
    transports = transports.split()
    mca = {"shm": mca_shm, "tcp": mca_tcp}
    tests = ("sendrecv", "putget")

    summary = {"rounds": rounds, "cores": int(cores), "mpi": mpi_version, "flags": flags,
               "baseline": base, "transports": {}, "reference": {}}
    print("#")
    print(f"# point to point, 2 ranks; benchmark flags: {flags}")
    print(f"# orbite: this build; before: {base['label']} ({base['dir']}); mpi: Open MPI")
    print_skipped(base, tests)
    for t in transports:
        docs = {(impl, test): [load(out, f"{impl}-{test}-{t}-r{r}.json")
                               for r in range(1, rounds + 1)]
                for impl in ("orbite", "before", "mpi") for test in tests
                if impl != "before" or test in base["tests"]}
        print("#")
        print(f"# transport {t}: OrbiTE --transport {t} (orbite, before); "
              f"Open MPI --mca pml ob1 --mca osc ^ucx {mca[t]}")
        print(f"# {'size':>8}  {'metric':<18} {'orbite':>10} {'before':>10} {'mpi':>10}"
              f" {'orbite/mpi':>10} {'before/mpi':>10} {'orbite/before':>13}")
        medians = {(impl, label): by_size(docs.get((impl, test), []), key)
                   for test, label, key, _ in P2P_METRICS for impl in ("orbite", "before", "mpi")}
        sizes = sorted(set().union(*(set(m) for m in medians.values())))
        rows = []
        for size in sizes:
            for test, label, key, higher_better in P2P_METRICS:
                o, b, m = (medians[(impl, label)].get(size) for impl in ("orbite", "before", "mpi"))
                row = {"size": size, "metric": key, "test": test, "orbite": o, "before": b,
                       "mpi": m, "ratio": better(o, m, higher_better),
                       "before_mpi_ratio": better(b, m, higher_better),
                       "orbite_before_ratio": better(o, b, higher_better)}
                rows.append(row)
                print(f"  {fmt_size(size):>8}  {label:<18} {fmt(o):>10} {fmt(b):>10} {fmt(m):>10}"
                      f" {fmt(row['ratio']):>10} {fmt(row['before_mpi_ratio']):>10}"
                      f" {fmt(row['orbite_before_ratio']):>13}")
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


def coll_baseline(out, rounds, transports, colls, ranks_list, gloo, mca_shm, mca_tcp, flags, base):
    """coll with the baseline's columns: orbite, before and mpi busbw and time, the three ratios
    out of place and two in place."""
    rounds = int(rounds)
    mca = {"shm": mca_shm, "tcp": mca_tcp}

    summary = {"rounds": rounds, "flags": flags, "baseline": base, "collectives": []}
    print("#")
    print(f"# collectives; busbw in GB/s, time in us per collective; flags: {flags}")
    print(f"# orbite: this build; before: {base['label']} ({base['dir']}); mpi: Open MPI")
    print("# a/b: a's busbw / b's busbw out of place, the same as b's time / a's time (one size, "
          "one factor); ip a/b: the same in place; orbite/gloo likewise")
    print_skipped(base, colls.split())
    for t in transports.split():
        for n in ranks_list.split():
            with_gloo = gloo == "1" and t == "tcp" and "all_reduce" in colls.split()
            print("#")
            print(f"# transport {t}, {n} ranks: OrbiTE --transport {t} (orbite, before); "
                  f"Open MPI --mca pml ob1 {mca[t]}"
                  + ("; Gloo ring all-reduce over TCP (unbound ranks)" if with_gloo else ""))
            print(f"# {'coll':<15}{'size':>7} {'orbite bw':>10} {'before bw':>10} {'mpi bw':>10}"
                  f" {'orbite us':>10} {'before us':>10} {'mpi us':>10} {'orbite/mpi':>10}"
                  f" {'before/mpi':>10} {'orbite/before':>13} {'ip orbite/mpi':>13}"
                  f" {'ip orbite/before':>16}" +
                  (f" {'gloo bw':>9} {'gloo us':>9} {'orbite/gloo':>11}" if with_gloo else ""))
            for c in colls.split():
                impls = (["orbite"] + (["before"] if c in base["tests"] else []) + ["mpi"]
                         + (["gloo"] if with_gloo and c == "all_reduce" else []))
                docs = {i: [load(out, f"coll-{i}-{c}-{t}-n{n}-r{r}.json")
                            for r in range(1, rounds + 1)] for i in impls}
                bw = {i: by_size(d, "busbw_gbps") for i, d in docs.items()}
                us = {i: by_size(d, "time_us") for i, d in docs.items()}
                ip_us = {i: by_size(d, "inplace_time_us") for i, d in docs.items()}
                for size in sorted(set().union(*(set(v) for v in bw.values()))):
                    get = lambda table, i: table.get(i, {}).get(size)
                    row = {"coll": c, "transport": t, "ranks": int(n), "size": size,
                           "orbite_busbw": get(bw, "orbite"), "before_busbw": get(bw, "before"),
                           "mpi_busbw": get(bw, "mpi"),
                           "orbite_us": get(us, "orbite"), "before_us": get(us, "before"),
                           "mpi_us": get(us, "mpi"),
                           "ratio": ratio(get(us, "mpi"), get(us, "orbite")),
                           "before_mpi_ratio": ratio(get(us, "mpi"), get(us, "before")),
                           "orbite_before_ratio": ratio(get(us, "before"), get(us, "orbite")),
                           "orbite_inplace_us": get(ip_us, "orbite"),
                           "before_inplace_us": get(ip_us, "before"),
                           "mpi_inplace_us": get(ip_us, "mpi"),
                           "inplace_ratio": ratio(get(ip_us, "mpi"), get(ip_us, "orbite")),
                           "inplace_orbite_before_ratio": ratio(get(ip_us, "before"),
                                                                get(ip_us, "orbite")),
                           "gloo_busbw": get(bw, "gloo"), "gloo_us": get(us, "gloo"),
                           "gloo_ratio": ratio(get(us, "gloo"), get(us, "orbite"))}
                    summary["collectives"].append(row)
                    gloo_cells = (f" {fmt(row['gloo_busbw']):>9} {fmt(row['gloo_us']):>9}"
                                  f" {fmt(row['gloo_ratio']):>11}" if "gloo" in impls else "")
                    print(f"  {c:<15}{fmt_size(size):>7} {fmt(row['orbite_busbw']):>10}"
                          f" {fmt(row['before_busbw']):>10} {fmt(row['mpi_busbw']):>10}"
                          f" {fmt(row['orbite_us']):>10} {fmt(row['before_us']):>10}"
                          f" {fmt(row['mpi_us']):>10} {fmt(row['ratio']):>10}"
                          f" {fmt(row['before_mpi_ratio']):>10}"
                          f" {fmt(row['orbite_before_ratio']):>13}"
                          f" {fmt(row['inplace_ratio']):>13}"
                          f" {fmt(row['inplace_orbite_before_ratio']):>16}{gloo_cells}")

    with open(os.path.join(out, "summary-collectives.json"), "w") as f:
        json.dump(summary, f, indent=2)


if __name__ == "__main__":
    commands = {"p2p": (p2p, 8), "coll": (coll, 9)}
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        sys.exit("usage: compare_summary.py p2p|coll ARGS... (see the docstring)")
    fn, nargs = commands[sys.argv[1]]
    if len(sys.argv) - 2 not in (nargs, nargs + 3):
        sys.exit(f"compare_summary.py {sys.argv[1]}: expected {nargs} arguments (or {nargs + 3} "
                 f"with a baseline), got {len(sys.argv) - 2}")
    fn(*sys.argv[2:])
