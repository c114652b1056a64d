#!/usr/bin/env python3
"""The metrics exporter as a real Prometheus sees it (docs/metrics.md).

Starts a 2-rank job (orbite-metrics-job under orbite-run) whose ranks export on a base port + their
local rank, and Debian's prometheus server on loopback with a scrape config naming both. Then asks
the server's HTTP API (the real client, not our text) until both targets are up and a counter of
each rank moved between scrapes, and lints one rank's exposition with `promtool check metrics`.
Every wait is bounded; on failure the job's and the server's output is printed.

With SOFTVERBS_DIR the ranks install the RDMA transport on softverbs (the test's NIC), so that the
RDMA and NIC families are scraped and linted too.

usage: prometheus_test.py ORBITE_RUN METRICS_JOB [SOFTVERBS_DIR]
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from free_ports import free_port, free_port_pair  # noqa: E402

WAIT = 90  # seconds, the bound of each wait below


def query(server, promql):
    url = f"http://{server}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(url, timeout=10) as r:
        answer = json.load(r)
    if answer.get("status") != "success":
        raise RuntimeError(f"query {promql!r}: {answer}")
    return answer["data"]["result"]


def main():
    if len(sys.argv) not in (3, 4):
        raise SystemExit(__doc__)
    orbite_run, job = sys.argv[1], sys.argv[2]
    softverbs = sys.argv[3] if len(sys.argv) == 4 else None
    prometheus = shutil.which("prometheus")
    promtool = shutil.which("promtool")
    if not prometheus or not promtool:
        raise SystemExit("FAIL: prometheus and promtool are needed (scripts/install-deps.sh "
                         "installs Debian's prometheus package)")
    work = tempfile.mkdtemp(prefix="orbite-prometheus-")
    base, server = free_port_pair(), f"127.0.0.1:{free_port()}"
    targets = [f"127.0.0.1:{base}", f"127.0.0.1:{base + 1}"]
    config = os.path.join(work, "prometheus.yml")
    with open(config, "w") as f:
        f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                "scrape_configs:\n  - job_name: orbite\n    static_configs:\n"
                f"      - targets: {json.dumps(targets)}\n")
    stop_file = os.path.join(work, "stop")
    env = dict(os.environ, ORBITE_METRICS_LISTEN=f"127.0.0.1:{base}")
    if softverbs:
        env.update(LD_LIBRARY_PATH=softverbs, SOFTVERBS_CONFIG="", ORBITE_RDMA_ENABLE="on")
    job_log = open(os.path.join(work, "job.log"), "w+")
    server_log = open(os.path.join(work, "prometheus.log"), "w+")
    job_proc = subprocess.Popen([orbite_run, "-n", "2", "--tag-output", "--timeout", "150", "--",
                                 job, "--seconds", "140", "--stop-file", stop_file],
                                env=env, stdout=job_log, stderr=subprocess.STDOUT)
    server_proc = subprocess.Popen([prometheus, f"--config.file={config}",
                                    f"--storage.tsdb.path={os.path.join(work, 'data')}",
                                    f"--web.listen-address={server}", "--log.level=warn"],
                                   stdout=server_log, stderr=subprocess.STDOUT)
    ok = False
    try:
        ok = check(server, targets, promtool, job_proc, softverbs is not None)
    finally:
        open(stop_file, "w").close()
        try:
            rc = job_proc.wait(timeout=WAIT)
        except subprocess.TimeoutExpired:
            job_proc.kill()
            rc = "killed after the stop file"
        server_proc.terminate()
        try:
            server_proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server_proc.kill()
        if rc != 0:
            print(f"FAIL: the job ended with {rc}")
            ok = False
        if not ok:
            for name, log in (("job", job_log), ("prometheus", server_log)):
                log.seek(0)
                print(f"--- {name} output ---\n{log.read()[-6000:]}")
        shutil.rmtree(work, ignore_errors=True)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


def check(server, targets, promtool, job_proc, rdma):
    deadline = time.monotonic() + WAIT
    last = None
    # 1. Both targets up, as the server's own `up` series says.
    while time.monotonic() < deadline:
        if job_proc.poll() is not None:
            print("FAIL: the job ended before both targets were up")
            return False
        try:
            up = {r["metric"]["instance"]: r["value"][1] for r in query(server, 'up{job="orbite"}')}
            if all(up.get(t) == "1" for t in targets):
                break
            last = f"up: {up}"
        except OSError as e:  # the server is still starting
            last = f"server: {e}"
        time.sleep(0.5)
    else:
        print(f"FAIL: the targets did not come up within {WAIT} s ({last})")
        return False
    print(f"both targets up: {targets}")
    # 2. A counter of each rank moved between two of the server's scrapes: the shm transport's
    # bytes (the ranks share this host) and the completed requests.
    moved = {}
    for promql in ('increase(orbite_transport_sent_bytes_total{transport="shm"}[20s]) > 0',
                   'increase(orbite_requests_completed_total[20s]) > 0'):
        while time.monotonic() < deadline:
            got = query(server, promql)
            ranks = sorted(r["metric"].get("rank", "?") for r in got)
            if ranks == ["0", "1"]:
                moved[promql] = {r["metric"]["rank"]: float(r["value"][1]) for r in got}
                break
            last = f"{promql}: {got}"
            time.sleep(0.5)
        else:
            print(f"FAIL: no increase seen for both ranks within {WAIT} s ({last})")
            return False
    for promql, by_rank in moved.items():
        print(f"{promql}: {by_rank}")
    # The instance label is the endpoint each rank reported; rank r is on the base port + r.
    series = query(server, 'orbite_build_info{job="orbite"}')
    placed = sorted((r["metric"]["rank"], r["metric"]["instance"]) for r in series)
    if placed != [("0", targets[0]), ("1", targets[1])]:
        print(f"FAIL: ranks and endpoints {placed}, expected rank r at {targets}")
        return False
    installed = sorted((r["metric"]["rank"], r["value"][1])
                       for r in query(server, 'orbite_rdma_installed{job="orbite"}'))
    if installed != [("0", "1" if rdma else "0"), ("1", "1" if rdma else "0")]:
        print(f"FAIL: orbite_rdma_installed by rank {installed} (softverbs: {rdma})")
        return False
    # 3. The exposition passes promtool's lint.
    with urllib.request.urlopen(f"http://{targets[0]}/metrics", timeout=10) as r:
        text = r.read()
    lint = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                          timeout=60)
    if lint.returncode != 0 or lint.stdout.strip() or lint.stderr.strip():
        print(f"FAIL: promtool check metrics ({lint.returncode}):\n"
              f"{lint.stdout.decode()}{lint.stderr.decode()}")
        return False
    print(f"promtool check metrics: clean ({len(text)} bytes, "
          f"{text.count(b'# TYPE ')} families)")
    # 4. docs/metrics.md documents every family scraped, with its type; on softverbs (every
    # family present) it documents no other.
    scraped = set(re.findall(r"^# TYPE (\S+) (\S+)$", text.decode(), re.M))
    docs = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs",
                        "metrics.md")
    with open(docs) as f:
        documented = set(re.findall(r"^\| `(orbite_\w+)` \| (counter|gauge) \|", f.read(), re.M))
    missing, stale = scraped - documented, documented - scraped
    if missing or (rdma and stale):
        print(f"FAIL: docs/metrics.md lacks {sorted(missing)}"
              + (f" and lists {sorted(stale)} that were not scraped" if rdma and stale else ""))
        return False
    print(f"docs/metrics.md documents the {len(scraped)} families scraped")
    return True


if __name__ == "__main__":
    sys.exit(main())
