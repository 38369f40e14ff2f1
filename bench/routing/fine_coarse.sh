#!/usr/bin/env bash
# Fine vs coarse load reads (seed 002 section 5.2.3, Fig. 9 and Table 1) on
# the emulated cluster (`rdmalb-testbed cluster`, docs/testbed.md): the same
# heterogeneous trace through the same nodes and proxies under
#   weighted-least-load with per-request reads, with interval:64ms, 256ms,
#   1s, 4s snapshots, and roundrobin, leastconn, random (power of two).
#
#   bash bench/routing/fine_coarse.sh                 # 3 rounds x 8 policies x 6 s (~4 min)
#   ROUNDS=1 DURATION=3 bash bench/routing/fine_coarse.sh
#
# A policy may name the transport the proxies read the windows over:
# `per-request@tcp`, `interval:50ms@tcp` (default shm; the cluster spec's
# `transport`, docs/testbed.md). HOGS lists backend CPU hogs per run
# ("0 2": every policy without and with 2 hogs); any non-zero count pins
# the cluster for every run of the invocation, so runs with and without
# hogs differ in the hogs only: the cluster process (load client) and its
# proxies on CPU 0, the testsrv nodes and their sidecars on CPU 1 (moved
# there by PID once the cluster has written pids.txt), and the hogs —
# busy-loop `sh` processes at the nodes' nice level (0), so they share
# CPU 1 with the backend as a busy backend's own work would — on CPU 1,
# started before each run and killed by PID after it. NAME sets the
# result file name (bench/routing/backend_load.sh uses this).
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
HOGS=${HOGS:-0}
NAME=${NAME:-routing-fine-coarse}
RESULTS_DIR=${RESULTS_DIR:-$ROOT/bench/results}
# The testbed binary (trace, cluster); it runs the appliance `rdmalb` found
# beside it (or RDMALB_BIN).
BIN=${RDMALB_TESTBED_BIN:-}
for v in ROUNDS DURATION NODES PROXIES CONNS; do
    [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "$v=${!v} is not a positive integer" >&2; exit 2; }
done
PIN=0
for h in $HOGS; do
    [[ $h =~ ^[0-9]+$ ]] || { echo "HOGS: $h is not a count" >&2; exit 2; }
    if [ "$h" -gt 0 ]; then PIN=1; fi
done
if [ "$PIN" = 1 ] && [ "$(nproc)" -lt 2 ]; then
    echo "HOGS needs 2 CPUs (front end on CPU 0, backend and hogs on CPU 1)" >&2; exit 2
fi
if [ -z "$BIN" ]; then
    (cd "$ROOT" && cargo build --release --quiet --bin rdmalb --bin rdmalb-testbed)
    BIN=$ROOT/target/release/rdmalb-testbed
fi
WORK=$(mktemp -d /tmp/rdmalb-fine-coarse.XXXXXX)
HOG_PIDS=()
CLUSTER_PID=
stop_hogs() {
    if [ ${#HOG_PIDS[@]} -gt 0 ]; then
        kill "${HOG_PIDS[@]}" 2>/dev/null || true
        wait "${HOG_PIDS[@]}" 2>/dev/null || true
    fi
    HOG_PIDS=()
}
trap '[ -n "$CLUSTER_PID" ] && kill "$CLUSTER_PID" 2>/dev/null; stop_hogs; rm -rf "$WORK"' EXIT

"$BIN" trace zipf --sites shop --alpha 0.5 --files 1000 --dynamic-share 0.3 --cost 2ms \
    -n 200000 --seed 11 -o "$WORK/cheap.txt" >/dev/null
"$BIN" trace zipf --sites shop --alpha 0.5 --files 1000 --dynamic-share 0.3 --cost 40ms \
    -n 200000 --seed 12 -o "$WORK/dear.txt" >/dev/null
{
    echo "# RUBiS-like mix: zipf alpha 0.5, 30% dynamic, cheap (2ms, seed 11) and expensive (40ms, seed 12) interleaved"
    paste -d'\n' <(grep -v '^#' "$WORK/cheap.txt") <(grep -v '^#' "$WORK/dear.txt")
} >"$WORK/mix.txt"

# The load index every emulated-cluster benchmark configures: written once,
# in bench/cluster_bench.py (app_weights).
WEIGHTS=$(INFLIGHT="$INFLIGHT_WEIGHT" PYTHONPATH="$ROOT/bench" python3 -c \
    'import os; from cluster_bench import app_weights; print(app_weights(os.environ["INFLIGHT"]), end="")')

spec() { # policy[@transport] out
    local balance=weighted-least-load routing="" transport=shm
    case $1 in *@*) transport=${1#*@} ;; esac
    case $1 in
        per-request* | interval:*) routing="load_read = \"${1%@*}\"" ;;
        roundrobin | leastconn | random) balance=$1 ;;
        *) echo "unknown policy $1" >&2; exit 2 ;;
    esac
    cat >"$2" <<SPEC
sites = ["shop"]
split = "$NODES"
proxies = $PROXIES
balance = "$balance"
transport = "$transport"
duration = "${DURATION}s"
trace_file = "$WORK/mix.txt"

[node]
slots = 4
queue = 16

[load]
connections = $CONNS
interval = "1s"
timeout = "5s"

$WEIGHTS

[proxy.routing]
candidates = $CANDIDATES
$routing
SPEC
}

# One cluster run: hogs (if any) started before and killed after; the
# backend moved to CPU 1 when pinning; the proxies' /metrics scraped every
# 0.5 s while it runs (counters: the last scrape covers the run).
run_cluster() { # spec out hogs
    local front=() moved=0 admins a ok
    if [ "$PIN" = 1 ]; then
        front=(taskset -c 0)
        for ((k = 0; k < $3; k++)); do
            taskset -c 1 nice -n 0 sh -c 'while :; do :; done' &
            HOG_PIDS+=($!)
        done
    fi
    "${front[@]}" "$BIN" cluster -c "$1" -o "$2" >"$2.log" 2>&1 &
    CLUSTER_PID=$!
    while kill -0 "$CLUSTER_PID" 2>/dev/null; do
        if [ "$PIN" = 1 ] && [ $moved = 0 ] && [ -s "$2/pids.txt" ]; then
            while read -r name pid; do
                if [[ $name =~ ^n[0-9]+(-sidecar)?$ ]]; then taskset -a -p -c 1 "$pid" >/dev/null || true; fi
            done <"$2/pids.txt"
            moved=1
        fi
        admins=$(cat "$2"/conf/proxy*.toml 2>/dev/null |
            awk '/^\[/ { sec = $0 } sec == "[admin]" && $1 == "listen" { gsub(/"/, "", $3); print $3 }')
        if [ -n "$admins" ]; then
            ok=1
            : >"$2.metrics.tmp"
            for a in $admins; do
                curl -fsS -m 1 "http://$a/metrics" >>"$2.metrics.tmp" 2>/dev/null || ok=0
            done
            if [ $ok = 1 ]; then mv "$2.metrics.tmp" "$2.metrics"; fi
        fi
        sleep 0.5
    done
    local rc=0
    wait "$CLUSTER_PID" || rc=$?
    CLUSTER_PID=
    stop_hogs
    return $rc
}

CSV=$WORK/runs.csv
echo "round,policy,hogs,requests,served,served_per_s,mean_ms,p50_ms,p99_ms,max_ms,errors_503,errors_other,load_reads,load_unknown,unknown_reasons" >"$CSV"
read -r -a ORDER <<<"$POLICIES"
read -r -a HOG_LIST <<<"$HOGS"
N=${#ORDER[@]}
START=$(date -u +%Y-%m-%dT%H:%MZ)
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
for ((r = 1; r <= ROUNDS; r++)); do
    for ((i = 0; i < N; i++)); do
        p=${ORDER[$(((i + r - 1) % N))]}
        spec "$p" "$WORK/spec.toml"
        for h in "${HOG_LIST[@]}"; do
            out=$WORK/run-$r-${p//[:@]/-}-h$h
            run_cluster "$WORK/spec.toml" "$out" "$h" ||
                { tail -20 "$out.log" >&2; echo "cluster run failed: $p, $h hogs" >&2; exit 1; }
            python3 - "$out/load.json" "$r" "$p" "$CONNS" "$h" "$out.metrics" >>"$CSV" <<'PY'
import json, os, sys
d = json.load(open(sys.argv[1]))
# Load reads and unknowns summed over nodes and proxies (Prometheus text:
# `name{labels} value`); empty when no scrape succeeded.
reads, unknown, reasons = "", "", {}
if os.path.exists(sys.argv[6]):
    reads, unknown = 0, 0
    for line in open(sys.argv[6]):
        if line.startswith("rdmalb_load_reads_total{"):
            reads += float(line.split()[-1])
        elif line.startswith("rdmalb_load_unknown_total{"):
            v = float(line.split()[-1])
            unknown += v
            r = line.split('reason="', 1)[1].split('"', 1)[0] if 'reason="' in line else "?"
            reasons[r] = reasons.get(r, 0) + v
    reads, unknown = f"{reads:.0f}", f"{unknown:.0f}"
why = ";".join(f"{k}:{v:.0f}" for k, v in sorted(reasons.items()) if v)
t = next(s for s in d["summary"] if s["site"] == "TOTAL")
e503 = t["error_kinds"].get("503", 0)
other = t["errors"] - e503
rate = t["served_per_s"]
# Closed loop, no think time: mean response time over all responses (503s
# included) = connections / completed requests per second (Little's law).
done_per_s = t["requests"] / d["elapsed_s"] if d["elapsed_s"] else 0
mean = float(sys.argv[4]) / done_per_s * 1000 if done_per_s else 0
print(f'{sys.argv[2]},{sys.argv[3]},{sys.argv[5]},{t["requests"]},{t["served"]},{rate:.1f},{mean:.2f},{t["p50_ms"]:.2f},{t["p99_ms"]:.2f},{t["max_ms"]:.2f},{e503},{other},{reads},{unknown},{why}')
PY
            tail -n1 "$CSV"
        done
    done
done
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)
STAMP=$(date -u +%Y%m%d-%H%M)
mkdir -p "$RESULTS_DIR"
cp "$CSV" "$RESULTS_DIR/$NAME-$STAMP.csv"
{
    echo "# $NAME, $START"
    echo
    echo "Command: \`ROUNDS=$ROUNDS DURATION=$DURATION NODES=$NODES PROXIES=$PROXIES CONNS=$CONNS CANDIDATES=$CANDIDATES INFLIGHT_WEIGHT=$INFLIGHT_WEIGHT POLICIES=\"$POLICIES\" HOGS=\"$HOGS\" NAME=$NAME bash bench/routing/fine_coarse.sh\`"
    echo "($NODES testsrv nodes of 4 slots + queue 16, $PROXIES proxies, closed loop of $CONNS connections, ${DURATION}s per run,"
    echo "$ROUNDS interleaved rounds, medians; transport per row (shm and tcp, neither is RDMA); load average $LOAD_START at start, $LOAD_END at end: the machine is shared."
    if [ "$PIN" = 1 ]; then echo "Pinned: load client and proxies on CPU 0, testsrv nodes, sidecars and hogs (busy loops, nice 0) on CPU 1."; fi
    echo ")"
    echo
    echo "| policy | transport | backend hogs | served/s | mean ms (all) | p50 ms | p99 ms | max ms | 503s | load reads | unknown |"
    echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    for p in "${ORDER[@]}"; do
        for h in "${HOG_LIST[@]}"; do
            label=${p%@*} transport=shm
            case $p in *@*) transport=${p#*@} ;; esac
            case $label in per-request | interval:*) label="weighted-least-load, $label" ;; esac
            awk -F, -v p="$p" -v h="$h" -v label="$label" -v tr="$transport" '
                function med(c,   n, i, j, t, v) { n = 0
                    for (i = 2; i <= NR; i++) if (pol[i] == p && hog[i] == h) v[++n] = col[i, c]
                    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
                    return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2 }
                { pol[NR] = $2; hog[NR] = $3; for (c = 1; c <= NF; c++) col[NR, c] = $c + 0 }
                END { printf "| %s | %s | %s | %.0f | %.1f | %.1f | %.1f | %.1f | %d | %d | %d |\n", label, tr, h, med(6), med(7), med(8), med(9), med(10), med(11), med(13), med(14) }' "$CSV"
        done
    done
    echo
    echo "## Every run"
    echo
    echo '```'
    cat "$CSV"
    echo '```'
} >"$RESULTS_DIR/$NAME-$STAMP.md"
cat "$RESULTS_DIR/$NAME-$STAMP.md"
