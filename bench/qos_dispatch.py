#!/usr/bin/env python3
"""VirtualClock vs FIFO dispatch in the proxy's admission queue ([qos]).

Two sites on the emulated cluster (`rdmalb-testbed cluster`: real testsrv nodes,
sidecars and proxy; shm windows, NOT RDMA), 2 nodes each, nodes never move
(rigid). The proxy forwards at most `qos.max_inflight` requests at once:
that cap is the shared bottleneck (it stands for the proxy's own capacity,
or a pool both sites share), well below what the four nodes could serve.
An open-loop client offers a fixed mix of gold (guarantee G, priority 10)
and bronze (best effort, floor 10/s) requests. Per cell: served/s of each
site, gold's QoS-meeting % (seed 003's metric) and the 503s the queue shed.

Cells: no cap (the nodes are the only limit), the cap with FIFO dispatch
(one shared queue: slots go by arrival, so by demand), the cap with
VirtualClock dispatch (slots in proportion to guarantee : floor, a site
below its share served first).

    python3 bench/qos_dispatch.py
    python3 bench/qos_dispatch.py --plot bench/results/qos-dispatch-STAMP   # redraw a PNG

Environment as bench/reconfig_experiments.py: BIN, RUNS (default 3,
medians reported), OUT (default bench/results), SCALE (run length factor).
"""

import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reconfig_experiments as rx  # noqa: E402  (run_cluster, qos_percent, gnuplot)

RATE = 1200.0          # offered requests/s, both sites together
CAP = 6                # qos.max_inflight in the capped cells
GUARANTEE = 300        # gold's guarantee, requests/s
SECS = 10              # run length
# (label, gold share of the offered requests)
SCENARIOS = [("gold asks 400/s, bronze 800/s", 1 / 3),
             ("gold asks 800/s, bronze 400/s", 2 / 3)]
# A short queue per site: excess demand is shed (503) instead of piling up
# in the client's in-flight budget, where queued bronze requests would hold
# back the client's gold ones (one load generator plays every client).
QUEUE = 128
CELLS = [("no cap", ""),
         ("cap, fifo", f"[proxy.qos]\nmax_inflight = {CAP}\nmax_queue = {QUEUE}\ndispatch = \"fifo\"\n"),
         ("cap, virtualclock",
          f"[proxy.qos]\nmax_inflight = {CAP}\nmax_queue = {QUEUE}\ndispatch = \"virtualclock\"\n")]


def write_trace(path, gold_share, n):
    """Deterministic interleaving: request i is gold when the running gold
    count falls behind gold_share * i (no randomness between cells)."""
    with open(path, "w") as f:
        f.write(f"# qos_dispatch mix gold_share={gold_share:.3f}\n# format: <site><TAB><path>\n")
        gold = 0
        for i in range(1, n + 1):
            if gold < gold_share * i:
                gold += 1
                f.write("gold\t/static/1k\n")
            else:
                f.write("bronze\t/static/1k\n")


def site_rates(rows, site):
    """Mean served/s and total 503s of `site` (the last, partial interval
    left out of the rate)."""
    mine = [r for r in rows if r["site"] == site]
    full = mine[:-1] or mine
    served = statistics.mean(float(r["served_per_s"]) for r in full) if full else 0.0
    shed = 0
    for r in mine:
        for kv in filter(None, (r.get("error_kinds") or "").split(";")):
            kind, _, count = kv.partition(":")
            if kind == "503":
                shed += int(count)
    return served, shed


def main():
    results = []  # (scenario, cell, gold/s, bronze/s, gold qos %, 503s)
    with tempfile.TemporaryDirectory(prefix="rdmalb-qos-") as d:
        for label, share in SCENARIOS:
            trace = os.path.join(d, f"mix-{share:.3f}.txt")
            write_trace(trace, share, int(RATE * SECS * rx.SCALE * 1.5) + 1000)
            for cell, keys in CELLS:
                runs = []
                for r in range(rx.RUNS):
                    spec = (f"sites = [\"gold\", \"bronze\"]\nsplit = \"2:2\"\nmode = \"rigid\"\n"
                            f"duration = \"{SECS * rx.SCALE:.1f}s\"\ntrace_file = \"{trace}\"\n"
                            f"{rx.NODE}[load]\nrate = {RATE}\nmax_inflight = 4000\ninterval = \"500ms\"\ntimeout = \"10s\"\n"
                            f"[guarantee]\ngold = {GUARANTEE}\n[priority]\ngold = 10\n"
                            f"[proxy.timeouts]\nqueue = \"2s\"\n{keys}")
                    _, rows = rx.run_cluster(spec, f"{label}: {cell} run {r + 1}")
                    g, g503 = site_rates(rows, "gold")
                    b, b503 = site_rates(rows, "bronze")
                    runs.append((g, b, rx.qos_percent(rows, "gold", GUARANTEE), g503 + b503))
                results.append((label, cell) + tuple(rx.med([x[i] for x in runs]) for i in range(4)))
    os.makedirs(rx.OUT, exist_ok=True)
    base = os.path.join(rx.OUT, f"qos-dispatch-{rx.stamp()}")
    with open(base + ".csv", "w") as f:
        f.write("scenario,cell,gold_served_per_s,bronze_served_per_s,gold_qos_meeting_percent,shed_503\n")
        for (s, c, g, b, q, e) in results:
            f.write(f"{s},{c},{g:.1f},{b:.1f},{'' if q is None else f'{q:.1f}'},{e:.0f}\n")
    lines = [f"\nadmission queue: qos.max_inflight = {CAP} shared by 2 sites (2 testsrv nodes each, rigid), "
             f"open loop {RATE:.0f}/s, gold guarantee {GUARANTEE}/s, bronze best effort (floor 10/s);\n"
             f"emulated nodes, shm windows (not RDMA); median of {rx.RUNS} runs"]
    for label, _ in SCENARIOS:
        lines.append(f"\n{label}")
        lines.append(f"{'':>18} {'gold/s':>8} {'bronze/s':>9} {'gold QoS met':>13} {'503s':>6}")
        for (s, c, g, b, q, e) in results:
            if s == label:
                qs = "n/a" if q is None else f"{q:.1f}%"
                lines.append(f"{c:>18} {g:>8.0f} {b:>9.0f} {qs:>13} {e:>6.0f}")
    lines.append("seed 004 Fig. 5: at high load VirtualClock (QoS VIA) keeps the QoS channels' jitter fraction "
                 "below FCFS's (PVIA), at a small latency cost to the best-effort channel; docs/operations.md: "
                 "Vtick = 1/guarantee, best-effort sites keep a floor share.")
    rx.write_table(base, lines)
    for i, (label, _) in enumerate(SCENARIOS):
        with open(base + f"-{i}.dat", "w") as f:
            f.write("cell gold bronze\n")
            for (s, c, g, b, _, _) in results:
                if s == label:
                    f.write(f"\"{c}\" {g:.1f} {b:.1f}\n")
    plot(base)
    print(f"wrote {base}.csv {base}.txt {base}.png")


def plot(base):
    """The PNG of a run from its .dat files (also: --plot BASE)."""
    gp = (f"set terminal pngcairo size 1100,450 font ',10'\nset output '{base}.png'\n{rx.HISTOGRAMS}"
          f"set multiplot layout 1,2 title 'Admission queue (qos.max_inflight = {CAP}): served/s per site, "
          "emulated cluster, shm transport (not RDMA)'\n"
          "set ylabel 'served requests/s'\nset yrange [0:*]\n")
    for i, (label, _) in enumerate(SCENARIOS):
        gp += (f"set title '{label}; gold guarantee {GUARANTEE}/s'\n"
               f"plot '{base}-{i}.dat' using 2:xtic(1) title col, '' using 3 title col, "
               f"{GUARANTEE} with lines dt 2 lc rgb 'black' title 'gold guarantee'\n")
    gp += "unset multiplot\n"
    rx.gnuplot(gp)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--plot":
        plot(sys.argv[2])
    else:
        main()
