#!/usr/bin/env python3
"""Routing policies against each other at fixed arrival rates (issue 15).

On the emulated cluster (`rdmalb-testbed cluster`, docs/testbed.md), open
loop at fixed fractions of the cluster's measured capacity, every policy
in every scenario, rounds interleaved with a rotating order, medians.
Reports p50, p99, p99.9 latency of served requests and the goodput within
a latency objective (served requests answered within OBJECTIVE ms, per
second), as tables (Markdown) and curves (PNG, gnuplot). p99 is over the
served requests; "p99 all" over every request with errors (503s from full
node queues) counted as slower than any served one, so a policy cannot
look better by refusing requests ("inf" when more than 1 % failed).
--timeline DIR keeps each node's state every 5 ms (busy, queue, co-tenant
slots, completions, 503s) in DIR/<run>/n<i>.timeline.csv, for diagnosis.

Every run also reports what it cost the machine, because the proxies share
its CPUs with the emulated nodes: "proxy CPU" is the proxies' user+system
CPU per served request while the load ran, and "node ms/req" is the mean
time a served request held a node's worker slot (from the node timelines'
service_us_total), against the 10 ms the trace asks for (the RUBiS-like mix
asks for a mix of costs). A contended machine stretches the nodes' timers:
when one policy's row shows a higher figure than another's, it was
measured on a cluster with less capacity.

    python3 bench/routing/policies.py                      # the default matrix (see --help)
    python3 bench/routing/policies.py --scenarios antagonist --loads 80,90 --rounds 1

Scenarios (each names its proxies; the load client spreads requests over
them, so each proxy sees 1/P of the traffic):
  hetero      6 nodes with 2, 4, 8, 2, 4, 8 slots (capacities 1:2:4), 4 proxies
  antagonist  6 nodes of 4 slots; on each, a co-tenant takes 3 slots for
              exponential periods (mean 1 s on, 3 s off), 4 proxies
  eight       as antagonist, 8 proxies
  rubis       4 nodes of 4 slots, the RUBiS-like mix of fine_coarse.sh
              (cheap 2 ms and expensive 40 ms dynamic requests, static
              files), 4 proxies
Scenarios hetero, antagonist and eight replay dynamic requests of 10 ms.

Capacity: each scenario starts with a closed-loop calibration run
(leastconn, 4 connections per slot) whose served/s is the cluster's
capacity C; the offered loads are the given percentages of C.
--capacity antagonist=1650 gives C instead (the calibration is a 4 s run
on a shared machine: one disturbed run shifts every load of the run).
--calibrations N takes the median of N calibration runs; --same-capacity
gives every scenario with the same nodes (antagonist and eight) the median
of all their calibration runs: their clusters are the same, only the
number of proxies differs.

The transport the proxies read the windows over is named in every row
(shm by default; neither shm nor tcp is RDMA). Results:
bench/results/routing-policies-<stamp>.{md,csv} and one PNG per scenario.
"""

import argparse
import csv
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from cluster_bench import app_weights, write_rows  # noqa: E402 (after the path)

POLICIES = {
    # name: (balance, [proxy.routing] lines)
    "roundrobin": ("roundrobin", ""),
    "leastconn": ("leastconn", ""),
    "random": ("random", ""),
    "peak-ewma": ("peak-ewma", ""),
    # The load-aware policies as a user gets them who writes only
    # `balance = ...`: every default (candidates = 16, so all 6 nodes here).
    "wll-default": ("weighted-least-load", ""),
    "shortest-wait-default": ("shortest-wait", ""),
    "prequal": ("prequal", ""),
    # The variants measured while the defaults were chosen. Before
    # 2026-11-28 the default was candidates = 2, which these name.
    "wll-per-request": ("weighted-least-load", 'load_read = "per-request"\ncandidates = 2'),
    "wll-interval": ("weighted-least-load", 'load_read = "interval:50ms"\ncandidates = 2'),
    # Every node compared, as leastconn does.
    "wll-all": ("weighted-least-load", 'load_read = "per-request"\ncandidates = "all"'),
    "wll-3": ("weighted-least-load", 'load_read = "per-request"\ncandidates = 3'),
    # The window policies score this proxy's requests sent after the block
    # (routing.unseen = "count", the default); these score the blocks as
    # published, as before 2026-11-27 evening.
    "wll-ignore": ("weighted-least-load", 'load_read = "per-request"\ncandidates = 2\nunseen = "ignore"'),
    "wll-all-ignore": ("weighted-least-load", 'load_read = "per-request"\ncandidates = "all"\nunseen = "ignore"'),
    "hot-cold": ("hot-cold", 'load_read = "per-request"\ncandidates = 2'),
    "shortest-wait": ("shortest-wait", 'load_read = "per-request"\ncandidates = 2'),
    # Every node compared (6 here): the expected wait is exact, so a full
    # scan does not herd the way the app index can.
    "shortest-wait-all": ("shortest-wait", 'load_read = "per-request"\ncandidates = "all"'),
    "shortest-wait-all-ignore": ("shortest-wait", 'load_read = "per-request"\ncandidates = "all"\nunseen = "ignore"'),
    "shortest-wait-3": ("shortest-wait", 'load_read = "per-request"\ncandidates = 3'),
    # A node whose published queue (window word 22) is nearly full is ranked
    # last (routing.full_queue = "avoid", the default since 2026-11-27
    # late); these rank it by its wait like any other, as before.
    "shortest-wait-all-fullignore": ("shortest-wait", 'load_read = "per-request"\ncandidates = "all"\nfull_queue = "ignore"'),
    "shortest-wait-fullignore": ("shortest-wait", 'load_read = "per-request"\ncandidates = 2\nfull_queue = "ignore"'),
    # Late binding: each proxy keeps at most 2 requests in flight per node
    # (limits.max_inflight_per_node); beyond, requests wait in the proxy's
    # site queue and go to the first node that frees a slot, so a node
    # whose capacity drops (a co-tenant arriving) holds few committed
    # requests. The peers with the same cap, for a fair comparison.
    "shortest-wait-all-cap2": ("shortest-wait", 'load_read = "per-request"\ncandidates = "all"', "max_inflight_per_node = 2"),
    "peak-ewma-cap2": ("peak-ewma", "", "max_inflight_per_node = 2"),
    "leastconn-cap2": ("leastconn", "", "max_inflight_per_node = 2"),
    # The drain rates' time constant (default 50ms) shorter and longer.
    "shortest-wait-all-20ms": ("shortest-wait", 'load_read = "per-request"\ncandidates = "all"\ndrain_window = "20ms"'),
    "shortest-wait-all-200ms": ("shortest-wait", 'load_read = "per-request"\ncandidates = "all"\ndrain_window = "200ms"'),
}

# What a user chooses among: the baselines and the load-aware policies
# with their defaults. The other entries are the experiments behind them.
RECOMMENDED = ["roundrobin", "leastconn", "random", "peak-ewma", "wll-default", "shortest-wait-default"]

SCENARIOS = {
    "hetero": dict(nodes=6, proxies=4, node_slots=[2, 4, 8], node="", trace="dynamic"),
    "antagonist": dict(
        nodes=6,
        proxies=4,
        node_slots=[],
        node='antagonist_slots = 3\nantagonist_on = "1s"\nantagonist_off = "3s"\n',
        trace="dynamic",
    ),
    "eight": dict(
        nodes=6,
        proxies=8,
        node_slots=[],
        node='antagonist_slots = 3\nantagonist_on = "1s"\nantagonist_off = "3s"\n',
        trace="dynamic",
    ),
    "rubis": dict(nodes=4, proxies=4, node_slots=[], node="", trace="rubis"),
}


def sh(args, **kw):
    return subprocess.run(args, check=True, **kw)


def traces(bin_, work):
    """The two trace files: 10 ms dynamic requests, and the RUBiS-like mix."""
    dyn = os.path.join(work, "dynamic.txt")
    sh([bin_, "trace", "zipf", "--sites", "shop", "--alpha", "0.5", "--files", "1000",
        "--dynamic-share", "1.0", "--cost", "10ms", "-n", "400000", "--seed", "21", "-o", dyn],
       stdout=subprocess.DEVNULL)
    cheap, dear = os.path.join(work, "cheap.txt"), os.path.join(work, "dear.txt")
    for out, cost, seed in ((cheap, "2ms", "11"), (dear, "40ms", "12")):
        sh([bin_, "trace", "zipf", "--sites", "shop", "--alpha", "0.5", "--files", "1000",
            "--dynamic-share", "0.3", "--cost", cost, "-n", "200000", "--seed", seed, "-o", out],
           stdout=subprocess.DEVNULL)
    mix = os.path.join(work, "rubis.txt")
    with open(cheap) as a, open(dear) as b, open(mix, "w") as out:
        out.write("# RUBiS-like mix: cheap (2ms) and expensive (40ms) zipf traces interleaved\n")
        la = [l for l in a if not l.startswith("#")]
        lb = [l for l in b if not l.startswith("#")]
        for x, y in zip(la, lb):
            out.write(x)
            out.write(y)
    return {"dynamic": dyn, "rubis": mix}


def spec(scenario, policy, transport, duration, load, trace_file, candidates, inflight=0.2, timeline=None):
    s = SCENARIOS[scenario]
    balance, routing, *limits = POLICIES[policy]
    limits = f"\n[proxy.limits]\n{limits[0]}\n" if limits else ""
    slots = s["node_slots"]
    top = f"node_slots = {slots}\n" if slots else ""
    return f"""sites = ["shop"]
split = "{s['nodes']}"
proxies = {s['proxies']}
balance = "{balance}"
transport = "{transport}"
duration = "{duration}s"
trace_file = "{trace_file}"
seed = 7
{top}
[node]
slots = 4
queue = 64
{s['node']}{f'timeline_dir = "{timeline}"' if timeline else ""}
[load]
{load}
interval = "1s"
timeout = "10s"

{app_weights(inflight)}
[proxy.routing]
{"" if candidates is None or "candidates" in routing else f"candidates = {candidates}"}
{routing}
{limits}"""


def run(bin_, work, name, text):
    path = os.path.join(work, name + ".toml")
    out = os.path.join(work, name)
    with open(path, "w") as f:
        f.write(text)
    # A run that fails is tried once more: the cluster picks free loopback
    # ports before binding them, and another program may take one between.
    for attempt in (1, 2):
        with open(out + ".log", "w") as log:
            r = subprocess.run([bin_, "cluster", "-c", path, "-o", out], stdout=log, stderr=log)
        if r.returncode == 0:
            break
        tail = open(out + ".log").read()[-3000:]
        shutil.rmtree(out, ignore_errors=True)
        if attempt == 2:
            sys.stderr.write(tail)
            sys.exit(f"cluster run {name} failed twice")
        print(f"cluster run {name} failed; once more: {tail.strip().splitlines()[-1] if tail.strip() else ''}", file=sys.stderr)
    d = json.load(open(os.path.join(out, "load.json")))
    t = next(s for s in d["summary"] if s["site"] == "TOTAL")
    d["cpu"] = json.load(open(os.path.join(out, "cluster.json"))).get("cpu", {})
    shutil.rmtree(out, ignore_errors=True)
    return d, t


def node_ms_per_request(timeline):
    """The mean time a served request held a node's worker slot, ms, over
    every node of a run (the last line of each n<i>.timeline.csv:
    service_us_total / requests_total); None without completions."""
    held_us = done = 0
    for name in sorted(os.listdir(timeline)):
        if not name.endswith(".timeline.csv"):
            continue
        with open(os.path.join(timeline, name)) as f:
            rows = list(csv.DictReader(f))
        if rows and "service_us_total" not in rows[-1]:
            return None  # a testbed binary from before 2026-11-28: no figure
        if rows:
            held_us += int(rows[-1]["service_us_total"])
            done += int(rows[-1]["requests_total"])
    return round(held_us / done / 1000, 2) if done else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenarios", default="antagonist,eight,hetero,rubis")
    ap.add_argument("--policies", default=",".join(RECOMMENDED),
                    help=f"default: the baselines and the defaults ({','.join(RECOMMENDED)}); any of {','.join(POLICIES)}")
    ap.add_argument("--loads", default="50,70,80,90,95", help="offered load, %% of measured capacity")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=int, default=8, help="seconds per run")
    ap.add_argument("--objective", type=int, default=100, help="latency objective, ms (one of 10,25,50,100,250,500,1000,2500)")
    ap.add_argument("--transport", default="shm", choices=["shm", "tcp"])
    ap.add_argument("--candidates", default=None, help="routing.candidates of every policy that names none (a number or '\"all\"'); unset, such a policy runs with the proxy's default, as a user who writes only `balance` gets it")
    ap.add_argument("--inflight-weight", type=float, default=0.2, help="[weights] inflight of weighted-least-load")
    ap.add_argument("--bin", default=os.environ.get("RDMALB_TESTBED_BIN"))
    ap.add_argument("--calibrations", type=int, default=1, help="calibration runs per scenario; C is their median")
    ap.add_argument("--same-capacity", action="store_true", help="antagonist and eight (the same nodes) share one C: the median of both scenarios' calibration runs")
    ap.add_argument("--capacity", default="", help="scenario=served/s,...: use this capacity instead of calibrating (e.g. antagonist=1650)")
    ap.add_argument("--timeline", help="a folder: each run's nodes write their state every 5 ms into DIR/<run>/")
    a = ap.parse_args()
    scenarios = [s for s in a.scenarios.split(",") if s]
    policies = [p for p in a.policies.split(",") if p]
    loads = [int(x) for x in a.loads.split(",") if x]
    for s in scenarios:
        if s not in SCENARIOS:
            sys.exit(f"unknown scenario {s} (expected one of {', '.join(SCENARIOS)})")
    for p in policies:
        if p not in POLICIES:
            sys.exit(f"unknown policy {p} (expected one of {', '.join(POLICIES)})")
    if a.calibrations < 1:
        sys.exit("--calibrations must be 1 or more")
    if a.objective not in (10, 25, 50, 100, 250, 500, 1000, 2500):
        sys.exit("--objective must be one of 10,25,50,100,250,500,1000,2500")
    bin_ = a.bin
    if not bin_:
        sh(["cargo", "build", "--release", "--quiet", "--bin", "rdmalb", "--bin", "rdmalb-testbed"], cwd=ROOT)
        bin_ = os.path.join(ROOT, "target/release/rdmalb-testbed")
    work = tempfile.mkdtemp(prefix="rdmalb-policies.")
    try:
        files = traces(bin_, work)
        start = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%MZ")
        load_start = open("/proc/loadavg").read().split()[:3]
        rows = []
        capacity = {}
        calibrated = {}
        fixed = dict((k, float(v)) for k, v in (x.split("=") for x in a.capacity.split(",") if x))
        for s in scenarios:
            sc = SCENARIOS[s]
            if s in fixed:
                capacity[s] = fixed[s]
                print(f"{s}: capacity {capacity[s]:.0f} served/s (given)", flush=True)
                continue
            slots = sum((sc["node_slots"] or [4])[i % len(sc["node_slots"] or [4])] for i in range(sc["nodes"]))
            text = spec(s, "leastconn", a.transport, 4, f"connections = {4 * slots}", files[sc["trace"]], a.candidates)
            served = []
            for k in range(a.calibrations):
                _, t = run(bin_, work, f"calibrate-{s}-{k}", text)
                served.append(t["served_per_s"])
            calibrated[s] = served
            capacity[s] = statistics.median(served)
            print(f"{s}: capacity {capacity[s]:.0f} served/s (closed loop, leastconn; runs {', '.join(f'{x:.0f}' for x in served)})", flush=True)
        same = [s for s in ("antagonist", "eight") if s in calibrated]
        if a.same_capacity and len(same) == 2:
            c = statistics.median(calibrated["antagonist"] + calibrated["eight"])
            for s in same:
                capacity[s] = c
            print(f"antagonist and eight: capacity {c:.0f} served/s (the median of both scenarios' calibration runs)", flush=True)
        for r in range(a.rounds):
            for s in scenarios:
                order = policies[r % len(policies):] + policies[: r % len(policies)]
                for p in order:
                    for pct in loads:
                        rate = capacity[s] * pct / 100.0
                        name = f"{s}-{p}-{pct}-{r}"
                        tl = os.path.abspath(os.path.join(a.timeline or os.path.join(work, "timelines"), name))
                        os.makedirs(tl, exist_ok=True)
                        text = spec(s, p, a.transport, a.duration, f"rate = {rate:.1f}", files[SCENARIOS[s]["trace"]], a.candidates, a.inflight_weight, tl)
                        d, t = run(bin_, work, name, text)
                        within = t["served_within_ms"].get(str(a.objective), 0)
                        row = dict(
                            round=r + 1, scenario=s, policy=p, transport=a.transport, load_pct=pct,
                            offered_per_s=round(t["offered_per_s"], 1), served_per_s=round(t["served_per_s"], 1),
                            goodput_per_s=round(within / d["elapsed_s"], 1) if d["elapsed_s"] else 0,
                            p50_ms=t["p50_ms"], p99_ms=t["p99_ms"], p999_ms=t["p999_ms"], errors=t["errors"],
                            p99_all_ms=float("inf") if t.get("p99_all_ms", 0) is None else t.get("p99_all_ms", float("nan")),
                            proxy_cpu_us_per_req=round(d["cpu"].get("proxies_s", float("nan")) * 1e6 / max(1, t["served_per_s"] * d["elapsed_s"]), 1),
                            node_ms_per_req=node_ms_per_request(tl),
                        )
                        if not a.timeline:
                            shutil.rmtree(tl, ignore_errors=True)
                        rows.append(row)
                        print(",".join(str(v) for v in row.values()), flush=True)
        load_end = open("/proc/loadavg").read().split()[:3]
        base = write_rows("routing-policies", rows)
        med = {}
        for key in {(x["scenario"], x["policy"], x["load_pct"]) for x in rows}:
            sel = [x for x in rows if (x["scenario"], x["policy"], x["load_pct"]) == key]
            med[key] = {k: statistics.median(x[k] for x in sel) for k in ("served_per_s", "goodput_per_s", "p50_ms", "p99_ms", "p999_ms", "errors", "p99_all_ms", "proxy_cpu_us_per_req")}
            nms = [x["node_ms_per_req"] for x in sel if x["node_ms_per_req"] is not None]
            med[key]["node_ms_per_req"] = statistics.median(nms) if nms else float("nan")
        cmd = " ".join(["python3", "bench/routing/policies.py"] + sys.argv[1:])
        md = [f"# Routing policies at fixed arrival rates, {start}", "",
              f"Command: `{cmd}`", "",
              f"Transport: {a.transport} (the proxies read the node windows over {a.transport}; not RDMA). "
              f"{a.rounds} interleaved rounds of {a.duration} s, medians; goodput = served within {a.objective} ms, per second. "
              f"Load average {' '.join(load_start)} at start, {' '.join(load_end)} at end: the machine is shared.", ""]
        for s in scenarios:
            sc = SCENARIOS[s]
            md += [f"## {s} ({sc['nodes']} nodes, {sc['proxies']} proxies; capacity {capacity[s]:.0f}/s)", "",
                   "| policy | load % | served/s | goodput/s | p50 ms | p99 ms | p99.9 ms | errors | p99 all ms | proxy CPU µs/req | node ms/req |",
                   "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
            for p in policies:
                for pct in loads:
                    m = med[(s, p, pct)]
                    md.append(f"| {p} | {pct} | {m['served_per_s']:.0f} | {m['goodput_per_s']:.0f} | {m['p50_ms']:.1f} | {m['p99_ms']:.1f} | {m['p999_ms']:.1f} | {m['errors']:.0f} | {m['p99_all_ms']:.1f} | {m['proxy_cpu_us_per_req']:.0f} | {m['node_ms_per_req']:.2f} |")
            md.append("")
            if shutil.which("gnuplot"):
                dat = f"{base}-{s}.dat"
                with open(dat, "w") as f:
                    for i, p in enumerate(policies):
                        f.write(f'"{p}"\n')
                        for pct in loads:
                            f.write(f"{pct} {med[(s, p, pct)]['p99_ms']}\n")
                        f.write("\n\n")
                png = f"{base}-{s}.png"
                plot = (f'set terminal png size 900,560; set output "{png}"; '
                        f'set title "{s}: p99 latency vs offered load ({a.transport})"; '
                        'set xlabel "offered load, % of capacity"; set ylabel "p99 ms"; set logscale y; set key left top; '
                        f'plot for [i=0:{len(policies) - 1}] "{dat}" index i using 1:2 with linespoints title columnheader(1)')
                subprocess.run(["gnuplot", "-e", plot], check=False)
                os.remove(dat)
                md += [f"![{s}]({os.path.basename(png)})", ""]
        with open(base + ".md", "w") as f:
            f.write("\n".join(md) + "\n")
        print("\n".join(md))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
