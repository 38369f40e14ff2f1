#!/usr/bin/env python3
"""Summarises the node timelines of routing runs (policies.py --timeline DIR).

    python3 bench/routing/timeline.py DIR/antagonist-shortest-wait-all-95-0 [...]

Each node's `n<i>.timeline.csv` has a line every 5 ms: ms since start,
busy slots (the co-tenant's included), queue, co-tenant slots (held),
completions, 503s, microseconds served requests held a slot. Per run it prints, per node and in total: the share of
samples with the co-tenant on, the mean and largest queue with it on and
off, and the 503s by the node's state in the sample that counted them
(co-tenant on or off, ms since the co-tenant's last change, the queue of
the sample before) and how many co-tenants were on in the whole cluster
at that moment. "caught" is the requests queued in a node when its
co-tenant arrived (the queue of the first sample with it on): they were
placed for a node draining 4 slots and drain with 1.
"""

import csv
import glob
import os
import statistics
import sys


def load(path):
    with open(path) as f:
        return [{k: float(v) for k, v in r.items()} for r in csv.DictReader(f)]


def summarise(run):
    nodes = {}
    for p in sorted(glob.glob(os.path.join(run, "n*.timeline.csv"))):
        rows = load(p)
        if rows:
            nodes[os.path.basename(p).split(".")[0]] = rows
    if not nodes:
        print(f"{run}: no timelines")
        return
    # Co-tenants on in the cluster at a time (by the nearest sample of each node).
    def on_at(ms):
        n = 0
        for rows in nodes.values():
            i = min(len(rows) - 1, max(0, int(ms / 5)))
            n += rows[i]["held"] > 0
        return n

    print(f"## {os.path.basename(run)}")
    print("| node | caught | co-tenant on | queue on: mean / max | queue off: mean / max | 503s on | 503s off | 503s: ms since change (median) | 503s: cluster co-tenants on (median) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    tot = dict(on=0, off=0, caught=0, done=0)
    for name, rows in nodes.items():
        q_on = [r["queue"] for r in rows if r["held"] > 0]
        q_off = [r["queue"] for r in rows if r["held"] == 0]
        rej_on = rej_off = 0
        since, cluster = [], []
        changed = 0.0
        caught = 0
        for a, b in zip(rows, rows[1:]):
            if (b["held"] > 0) != (a["held"] > 0):
                changed = b["ms"]
                if b["held"] > 0:
                    caught += b["queue"]
            d = b["rejected_total"] - a["rejected_total"]
            if d > 0:
                if b["held"] > 0:
                    rej_on += d
                else:
                    rej_off += d
                since += [b["ms"] - changed] * int(d)
                cluster += [on_at(b["ms"])] * int(d)
        tot["on"] += rej_on
        tot["off"] += rej_off
        tot["caught"] += caught
        tot["done"] += rows[-1]["requests_total"] - rows[0]["requests_total"]
        share = len(q_on) / len(rows)
        fmt = lambda q: f"{statistics.mean(q):.1f} / {max(q):.0f}" if q else "–"
        med = lambda x: f"{statistics.median(x):.0f}" if x else "–"
        print(f"| {name} | {caught:.0f} | {share:.0%} | {fmt(q_on)} | {fmt(q_off)} | {rej_on:.0f} | {rej_off:.0f} | {med(since)} | {med(cluster)} |")
    print(f"\n503s with the node's co-tenant on: {tot['on']:.0f}, off: {tot['off']:.0f}; "
          f"requests caught in a queue by a co-tenant's arrival: {tot['caught']:.0f} of {tot['done']:.0f} completed "
          f"({tot['caught'] / max(tot['done'], 1):.2%})\n")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for run in sys.argv[1:]:
        summarise(run)
