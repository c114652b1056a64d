#!/usr/bin/env python3
"""Plots bandwidth against size from the --json files of the benchmarks, one line per file.

    scripts/plot.py --out chart.png build/demo/all_reduce.json mpi.json [--key busbw_gbps]

The y value is a JSON row key: busbw_gbps (the collectives' bus bandwidth, the default when the
files have it), inplace_busbw_gbps, algbw_gbps, or bw_gbps (sendrecv_perf's streaming
bandwidth, the default otherwise). The size axis is logarithmic. Each line is labelled from the
file's implementation, program, transport and rank count, or with --label (once per file).
Needs python3 and matplotlib (Debian: python3-matplotlib); draws without a display.
"""
import argparse
import json
import os
import sys

DEFAULT_KEYS = ("busbw_gbps", "bw_gbps")
AXIS_NAMES = {
    "busbw_gbps": "bus bandwidth (GB/s)",
    "inplace_busbw_gbps": "in-place bus bandwidth (GB/s)",
    "algbw_gbps": "algorithm bandwidth (GB/s)",
    "inplace_algbw_gbps": "in-place algorithm bandwidth (GB/s)",
    "bw_gbps": "bandwidth (GB/s)",
}


def fail(message):
    print(f"plot.py: {message}", file=sys.stderr)
    sys.exit(1)


def load(path):
    if not os.path.isfile(path):
        fail(f"{path}: no such file")
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        fail(f"{path}: not a benchmark JSON file ({e})")
    if not isinstance(doc, dict) or not isinstance(doc.get("rows"), list):
        fail(f"{path}: no \"rows\" list (not written by a benchmark's --json)")
    return doc


def points(path, doc, key):
    xs, ys = [], []
    for row in doc["rows"]:
        size, value = row.get("size"), row.get(key)
        # A zero size has no place on a log axis; a null value is a point the run did not measure.
        if isinstance(size, (int, float)) and size > 0 and isinstance(value, (int, float)):
            xs.append(size)
            ys.append(value)
    if not xs:
        keys = ", ".join(sorted({k for row in doc["rows"] for k in row})) or "none"
        fail(f"{path}: no rows with a size and a {key} value (row keys: {keys})")
    return xs, ys


def label(doc):
    text = f"{doc.get('implementation') or '?'} ({doc.get('program') or '?'})"
    if doc.get("transport"):
        text += f", {doc['transport']}"
    if doc.get("ranks"):
        text += f", {doc['ranks']} ranks"
    return text


def size_label(n, _pos=None):
    for unit, suffix in ((1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")):
        if n >= unit:
            return f"{n / unit:g}{suffix}"
    return f"{n:g}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", help="--json outputs of the benchmarks")
    parser.add_argument("--out", required=True, help="the PNG to write")
    parser.add_argument("--key", help="the row key to plot (default: busbw_gbps or bw_gbps)")
    parser.add_argument("--label", action="append", help="a line's legend, once per file")
    parser.add_argument("--title", help="the chart's title")
    args = parser.parse_args()
    if args.label and len(args.label) != len(args.files):
        fail(f"--label given {len(args.label)} times for {len(args.files)} files")

    docs = [load(path) for path in args.files]
    key = args.key
    if key is None:
        for candidate in DEFAULT_KEYS:
            if any(candidate in row for doc in docs for row in doc["rows"]):
                key = candidate
                break
        else:
            fail(f"no file has a {' or '.join(DEFAULT_KEYS)} column: give --key")
    series = [points(path, doc, key) for path, doc in zip(args.files, docs)]

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FuncFormatter
    except ImportError as e:
        # Debian's python3-matplotlib is installed for Debian's interpreter, which another
        # python3 first on PATH (pyenv, a virtualenv) does not see.
        system = "/usr/bin/python3"
        other = os.path.realpath(sys.executable) != os.path.realpath(system)
        if other and os.access(system, os.X_OK):
            os.execv(system, [system, os.path.abspath(__file__)] + sys.argv[1:])
        fail(f"matplotlib is missing ({e}): apt-get install python3-matplotlib")

    fig, ax = plt.subplots(figsize=(9, 5.5))
    for i, ((xs, ys), doc) in enumerate(zip(series, docs)):
        ax.plot(xs, ys, marker="o", markersize=3,
                label=args.label[i] if args.label else label(doc))
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(size_label))
    ax.set_xlabel("size (bytes)")
    axis = AXIS_NAMES.get(key, key)
    ax.set_ylabel(axis)
    programs = sorted({str(doc.get("program", "")) for doc in docs})
    ax.set_title(args.title or f"{axis.split(' (')[0]}: {', '.join(programs)}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    try:
        fig.savefig(args.out, dpi=110)
    except OSError as e:
        fail(f"cannot write {args.out}: {e}")
    print(f"plot.py: wrote {args.out}")


if __name__ == "__main__":
    main()
