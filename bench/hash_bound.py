#!/usr/bin/env python3
"""Bounded-load hashing with 4 proxies (issue 30, docs/balancing.md).

Six equal nodes of the emulated cluster (`rdmalb-testbed testsrv`: 4 slots,
queue 64, 10 ms dynamic requests, so 2400 requests/s in all) behind four
proxies hashing the request path (`balance uri`, consistent hashing). The
load client spreads requests over the four proxies, open loop at a fixed
rate. The keys are skewed: the trace draws `/dynamic/f<i>` from 10 000
paths with Zipf exponent 1.1 (`rdmalb-testbed trace zipf`), so plain
consistent hashing hot-spots a node (on this ring the busiest node's share
of the keys is 28 %, 1.7 x the mean).

Modes, same nodes, same trace, same rate:
  unbounded   rdmalb, `type = "consistent"` without a balance factor (the
              reference: every key on its own node)
  haproxy     4 real HAProxy (Debian's 2.6), `hash-type consistent`,
              `hash-balance-factor 125`: each bounds by its own connections
  own         rdmalb, `balance_factor = 125`, `bound_load = "own"`:
              HAProxy's rule (each proxy counts its own in-flight requests)
  published   rdmalb, `balance_factor = 125`, `bound_load = "published"`:
              the nodes' published work (busy + queue, from every proxy)

rdmalb's modes run in `rdmalb-testbed cluster` (a sidecar per node, the
proxies read its window over the transport named in every row: shm by
default, which is not RDMA); the haproxy mode starts the same testsrv nodes
without sidecars (HAProxy reads no windows) and the same load client
(`rdmalb-testbed load`) itself.

Measured per run, from the nodes' timelines (busy + queue every 5 ms,
aligned on the runs' ends) while the load ran:
  node ms/req     the mean time a served request held a node's slot, against
                  the 10 ms asked: above it, the shared machine stretched the
                  nodes' timers and the cluster had less capacity than 2400/s
  max/mean load   the busiest node's time-averaged load over the nodes' mean
  max/mean served the busiest node's requests over the mean
  over bound %    share of the 5 ms samples in which some node's load was
                  above ceil(mean x 1.25), HAProxy's bound over all proxies
  over 100ms %    the same over 100 ms means of each node's load (what
                  stays over the bound longer than a few requests' noise)
  p99             client latency of served requests (load client)
  moved %         requests not served by their key's first-choice node
                  (the ring computed here as HAProxy and rdmalb lay it out,
                  checked by the unbounded mode's figure, which is 0), from
                  the proxies' access logs

Rounds interleave the modes with a rotating order; tables show medians.
Results: bench/results/hash_bound-<stamp>.{md,csv}. Run under the bench lock:

    flock /tmp/rdmalb-bench.lock python3 bench/hash_bound.py
    flock /tmp/rdmalb-bench.lock python3 bench/hash_bound.py --rounds 3 --duration 12 --rate 800

Every child is stopped by its PID on every exit path (the cluster stops its
own processes when it gets SIGTERM).
"""

import argparse
import bisect
import csv
import datetime
import json
import math
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster_bench import write_rows  # noqa: E402 (after the path)
NODES = 6
PROXIES = 4
FACTOR = 125
MODES = ["unbounded", "haproxy", "own", "published"]
M32 = 0xFFFFFFFF


# --- The ring, as HAProxy 2.6 and rdmalb lay it out (docs/balancing.md) ---

def sdbm(data):
    h = 0
    for c in data:
        h = (c + (h << 6) + (h << 16) - h) & M32
    return h


def full_hash(a):
    a = (a + 0x7ED55D16 + (a << 12)) & M32
    a = ((a ^ 0xC761C23C) ^ (a >> 19)) & M32
    a = (a + 0x165667B1 + (a << 5)) & M32
    a = ((a + 0xD3A2646C) ^ (a << 9)) & M32
    a = (a + 0xFD7046C5 + (a << 3)) & M32
    a = ((a ^ 0xB55A4F09) ^ (a >> 16)) & M32
    return (a * 3221225473) & M32


class Ring:
    """Node i (0-based, server id i + 1) at 16 points full_hash(id x 4096 + j);
    a key (sdbm, avalanche) goes to the nearer point around it."""

    def __init__(self, nodes):
        pts = sorted(((full_hash((i + 1) * 4096 + j), i) for i in range(nodes) for j in range(16)),
                     key=lambda p: p[0])
        self.keys = [p[0] for p in pts]
        self.nodes = [p[1] for p in pts]
        self.memo = {}

    def first(self, key):
        if key not in self.memo:
            h = full_hash(sdbm(key.encode()))
            n = len(self.keys)
            nxt = bisect.bisect_left(self.keys, h) % n
            prv = (nxt - 1) % n
            dp, dn = (h - self.keys[prv]) & M32, (self.keys[nxt] - h) & M32
            self.memo[key] = self.nodes[prv] if dp <= dn else self.nodes[nxt]
        return self.memo[key]


# --- Processes ---

CHILDREN = []


def stop(p, grace=15.0):
    """SIGTERM to one child we started, SIGKILL after `grace`."""
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(grace)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    if p in CHILDREN:
        CHILDREN.remove(p)


def spawn(args, log):
    with open(log, "w") as f:
        p = subprocess.Popen(args, stdout=f, stderr=subprocess.STDOUT)
    CHILDREN.append(p)
    return p


def run_child(args, log, bound):
    """Runs one child to its end (at most `bound` s); its exit status."""
    p = spawn(args, log)
    try:
        return p.wait(bound)
    finally:
        stop(p)


def free_ports(n):
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def wait_http(url, host, bound=10.0):
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        try:
            req = urllib.request.Request(url, headers={"Host": host})
            with urllib.request.urlopen(req, timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.05)
    sys.exit(f"{url} did not answer within {bound:.0f} s")


# --- Runs ---

def cluster_spec(mode, a, trace, timeline):
    hash_lines = 'type = "consistent"\n'
    if mode == "own":
        hash_lines += f'balance_factor = {FACTOR}\nbound_load = "own"\n'
    elif mode == "published":
        hash_lines += f'balance_factor = {FACTOR}\nbound_load = "published"\n'
    return f"""sites = ["shop"]
split = "{NODES}"
proxies = {a.proxies}
balance = "roundrobin"
transport = "{a.transport}"
duration = "{a.duration}s"
trace_file = "{trace}"
seed = 7

[node]
slots = 4
queue = 64
timeline_dir = "{timeline}"

[load]
rate = {a.rate:.1f}
interval = "1s"
timeout = "10s"

[proxy.global]
access_log = "stdout"

[[proxy.site]]
name = "shop"
hosts = ["shop.localhost"]
balance = "uri"

[proxy.site.hash]
{hash_lines}"""


def run_rdmalb(a, work, name, mode, trace):
    out = os.path.join(work, name)
    timeline = os.path.join(out + "-tl")
    os.makedirs(timeline, exist_ok=True)
    path = out + ".toml"
    with open(path, "w") as f:
        f.write(cluster_spec(mode, a, trace, timeline))
    for attempt in (1, 2):
        rc = run_child([a.bin, "cluster", "-c", path, "-o", out], out + ".log", a.duration + 120)
        if rc == 0:
            break
        tail = open(out + ".log").read()[-2000:]
        if attempt == 2:
            sys.stderr.write(tail)
            sys.exit(f"cluster run {name} failed twice")
        print(f"cluster run {name} failed; once more", file=sys.stderr)
        shutil.rmtree(out, ignore_errors=True)
    load = json.load(open(os.path.join(out, "load.json")))
    logs = [os.path.join(out, "logs", f) for f in os.listdir(os.path.join(out, "logs")) if f.startswith("proxy")]
    return load, timeline, logs, out


HAPROXY_CFG = """global
    nbthread 1
    maxconn 4096
    no strict-limits
    log stdout format raw local0

defaults
    mode http
    log global
    option httplog
    option http-keep-alive
    timeout connect 2s
    timeout client 30s
    timeout server 30s
    timeout http-request 10s
    timeout http-keep-alive 60s

frontend fe
    bind 127.0.0.1:{listen}
    default_backend shop

backend shop
    balance uri
    hash-type consistent
    hash-balance-factor {factor}
{servers}
"""


def run_haproxy(a, work, name, trace):
    out = os.path.join(work, name)
    timeline = out + "-tl"
    os.makedirs(timeline, exist_ok=True)
    os.makedirs(out, exist_ok=True)
    ports = free_ports(NODES + a.proxies)
    node_ports, proxy_ports = ports[:NODES], ports[NODES:]
    started = []
    try:
        for i, port in enumerate(node_ports):
            site = os.path.join(out, f"n{i + 1}-site.toml")
            with open(site, "w") as f:
                f.write('site = "shop"\nhosts = ["shop.localhost"]\n')
            conf = os.path.join(out, f"n{i + 1}.toml")
            with open(conf, "w") as f:
                f.write(f'name = "n{i + 1}"\nlisten = "127.0.0.1:{port}"\nsite_file = "{site}"\n'
                        f'slots = 4\nqueue = 64\ntimeline_file = "{timeline}/n{i + 1}.timeline.csv"\n')
            started.append(spawn([a.bin, "testsrv", "-c", conf], os.path.join(out, f"n{i + 1}.log")))
        for port in node_ports:
            wait_http(f"http://127.0.0.1:{port}/health", "shop.localhost")
        servers = "\n".join(f"    server n{i + 1} 127.0.0.1:{p}" for i, p in enumerate(node_ports))
        logs = []
        for k, port in enumerate(proxy_ports):
            cfg = os.path.join(out, f"haproxy{k + 1}.cfg")
            with open(cfg, "w") as f:
                f.write(HAPROXY_CFG.format(listen=port, factor=FACTOR, servers=servers))
            log = os.path.join(out, f"haproxy{k + 1}.log")
            logs.append(log)
            started.append(spawn([a.haproxy, "-db", "-f", cfg], log))
        for port in proxy_ports:
            wait_http(f"http://127.0.0.1:{port}/health", "shop.localhost")
        report = os.path.join(out, "load.json")
        urls = [x for p in proxy_ports for x in ("--url", f"http://127.0.0.1:{p}")]
        rc = run_child([a.bin, "load", "--trace", trace, *urls, "--rate", f"{a.rate:.1f}",
                        "--duration", f"{a.duration}s", "--timeout", "10s", "--json", report],
                       os.path.join(out, "load.log"), a.duration + 60)
        if rc != 0:
            sys.exit(f"load client of {name} failed ({rc}): see {out}/load.log")
    finally:
        # Nodes together so their timelines end together (aligned on the end).
        for p in started:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in started:
            stop(p)
    return json.load(open(report)), timeline, logs, out


# --- Measures ---

def node_loads(timeline):
    """Per node (n1..n6): {bin: busy + queue}, bins of 5 ms counted back from
    the node's last line, and its (requests, 503s, µs of service) at the end."""
    series, totals = [], []
    for i in range(NODES):
        with open(os.path.join(timeline, f"n{i + 1}.timeline.csv")) as f:
            rows = list(csv.DictReader(f))
        end = float(rows[-1]["ms"])
        series.append({round((end - float(r["ms"])) / 5): int(r["busy"]) + int(r["queue"]) for r in rows})
        totals.append((int(rows[-1]["requests_total"]), int(rows[-1]["rejected_total"]),
                       int(rows[-1]["service_us_total"])))
    return series, totals


def balance_figures(timeline):
    series, totals = node_loads(timeline)
    bins = sorted(set.intersection(*(set(s) for s in series)), reverse=True)  # oldest first
    busy = [b for b in bins if sum(s[b] for s in series) > 0]
    if not busy:
        return dict(node_ms_per_req=float("nan"), max_mean_load=float("nan"), max_mean_served=float("nan"), over_bound_pct=float("nan"),
                    over_100ms_pct=float("nan"), node_503=0)
    window = [b for b in bins if busy[-1] <= b <= busy[0]]
    mean_load = [statistics.fmean(s[b] for b in window) for s in series]

    def over_share(samples):
        over = sum(max(l) > math.ceil(sum(l) / NODES * FACTOR / 100) for l in samples)
        return round(100.0 * over / len(samples), 1) if samples else float("nan")

    samples = [[s[b] for s in series] for b in window]
    means = [[statistics.fmean(x) for x in zip(*samples[k:k + 20])] for k in range(0, len(samples) - 19, 20)]
    served = [t[0] for t in totals]
    held_us = sum(t[2] for t in totals)
    return dict(
        node_ms_per_req=round(held_us / sum(served) / 1000, 1) if sum(served) else float("nan"),
        max_mean_load=round(max(mean_load) / statistics.fmean(mean_load), 3) if sum(mean_load) else float("nan"),
        max_mean_served=round(max(served) / statistics.fmean(served), 3) if sum(served) else float("nan"),
        over_bound_pct=over_share(samples),
        over_100ms_pct=over_share(means),
        node_503=sum(t[1] for t in totals),
    )


LINE = re.compile(r' shop/n(\d+) .*"GET (\S+) HTTP/')


def moved_pct(logs, ring):
    """Requests (access-log lines with a node) not on their key's first node."""
    placed = moved = 0
    for log in logs:
        with open(log, errors="replace") as f:
            for line in f:
                m = LINE.search(line)
                if not m:
                    continue
                placed += 1
                moved += ring.first(m.group(2).split("?")[0]) != int(m.group(1)) - 1
    return (round(100.0 * moved / placed, 1) if placed else float("nan")), placed


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=int, default=12, help="seconds per run (at most 60)")
    ap.add_argument("--rate", type=float, default=800.0, help="requests/s offered (the nodes serve 2400/s on an idle machine)")
    ap.add_argument("--alpha", type=float, default=1.1, help="Zipf exponent of the keys")
    ap.add_argument("--keys", type=int, default=10000)
    ap.add_argument("--proxies", type=int, default=PROXIES, help="proxies in front of the nodes (1..8)")
    ap.add_argument("--transport", default="shm", choices=["shm", "tcp"])
    ap.add_argument("--bin", default=os.environ.get("RDMALB_TESTBED_BIN"))
    ap.add_argument("--haproxy", default=shutil.which("haproxy"))
    a = ap.parse_args()
    modes = [m for m in a.modes.split(",") if m]
    for m in modes:
        if m not in MODES:
            sys.exit(f"unknown mode {m} (expected one of {', '.join(MODES)})")
    if "haproxy" in modes and not a.haproxy:
        sys.exit("no haproxy on the PATH (give --haproxy, or leave the haproxy mode out)")
    if not 1 <= a.proxies <= 8:
        sys.exit("--proxies 1..8")
    if not (1 <= a.rounds <= 10 and 1 <= a.duration <= 60 and 0 < a.rate <= 5000):
        sys.exit("--rounds 1..10, --duration 1..60 s, --rate above 0 and at most 5000")
    if not a.bin:
        subprocess.run(["cargo", "build", "--release", "--quiet", "--bin", "rdmalb", "--bin", "rdmalb-testbed"],
                       cwd=ROOT, check=True)
        a.bin = os.path.join(ROOT, "target/release/rdmalb-testbed")
    ring = Ring(NODES)
    work = tempfile.mkdtemp(prefix="rdmalb-hash-bound.")
    try:
        trace = os.path.join(work, "keys.txt")
        subprocess.run([a.bin, "trace", "zipf", "--sites", "shop", "--alpha", str(a.alpha), "--files", str(a.keys),
                        "--dynamic-share", "1.0", "--cost", "10ms", "-n", "400000", "--seed", "21", "-o", trace],
                       check=True, stdout=subprocess.DEVNULL)
        start = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%MZ")
        load_start = open("/proc/loadavg").read().split()[:3]
        rows = []
        for r in range(a.rounds):
            for mode in modes[r % len(modes):] + modes[: r % len(modes)]:
                name = f"{mode}-{r}"
                if mode == "haproxy":
                    load, timeline, logs, out = run_haproxy(a, work, name, trace)
                else:
                    load, timeline, logs, out = run_rdmalb(a, work, name, mode, trace)
                t = next(s for s in load["summary"] if s["site"] == "TOTAL")
                moved, placed = moved_pct(logs, ring)
                row = dict(round=r + 1, mode=mode, proxy="haproxy" if mode == "haproxy" else "rdmalb",
                           transport="none (HAProxy reads no windows)" if mode == "haproxy" else a.transport,
                           offered_per_s=round(t["offered_per_s"], 1), served_per_s=round(t["served_per_s"], 1),
                           p50_ms=t["p50_ms"], p99_ms=t["p99_ms"], errors=t["errors"],
                           **balance_figures(timeline), moved_pct=moved, logged=placed)
                rows.append(row)
                print(",".join(str(v) for v in row.values()), flush=True)
                shutil.rmtree(out, ignore_errors=True)
                shutil.rmtree(timeline, ignore_errors=True)
        load_end = open("/proc/loadavg").read().split()[:3]
        base = write_rows("hash_bound", rows)
        keys = ("node_ms_per_req", "served_per_s", "max_mean_load", "max_mean_served", "over_bound_pct", "over_100ms_pct", "p50_ms", "p99_ms", "errors", "node_503", "moved_pct")
        cmd = " ".join(["python3", "bench/hash_bound.py"] + sys.argv[1:])
        md = [f"# Bounded-load hashing with {a.proxies} proxies, {start}", "",
              f"Command: `{cmd}`", "",
              f"{NODES} nodes of 4 slots (2400 requests/s of 10 ms), {a.proxies} proxies, `balance uri`, consistent "
              f"hashing, factor {FACTOR} where bounded; Zipf {a.alpha} over {a.keys} keys; open loop at "
              f"{a.rate:.0f} requests/s; {a.rounds} interleaved rounds of {a.duration} s, medians. Transport: the "
              f"rdmalb proxies read the node windows over {a.transport} (not RDMA); HAProxy reads none. "
              f"Load average {' '.join(load_start)} at start, {' '.join(load_end)} at end: the machine is shared.", "",
              "| mode | proxies | transport | node ms/req | served/s | max/mean load | max/mean served | over bound % | over 100ms % | p50 ms | p99 ms | errors | node 503s | moved % |",
              "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        # A run whose client could not offer the rate (the machine is
        # shared) measured something else: kept in the CSV, not in medians.
        short = [x for x in rows if x["offered_per_s"] < 0.9 * a.rate]
        if short:
            md[-2:-2] = ["Left out of the medians (offered below 90 % of the rate): "
                         + ", ".join("%s round %d (%.0f/s)" % (x["mode"], x["round"], x["offered_per_s"]) for x in short) + ".", ""]
        for mode in modes:
            sel = [x for x in rows if x["mode"] == mode and x not in short] or [x for x in rows if x["mode"] == mode]
            m = {k: statistics.median(x[k] for x in sel) for k in keys}
            md.append(f"| {mode} | {a.proxies} {sel[0]['proxy']} | {sel[0]['transport']} | {m['node_ms_per_req']:.1f} | {m['served_per_s']:.0f} | "
                      f"{m['max_mean_load']:.2f} | {m['max_mean_served']:.2f} | {m['over_bound_pct']:.1f} | {m['over_100ms_pct']:.1f} | "
                      f"{m['p50_ms']:.1f} | {m['p99_ms']:.1f} | {m['errors']:.0f} | {m['node_503']:.0f} | {m['moved_pct']:.1f} |")
        with open(base + ".md", "w") as f:
            f.write("\n".join(md) + "\n")
        print("\n".join(md))
    finally:
        for p in list(CHILDREN):
            stop(p)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
