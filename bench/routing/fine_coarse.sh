#!/usr/bin/env bash
# Fine vs coarse load reads (seed 002 section 5.2.3, Fig. 9 and Table 1) on
# the emulated cluster (`rdmalb cluster`, docs/testbed.md): the same
# heterogeneous trace through the same nodes and proxies under
#   weighted-least-load with per-request reads, with interval:64ms, 256ms,
#   1s, 4s snapshots, and roundrobin, leastconn, random (power of two).
#
#   bash bench/routing/fine_coarse.sh                 # 3 rounds x 8 policies x 6 s (~4 min)
#   ROUNDS=1 DURATION=3 bash bench/routing/fine_coarse.sh
#
# Cluster: one site, NODES testsrv nodes (4 slots, queue 16: a request beyond
# gets 503) with their sidecars (push collector: busy, queue, capacity)
# publishing into shm windows every 1 ms; PROXIES proxies (2: each knows only
# its own in-flight requests, the windows show everyone's), closed loop with
# CONNS connections spread over the proxies. Transport: shm (not RDMA).
#
# Trace (RUBiS-like mix, deterministic): two Zipf traces (alpha 0.5, 1000
# files, 30 % dynamic) interleaved line by line, one with cheap dynamic
# requests (2 ms), one with expensive ones (40 ms); static files 512 B..64 KiB.
#
# Load index: only the app index (busy + queue) / capacity and the
# in-flight term are weighted. The emulated nodes share one machine, so the
# host-wide indices (cpu, run queue, memory, network, irq) are the same
# for every node and would only add sampling noise.
#
# Reported per policy (medians over rounds): served/s (admitted requests:
# a node beyond its slots and queue answers 503 at once), mean response
# time over all responses (closed loop without think time: Little's law,
# CONNS / completed requests per second), p50, p99 and max of served
# requests, and the 503 count. Rounds are interleaved and the order rotates every round.
# Writes bench/results/routing-fine-coarse-<stamp>.{md,csv}.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-6}
NODES=${NODES:-4}
PROXIES=${PROXIES:-2}
CONNS=${CONNS:-48}
CANDIDATES=${CANDIDATES:-2}
INFLIGHT_WEIGHT=${INFLIGHT_WEIGHT:-0.2}
POLICIES=${POLICIES:-"per-request interval:64ms interval:256ms interval:1s interval:4s roundrobin leastconn random"}
RESULTS_DIR=${RESULTS_DIR:-$ROOT/bench/results}
BIN=${RDMALB_BIN:-}
for v in ROUNDS DURATION NODES PROXIES CONNS; do
    [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "$v=${!v} is not a positive integer" >&2; exit 2; }
done
if [ -z "$BIN" ]; then
    (cd "$ROOT" && cargo build --release --quiet)
    BIN=$ROOT/target/release/rdmalb
fi
WORK=$(mktemp -d /tmp/rdmalb-fine-coarse.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

"$BIN" trace zipf --sites shop --alpha 0.5 --files 1000 --dynamic-share 0.3 --cost 2ms \
    -n 200000 --seed 11 -o "$WORK/cheap.txt" >/dev/null
"$BIN" trace zipf --sites shop --alpha 0.5 --files 1000 --dynamic-share 0.3 --cost 40ms \
    -n 200000 --seed 12 -o "$WORK/dear.txt" >/dev/null
{
    echo "# RUBiS-like mix: zipf alpha 0.5, 30% dynamic, cheap (2ms, seed 11) and expensive (40ms, seed 12) interleaved"
    paste -d'\n' <(grep -v '^#' "$WORK/cheap.txt") <(grep -v '^#' "$WORK/dear.txt")
} >"$WORK/mix.txt"

spec() { # policy out
    local balance=weighted-least-load routing=""
    case $1 in
        per-request | interval:*) routing="load_read = \"$1\"" ;;
        roundrobin | leastconn | random) balance=$1 ;;
        *) echo "unknown policy $1" >&2; exit 2 ;;
    esac
    cat >"$2" <<SPEC
sites = ["shop"]
split = "$NODES"
proxies = $PROXIES
balance = "$balance"
duration = "${DURATION}s"
trace_file = "$WORK/mix.txt"

[node]
slots = 4
queue = 16

[load]
connections = $CONNS
interval = "1s"
timeout = "5s"

[proxy.weights]
cpu = 0.0
run_queue = 0.0
memory = 0.0
network = 0.0
connections = 0.0
irq = 0.0
app = 1.0
inflight = $INFLIGHT_WEIGHT

[proxy.routing]
candidates = $CANDIDATES
$routing
SPEC
}

CSV=$WORK/runs.csv
echo "round,policy,requests,served,served_per_s,mean_ms,p50_ms,p99_ms,max_ms,errors_503,errors_other" >"$CSV"
read -r -a ORDER <<<"$POLICIES"
N=${#ORDER[@]}
START=$(date -u +%Y-%m-%dT%H:%MZ)
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
for ((r = 1; r <= ROUNDS; r++)); do
    for ((i = 0; i < N; i++)); do
        p=${ORDER[$(((i + r - 1) % N))]}
        out=$WORK/run-$r-${p//[:]/-}
        spec "$p" "$WORK/spec.toml"
        "$BIN" cluster -c "$WORK/spec.toml" -o "$out" >"$out.log" 2>&1 ||
            { tail -20 "$out.log" >&2; echo "cluster run failed: $p" >&2; exit 1; }
        python3 - "$out/load.json" "$r" "$p" "$CONNS" >>"$CSV" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
t = next(s for s in d["summary"] if s["site"] == "TOTAL")
e503 = t["error_kinds"].get("503", 0)
other = t["errors"] - e503
rate = t["served_per_s"]
# Closed loop, no think time: mean response time over all responses (503s
# included) = connections / completed requests per second (Little's law).
done_per_s = t["requests"] / d["elapsed_s"] if d["elapsed_s"] else 0
mean = float(sys.argv[4]) / done_per_s * 1000 if done_per_s else 0
print(f'{sys.argv[2]},{sys.argv[3]},{t["requests"]},{t["served"]},{rate:.1f},{mean:.2f},{t["p50_ms"]:.2f},{t["p99_ms"]:.2f},{t["max_ms"]:.2f},{e503},{other}')
PY
        tail -n1 "$CSV"
    done
done
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)
STAMP=$(date -u +%Y%m%d-%H%M)
mkdir -p "$RESULTS_DIR"
cp "$CSV" "$RESULTS_DIR/routing-fine-coarse-$STAMP.csv"
{
    echo "# Fine vs coarse load reads, $START"
    echo
    echo "Command: \`ROUNDS=$ROUNDS DURATION=$DURATION NODES=$NODES PROXIES=$PROXIES CONNS=$CONNS CANDIDATES=$CANDIDATES INFLIGHT_WEIGHT=$INFLIGHT_WEIGHT POLICIES=\"$POLICIES\" bash bench/routing/fine_coarse.sh\`"
    echo "($NODES testsrv nodes of 4 slots + queue 16, $PROXIES proxies, closed loop of $CONNS connections, ${DURATION}s per run,"
    echo "$ROUNDS interleaved rounds, medians; transport shm, not RDMA; load average $LOAD_START at start, $LOAD_END at end: the machine is shared.)"
    echo
    echo "| policy | served/s | mean ms (all) | p50 ms | p99 ms | max ms | 503s |"
    echo "|---|---:|---:|---:|---:|---:|---:|"
    for p in "${ORDER[@]}"; do
        label=$p
        case $p in per-request | interval:*) label="weighted-least-load, $p" ;; esac
        awk -F, -v p="$p" -v label="$label" '
            function med(c,   n, i, j, t, v) { n = 0
                for (i = 2; i <= NR; i++) if (pol[i] == p) v[++n] = col[i, c]
                for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
                return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2 }
            { pol[NR] = $2; for (c = 1; c <= NF; c++) col[NR, c] = $c + 0 }
            END { printf "| %s | %.0f | %.1f | %.1f | %.1f | %.1f | %d |\n", label, med(5), med(6), med(7), med(8), med(9), med(10) }' "$CSV"
    done
    echo
    echo "## Every run"
    echo
    echo '```'
    cat "$CSV"
    echo '```'
} >"$RESULTS_DIR/routing-fine-coarse-$STAMP.md"
cat "$RESULTS_DIR/routing-fine-coarse-$STAMP.md"
