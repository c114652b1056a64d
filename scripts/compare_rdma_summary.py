#!/usr/bin/env python3
"""Summary of scripts/compare-rdma.sh: per size, the medians over the rounds of softverbs' raw
WRITE/READ and raw TCP stream (softverbs_bw), OrbiTE's RDMA put/get and OrbiTE's tcp put/get
(putget_perf, window bandwidth), and the ratios. Above 1: OrbiTE's RDMA is faster.

  compare_rdma_summary.py OUT ROUNDS

Writes OUT/summary-rdma.json and prints a Markdown table."""
import json
import os
import sys

from compare_summary import by_size as median_by_size, fmt_size


def rows(out, name, rounds):
    docs = []
    for r in range(1, rounds + 1):
        path = os.path.join(out, "json", f"{name}.{r}.json")
        with open(path) as f:
            docs.append(json.load(f))
    return docs


def wrong(docs):
    return sum(int(row.get("wrong") or 0) for doc in docs for row in doc["rows"])


def ratio(a, b):
    return a / b if a and b else None


def fmt(v):
    return "N/A" if v is None else f"{v:.2f}"


def main():
    out, rounds = sys.argv[1], int(sys.argv[2])
    sv = rows(out, "softverbs_bw", rounds)
    rd = rows(out, "putget_rdma", rounds)
    tc = rows(out, "putget_tcp", rounds)
    raw = median_by_size(sv, "raw_gbps")
    write = median_by_size(sv, "write_gbps")
    read = median_by_size(sv, "read_gbps")
    put = median_by_size(rd, "put_bw_gbps")
    get = median_by_size(rd, "get_bw_gbps")
    put_lat = median_by_size(rd, "put_lat_us")
    tput = median_by_size(tc, "put_bw_gbps")
    tget = median_by_size(tc, "get_bw_gbps")
    table = []
    print("| size | raw TCP | sv WRITE | sv READ | rdma put | rdma get | tcp put | tcp get |"
          " **put/WRITE** | **get/READ** | put/tcp put | get/tcp get | rdma put lat (us) |")
    print("|---:|" + "---:|" * 12)
    for s in sorted(put):
        row = {
            "size": s, "raw": raw.get(s), "write": write.get(s), "read": read.get(s),
            "put": put.get(s), "get": get.get(s), "tcp_put": tput.get(s), "tcp_get": tget.get(s),
            "put_over_write": ratio(put.get(s), write.get(s)),
            "get_over_read": ratio(get.get(s), read.get(s)),
            "put_over_tcp": ratio(put.get(s), tput.get(s)),
            "get_over_tcp": ratio(get.get(s), tget.get(s)),
            "put_lat_us": put_lat.get(s),
        }
        table.append(row)
        print(f"| {fmt_size(s)} | {fmt(row['raw'])} | {fmt(row['write'])} | {fmt(row['read'])} | "
              f"{fmt(row['put'])} | {fmt(row['get'])} | {fmt(row['tcp_put'])} | "
              f"{fmt(row['tcp_get'])} | **{fmt(row['put_over_write'])}** | "
              f"**{fmt(row['get_over_read'])}** | {fmt(row['put_over_tcp'])} | "
              f"{fmt(row['get_over_tcp'])} | {fmt(row['put_lat_us'])} |")
    bad = wrong(sv) + wrong(rd) + wrong(tc)
    print(f"\nGB/s, medians of {rounds} rounds; wrong bytes in all runs: {bad}")
    with open(os.path.join(out, "summary-rdma.json"), "w") as f:
        json.dump({"rounds": rounds, "wrong": bad, "rows": table}, f, indent=1)
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
