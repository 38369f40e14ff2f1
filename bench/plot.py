#!/usr/bin/env python3
"""Draws the curves of docs/benchmarks.md from result files already in
bench/results/ (it runs no benchmark):

    python3 bench/plot.py        # writes docs/img/routing-p99-vs-load.png
                                 # and docs/img/throughput-vs-burst.png

- routing-p99-vs-load.png: p99 of served requests against offered load,
  one line per routing policy (the median of the rounds, the bar their
  range), from the routing policies run named in ROUTING;
- throughput-vs-burst.png: served requests/s against burst length L,
  rigid against reconfigure (and over-provisioned, from the newest run that
  measured it), from the experiment 1 runs named in BURSTS.

Each figure names its result files. Needs matplotlib (Debian's
python3-matplotlib, installed by scripts/setup.sh); when the interpreter
running this has none, it runs itself again with /usr/bin/python3.
"""
import csv
import os
import statistics
import sys

try:
    import matplotlib
except ImportError:
    if os.path.exists('/usr/bin/python3') and os.path.realpath(sys.executable) != os.path.realpath('/usr/bin/python3'):
        os.execv('/usr/bin/python3', ['/usr/bin/python3'] + sys.argv)
    sys.exit('bench/plot.py needs matplotlib: apt-get install -y python3-matplotlib')
matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, 'bench', 'results')
IMG = os.path.join(ROOT, 'docs', 'img')

# The goal matrix of issue 15 (docs/benchmarks.md, "Routing policies at
# fixed arrival rates"): 5 policies x 80/90/95 % x 3 rounds, two scenarios.
ROUTING = 'routing-policies-20261128-0258.csv'
# Experiment 1, per split: the newest rigid/reconfigure run (its newest
# build: "reconfigure after" when the run has it), and the newest run that
# measured the over-provisioned cluster at every L (an older build; the
# over-provisioned column does not depend on the agent).
BURSTS = [
    ('4 sites 2:2:2:2', 'exp1-20261128-0153.csv', 'exp1-20261124-1217.csv'),
    ('3 sites 3:3:2', 'exp1-20261128-0201.csv', 'exp1-20261124-1217.csv'),
]


def rows(name):
    with open(os.path.join(RESULTS, name), newline='', encoding='utf-8') as f:
        return list(csv.DictReader(f))


def routing():
    data = rows(ROUTING)
    scenarios = list(dict.fromkeys(r['scenario'] for r in data))
    policies = list(dict.fromkeys(r['policy'] for r in data))
    fig, axes = plt.subplots(1, len(scenarios), figsize=(11, 4.2), sharey=True)
    for ax, scenario in zip(axes, scenarios):
        for policy in policies:
            cells = {}
            for r in data:
                if r['scenario'] == scenario and r['policy'] == policy:
                    cells.setdefault(int(r['load_pct']), []).append(float(r['p99_ms']))
            loads = sorted(cells)
            med = [statistics.median(cells[x]) for x in loads]
            lo = [m - min(cells[x]) for m, x in zip(med, loads)]
            hi = [max(cells[x]) - m for m, x in zip(med, loads)]
            style = dict(lw=2.5) if policy.startswith('shortest-wait') else dict(lw=1.2)
            # p99 is of served requests: say so where many were not served.
            errors = max(int(r['errors']) for r in data
                         if r['scenario'] == scenario and r['policy'] == policy)
            label = policy if errors < 100 else f'{policy} (up to {errors} errors a run)'
            ax.errorbar(loads, med, yerr=[lo, hi], marker='o', capsize=3, label=label, **style)
        ax.set_title(f'{scenario}')
        ax.set_xlabel('offered load, % of the calibrated capacity')
        ax.set_xticks(sorted({int(r['load_pct']) for r in data}))
        ax.set_yscale('log')
        ax.set_yticks([30, 50, 100, 200, 300, 500, 700], ['30', '50', '100', '200', '300', '500', '700'])
        ax.grid(True, which='both', alpha=0.3)
        ax.legend(fontsize=7, loc='lower right')
    axes[0].set_ylabel('p99 of served requests, ms (log)')
    fig.suptitle(f'p99 against load per policy (shm windows, not RDMA; medians of 3 rounds, '
                 f'bars: their range)\nbench/results/{ROUTING}', fontsize=9)
    fig.tight_layout()
    out = os.path.join(IMG, 'routing-p99-vs-load.png')
    fig.savefig(out, dpi=90)
    return out


def bursts():
    fig, axes = plt.subplots(1, len(BURSTS), figsize=(11, 4.2))
    for ax, (scenario, newest, overprov) in zip(axes, BURSTS):
        def series(name, mode):
            pts = sorted((int(r['burst']), float(r['served_per_s'])) for r in rows(name)
                         if r['scenario'] == scenario and r['mode'] == mode)
            return [p[0] for p in pts], [p[1] for p in pts]
        for mode, label, style in (
            ('rigid', f'rigid ({newest})', dict(marker='s', color='tab:gray')),
            ('reconfigure after', f'reconfigure ({newest})', dict(marker='o', color='tab:blue', lw=2.5)),
            ('reconfigure', f'reconfigure ({newest})', dict(marker='o', color='tab:blue', lw=2.5)),
        ):
            x, y = series(newest, mode)
            if x and not any(label == line.get_label() for line in ax.get_lines()):
                ax.plot(x, y, label=label, **style)
        x, y = series(overprov, 'overprov')
        ax.plot(x, y, label=f'over-provisioned ({overprov})', marker='^', ls='--', color='tab:green')
        ax.set_xscale('log', base=2)
        ax.set_xticks([512, 4096, 32768], ['512', '4096', '32768'])
        ax.set_title(scenario)
        ax.set_xlabel('burst length L, requests (log)')
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc='lower right')
    axes[0].set_ylabel('served requests/s (all sites)')
    fig.suptitle('Experiment 1: throughput against burst length (emulated nodes, shm windows, '
                 'not RDMA; medians of 3 runs)\nonly L = 512, 4096 and 32768 were measured',
                 fontsize=9)
    fig.tight_layout()
    out = os.path.join(IMG, 'throughput-vs-burst.png')
    fig.savefig(out, dpi=90)
    return out


def main():
    os.makedirs(IMG, exist_ok=True)
    for out in (routing(), bursts()):
        print(os.path.relpath(out, ROOT))
    return 0


if __name__ == '__main__':
    sys.exit(main())
