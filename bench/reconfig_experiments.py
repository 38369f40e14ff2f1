#!/usr/bin/env python3
"""Reconfiguration experiments of issue 7 on the emulated cluster.

One command per experiment; each runs `rdmalb-testbed cluster` (real testsrv nodes,
real sidecars applying roles, real proxies; shm windows, NOT RDMA) once per
configuration and repetition, prints a table shaped like the seed's figure
with the seed's numbers beside ours, and writes a CSV and a PNG (gnuplot).

    python3 bench/reconfig_experiments.py exp1   # seed 001 Fig. 7
    python3 bench/reconfig_experiments.py exp2   # seed 003 Fig. 17/19
    python3 bench/reconfig_experiments.py exp3   # seed 003 Fig. 20/21 (priority + best effort)
    python3 bench/reconfig_experiments.py exp4   # seed 003 Fig. 16
    python3 bench/reconfig_experiments.py exp5   # seed 003 Fig. 14/15 (Zipf, world-cup-like)
    python3 bench/reconfig_experiments.py all    # exp1 .. exp5 in sequence

Environment: BIN (the testbed binary; default target/release/rdmalb-testbed,
which finds the appliance `rdmalb` beside it or through RDMALB_BIN), RUNS (repetitions, median
reported; default 3), OUT (default bench/results), SCALE (multiplies every
run's duration; default 1.0), LOANS_OFF (1: experiments 1 and 5 also run
reconfigure with `loan_return` and `claim_horizon` "off", interleaved run by run with the
other configurations, as a same-session baseline of the agent without
loans), BIN_AFTER (exp1 and exp5: a second testbed binary; every
reconfigure configuration runs once more with it, titled "... after",
interleaved run by run: a change against BIN in one session), BURSTS (exp1, exp2, exp3: comma-separated burst lengths to run,
e.g. "512,32768"; default all), SPLITS (exp1 only: comma-separated splits
to run, e.g. "2:2:2:2"; default both), SKIP_OVERPROV (1: exp1 and exp5
leave out the over-provisioned runs), TRACES (exp5: "zipf", "world-cup"
or both, comma-separated; default both), COSTS (exp5: dynamic costs, e.g.
"10ms"; default "10ms,40ms"), SKIP_SKEWED (1: exp5 leaves out the 3:1
split), KEEP (a directory: every run's cluster output --
load.csv, cluster.json, the proxies' logs -- is copied there under the
run's label, for a look at single intervals and claims).

Time is scaled to a 2-core machine (docs/benchmarks.md explains how): nodes
are capacity-model testsrv nodes (4 slots, 10 ms per 1 KiB request, about
330-360 requests/s each here), S = 50 ms, T = 200 ms, cool-down 1 s.
"""

import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

BIN = os.environ.get("BIN", "target/release/rdmalb-testbed")
RUNS = int(os.environ.get("RUNS", "3"))
OUT = os.environ.get("OUT", "bench/results")
SCALE = float(os.environ.get("SCALE", "1.0"))

NODE = '[node]\nslots = 4\nqueue = 32\nstatic_base = "10ms"\npublish_interval = "2ms"\n'
RECONFIG = ('[proxy.reconfig]\nsensitivity = "50ms"\nhistory = "200ms"\n'
            'cooldown = "1s"\n')
MODES = [("rigid", "mode = \"rigid\"\n"),
         ("overprov", "mode = \"rigid\"\noverprovision = true\n"),
         ("reconfigure", "mode = \"reconfigure\"\n")]
LOANS_OFF = os.environ.get("LOANS_OFF", "") == "1"
# A second testbed binary (exp5): every reconfigure configuration runs once
# more with it, titled "... after", interleaved with the rest run by run, so
# a change is measured against BIN side by side in one session.
BIN_AFTER = os.environ.get("BIN_AFTER", "")
# Reconfigure without loans and the burst estimate (the agent before issue
# 16), appended to RECONFIG.
NO_LOANS = 'loan_return = "off"\nclaim_horizon = "off"\n'


def run_cluster(spec_text, label, files=None):
    """Runs one cluster; returns (cluster.json, rows of load.csv). `files`
    maps names to contents written beside the spec (e.g. a trace_file)."""
    with tempfile.TemporaryDirectory(prefix="rdmalb-exp-") as d:
        for name, text in (files or {}).items():
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
        spec = os.path.join(d, "spec.toml")
        with open(spec, "w") as f:
            f.write(spec_text)
        out = os.path.join(d, "out")
        t0 = time.time()
        for attempt in range(2):
            binary = BIN_AFTER if BIN_AFTER and label.split(" run ")[0].endswith(" after") else BIN
            p = subprocess.run([binary, "cluster", "-c", spec, "-o", out],
                               capture_output=True, text=True)
            if p.returncode == 0:
                break
            # A start-up failure (e.g. a port taken between choosing and
            # binding it) is retried once; a second failure stops.
            sys.stderr.write(f"{label}: attempt {attempt + 1} failed:\n{p.stderr[-1500:]}\n")
        if p.returncode != 0:
            sys.stderr.write(p.stderr[-3000:])
            raise SystemExit(f"{label}: rdmalb-testbed cluster failed ({p.returncode})")
        if os.environ.get("KEEP"):
            keep = os.path.join(os.environ["KEEP"], label.replace(" ", "_").replace("/", "-"))
            shutil.rmtree(keep, ignore_errors=True)
            shutil.copytree(out, keep, ignore=shutil.ignore_patterns("*.sock", "shm*"))
        with open(os.path.join(out, "cluster.json")) as f:
            outcome = json.load(f)
        with open(os.path.join(out, "load.csv")) as f:
            rows = list(csv.DictReader(f))
        print(f"  {label}: {outcome['aggregate_served_per_s']:.0f} served/s, "
              f"{outcome['moves']} moves ({time.time() - t0:.0f} s)", flush=True)
        return outcome, rows


def qos_count(rows, site, guarantee):
    """Same rule as crates/testbed/src/qos.rs: intervals (the last, partial
    one left out) whose offered rate reached the guarantee count; met when
    the served rate reached it too. A burst edge (an interval whose offered
    rate reached the guarantee while the one before did not; the run's
    first interval is none) is accounted apart, in every mode alike.
    Returns (counted, met, edges, edges_met)."""
    mine = [r for r in rows if r["site"] == site][:-1]
    t = [float(r["time_s"]) for r in mine]
    iv = (t[1] - t[0]) if len(t) > 1 else 1.0
    counted = met = edges = edges_met = 0
    before = None
    for r in mine:
        rate = int(r["offered"]) / iv
        if rate >= guarantee:
            kept = float(r["served_per_s"]) >= guarantee
            if before is not None and before < guarantee:
                edges += 1
                edges_met += kept
            else:
                counted += 1
                met += kept
        before = rate
    return counted, met, edges, edges_met


def qos_percent(rows, site, guarantee):
    """The QoS-meeting % of `qos_count` (burst edges apart)."""
    counted, met, _, _ = qos_count(rows, site, guarantee)
    return 100.0 * met / counted if counted else None


def edges_text(counts):
    """Burst edges met / seen, summed over runs: "met/seen"."""
    return f"{sum(c[3] for c in counts)}/{sum(c[2] for c in counts)}"


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def write_table(base, lines):
    """Prints an experiment's table and writes it to BASE.txt."""
    table = "\n".join(lines)
    print(table)
    with open(base + ".txt", "w") as f:
        f.write(table + "\n")


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


def chosen_bursts(bursts, key=lambda b: b[0]):
    """`bursts` restricted to the lengths BURSTS names (all when unset)."""
    if not os.environ.get("BURSTS"):
        return bursts
    wanted = os.environ["BURSTS"].split(",")
    return [b for b in bursts if str(key(b)) in wanted]


EXP1_BURSTS = chosen_bursts(EXP1_BURSTS)
if os.environ.get("SPLITS"):
    EXP1_SCENARIOS = [sc for sc in EXP1_SCENARIOS if sc[2] in os.environ["SPLITS"].split(",")]


def exp1_modes():
    """(name, top-level spec keys, extra [proxy.reconfig] keys) of exp1."""
    modes = [(m, k, "") for m, k in MODES
             if not (m == "overprov" and os.environ.get("SKIP_OVERPROV") == "1")]
    if LOANS_OFF:
        modes.append(("reconf-off", MODES[2][1], NO_LOANS))
    if BIN_AFTER:
        modes.append(("reconfigure after", MODES[2][1], ""))
    return modes


def exp1():
    results = []  # (scenario, L, mode, median served/s, median moves)
    modes = exp1_modes()
    for name, sites, split in EXP1_SCENARIOS:
        for burst, secs in EXP1_BURSTS:
            runs = {m: [] for m, _, _ in modes}
            # Run by run, every configuration in turn: on a shared machine
            # the load drifts, and interleaving spreads it over all of them.
            for r in range(RUNS):
                for mode, mode_keys, extra in modes:
                    spec = (f"sites = {sites}\nsplit = \"{split}\"\n{mode_keys}"
                            f"duration = \"{secs * SCALE:.1f}s\"\nrequests = 2000000\nseed = {r + 1}\n"
                            f"[trace]\nkind = \"bursty\"\nburst = {burst}\nmode = \"sites\"\nsize = \"1k\"\n"
                            f"{NODE}[load]\nconnections = 32\ninterval = \"500ms\"\ntimeout = \"10s\"\n"
                            f"{RECONFIG}{extra}")
                    runs[mode].append(run_cluster(spec, f"{name} L={burst} {mode} run {r + 1}")[0])
            for mode, _, _ in modes:
                results.append((name, burst, mode,
                                med([o["aggregate_served_per_s"] for o in runs[mode]]),
                                med([o["moves"] for o in runs[mode]])))
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
                     f"{'reconf/rigid':>12} {'overprov/rigid':>14}"
                     + (f" {'off':>9} {'moves':>6} {'off/rigid':>13}" if LOANS_OFF else "")
                     + (f" {'after':>9} {'moves':>6} {'after/rigid':>13}" if BIN_AFTER else ""))
        for burst, _ in EXP1_BURSTS:
            v = {m: (s, mv) for (n, b, m, s, mv) in results if n == name and b == burst}
            rg, rc = v["rigid"][0], v["reconfigure"][0]
            op = v["overprov"][0] if "overprov" in v else None
            opc = f"{op:>9.0f}" if op else f"{'-':>9}"
            opr = f"{op / rg:>13.2f}x" if op else f"{'-':>14}"
            line = (f"{burst:>8} {rg:>9.0f} {opc} {rc:>9.0f} {v['reconfigure'][1]:>6.0f} "
                    f"{rc / rg:>11.2f}x {opr}")
            if LOANS_OFF:
                nl, nlm = v["reconf-off"]
                line += f" {nl:>9.0f} {nlm:>6.0f} {nl / rg:>12.2f}x"
            if BIN_AFTER:
                na, nam = v["reconfigure after"]
                line += f" {na:>9.0f} {nam:>6.0f} {na / rg:>12.2f}x"
            lines.append(line)
        lines.append(seed[name])
    write_table(base, lines)
    plots = []
    for i, (name, _, _) in enumerate(EXP1_SCENARIOS):
        dat = base + f"-{i}.dat"
        with open(dat, "w") as f:
            f.write("L rigid overprov reconfigure\n")
            for burst, _ in EXP1_BURSTS:
                v = {m: s for (n, b, m, s, _) in results if n == name and b == burst}
                f.write(f"{burst} {v['rigid']:.1f} {v.get('overprov', 0):.1f} {v['reconfigure']:.1f}\n")
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
EXP2_BURSTS = chosen_bursts([("high (L=16K)", 16384, 24), ("low (L=512)", 512, 10)],
                            key=lambda b: b[1])


def exp2():
    results = []  # (burstiness, mode, guarantee, median %, median moves, burst edges met/seen)
    for label, burst, secs in EXP2_BURSTS:
        for mode, mode_keys in MODES:
            pct = {g: [] for g in EXP2_GUARANTEES}
            cnt = {g: [] for g in EXP2_GUARANTEES}
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
                    cnt[g].append(qos_count(rows, "gold", g))
            for g in EXP2_GUARANTEES:
                results.append((label, mode, g, med(pct[g]), med(moves), edges_text(cnt[g])))
    os.makedirs(OUT, exist_ok=True)
    base = os.path.join(OUT, f"exp2-{stamp()}")
    with open(base + ".csv", "w") as f:
        f.write("burstiness,mode,guarantee,qos_meeting_percent,moves,burst_edges_met_of_seen\n")
        for (b, m, g, p, mv, e) in results:
            f.write(f"{b},{m},{g},{'' if p is None else f'{p:.1f}'},{mv},{e}\n")
    fmt = lambda p: "   n/a" if p is None else f"{p:5.1f}%"
    lines = []
    for label, _, _ in EXP2_BURSTS:
        lines.append(f"\nburstiness {label}: QoS-meeting % of site gold (offered {EXP2_RATE:.0f}/s in its "
                     f"bursts; emulated nodes, shm windows; median of {RUNS} runs)")
        lines.append(f"{'guarantee/s':>11} {'rigid 2:2':>10} {'reconf 2:2':>11} {'overprov 3:3':>13}"
                     f"   burst edges met/seen (all runs): rigid reconf overprov")
        for g in EXP2_GUARANTEES:
            v = {m: p for (b, m, gg, p, _, _) in results if b == label and gg == g}
            e = {m: x for (b, m, gg, _, _, x) in results if b == label and gg == g}
            lines.append(f"{g:>11} {fmt(v['rigid']):>10} {fmt(v['reconfigure']):>11} {fmt(v['overprov']):>13}"
                         f"   {e['rigid']:>6} {e['reconfigure']:>6} {e['overprov']:>8}")
        mv = [mv for (b, m, _, _, mv, _) in results if b == label and m == "reconfigure"][0]
        lines.append(f"node moves (reconfigure, median): {mv}")
    lines.append("seed 003 Fig. 17: high burstiness (64K): rigid drops to ~5% at high guarantees, "
                 "reconfiguration stays near 100%; low burstiness (512): both ~100%.\n"
                 "seed 003 Fig. 19a: over-provisioning ~100%; reconfiguration ~75% at low burstiness, "
                 "~100% at high, with 25% fewer nodes.")
    write_table(base, lines)
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
                v = {m: p for (b, m, gg, p, _, _) in results if b == label and gg == g}
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
                        f"[proxy.reconfig]\nsensitivity = \"{sens}\"\nhistory = \"{sens}\"\n"
                        # T fixed (= S), as in the seed: adaptive T would
                        # change the history this experiment sets.
                        f"history_max = \"{sens}\"\ncooldown = \"1s\"\n")
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
    write_table(base, lines)
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



def busy_rate(rows, site):
    """Mean served/s of `site` over the intervals in which it had demand
    (offered > 0; the last, partial interval left out): its throughput
    during its own bursts."""
    mine = [r for r in rows if r["site"] == site][:-1]
    rates = [float(r["served_per_s"]) for r in mine if int(r["offered"]) > 0]
    return statistics.mean(rates) if rates else None


def histogram_panel(title, dat, ylabel, yrange, columns=3):
    """One clustered-histogram panel of `columns` series (data columns 2..)."""
    series = ", ".join(["'' using %d title col" % c for c in range(3, columns + 2)])
    return (f"set title '{title}'\nset ylabel '{ylabel}'\nset yrange {yrange}\n"
            f"plot '{dat}' using 2:xtic(1) title col, {series}\n")


HISTOGRAMS = ("set termoption noenhanced\nset style data histograms\nset style histogram clustered gap 1\n"
              "set style fill solid 0.8 border -1\nset key outside bottom center horizontal\nset grid ytics\n")


# ---------------------------------------------------------------- exp 3

# Seed 003 section 5.4 / seed 000 chapter 6: "gold" (priority 10, the
# guarantee) and "bronze" (priority 0, best effort), bursts alternating
# between them, open loop at EXP3_RATE. The seed's rigid scheme
# over-provisions the high-priority site (5 of 7 nodes) and leaves the rest
# to the low-priority one: here 3:2 (3 gold nodes hold 900/s). Reconfigure
# starts from the same 3:2; over-provisioning is every site's worst case
# (4:4, 8 nodes). The proxies get the top guarantee; the lower ones are
# evaluated on the same runs (as in exp 2).
#
# Passive health stays at the proxies' default (passive_failures = 3).
# The first runs of this experiment found that it ejected overloaded testsrv
# nodes answering 503 (slots and queue full): their load then read 0, the
# best-effort site's hot streak broke and it never won idle nodes back. The
# proxy no longer counts a node's 503 as a failure (docs/operations.md,
# "Passive ejection"); bench/results/exp3-20261124-1156.txt has the runs
# from before, with a passive-health-on column.
EXP3_RATE = 1500.0
EXP3_GUARANTEES = [600, 900, 1200]
EXP3_BURSTS = chosen_bursts([(512, 8), (4096, 14), (16384, 26)])
# (key, column title, top-level spec keys, extra tables)
EXP3_MODES = [("rigid", "rigid 3:2", MODES[0][1], ""),
              ("reconfigure", "reconf 3:2", MODES[2][1], ""),
              ("overprov", "overprov 4:4", MODES[1][1], "")]


def exp3():
    results = []  # (L, mode, {G: median %}, gold/s, bronze/s, moves, {G: burst edges met/seen})
    for burst, secs in EXP3_BURSTS:
        for mode, _, mode_keys, tables in EXP3_MODES:
            pct = {g: [] for g in EXP3_GUARANTEES}
            cnt = {g: [] for g in EXP3_GUARANTEES}
            gold, bronze, moves = [], [], []
            for r in range(RUNS):
                spec = (f"sites = [\"gold\", \"bronze\"]\nsplit = \"3:2\"\n{mode_keys}"
                        f"duration = \"{secs * SCALE:.1f}s\"\nrequests = 2000000\nseed = {r + 1}\n"
                        f"[trace]\nkind = \"bursty\"\nburst = {burst}\nmode = \"sites\"\nsize = \"1k\"\n"
                        f"{NODE}[load]\nrate = {EXP3_RATE}\ninterval = \"250ms\"\ntimeout = \"10s\"\n"
                        f"[guarantee]\ngold = {EXP3_GUARANTEES[-1]}\n[priority]\ngold = 10\nbronze = 0\n"
                        f"{RECONFIG}{tables}")
                outcome, rows = run_cluster(spec, f"L={burst} {mode} run {r + 1}")
                moves.append(outcome["moves"])
                gold.append(busy_rate(rows, "gold"))
                bronze.append(busy_rate(rows, "bronze"))
                for g in EXP3_GUARANTEES:
                    pct[g].append(qos_percent(rows, "gold", g))
                    cnt[g].append(qos_count(rows, "gold", g))
            results.append((burst, mode, {g: med(pct[g]) for g in EXP3_GUARANTEES},
                            med(gold), med(bronze), med(moves),
                            {g: edges_text(cnt[g]) for g in EXP3_GUARANTEES}))
    os.makedirs(OUT, exist_ok=True)
    base = os.path.join(OUT, f"exp3-{stamp()}")
    with open(base + ".csv", "w") as f:
        f.write("burst,mode," + ",".join(f"gold_qos_percent_{g}" for g in EXP3_GUARANTEES)
                + ",gold_served_per_s_in_bursts,bronze_served_per_s_in_bursts,moves,"
                + ",".join(f"burst_edges_met_of_seen_{g}" for g in EXP3_GUARANTEES) + "\n")
        for (b, m, p, gs, bs, mv, e) in results:
            f.write(f"{b},{m}," + ",".join("" if p[g] is None else f"{p[g]:.1f}" for g in EXP3_GUARANTEES)
                    + f",{gs:.1f},{bs:.1f},{mv}," + ",".join(e[g] for g in EXP3_GUARANTEES) + "\n")
    fmt = lambda p: "   n/a" if p is None else f"{p:5.1f}%"
    cell = lambda b, m: [x for x in results if x[0] == b and x[1] == m][0]
    titles = [(m, t) for m, t, _, _ in EXP3_MODES]
    lines = [f"\n(a) QoS-meeting % of gold (priority 10; open loop {EXP3_RATE:.0f}/s, bursts alternating "
             f"with bronze; emulated nodes, shm windows; median of {RUNS} runs)",
             f"{'burst L':>8} {'guarantee/s':>11} " + " ".join(f"{t:>14}" for _, t in titles)]
    for burst, _ in EXP3_BURSTS:
        for g in EXP3_GUARANTEES:
            lines.append(f"{burst:>8} {g:>11} " + " ".join(
                f"{fmt(cell(burst, m)[2][g]):>14}" for m, _ in titles))
    lines.append("\n(a') burst edges (an interval in which gold's demand reached the guarantee while the one "
                 "before did not; left out of (a), the same way in every mode): met/seen over all runs")
    lines.append(f"{'burst L':>8} {'guarantee/s':>11} " + " ".join(f"{t:>14}" for _, t in titles))
    for burst, _ in EXP3_BURSTS:
        for g in EXP3_GUARANTEES:
            lines.append(f"{burst:>8} {g:>11} " + " ".join(
                f"{cell(burst, m)[6][g]:>14}" for m, _ in titles))
    lines.append("\n(b) served requests/s of each site during its own bursts (bronze: best effort, "
                 "priority 0) and node moves")
    lines.append(f"{'burst L':>8} {'site':>6} " + " ".join(f"{t:>14}" for _, t in titles)
                 + f" {'moves reconf':>12}")
    for burst, _ in EXP3_BURSTS:
        for name, i in (("bronze", 4), ("gold", 3)):
            lines.append(f"{burst:>8} {name:>6} " + " ".join(f"{cell(burst, m)[i]:>14.0f}" for m, _ in titles)
                         + f" {cell(burst, 'reconfigure')[5]:>12.0f}")
    lines.append("seed 003 Fig. 20a (64K bursts): at 9,000 TPS rigid (gold over-provisioned, 5:2) and "
                 "reconfiguration both 100%; at 12,000 TPS rigid ~40%, reconfiguration 100%. "
                 "Fig. 20b (512): both 100%.\n"
                 "seed 003 Fig. 21a: reconfiguration keeps the guarantee at least as often as "
                 "over-provisioning at every burst length. Fig. 21b: best-effort throughput "
                 "significantly higher with reconfiguration, especially for long bursts.\n"
                 "seed 000 Fig. 6.2: rigid ~46% at 14,000 TPS (65536), ~35% at 16,000; "
                 "reconfiguration ~100%.")
    write_table(base, lines)
    gp = (f"set terminal pngcairo size 1500,450 font ',10'\nset output '{base}.png'\n"
          "set multiplot layout 1,3 title 'Exp 3 (seed 003 Fig. 20/21): gold (priority, guarantee) and "
          "best-effort bronze, emulated cluster, shm transport (not RDMA)'\n"
          f"{HISTOGRAMS}set xlabel 'burst length (requests)'\n")
    header = " ".join(["L"] + [t.replace(" ", "_") for _, t in titles]) + "\n"
    for i, g in enumerate(EXP3_GUARANTEES[1:]):
        dat = base + f"-{i}.dat"
        with open(dat, "w") as f:
            f.write(header)
            for burst, _ in EXP3_BURSTS:
                f.write(f"{burst} " + " ".join(
                    "0" if cell(burst, m)[2][g] is None else f"{cell(burst, m)[2][g]:.1f}"
                    for m, _ in titles) + "\n")
        gp += histogram_panel(f"(a) gold QoS met, guarantee {g}/s", dat, "QoS met (% of intervals)",
                              "[0:105]", len(titles))
    dat = base + "-bronze.dat"
    with open(dat, "w") as f:
        f.write(header)
        for burst, _ in EXP3_BURSTS:
            f.write(f"{burst} " + " ".join(f"{cell(burst, m)[4]:.1f}" for m, _ in titles) + "\n")
    gp += histogram_panel("(b) best-effort bronze in its bursts", dat, "served requests/s", "[0:*]",
                          len(titles))
    gp += "unset multiplot\n"
    gnuplot(gp)
    print(f"wrote {base}.csv {base}.txt {base}.png")


# ---------------------------------------------------------------- exp 5

# Seed 003 Fig. 14/15 (seed 000 Fig. 5.10/5.11): Zipf and world-cup
# traces. The seed reconfigures between the proxy tier (static content) and
# the application tier (dynamic content); our unit of reconfiguration is the
# site, so the driver generates each trace with `rdmalb-testbed trace` and sends
# static requests to site "web" and dynamic ones to site "app" (the
# generators draw every request's site uniformly, which would give each site
# the same mix and nothing to move). Closed loop, 32 connections; the x axis
# is the dynamic requests' computation (the seed's "assumed requirements of
# computation"); static requests cost 10 ms + size / 100 MiB/s. Splits are
# web:app: 2:2 is the seed's rigid "equal mix" (rigid-1), 3:1 its rigid-2
# (seed 000: two thirds of the nodes for static content), over-provisioned
# 3:3.
EXP5_COSTS = ["10ms", "40ms"]
EXP5_EQUAL = [("rigid 2:2", "2:2", MODES[0][1]), ("reconf 2:2", "2:2", MODES[2][1]),
              ("overprov 3:3", "2:2", MODES[1][1])]
EXP5_SKEWED = [("rigid 3:1", "3:1", MODES[0][1]), ("reconf 3:1", "3:1", MODES[2][1])]
# Each run is bounded by time (Zipf: a stationary mix, any stretch of the
# trace is alike) or by a request count per dynamic cost (world-cup: long
# runs of one class, so every configuration replays the same prefix and
# throughput = requests / time to serve them, as the seed's "one million
# requests in about 100 seconds").
EXP5_TRACES = [
    ("zipf", "Zipf a=0.75, 1000 files, half of them dynamic", ("duration", 12),
     ["zipf", "--alpha", "0.75", "--files", "1000", "--dynamic-share", "0.5"], EXP5_EQUAL),
    ("world-cup", "world-cup-like, 2/3 dynamic in runs of mean 512", ("requests", {"10ms": 8000, "40ms": 2500}),
     ["world-cup", "--mean-burst", "512"], EXP5_EQUAL + EXP5_SKEWED),
]
EXP5_REQUESTS = 100000
# Picking rows of experiment 5 (docs/benchmarks.md quotes runs made so).
if os.environ.get("TRACES"):
    _wanted = os.environ["TRACES"].split(",")
    _unknown = [t for t in _wanted if t not in [x[0] for x in EXP5_TRACES]]
    if _unknown:
        sys.exit(f"TRACES: unknown trace {', '.join(_unknown)} (expected zipf, world-cup or both, comma-separated)")
    EXP5_TRACES = [t for t in EXP5_TRACES if t[0] in _wanted]
if os.environ.get("COSTS"):
    _unknown = [c for c in os.environ["COSTS"].split(",") if c not in EXP5_COSTS]
    if _unknown:
        sys.exit(f"COSTS: unknown dynamic cost {', '.join(_unknown)} (expected {' or '.join(EXP5_COSTS)}, comma-separated: "
                 "the world-cup runs have a request count per cost)")
    EXP5_COSTS = os.environ["COSTS"].split(",")
if os.environ.get("SKIP_OVERPROV") == "1" or os.environ.get("SKIP_SKEWED") == "1":
    def _kept(c):
        if os.environ.get("SKIP_OVERPROV") == "1" and c[0].startswith("overprov"):
            return False
        return not (os.environ.get("SKIP_SKEWED") == "1" and c in EXP5_SKEWED)
    EXP5_TRACES = [t[:4] + ([c for c in t[4] if _kept(c)],) for t in EXP5_TRACES]


def tier_trace(args, cost, seed):
    """Generates a trace with `rdmalb-testbed trace`, then maps content classes to
    sites: /dynamic/ -> app, the rest -> web."""
    with tempfile.TemporaryDirectory(prefix="rdmalb-trace-") as d:
        path = os.path.join(d, "t.txt")
        subprocess.run([BIN, "trace"] + args + ["--cost", cost, "--sites", "web", "-n", str(EXP5_REQUESTS),
                                                "--seed", str(seed), "-o", path], check=True)
        with open(path) as f:
            lines = f.read().splitlines()
    out = ["# sites by content class: /dynamic/ -> app, static -> web (reconfig_experiments.py exp5)"]
    for line in lines:
        if not line.startswith("#") and "\t/dynamic/" in line:
            line = "app" + line[line.index("\t"):]
        out.append(line)
    return "\n".join(out) + "\n"


def app_share(rows):
    """Share of the requests sent to site app (the dynamic ones)."""
    sent = {s: sum(int(r["offered"]) for r in rows if r["site"] == s) for s in ("web", "app")}
    total = sum(sent.values())
    return sent["app"] / total if total else None


def exp5():
    results = []  # (trace, cost, config, median served/s, median moves, median dynamic share)
    for kind, _, (bound, value), args, configs in EXP5_TRACES:
        for cost in EXP5_COSTS:
            if bound == "duration":
                limits = f"duration = \"{value * SCALE:.1f}s\"\nrequests = 2000000\n"
            else:
                limits = f"duration = \"300s\"\nrequests = {int(value[cost] * SCALE)}\n"
            if LOANS_OFF:
                configs = [(t, sp, k) for t, sp, k in configs if not t.endswith(" off")]
                configs += [(t + " off", sp, k) for t, sp, k in configs if t.startswith("reconf")]
            if BIN_AFTER:
                configs = [(t, sp, k) for t, sp, k in configs if not t.endswith(" after")]
                configs += [(t + " after", sp, k) for t, sp, k in configs if t.startswith("reconf")]
            runs = {t: [] for t, _, _ in configs}
            shares = {t: [] for t, _, _ in configs}
            # Run by run, every configuration in turn (same trace prefix).
            for r in range(RUNS):
                trace = tier_trace(args, cost, r + 1)
                for title, split, mode_keys in configs:
                    extra = NO_LOANS if title.endswith(" off") else ""
                    spec = (f"sites = [\"web\", \"app\"]\nsplit = \"{split}\"\n{mode_keys}{limits}"
                            f"trace_file = \"trace.txt\"\n"
                            f"{NODE}[load]\nconnections = 32\ninterval = \"500ms\"\ntimeout = \"10s\"\n"
                            f"{RECONFIG}{extra}")
                    outcome, rows = run_cluster(spec, f"{kind} cost={cost} {title} run {r + 1}",
                                                {"trace.txt": trace})
                    runs[title].append(outcome)
                    shares[title].append(app_share(rows))
            for title, _, _ in configs:
                results.append((kind, cost, title, med([o["aggregate_served_per_s"] for o in runs[title]]),
                                med([o["moves"] for o in runs[title]]), med(shares[title])))
    os.makedirs(OUT, exist_ok=True)
    base = os.path.join(OUT, f"exp5-{stamp()}")
    with open(base + ".csv", "w") as f:
        f.write("trace,dynamic_cost,config,served_per_s,moves,dynamic_share_sent\n")
        for row in results:
            f.write("%s,%s,%s,%.1f,%s,%.3f\n" % row)
    cell = lambda k, c, t: [x for x in results if x[0] == k and x[1] == c and x[2] == t][0]
    lines = []
    for kind, title, _, _, configs in EXP5_TRACES:
        names = [t for t, _, _ in configs]
        if LOANS_OFF:
            names += [t + " off" for t in names if t.startswith("reconf")]
        if BIN_AFTER:
            names += [t + " after" for t in names if t.startswith("reconf")]
        lines.append(f"\n{title}: static -> site web, dynamic -> site app, splits web:app (emulated nodes, "
                     f"shm windows; median of {RUNS} runs; served requests/s, all sites)")
        lines.append(f"{'dyn. cost':>9} {'dyn. share':>10} " + " ".join(f"{t:>12}" for t in names)
                     + " " + " ".join(f"{'moves ' + ' '.join(t.split()[1:]):>10}" for t in names if t.startswith("reconf"))
                     + f" {'reconf/rigid':>12}")
        for cost in EXP5_COSTS:
            v = {t: cell(kind, cost, t) for t in names}
            ratios = "/".join(f"{v['reconf ' + t.split()[1]][3] / v[t][3]:.2f}x"
                              for t in names if t.startswith("rigid"))
            if LOANS_OFF:
                ratios += " off " + "/".join(
                    f"{v['reconf ' + t.split()[1] + ' off'][3] / v[t][3]:.2f}x"
                    for t in names if t.startswith("rigid"))
            if BIN_AFTER:
                ratios += " after " + "/".join(
                    f"{v['reconf ' + t.split()[1] + ' after'][3] / v[t][3]:.2f}x"
                    for t in names if t.startswith("rigid"))
            lines.append(f"{cost:>9} {v[names[0]][5]:>10.2f} " + " ".join(f"{v[t][3]:>12.0f}" for t in names)
                         + " " + " ".join(f"{v[t][4]:>10.0f}" for t in names if t.startswith("reconf"))
                         + f" {ratios:>12}")
    lines.append("(dyn. share: share of the requests sent that were dynamic; reconf/rigid per split)")
    lines.append("seed 003 Fig. 14: with Zipf traces reconfiguration performs as with the single-file trace "
                 "(no numbers in the text).\n"
                 "seed 003 Fig. 15 / seed 000 Fig. 5.11: world-cup trace, several dynamic costs: a rigid equal "
                 "split (rigid-1) does as well as reconfiguration; a rigid split expecting static content "
                 "(rigid-2: 1/3 application, 2/3 proxy nodes) is up to 3x below it.")
    write_table(base, lines)
    gp = (f"set terminal pngcairo size 1300,450 font ',10'\nset output '{base}.png'\n"
          "set multiplot layout 1,2 title 'Exp 5 (seed 003 Fig. 14/15): Zipf and world-cup-like traces, "
          "static -> web, dynamic -> app; emulated cluster, shm transport (not RDMA)'\n"
          f"{HISTOGRAMS}set xlabel 'dynamic request cost'\n")
    for i, (kind, title, _, _, configs) in enumerate(EXP5_TRACES):
        names = [t for t, _, _ in configs]
        if LOANS_OFF:
            names += [t + " off" for t in names if t.startswith("reconf")]
        if BIN_AFTER:
            names += [t + " after" for t in names if t.startswith("reconf")]
        dat = base + f"-{i}.dat"
        with open(dat, "w") as f:
            f.write("cost " + " ".join(t.replace(" ", "_") for t in names) + "\n")
            for cost in EXP5_COSTS:
                f.write(f"{cost} " + " ".join(f"{cell(kind, cost, t)[3]:.1f}" for t in names) + "\n")
        gp += histogram_panel(title, dat, "served requests/s", "[0:*]", len(names))
    gp += "unset multiplot\n"
    gnuplot(gp)
    print(f"wrote {base}.csv {base}.txt {base}.png")


def run_all():
    for name, fn in EXPERIMENTS.items():
        if name != "all":
            print(f"== {name}", flush=True)
            fn()


EXPERIMENTS = {"exp1": exp1, "exp2": exp2, "exp3": exp3, "exp4": exp4, "exp5": exp5, "all": run_all}

if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else ""
    EXPERIMENTS.get(what, lambda: sys.exit(
        "usage: reconfig_experiments.py exp1|exp2|exp3|exp4|exp5|all"))()
