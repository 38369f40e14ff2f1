#!/usr/bin/env bash
# Proxy cost benchmark: rdmalb against HAProxy and nginx, same backend, same
# load, one run.
#
#   bash bench/proxy/run.sh            # 5 rounds x 10 s per target (~4.5 min)
#   ROUNDS=1 DURATION=3 bash bench/proxy/run.sh   # quick look
#   TARGETS="rdmalb rdmalb-rrw rdmalb-wll" UPDATE_DOCS=0 bash bench/proxy/run.sh
#                                      # roundrobin vs weighted-least-load
#
# One backend (nginx, one worker, a 1 KiB body from memory) sits behind three
# reverse proxies, each configured equivalently (bench/proxy/*.in): one
# worker/thread each, keep-alive to the client and a pool of keep-alive
# connections to the backend, X-Forwarded-For added, no logging. wrk drives
# each target in turn for DURATION seconds with CONNS connections; rounds are
# interleaved and the order rotates every round, so slow drift on a shared
# machine hits every target alike. A "direct" target (wrk straight to the
# backend) is measured too, as the floor.
#
# Per run it records req/s, p50/p99 latency (wrk --latency) and the CPU time
# each proxy used per request: the utime+stime delta in /proc/<pid>/stat over
# the run, summed over every process of the proxy (nginx's master and worker;
# all threads are included in a process's figures), divided by the requests
# wrk completed. It reports medians over rounds and the ratios rdmalb/HAProxy
# and rdmalb/nginx, writes bench/results/proxy-<date>.{md,csv}, and replaces
# the results block of the "Proxy cost" section in docs/benchmarks.md.
#
# CPU placement (PIN=1, the default on 2+ CPUs): the proxy under test runs on
# CPU 0; wrk (one thread) and the backend share CPU 1. One worker per proxy is
# the fair choice on a 2-CPU machine: it gives every proxy the same single
# core, and CPU per request, the main figure, does not depend on it.
#
# Balancing policies: the target `rdmalb` balances roundrobin; `rdmalb-wll`
# is the same proxy config with balance = "weighted-least-load", reading the
# nodes' shm windows per request (d = 2); every node of it has an `rdmalb
# sidecar` (on the load CPU) publishing the host's load every 1 ms. Both
# rdmalb targets get RDMALB_NODES nodes (default 2 when rdmalb-wll is a
# target, else 1), all the same backend. `rdmalb-rrw` is roundrobin over
# the same windowed nodes as `rdmalb-wll`: it reads no load, but its proxy
# follows the nodes' role words and keeps a copy of each bodyless request's
# head for the 421 replay, as every proxy whose nodes can move does. So the
# ratio line "rdmalb-wll / rdmalb-rrw" is the policy's cost alone, and
# "rdmalb-rrw / rdmalb" what nodes that can move cost a roundrobin proxy
# (without rdmalb-rrw, "rdmalb-wll / rdmalb" is printed: both together).
# `rdmalb-qos` is the `rdmalb` config plus `[qos] max_inflight = 4096`: every
# request takes and releases an admission slot (the lock-free fast path;
# wrk's connections never reach the cap, so nothing queues); the ratio line
# "rdmalb-qos / rdmalb" is the admission queue's cost when it is not full.
#
# Environment:
#   ROUNDS=5 DURATION=10 (seconds per run) CONNS=50 WRK_THREADS=1 WARMUP=3
#   TARGETS="direct haproxy nginx rdmalb"   (also: rdmalb-wll rdmalb-rrw rdmalb-qos)   PIN=1|0
#   RDMALB_NODES=1|2|...
#   RDMALB_BIN=path (else: cargo build --release)   UPDATE_DOCS=1|0
#   RESULTS_DIR=bench/results
#   PROFILE="rdmalb"   after the rounds, profile these targets with perf
#                      (cpu-clock samples, DWARF call graphs) during one more
#                      wrk run each; reports go to bench/results/ (empty: none)
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
# shellcheck source=scripts/lib/common.sh
. "$ROOT/scripts/lib/common.sh"
# shellcheck source=bench/proxy/lib.sh
. "$HERE/lib.sh"
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"
umask 022

ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-10}
CONNS=${CONNS:-50}
WRK_THREADS=${WRK_THREADS:-1}
WARMUP=${WARMUP:-3}
TARGETS=${TARGETS:-"direct haproxy nginx rdmalb"}
UPDATE_DOCS=${UPDATE_DOCS:-1}
PROFILE=${PROFILE:-}
RESULTS_DIR=${RESULTS_DIR:-$ROOT/bench/results}
BIN=${RDMALB_BIN:-}
NCPU=$(nproc)
PIN=${PIN:-$([ "$NCPU" -ge 2 ] && echo 1 || echo 0)}
for v in ROUNDS DURATION CONNS WRK_THREADS WARMUP; do
    [[ ${!v} =~ ^[0-9]+$ ]] || die "$v=${!v} is not a whole number"
done
if [ "$ROUNDS" -lt 1 ] || [ "$DURATION" -lt 1 ]; then die "ROUNDS and DURATION must be at least 1"; fi
for t in $TARGETS; do
    case $t in direct | haproxy | nginx | rdmalb | rdmalb-wll | rdmalb-rrw | rdmalb-qos) ;; *) die "unknown target $t (accepted: direct haproxy nginx rdmalb rdmalb-wll rdmalb-rrw rdmalb-qos)" ;; esac
done
for t in $PROFILE; do
    [[ " $TARGETS " == *" $t "* && $t != direct ]] || die "PROFILE target $t is not a proxy in TARGETS ($TARGETS)"
    command -v perf >/dev/null || die "PROFILE needs perf (apt-get install linux-perf)"
done
for tool in nginx haproxy wrk curl taskset; do
    command -v "$tool" >/dev/null || die "$tool not found (run scripts/setup.sh)"
done

bench_work proxy

# Targets whose nodes have shm windows (and sidecars publishing them).
WINDOWED=()
for t in $TARGETS; do case $t in rdmalb-wll | rdmalb-rrw) WINDOWED+=("$t") ;; esac; done
RDMALB_NODES=${RDMALB_NODES:-$([ ${#WINDOWED[@]} -gt 0 ] && echo 2 || echo 1)}
[[ $RDMALB_NODES =~ ^[1-9][0-9]?$ ]] || die "RDMALB_NODES=$RDMALB_NODES is not 1..99"
if [ -z "$BIN" ] && [[ " $TARGETS " == *" rdmalb"* ]]; then
    ensure_cargo
    log "building rdmalb (cargo build --release)"
    (cd "$ROOT" && cargo build --release --quiet) || die "cargo build --release failed"
    BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/rdmalb"
    case $BIN in /*) ;; *) BIN="$ROOT/$BIN" ;; esac
fi

# CPU sets: proxy on one core, load generator and backend on the other.
# (Command prefixes, not functions: setsid and timeout exec them.)
if [ "$PIN" = 1 ]; then
    PROXY_CPUS=0 LOAD_CPUS=1
    ON_PROXY_CPU=(taskset -c "$PROXY_CPUS")
    ON_LOAD_CPU=(taskset -c "$LOAD_CPUS")
else
    PROXY_CPUS=all LOAD_CPUS=all
    ON_PROXY_CPU=()
    ON_LOAD_CPU=()
fi

# ----------------------------------------------------------------- configs
# Templates are filled by proxy_render (lib.sh): one worker, 4096
# connections, no TLS listener.
render() { proxy_render "$@"; }
# 1 KiB body: 64 x 16 characters.
BODY=$(printf '%.0s0123456789abcdef' $(seq 64))
free_port BACKEND_PORT 28000
declare -A PORT PGID
free_port 'PORT[haproxy]' 28001
free_port 'PORT[nginx]' 28002
free_port 'PORT[rdmalb]' 28003
free_port 'PORT[rdmalb-wll]' 28004
free_port 'PORT[rdmalb-qos]' 28005
free_port 'PORT[rdmalb-rrw]' 28006
PORT[direct]=$BACKEND_PORT

render "$HERE/backend.nginx.conf.in" "$WORK/backend.conf"
render "$HERE/haproxy.cfg.in" "$WORK/haproxy.cfg" "${PORT[haproxy]}"
render "$HERE/nginx-proxy.conf.in" "$WORK/nginx-proxy.conf" "${PORT[nginx]}"
# rdmalb_config OUT PORT BALANCE WINDOWS(0|1): the rdmalb template with
# RDMALB_NODES nodes (all the backend), with shm windows when WINDOWS=1.
rdmalb_config() {
    local i nodes
    nodes=$WORK/nodes-$(basename "$1")
    : >"$nodes"
    for ((i = 1; i <= RDMALB_NODES; i++)); do
        printf '[[node]]\nname = "b%d"\naddress = "127.0.0.1:%s"\nsite = "bench"\n' "$i" "$BACKEND_PORT" >>"$nodes"
        [ "$4" = 1 ] && printf 'transport = "shm"\nsidecar = "%s/window-b%d"\nnode_id = %d\n' "$WORK" "$i" "$i" >>"$nodes"
        printf '\n' >>"$nodes"
    done
    render "$HERE/rdmalb.toml.in" "$1.tmp" "$2"
    sed -e "s|@BALANCE@|$3|" -e "/@NODES@/{r $nodes" -e "d}" "$1.tmp" >"$1"
    rm -f "$1.tmp"
}
rdmalb_config "$WORK/rdmalb.toml" "${PORT[rdmalb]}" roundrobin 0
rdmalb_config "$WORK/rdmalb-wll.toml" "${PORT[rdmalb-wll]}" weighted-least-load 1
rdmalb_config "$WORK/rdmalb-rrw.toml" "${PORT[rdmalb-rrw]}" roundrobin 1
rdmalb_config "$WORK/rdmalb-qos.toml" "${PORT[rdmalb-qos]}" roundrobin 0
printf '\n[qos]\nmax_inflight = 4096\n' >>"$WORK/rdmalb-qos.toml"

# ----------------------------------------------------------------- start
# Every process logs to a file: no colour escapes in those logs.
export NO_COLOR=1
log "starting the backend and the proxies (work dir $WORK)"
nginx -t -q -p "$WORK" -e "$WORK/backend-error.log" -c "$WORK/backend.conf"
spawn backend "$WORK/backend.out" "${ON_LOAD_CPU[@]}" \
    nginx -p "$WORK" -e "$WORK/backend-error.log" -c "$WORK/backend.conf" -g 'daemon off;'
BACKEND_PGID=$SPAWN_PID
PGID[direct]=''
for t in $TARGETS; do
    case $t in
        haproxy)
            haproxy -c -q -f "$WORK/haproxy.cfg" || die "haproxy rejected $WORK/haproxy.cfg"
            spawn haproxy "$WORK/haproxy.out" "${ON_PROXY_CPU[@]}" haproxy -db -f "$WORK/haproxy.cfg"
            ;;
        nginx)
            nginx -t -q -p "$WORK" -e "$WORK/nginx-proxy-error.log" -c "$WORK/nginx-proxy.conf"
            spawn nginx-proxy "$WORK/nginx-proxy.out" "${ON_PROXY_CPU[@]}" \
                nginx -p "$WORK" -e "$WORK/nginx-proxy-error.log" -c "$WORK/nginx-proxy.conf" -g 'daemon off;'
            ;;
        rdmalb | rdmalb-wll | rdmalb-rrw | rdmalb-qos)
            [ -x "$BIN" ] || die "rdmalb binary not found: $BIN"
            if [ "$t" = "${WINDOWED[0]:-}" ]; then
                # The nodes' sidecars first (once, for every windowed
                # target), so the windows exist when the proxy starts (it
                # would retry, but the first requests would be scored
                # without loads).
                for ((i = 1; i <= RDMALB_NODES; i++)); do
                    sed -e "s|@DIR@|$WORK|g" -e "s|@BACKEND_PORT@|$BACKEND_PORT|g" -e "s|@NODE@|b$i|g" \
                        -e "s|@NODE_ID@|$i|g" "$HERE/sidecar.toml.in" >"$WORK/sidecar-b$i.toml"
                    spawn "sidecar-b$i" "$WORK/sidecar-b$i.out" "${ON_LOAD_CPU[@]}" "$BIN" sidecar -c "$WORK/sidecar-b$i.toml"
                    for _ in $(seq 100); do [ -e "$WORK/window-b$i" ] && break; sleep 0.1; done
                    [ -e "$WORK/window-b$i" ] || die "sidecar b$i did not create its window (log: $WORK/sidecar-b$i.out)"
                done
            fi
            "$BIN" check -c "$WORK/$t.toml" >"$WORK/$t-check.out" 2>&1 ||
                { cat "$WORK/$t-check.out" >&2; die "rdmalb check rejected $WORK/$t.toml"; }
            spawn "$t" "$WORK/$t.out" "${ON_PROXY_CPU[@]}" "$BIN" proxy -c "$WORK/$t.toml"
            ;;
        direct) continue ;;
    esac
    PGID[$t]=$SPAWN_PID
done

# Every target must answer 200 with exactly the backend's body before we
# measure anything: a misconfigured proxy must not produce a number.
for t in $TARGETS; do
    url="http://127.0.0.1:${PORT[$t]}/"
    wait_http "$url" 15 -H "Host: bench.localhost" ||
        { check_spawned || true; die "$t does not answer 200 on $url (logs in $WORK)"; }
    got=$(curl -fsS --max-time 5 -H "Host: bench.localhost" "$url")
    [ "$got" = "$BODY" ] || die "$t answered a different body (${#got} bytes) on $url"
done

# The windowed targets must really be reading windows: every node's window
# connected (the proxy logs each connection), else the weighted-least-load
# figure would be the cost of scoring without loads.
for t in "${WINDOWED[@]}"; do
    for _ in $(seq 100); do
        [ "$(grep -c 'window connected' "$WORK/$t.out" || true)" -ge "$RDMALB_NODES" ] && break
        sleep 0.1
    done
    [ "$(grep -c 'window connected' "$WORK/$t.out" || true)" -ge "$RDMALB_NODES" ] ||
        die "$t did not connect to all $RDMALB_NODES node windows (log: $WORK/$t.out)"
done

# ----------------------------------------------------------------- measuring
# cpu_ticks PGID (lib.sh): utime+stime of every process of the group.

CSV=$WORK/runs.csv
echo "round,position,target,requests,seconds,req_per_s,p50_ms,p99_ms,socket_errors,non_2xx,proxy_cpu_us_per_req,proxy_cpu_util,backend_cpu_us_per_req" >"$CSV"

# run_wrk TARGET SECONDS OUTFILE
run_wrk() {
    timeout $(($2 + 30)) "${ON_LOAD_CPU[@]}" wrk -t"$WRK_THREADS" -c"$CONNS" -d"${2}s" --timeout 5s --latency \
        -H "Host: bench.localhost" "http://127.0.0.1:${PORT[$1]}/" >"$3" 2>&1 ||
        { cat "$3" >&2; die "wrk failed against $1"; }
}

# measure ROUND POSITION TARGET
measure() {
    local round=$1 pos=$2 t=$3 out p0 p1 b0 b1 t0 t1
    out=$WORK/wrk-$t-$round.txt
    p0=0 p1=0
    [ -n "${PGID[$t]}" ] && p0=$(cpu_ticks "${PGID[$t]}")
    b0=$(cpu_ticks "$BACKEND_PGID")
    t0=$(date +%s.%N)
    run_wrk "$t" "$DURATION" "$out"
    t1=$(date +%s.%N)
    [ -n "${PGID[$t]}" ] && p1=$(cpu_ticks "${PGID[$t]}")
    b1=$(cpu_ticks "$BACKEND_PGID")
    check_spawned || die "a process died during the $t run"
    awk -v round="$round" -v pos="$pos" -v t="$t" -v hz="$CLK_HZ" -v dp=$((p1 - p0)) -v db=$((b1 - b0)) \
        -v wall="$(awk -v a="$t0" -v b="$t1" 'BEGIN{print b-a}')" -v proxied="${PGID[$t]:+1}" '
        function ms(v,   n, u) { n = v + 0; u = v; sub(/^[0-9.]+/, "", u)
            if (u == "us") n /= 1000; else if (u == "s") n *= 1000; else if (u == "m") n *= 60000
            return n }
        /requests in/ { req = $1; secs = $4; sub(/s,?$/, "", secs) }
        /Requests\/sec:/ { rps = $2 }
        /^ +50%/ { p50 = ms($2) }
        /^ +99%/ { p99 = ms($2) }
        /Socket errors:/ { gsub(/,/, ""); serr = $4 + $6 + $8 + $10 }
        /Non-2xx or 3xx responses:/ { non2xx = $5 }
        END {
            if (req == 0) { print "no requests completed" > "/dev/stderr"; exit 1 }
            pcpu = proxied ? sprintf("%.2f", dp * 1e6 / hz / req) : ""
            putil = proxied ? sprintf("%.3f", dp / hz / wall) : ""
            printf "%s,%s,%s,%d,%s,%.1f,%.3f,%.3f,%d,%d,%s,%s,%.2f\n", round, pos, t, req, secs, rps,
                p50, p99, serr, non2xx, pcpu, putil, db * 1e6 / hz / req
        }' "$out" >>"$CSV" || { cat "$out" >&2; die "could not parse wrk output for $t"; }
    tail -n1 "$CSV" | awk -F, '{ printf "    %-8s %9.0f req/s  p50 %7.3f ms  p99 %7.3f ms  proxy %6s us/req  errors %d\n",
        $3, $6, $7, $8, ($11 == "" ? "-" : $11), $9 + $10 }'
}

read -r -a ORDER <<<"$TARGETS"
N=${#ORDER[@]}
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
START_DATE=$(date -u +%Y-%m-%dT%H:%MZ)
total=$(((ROUNDS * DURATION + WARMUP) * N))
log "warm-up ${WARMUP}s per target, then $ROUNDS rounds x $N targets x ${DURATION}s (about $((total / 60 + 1)) min)"
if [ "$WARMUP" -gt 0 ]; then
    for t in "${ORDER[@]}"; do run_wrk "$t" "$WARMUP" "$WORK/warmup-$t.txt"; done
fi
for ((r = 1; r <= ROUNDS; r++)); do
    log "round $r/$ROUNDS"
    for ((i = 0; i < N; i++)); do
        measure "$r" "$((i + 1))" "${ORDER[$(((i + r - 1) % N))]}"
    done
done
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)
STAMP=$(date -u +%Y%m%d-%H%M)

# ----------------------------------------------------------------- profile
# perf_profile (lib.sh): cpu-clock samples with DWARF call graphs during one
# more wrk run of the target; three reports per profile.
PROFILES=()
for t in $PROFILE; do
    log "profiling $t during a ${DURATION}s wrk run"
    mkdir -p "$RESULTS_DIR"
    report=$RESULTS_DIR/proxy-profile-$t-$STAMP.txt
    perf_profile "$t" "${PGID[$t]}" "$report" "$t under wrk -t$WRK_THREADS -c$CONNS -d${DURATION}s" \
        run_wrk "$t" "$DURATION" "$WORK/wrk-profile-$t.txt"
    PROFILES+=("$report")
done

# ----------------------------------------------------------------- report
# median, ratio and proxy_labels come from lib.sh.
declare -A RPS P50 P99 CPU UTIL BCPU ERR
for t in "${ORDER[@]}"; do
    RPS[$t]=$(median "$CSV" 6 "$t")
    P50[$t]=$(median "$CSV" 7 "$t")
    P99[$t]=$(median "$CSV" 8 "$t")
    CPU[$t]=$(median "$CSV" 11 "$t")
    UTIL[$t]=$(median "$CSV" 12 "$t")
    BCPU[$t]=$(median "$CSV" 13 "$t")
    ERR[$t]=$(awk -F, -v t="$t" 'NR > 1 && $3 == t { s += $9 + $10 } END { print s + 0 }' "$CSV")
done
proxy_labels "$ROOT"
LABEL[rdmalb-wll]="${LABEL[rdmalb]} weighted-least-load (shm, per-request, d = 2)"
LABEL[rdmalb-rrw]="${LABEL[rdmalb]} roundrobin, nodes with shm windows"
LABEL[rdmalb-qos]="${LABEL[rdmalb]} roundrobin, [qos] max_inflight = 4096 (never full)"
[ ${#WINDOWED[@]} -gt 0 ] && LABEL[rdmalb]+=" roundrobin"

CPU_MODEL=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
COMMAND="TARGETS=\"$TARGETS\" ROUNDS=$ROUNDS DURATION=$DURATION CONNS=$CONNS WRK_THREADS=$WRK_THREADS PIN=$PIN RDMALB_NODES=$RDMALB_NODES bash bench/proxy/run.sh"
BLOCK=$WORK/block.md
{
    echo "Measured $START_DATE on $NCPU CPUs ($CPU_MODEL), Linux $(uname -r), load average $LOAD_START at start and $LOAD_END at end (the machine is shared)."
    echo
    echo "Command: \`$COMMAND\`"
    echo "(wrk -t$WRK_THREADS -c$CONNS -d${DURATION}s --latency, 1 KiB body, $ROUNDS interleaved rounds, medians shown;"
    if [ "$PIN" = 1 ]; then
        echo "proxy pinned to CPU $PROXY_CPUS, wrk and the backend to CPU $LOAD_CPUS; one worker/thread per proxy)."
    else
        echo "no CPU pinning; one worker/thread per proxy)."
    fi
    echo
    echo "| target | req/s | p50 ms | p99 ms | proxy CPU µs/req | proxy CPU use (cores) | backend CPU µs/req | errors |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|"
    for t in "${ORDER[@]}"; do
        printf '| %s | %.0f | %.3f | %.3f | %s | %s | %.1f | %s |\n' "${LABEL[$t]}" "${RPS[$t]}" "${P50[$t]}" "${P99[$t]}" \
            "$([ -n "${CPU[$t]}" ] && printf '%.1f' "${CPU[$t]}" || echo '–')" \
            "$([ -n "${UTIL[$t]}" ] && printf '%.2f' "${UTIL[$t]}" || echo '–')" "${BCPU[$t]}" "${ERR[$t]}"
    done
    echo
    echo "\"proxy CPU use\" is the proxy's CPU time over the run's wall time: well below 1.00 means the"
    echo "proxy was waiting for its core (other work on the machine) or for the load generator."
    if [ -n "${RPS[rdmalb]:-}" ]; then
        echo
        for other in haproxy nginx; do
            [ -n "${RPS[$other]:-}" ] || continue
            echo "- rdmalb / ${LABEL[$other]}: throughput **$(ratio "${RPS[rdmalb]}" "${RPS[$other]}")x**, CPU per request **$(ratio "${CPU[rdmalb]}" "${CPU[$other]}")x**, p99 latency $(ratio "${P99[rdmalb]}" "${P99[$other]}")x"
        done
    fi
    # pair_line LABEL A B: A's figures over B's.
    pair_line() {
        echo
        echo "- $1 ($2 / $3, $RDMALB_NODES nodes): throughput **$(ratio "${RPS[$2]}" "${RPS[$3]}")x**, CPU per request **$(ratio "${CPU[$2]}" "${CPU[$3]}")x**, p99 latency $(ratio "${P99[$2]}" "${P99[$3]}")x (transport shm, not RDMA)"
    }
    if [ -n "${RPS[rdmalb-rrw]:-}" ] && [ -n "${RPS[rdmalb-wll]:-}" ]; then
        pair_line "weighted-least-load / roundrobin, the same windowed nodes" rdmalb-wll rdmalb-rrw
    elif [ -n "${RPS[rdmalb]:-}" ] && [ -n "${RPS[rdmalb-wll]:-}" ]; then
        pair_line "weighted-least-load over windowed nodes / roundrobin over plain nodes" rdmalb-wll rdmalb
    fi
    if [ -n "${RPS[rdmalb]:-}" ] && [ -n "${RPS[rdmalb-rrw]:-}" ]; then
        pair_line "roundrobin, nodes with windows / without" rdmalb-rrw rdmalb
    fi
    if [ -n "${RPS[rdmalb]:-}" ] && [ -n "${RPS[rdmalb-qos]:-}" ]; then
        echo
        echo "- admission queue on, never full / off (rdmalb-qos / rdmalb): throughput **$(ratio "${RPS[rdmalb-qos]}" "${RPS[rdmalb]}")x**, CPU per request **$(ratio "${CPU[rdmalb-qos]}" "${CPU[rdmalb]}")x**, p99 latency $(ratio "${P99[rdmalb-qos]}" "${P99[rdmalb]}")x"
    fi
} >"$BLOCK"

mkdir -p "$RESULTS_DIR"
cp "$CSV" "$RESULTS_DIR/proxy-$STAMP.csv"
{
    echo "# Proxy cost benchmark, $START_DATE"
    echo
    cat "$BLOCK"
    echo
    echo "## Every run"
    echo
    echo "| round | order | target | requests | req/s | p50 ms | p99 ms | errors | proxy CPU µs/req | proxy CPU util | backend CPU µs/req |"
    echo "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"
    awk -F, 'NR > 1 { printf "| %s | %s | %s | %s | %.0f | %s | %s | %d | %s | %s | %s |\n", $1, $2, $3, $4, $6, $7, $8, $9 + $10, ($11 == "" ? "–" : $11), ($12 == "" ? "–" : $12), $13 }' "$CSV"
    echo
    echo "## Configurations"
    for f in backend.conf haproxy.cfg nginx-proxy.conf rdmalb.toml rdmalb-wll.toml rdmalb-rrw.toml rdmalb-qos.toml sidecar-b1.toml; do
        [ -f "$WORK/$f" ] || continue
        echo
        echo "\`$f\` (rendered from bench/proxy/; the body is 1024 bytes):"
        echo
        echo '```'
        sed "s|$BODY|<1 KiB body>|; s|$WORK|<workdir>|g" "$WORK/$f"
        echo '```'
    done
} >"$RESULTS_DIR/proxy-$STAMP.md"
echo
cat "$BLOCK"
echo
log "results: $RESULTS_DIR/proxy-$STAMP.md (+ .csv)"
for f in "${PROFILES[@]}"; do log "profile: $f"; done

# ----------------------------------------------------------------- docs
# Replace only the generated block of the "Proxy cost" section; everything
# else in docs/benchmarks.md (other benchmarks' sections, the profile notes)
# is left as it is.
if [ "$UPDATE_DOCS" = 1 ]; then
    {
        echo "Latest run: \`bench/results/proxy-$STAMP.md\`."
        echo
        cat "$BLOCK"
    } >"$WORK/block-doc.md"
    replace_doc_block "$ROOT/docs/benchmarks.md" proxy-cost bench/proxy/run.sh "$WORK/block-doc.md" "## Proxy cost"
    log "updated the Proxy cost section of docs/benchmarks.md"
fi
