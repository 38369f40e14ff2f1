#!/usr/bin/env python3
"""Reconfiguration experiments of issue 7 on the emulated cluster.

One command per experiment; each runs `rdmalb cluster` (real testsrv nodes,
real sidecars applying roles, real proxies; shm windows, NOT RDMA) once per
configuration and repetition, prints a table shaped like the seed's figure
with the seed's numbers beside ours, and writes a CSV and a PNG (gnuplot).

    python3 bench/reconfig_experiments.py exp1   # seed 001 Fig. 7
    python3 bench/reconfig_experiments.py exp2   # seed 003 Fig. 17/19
    python3 bench/reconfig_experiments.py exp4   # seed 003 Fig. 16

Environment: BIN (default target/release/rdmalb), RUNS (repetitions, median
reported; default 3), OUT (default bench/results), SCALE (multiplies every
run's duration; default 1.0).

Time is scaled to a 2-core machine (docs/benchmarks.md explains how): nodes
are capacity-model testsrv nodes (4 slots, 10 ms per 1 KiB request, about
330-360 requests/s each here), S = 50 ms, T = 200 ms, cool-down 1 s.
"""

import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

BIN = os.environ.get("BIN", "target/release/rdmalb")
RUNS = int(os.environ.get("RUNS", "3"))
OUT = os.environ.get("OUT", "bench/results")
SCALE = float(os.environ.get("SCALE", "1.0"))

NODE = '[node]\nslots = 4\nqueue = 32\nstatic_base = "10ms"\npublish_interval = "2ms"\n'
RECONFIG = ('[proxy.reconfig]\nsensitivity = "50ms"\nhistory = "200ms"\n'
            'cooldown = "1s"\n')
MODES = [("rigid", "mode = \"rigid\"\n"),
         ("overprov", "mode = \"rigid\"\noverprovision = true\n"),
         ("reconfigure", "mode = \"reconfigure\"\n")]


def run_cluster(spec_text, label):
    """Runs one cluster; returns (cluster.json, rows of load.csv)."""
    with tempfile.TemporaryDirectory(prefix="rdmalb-exp-") as d:
        spec = os.path.join(d, "spec.toml")
        with open(spec, "w") as f:
            f.write(spec_text)
        out = os.path.join(d, "out")
        t0 = time.time()
        for attempt in range(2):
            p = subprocess.run([BIN, "cluster", "-c", spec, "-o", out],
                               capture_output=True, text=True)
            if p.returncode == 0:
                break
            # A start-up failure (e.g. a port taken between choosing and
            # binding it) is retried once; a second failure stops.
            sys.stderr.write(f"{label}: attempt {attempt + 1} failed:\n{p.stderr[-1500:]}\n")
        if p.returncode != 0:
            sys.stderr.write(p.stderr[-3000:])
            raise SystemExit(f"{label}: rdmalb cluster failed ({p.returncode})")
        with open(os.path.join(out, "cluster.json")) as f:
            outcome = json.load(f)
        with open(os.path.join(out, "load.csv")) as f:
            rows = list(csv.DictReader(f))
        print(f"  {label}: {outcome['aggregate_served_per_s']:.0f} served/s, "
              f"{outcome['moves']} moves ({time.time() - t0:.0f} s)", flush=True)
        return outcome, rows


def qos_percent(rows, site, guarantee):
    """Same rule as src/testbed/qos.rs: intervals (the last, partial one
    left out) whose offered rate reached the guarantee count; met when the
    served rate reached it too."""
    mine = [r for r in rows if r["site"] == site][:-1]
    if not mine:
        return None
    t = [float(r["time_s"]) for r in mine]
    iv = (t[1] - t[0]) if len(t) > 1 else 1.0
    counted = met = 0
    for r in mine:
        if int(r["offered"]) / iv >= guarantee:
            counted += 1
            if float(r["served_per_s"]) >= guarantee:
                met += 1
    return 100.0 * met / counted if counted else None


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def gnuplot(script):
    subprocess.run(["gnuplot"], input=script, text=True, check=True)


def stamp():
    return time.strftime("%Y%m%d-%H%M", time.gmtime())


# ---------------------------------------------------------------- exp 1

EXP1_SCENARIOS = [
    ("3 sites 3:3:2", '["a", "b", "c"]', "3:3:2"),
    ("4 sites 2:2:2:2", '["a", "b", "c", "d"]', "2:2:2:2"),
]
# Burst length -> run duration (s): long enough for several bursts at the
# short lengths and for one burst change at 32K.
EXP1_BURSTS = [(512, 6), (4096, 8), (32768, 24)]


def exp1():
    results = []  # (scenario, L, mode, median served/s, median moves)
    for name, sites, split in EXP1_SCENARIOS:
        for burst, secs in EXP1_BURSTS:
            for mode, mode_keys in MODES:
                runs = []
                for r in range(RUNS):
                    spec = (f"sites = {sites}\nsplit = \"{split}\"\n{mode_keys}"
                            f"duration = \"{secs * SCALE:.1f}s\"\nrequests = 2000000\nseed = {r + 1}\n"
                            f"[trace]\nkind = \"bursty\"\nburst = {burst}\nmode = \"sites\"\nsize = \"1k\"\n"
                            f"{NODE}[load]\nconnections = 32\ninterval = \"500ms\"\ntimeout = \"10s\"\n{RECONFIG}")
                    runs.append(run_cluster(spec, f"{name} L={burst} {mode} run {r + 1}")[0])
                results.append((name, burst, mode,
                                med([o["aggregate_served_per_s"] for o in runs]),
                                med([o["moves"] for o in runs])))
    os.makedirs(OUT, exist_ok=True)
    base = os.path.join(OUT, f"exp1-{stamp()}")
    with open(base + ".csv", "w") as f:
        f.write("scenario,burst,mode,served_per_s,moves\n")
        for row in results:
            f.write("%s,%d,%s,%.1f,%s\n" % row)
    seed = {"3 sites 3:3:2": "seed 001 Fig. 7a: rigid ~26,000 TPS, over-prov ~51,000 TPS (1.96x); "
                             "reconfigure ~rigid at short bursts, close to over-prov at long ones",
            "4 sites 2:2:2:2": "seed 001 Fig. 7b: reconfigure up to 2.5x rigid, close to "
                               "over-provisioning (5 nodes/site) with half the nodes"}
    lines = []
    for name, _, split in EXP1_SCENARIOS:
        lines.append(f"\n{name} (emulated nodes, shm windows; median of {RUNS} runs; served requests/s)")
        lines.append(f"{'burst L':>8} {'rigid':>9} {'overprov':>9} {'reconfig':>9} {'moves':>6} "
                     f"{'reconf/rigid':>12} {'overprov/rigid':>14}")
        for burst, _ in EXP1_BURSTS:
            v = {m: (s, mv) for (n, b, m, s, mv) in results if n == name and b == burst}
            rg, op, rc = v["rigid"][0], v["overprov"][0], v["reconfigure"][0]
            lines.append(f"{burst:>8} {rg:>9.0f} {op:>9.0f} {rc:>9.0f} {v['reconfigure'][1]:>6.0f} "
                         f"{rc / rg:>11.2f}x {op / rg:>13.2f}x")
        lines.append(seed[name])
    table = "\n".join(lines)
    print(table)
    with open(base + ".txt", "w") as f:
        f.write(table + "\n")
    plots = []
    for i, (name, _, _) in enumerate(EXP1_SCENARIOS):
        dat = base + f"-{i}.dat"
        with open(dat, "w") as f:
            f.write("L rigid overprov reconfigure\n")
            for burst, _ in EXP1_BURSTS:
                v = {m: s for (n, b, m, s, _) in results if n == name and b == burst}
                f.write(f"{burst} {v['rigid']:.1f} {v['overprov']:.1f} {v['reconfigure']:.1f}\n")
        plots.append((name, dat))
    gp = (f"set terminal pngcairo size 1100,450 font ',10'\nset output '{base}.png'\n"
          "set multiplot layout 1,2 title 'Exp 1 (seed 001 Fig. 7): aggregate throughput, "
          "emulated cluster, shm transport (not RDMA)'\n"
          "set style data histograms\nset style histogram clustered gap 1\n"
          "set style fill solid 0.8 border -1\nset key outside bottom center horizontal\nset grid ytics\n"
          "set xlabel 'burst length (requests)'\nset ylabel 'served requests/s'\nset yrange [0:*]\n")
    for name, dat in plots:
        gp += (f"set title '{name}'\n"
               f"plot '{dat}' using 2:xtic(1) title col, '' using 3 title col, '' using 4 title col\n")
    gp += "unset multiplot\n"
    gnuplot(gp)
    print(f"wrote {base}.csv {base}.txt {base}.png")


# ---------------------------------------------------------------- exp 2

# Two sites: "gold" has the guarantee, "bronze" is best effort; 2:2 nodes
# (over-provisioned: 3:3). Open loop at RATE requests/s, bursts alternate.
EXP2_RATE = 1200.0
EXP2_GUARANTEES = [300, 600, 900]
EXP2_BURSTS = [("high (L=16K)", 16384, 24), ("low (L=512)", 512, 10)]


def exp2():
    results = []  # (burstiness, mode, guarantee, median %, median moves)
    for label, burst, secs in EXP2_BURSTS:
        for mode, mode_keys in MODES:
            pct = {g: [] for g in EXP2_GUARANTEES}
            moves = []
            for r in range(RUNS):
                spec = (f"sites = [\"gold\", \"bronze\"]\nsplit = \"2:2\"\n{mode_keys}"
                        f"duration = \"{secs * SCALE:.1f}s\"\nrequests = 2000000\nseed = {r + 1}\n"
                        f"[trace]\nkind = \"bursty\"\nburst = {burst}\nmode = \"sites\"\nsize = \"1k\"\n"
                        f"{NODE}[load]\nrate = {EXP2_RATE}\ninterval = \"250ms\"\ntimeout = \"10s\"\n"
                        f"[guarantee]\ngold = {EXP2_GUARANTEES[-1]}\n[priority]\ngold = 10\n{RECONFIG}")
                outcome, rows = run_cluster(spec, f"{label} {mode} run {r + 1}")
                moves.append(outcome["moves"])
                for g in EXP2_GUARANTEES:
                    pct[g].append(qos_percent(rows, "gold", g))
            for g in EXP2_GUARANTEES:
                results.append((label, mode, g, med(pct[g]), med(moves)))
    os.makedirs(OUT, exist_ok=True)
    base = os.path.join(OUT, f"exp2-{stamp()}")
    with open(base + ".csv", "w") as f:
        f.write("burstiness,mode,guarantee,qos_meeting_percent,moves\n")
        for (b, m, g, p, mv) in results:
            f.write(f"{b},{m},{g},{'' if p is None else f'{p:.1f}'},{mv}\n")
    fmt = lambda p: "   n/a" if p is None else f"{p:5.1f}%"
    lines = []
    for label, _, _ in EXP2_BURSTS:
        lines.append(f"\nburstiness {label}: QoS-meeting % of site gold (offered {EXP2_RATE:.0f}/s in its "
                     f"bursts; emulated nodes, shm windows; median of {RUNS} runs)")
        lines.append(f"{'guarantee/s':>11} {'rigid 2:2':>10} {'reconf 2:2':>11} {'overprov 3:3':>13}")
        for g in EXP2_GUARANTEES:
            v = {m: p for (b, m, gg, p, _) in results if b == label and gg == g}
            lines.append(f"{g:>11} {fmt(v['rigid']):>10} {fmt(v['reconfigure']):>11} {fmt(v['overprov']):>13}")
        mv = [mv for (b, m, _, _, mv) in results if b == label and m == "reconfigure"][0]
        lines.append(f"node moves (reconfigure, median): {mv}")
    lines.append("seed 003 Fig. 17: high burstiness (64K): rigid drops to ~5% at high guarantees, "
                 "reconfiguration stays near 100%; low burstiness (512): both ~100%.\n"
                 "seed 003 Fig. 19a: over-provisioning ~100%; reconfiguration ~75% at low burstiness, "
                 "~100% at high, with 25% fewer nodes.")
    table = "\n".join(lines)
    print(table)
    with open(base + ".txt", "w") as f:
        f.write(table + "\n")
    gp = (f"set terminal pngcairo size 1100,450 font ',10'\nset output '{base}.png'\n"
          "set multiplot layout 1,2 title 'Exp 2 (seed 003 Fig. 17/19): QoS-meeting % of the guaranteed "
          "site, emulated cluster, shm transport (not RDMA)'\n"
          "set style data histograms\nset style histogram clustered gap 1\n"
          "set style fill solid 0.8 border -1\nset key outside bottom center horizontal\nset grid ytics\n"
          "set xlabel 'guarantee (requests/s)'\nset ylabel 'QoS met (% of intervals)'\nset yrange [0:105]\n")
    for i, (label, _, _) in enumerate(EXP2_BURSTS):
        dat = base + f"-{i}.dat"
        with open(dat, "w") as f:
            f.write("G rigid reconfigure overprov\n")
            for g in EXP2_GUARANTEES:
                v = {m: p for (b, m, gg, p, _) in results if b == label and gg == g}
                f.write(f"{g} " + " ".join("0" if v[m] is None else f"{v[m]:.1f}"
                                           for m in ("rigid", "reconfigure", "overprov")) + "\n")
        gp += (f"set title 'burstiness {label}'\n"
               f"plot '{dat}' using 2:xtic(1) title col, '' using 3 title col, '' using 4 title col\n")
    gp += "unset multiplot\n"
    gnuplot(gp)
    print(f"wrote {base}.csv {base}.txt {base}.png")


# ---------------------------------------------------------------- exp 4

EXP4_S = ["200ms", "600ms", "1s", "1.4s", "1.8s"]
EXP4_BURSTS = [(512, 8), (32768, 24)]


def exp4():
    """Seed 003 Fig. 16: throughput of reconfiguration for S = 0.2..1.8 s
    (T = S: a site must be hot for one round), 3 sites 3:3:2."""
    results = []
    for burst, secs in EXP4_BURSTS:
        for sens in EXP4_S:
            runs = []
            for r in range(RUNS):
                spec = (f"sites = [\"a\", \"b\", \"c\"]\nsplit = \"3:3:2\"\nmode = \"reconfigure\"\n"
                        f"duration = \"{secs * SCALE:.1f}s\"\nrequests = 2000000\nseed = {r + 1}\n"
                        f"[trace]\nkind = \"bursty\"\nburst = {burst}\nmode = \"sites\"\nsize = \"1k\"\n"
                        f"{NODE}[load]\nconnections = 32\ninterval = \"500ms\"\ntimeout = \"10s\"\n"
                        f"[proxy.reconfig]\nsensitivity = \"{sens}\"\nhistory = \"{sens}\"\ncooldown = \"1s\"\n")
                runs.append(run_cluster(spec, f"L={burst} S={sens} run {r + 1}")[0])
            results.append((burst, sens, med([o["aggregate_served_per_s"] for o in runs]),
                            med([o["moves"] for o in runs])))
    os.makedirs(OUT, exist_ok=True)
    base = os.path.join(OUT, f"exp4-{stamp()}")
    with open(base + ".csv", "w") as f:
        f.write("burst,sensitivity,served_per_s,moves\n")
        for row in results:
            f.write("%d,%s,%.1f,%s\n" % row)
    lines = [f"\nreconfigure, 3 sites 3:3:2, T = S (emulated nodes, shm windows; median of {RUNS} runs)",
             f"{'S':>6} " + " ".join(f"{'L=' + str(b) + ' served/s':>16} {'moves':>5}" for b, _ in EXP4_BURSTS)]
    for sens in EXP4_S:
        cells = []
        for b, _ in EXP4_BURSTS:
            v = [x for x in results if x[0] == b and x[1] == sens][0]
            cells.append(f"{v[2]:>16.0f} {v[3]:>5.0f}")
        lines.append(f"{sens:>6} " + " ".join(cells))
    lines.append("seed 003 Fig. 16: short bursts lose throughput at S = 1.8 s; long bursts lose a "
                 "little at S = 0.2 s (probing overhead)")
    table = "\n".join(lines)
    print(table)
    with open(base + ".txt", "w") as f:
        f.write(table + "\n")
    dat = base + ".dat"
    with open(dat, "w") as f:
        f.write("S " + " ".join(f"L={b}" for b, _ in EXP4_BURSTS) + "\n")
        for sens in EXP4_S:
            f.write(f"{sens} " + " ".join(
                f"{[x for x in results if x[0] == b and x[1] == sens][0][2]:.1f}" for b, _ in EXP4_BURSTS) + "\n")
    gnuplot(f"set terminal pngcairo size 800,450 font ',10'\nset output '{base}.png'\n"
            "set title 'Exp 4 (seed 003 Fig. 16): sensitivity S, emulated cluster, shm transport (not RDMA)'\n"
            "set style data histograms\nset style histogram clustered gap 1\n"
            "set style fill solid 0.8 border -1\nset key outside bottom center horizontal\nset grid ytics\nset yrange [0:*]\n"
            "set xlabel 'S (= T)'\nset ylabel 'served requests/s'\n"
            f"plot '{dat}' using 2:xtic(1) title col, '' using 3 title col\n")
    print(f"wrote {base}.csv {base}.txt {base}.png")


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else ""
    {"exp1": exp1, "exp2": exp2, "exp4": exp4}.get(what, lambda: sys.exit(
        "usage: reconfig_experiments.py exp1|exp2|exp4"))()
