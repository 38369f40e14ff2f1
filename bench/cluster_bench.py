"""What the emulated-cluster benchmarks share (bench/routing/policies.py,
bench/sticky.py, bench/hash_bound.py, and bench/routing/fine_coarse.sh for
its weights): the load index they configure and where their per-run rows
go."""

import csv
import datetime
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def app_weights(inflight):
    """The `[proxy.weights]` of a cluster spec: only `app` and `inflight`
    (on one machine the host-wide indices are the same for every emulated
    node)."""
    return f"""[proxy.weights]
cpu = 0.0
run_queue = 0.0
memory = 0.0
network = 0.0
connections = 0.0
irq = 0.0
app = 1.0
inflight = {inflight}
"""


def write_rows(name, rows):
    """Writes `rows` (dicts with the same keys) to
    `$RESULTS_DIR/<name>-<UTC stamp>.csv` (default bench/results/) and
    returns the path without its extension, for the `.md` beside it."""
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M")
    out_dir = os.environ.get("RESULTS_DIR", os.path.join(ROOT, "bench/results"))
    os.makedirs(out_dir, exist_ok=True)
    base = os.path.join(out_dir, f"{name}-{stamp}")
    with open(base + ".csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return base
