#!/usr/bin/env python3
"""Sticky sessions under an antagonist (issue 30): HAProxy-like stickiness
against rdmalb's load bound.

On the emulated cluster (`rdmalb-testbed cluster`, docs/testbed.md), the
antagonist scenario of bench/routing/policies.py: 6 nodes of 4 slots (queue
64), on each a co-tenant that takes 3 slots for exponential periods (mean
1 s on, 3 s off), 4 proxies, 10 ms dynamic requests, open loop at LOAD % of
the cluster's calibrated capacity. The load client is K sticky clients
(default 200, `[sticky] clients`): request k is sent by client k mod K with
its cookie jar (`Cookie: SRVID=n3` once it got one) and keeps the
`Set-Cookie` it gets (crates/testbed/src/load/sticky.rs). Every mode
balances with `weighted-least-load` and its defaults, so the modes differ
only in stickiness:

  haproxy-like  [site.sticky] cookie = "SRVID" (insert), no load bound: a
                session stays on its node while the node is up, as
                HAProxy's `cookie SRVID insert` (rdmalb's cookie handling
                is checked against the real HAProxy in
                tests/import/rules/sticky-insert.cfg)
  bound         the same with the load bound, max_load = 0.9, and a 2 s
                hold (max_load_for = "2s", the default until 2026-11-28)
  bound-1s, bound-500ms, bound-250ms
                max_load = 0.9 with a shorter hold (max_load_for = 1 s,
                500 ms, 250 ms: the co-tenant's mean period and below;
                250 ms is the default, the measured winner)
  no-sticky     no cookie: every request balanced (the reference)

Real HAProxy is not run: the emulated cluster starts rdmalb proxies only,
so rdmalb without a bound stands in for HAProxy's behaviour.

Per mode, medians over interleaved rounds (rotating order): served/s,
p50 / p99 / p99.9 of served requests, errors, p99 over all requests
(errors ranked last; inf above 1 % errors), session moves seen by the
clients, clients that moved, moves counted by the proxies
(`rdmalb_sticky_moves_total`, summed over the 4 proxies, by reason), and
the sessions per node at the end (max and min over the 6 nodes).

    python3 bench/sticky.py                           # 3 rounds x 15 s, load 85 %
    python3 bench/sticky.py --rounds 1 --duration 6 --capacity 1650

The transport the proxies read the windows over is named in every row
(shm by default; not RDMA). Results: bench/results/sticky-<stamp>.{md,csv}.
Every cluster run is bounded (duration + 120 s) and started in its own
process group; on a timeout or an interrupt that group (the cluster and
the nodes, sidecars and proxies it started) gets SIGTERM, then SIGKILL.
"""

import argparse
import datetime
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster_bench import app_weights, write_rows  # noqa: E402 (after the path)

COOKIE = "SRVID"
MODES = {
    # name: [sticky] lines (None: no stickiness)
    "haproxy-like": "",
    "bound": 'max_load = 0.9\nmax_load_for = "2s"\n',
    "bound-1s": 'max_load = 0.9\nmax_load_for = "1s"\n',
    "bound-500ms": 'max_load = 0.9\nmax_load_for = "500ms"\n',
    "bound-250ms": 'max_load = 0.9\nmax_load_for = "250ms"\n',
    "no-sticky": None,
}

# The process group of the cluster run in progress, for the clean-up.
RUNNING = []


def spec(mode, transport, duration, load, trace_file, clients):
    sticky = MODES[mode]
    sticky = "" if sticky is None else f'\n[sticky]\ncookie = "{COOKIE}"\nclients = {clients}\n{sticky}'
    return f"""sites = ["shop"]
split = "6"
proxies = 4
balance = "weighted-least-load"
transport = "{transport}"
duration = "{duration}s"
trace_file = "{trace_file}"
seed = 7

[node]
slots = 4
queue = 64
antagonist_slots = 3
antagonist_on = "1s"
antagonist_off = "3s"

[load]
{load}
interval = "1s"
timeout = "10s"

{app_weights(0.2)}{sticky}"""


def stop(proc):
    """SIGTERM to the run's process group, then SIGKILL after 15 s."""
    for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 5)):
        if proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            pass


def cluster(bin_, path, out, log, bound_s):
    proc = subprocess.Popen([bin_, "cluster", "-c", path, "-o", out], stdout=log, stderr=log,
                            start_new_session=True)
    RUNNING.append(proc)
    try:
        return proc.wait(timeout=bound_s)
    except subprocess.TimeoutExpired:
        stop(proc)
        return None
    finally:
        stop(proc)
        RUNNING.remove(proc)


def run(bin_, work, name, text, bound_s):
    path = os.path.join(work, name + ".toml")
    out = os.path.join(work, name)
    with open(path, "w") as f:
        f.write(text)
    # Tried once more on failure: the cluster picks free loopback ports
    # before binding them, and another program may take one between.
    for attempt in (1, 2):
        with open(out + ".log", "w") as log:
            rc = cluster(bin_, path, out, log, bound_s)
        if rc == 0:
            break
        tail = open(out + ".log").read()[-3000:]
        shutil.rmtree(out, ignore_errors=True)
        if attempt == 2:
            sys.stderr.write(tail)
            sys.exit(f"cluster run {name} failed twice (exit {rc})")
        print(f"cluster run {name} failed (exit {rc}); once more", file=sys.stderr)
    d = json.load(open(os.path.join(out, "load.json")))
    t = next(s for s in d["summary"] if s["site"] == "TOTAL")
    sticky_path = os.path.join(out, "sticky.json")
    st = json.load(open(sticky_path)) if os.path.exists(sticky_path) else None
    shutil.rmtree(out, ignore_errors=True)
    return d, t, st


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--modes", default=",".join(MODES), help=f"any of {','.join(MODES)}")
    ap.add_argument("--load", type=int, default=85, help="offered load, %% of calibrated capacity")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=int, default=15, help="seconds per run")
    ap.add_argument("--clients", type=int, default=200, help="sticky clients")
    ap.add_argument("--transport", default="shm", choices=["shm", "tcp"])
    ap.add_argument("--capacity", type=float, help="served/s: use this capacity instead of calibrating")
    ap.add_argument("--calibrations", type=int, default=1, help="calibration runs; C is their median")
    ap.add_argument("--bin", default=os.environ.get("RDMALB_TESTBED_BIN"))
    a = ap.parse_args()
    modes = [m for m in a.modes.split(",") if m]
    for m in modes:
        if m not in MODES:
            sys.exit(f"unknown mode {m} (expected one of {', '.join(MODES)})")
    if not (1 <= a.rounds <= 20 and 2 <= a.duration <= 300 and 1 <= a.clients <= 100000 and 1 <= a.load <= 200):
        sys.exit("--rounds 1..20, --duration 2..300, --clients 1..100000, --load 1..200")
    bin_ = a.bin
    if not bin_:
        subprocess.run(["cargo", "build", "--release", "--quiet", "--bin", "rdmalb", "--bin", "rdmalb-testbed"],
                       cwd=ROOT, check=True)
        bin_ = os.path.join(ROOT, "target/release/rdmalb-testbed")
    bound_s = a.duration + 120
    work = tempfile.mkdtemp(prefix="rdmalb-sticky.")
    try:
        trace = os.path.join(work, "dynamic.txt")
        subprocess.run([bin_, "trace", "zipf", "--sites", "shop", "--alpha", "0.5", "--files", "1000",
                        "--dynamic-share", "1.0", "--cost", "10ms", "-n", "400000", "--seed", "21", "-o", trace],
                       stdout=subprocess.DEVNULL, check=True)
        start = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%MZ")
        load_start = open("/proc/loadavg").read().split()[:3]
        if a.capacity:
            capacity, how = a.capacity, "given"
        else:
            # As policies.py: closed loop, leastconn, 4 connections per slot.
            served = []
            for k in range(a.calibrations):
                text = spec("no-sticky", a.transport, 4, "connections = 96", trace, a.clients)
                text = text.replace('balance = "weighted-least-load"', 'balance = "leastconn"')
                _, t, _ = run(bin_, work, f"calibrate-{k}", text, 4 + 120)
                served.append(t["served_per_s"])
            capacity = statistics.median(served)
            how = f"closed loop, leastconn; runs {', '.join(f'{x:.0f}' for x in served)}"
        print(f"capacity {capacity:.0f} served/s ({how})", flush=True)
        rate = capacity * a.load / 100.0
        rows = []
        for r in range(a.rounds):
            order = modes[r % len(modes):] + modes[: r % len(modes)]
            for m in order:
                text = spec(m, a.transport, a.duration, f"rate = {rate:.1f}", trace, a.clients)
                d, t, st = run(bin_, work, f"{m}-{r}", text, bound_s)
                per_node = {k: v for k, v in (st or {}).get("clients", {}).get("sessions_per_node", {}).items() if k}
                pm = (st or {}).get("proxy_moves", {})
                row = dict(
                    round=r + 1, mode=m, transport=a.transport, load_pct=a.load,
                    offered_per_s=round(t["offered_per_s"], 1), served_per_s=round(t["served_per_s"], 1),
                    p50_ms=t["p50_ms"], p99_ms=t["p99_ms"], p999_ms=t["p999_ms"], errors=t["errors"],
                    p99_all_ms=float("inf") if t.get("p99_all_ms") is None else t["p99_all_ms"],
                    client_moves=st["clients"]["moves"] if st else "",
                    clients_moved=st["clients"]["clients_moved"] if st else "",
                    proxy_moves=sum(pm.values()) if st else "",
                    proxy_moves_load=pm.get("load", 0) if st else "",
                    proxy_moves_down=pm.get("down", 0) if st else "",
                    proxies_unread=st["proxies_unread"] if st else "",
                    sessions_max=max(per_node.values(), default=0) if st else "",
                    sessions_min=min(per_node.get(f"n{i}", 0) for i in range(1, 7)) if st else "",
                    sessions_per_node=" ".join(f"{k}:{v}" for k, v in sorted(per_node.items())) if st else "",
                )
                rows.append(row)
                print(",".join(str(v) for v in row.values()), flush=True)
        load_end = open("/proc/loadavg").read().split()[:3]
        base = write_rows("sticky", rows)
        cmd = " ".join(["python3", "bench/sticky.py"] + sys.argv[1:])
        md = [f"# Sticky sessions under an antagonist, {start}", "",
              f"Command: `{cmd}`", "",
              f"Transport: {a.transport} (the proxies read the node windows over {a.transport}; not RDMA). "
              f"Antagonist scenario (6 nodes of 4 slots, a co-tenant taking 3 slots 1 s on / 3 s off on each, 4 proxies), "
              f"weighted-least-load, {a.clients} sticky clients, open loop at {a.load} % of C = {capacity:.0f} served/s "
              f"({how}). {a.rounds} interleaved rounds of {a.duration} s, medians. "
              f"Load average {' '.join(load_start)} at start, {' '.join(load_end)} at end: the machine is shared.", "",
              "| mode | transport | served/s | p50 ms | p99 ms | p99.9 ms | errors | p99 all ms | client moves | clients moved | proxy moves (load / down) | sessions per node max / min |",
              "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]

        def med(sel, k):
            v = [x[k] for x in sel if x[k] != ""]
            return statistics.median(v) if v else None

        for m in modes:
            sel = [x for x in rows if x["mode"] == m]
            f = {k: med(sel, k) for k in ("served_per_s", "p50_ms", "p99_ms", "p999_ms", "errors", "p99_all_ms",
                                          "client_moves", "clients_moved", "proxy_moves", "proxy_moves_load",
                                          "proxy_moves_down", "sessions_max", "sessions_min")}
            if f["client_moves"] is None:
                moves = ["–", "–", "–", "–"]
            else:
                moves = [f"{f['client_moves']:.0f}", f"{f['clients_moved']:.0f}",
                         f"{f['proxy_moves']:.0f} ({f['proxy_moves_load']:.0f} / {f['proxy_moves_down']:.0f})",
                         f"{f['sessions_max']:.0f} / {f['sessions_min']:.0f}"]
            md.append(
                f"| {m} | {a.transport} | {f['served_per_s']:.0f} | {f['p50_ms']:.1f} | {f['p99_ms']:.1f} | {f['p999_ms']:.1f} "
                f"| {f['errors']:.0f} | {f['p99_all_ms']:.1f} | " + " | ".join(moves) + " |")
        md += ["", "Per run (sessions per node at the end of the run, from the clients' jars):", "",
               "| round | mode | p99 ms | errors | client moves | proxy moves | sessions per node |",
               "|---:|---|---:|---:|---:|---:|---|"]
        for x in rows:
            md.append(f"| {x['round']} | {x['mode']} | {x['p99_ms']:.1f} | {x['errors']} | {x['client_moves']} "
                      f"| {x['proxy_moves']} | {x['sessions_per_node']} |")
        with open(base + ".md", "w") as f:
            f.write("\n".join(md) + "\n")
        print("\n".join(md))
    finally:
        for proc in list(RUNNING):
            stop(proc)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)
