#!/usr/bin/env bash
# Compression cost (issue 31): rdmalb's gzip, brotli and zstd against
# HAProxy's gzip (libslz in Debian's build), and both proxies without
# compression, side by side in one run.
#
#   bash bench/proxy/compression.sh                  # 5 rounds x 5 s (~6 min)
#   ROUNDS=1 DURATION=2 bash bench/proxy/compression.sh   # quick look
#
# One nginx backend serves two HTML files made of real English text (the
# GPL-3 in /usr/share/common-licenses, as Debian ships it): 1 KiB and
# 64 KiB. Each proxy (one worker/thread, pinned to CPU 0; wrk and nginx on
# CPU 1) is configured equivalently: keep-alive both sides, no logging, and
# compression of text/html. For every size and target, wrk (-t1 -c50) asks
# with the target's `Accept-Encoding` for DURATION seconds; rounds are
# interleaved, the order rotating. Per run: requests/s, the proxy's CPU time
# per response (utime+stime of its processes over the run / responses, from
# /proc), and the bytes per response on the wire (wrk's bytes read / its
# responses: head and body). Medians over rounds; ratios against HAProxy's
# gzip. Results: bench/results/compression-<date>.{md,csv}.
#
# Environment: ROUNDS=5 DURATION=5 CONNS=50 LEVEL=<rdmalb level, default:
# the config's> RDMALB_BIN=path (else cargo build --release)
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
. "$ROOT/scripts/lib/common.sh"
. "$HERE/lib.sh"
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-5}
CONNS=${CONNS:-50}
LEVEL=${LEVEL:-}
RESULTS_DIR=${RESULTS_DIR:-$ROOT/bench/results}
BIN=${RDMALB_BIN:-}
for v in ROUNDS DURATION CONNS; do
    [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v=${!v} is not a positive whole number"
done
for tool in nginx haproxy wrk taskset; do
    command -v "$tool" >/dev/null || die "$tool not found (run scripts/setup.sh)"
done
TEXT=/usr/share/common-licenses/GPL-3
[ -r "$TEXT" ] || die "$TEXT not found (Debian's base-files ships it)"
if [ -z "$BIN" ]; then
    ensure_cargo
    log "building rdmalb (cargo build --release)"
    (cd "$ROOT" && cargo build --release --quiet --bin rdmalb) || die "cargo build --release failed"
    BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/rdmalb"
fi
[ -x "$BIN" ] || die "rdmalb binary not found: $BIN"

bench_work compression
export NO_COLOR=1
ON_PROXY=(taskset -c 0)
ON_LOAD=(taskset -c 1)

# The files: HTML paragraphs of the license text, cut to size.
mkdir -p "$WORK/www"
{ echo "<!doctype html><html><body>"; sed 's/^/<p>/' "$TEXT"; sed 's/^/<p>/' "$TEXT"; } >"$WORK/text.html"
head -c 1024 "$WORK/text.html" >"$WORK/www/1k.html"
head -c 65536 "$WORK/text.html" >"$WORK/www/64k.html"

free_port BACKEND_PORT 29000
free_port HAPROXY_PORT 29001
free_port RDMALB_PORT 29002
cat >"$WORK/backend.conf" <<EOF
worker_processes 1;
pid $WORK/backend.pid;
events { worker_connections 4096; }
http {
$(nginx_tempdirs "$WORK")
    access_log off;
    keepalive_requests 1000000;
    types { text/html html; }
    server { listen 127.0.0.1:$BACKEND_PORT backlog=4096; root $WORK/www; }
}
EOF
cat >"$WORK/haproxy.cfg" <<EOF
global
    nbthread 1
    maxconn 4096
defaults
    mode http
    option http-keep-alive
    http-reuse always
    timeout connect 2s
    timeout client 30s
    timeout server 30s
frontend fe
    bind 127.0.0.1:$HAPROXY_PORT
    compression algo gzip
    compression type text/html
    default_backend be
backend be
    server b1 127.0.0.1:$BACKEND_PORT
EOF
cat >"$WORK/rdmalb.toml" <<EOF
[global]
workers = 1
access_log = "off"
shutdown_grace = "1s"
compression_max_cpu = 100

[limits]
pool_idle_per_node = 1024

[[listener]]
name = "bench"
listen = "127.0.0.1:$RDMALB_PORT"

[[site]]
name = "bench"
hosts = ["*"]

[site.compression]
types = ["text/html"]
min_size = 0
${LEVEL:+level = $LEVEL}

[[node]]
name = "b1"
address = "127.0.0.1:$BACKEND_PORT"
site = "bench"
check = false
EOF
"$BIN" check -c "$WORK/rdmalb.toml" >/dev/null || die "rdmalb check rejected $WORK/rdmalb.toml"
haproxy -c -q -f "$WORK/haproxy.cfg" || die "haproxy rejected $WORK/haproxy.cfg"

log "starting nginx, haproxy and rdmalb (work dir $WORK)"
spawn backend "$WORK/backend.out" "${ON_LOAD[@]}" nginx -p "$WORK" -e "$WORK/backend-error.log" -c "$WORK/backend.conf" -g 'daemon off;'
BACKEND_PGID=$SPAWN_PID
spawn haproxy "$WORK/haproxy.out" "${ON_PROXY[@]}" haproxy -db -f "$WORK/haproxy.cfg"
HAPROXY_PGID=$SPAWN_PID
spawn rdmalb "$WORK/rdmalb.out" "${ON_PROXY[@]}" "$BIN" proxy -c "$WORK/rdmalb.toml"
RDMALB_PGID=$SPAWN_PID
wait_tcp "$BACKEND_PORT" 20 "$BACKEND_PGID" || die "nginx did not start (log: $WORK/backend-error.log)"
wait_tcp "$HAPROXY_PORT" 20 "$HAPROXY_PGID" || die "haproxy did not start (log: $WORK/haproxy.out)"
wait_tcp "$RDMALB_PORT" 20 "$RDMALB_PGID" || die "rdmalb did not start (log: $WORK/rdmalb.out)"

# Targets: proxy and Accept-Encoding ("identity": no compression asked).
TARGETS=(haproxy:identity haproxy:gzip rdmalb:identity rdmalb:gzip rdmalb:br rdmalb:zstd)
cat >"$WORK/report.lua" <<'EOF'
done = function(summary, latency, requests)
    io.write(string.format("RESULT %d %d %d %.3f\n", summary.requests, summary.bytes,
        summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.status + summary.errors.timeout,
        latency:percentile(99) / 1000))
end
EOF
CSV=$WORK/runs.csv
echo "round,size,target,requests,req_per_s,bytes_per_resp,proxy_cpu_us_per_resp,p99_ms,errors" >"$CSV"

# measure ROUND SIZE TARGET
measure() {
    local proxy=${3%%:*} coding=${3#*:} port pgid c0 c1 out
    if [ "$proxy" = haproxy ]; then port=$HAPROXY_PORT pgid=$HAPROXY_PGID; else port=$RDMALB_PORT pgid=$RDMALB_PGID; fi
    out=$WORK/wrk-$1-$2-$3.txt
    c0=$(cpu_ticks "$pgid")
    timeout $((DURATION + 30)) "${ON_LOAD[@]}" wrk -t1 -c"$CONNS" -d"${DURATION}s" --timeout 5s -s "$WORK/report.lua" \
        -H "Accept-Encoding: $coding" "http://127.0.0.1:$port/$2.html" >"$out" 2>&1 || { cat "$out" >&2; die "wrk failed"; }
    c1=$(cpu_ticks "$pgid")
    check_spawned || die "a process died during the $3 run"
    awk -v r="$1" -v s="$2" -v t="$3" -v d="$DURATION" -v dc=$((c1 - c0)) -v hz="$CLK_HZ" '
        /^RESULT/ { printf "%s,%s,%s,%d,%.1f,%.0f,%.2f,%.3f,%d\n", r, s, t, $2, $2 / d, $3 / $2, dc * 1e6 / hz / $2, $5, $4 }
    ' "$out" >>"$CSV"
    tail -n1 "$CSV" | awk -F, '{ printf "    %-6s %-16s %8.0f req/s  %7s B/resp  proxy %7s us/resp  p99 %s ms  errors %d\n", $2, $3, $5, $6, $7, $8, $9 }'
}

# A warm-up, and a check that each target answers as configured.
for t in "${TARGETS[@]}"; do
    proxy=${t%%:*} coding=${t#*:}
    port=$([ "$proxy" = haproxy ] && echo "$HAPROXY_PORT" || echo "$RDMALB_PORT")
    head=$(curl -s -o /dev/null -D - -H "Accept-Encoding: $coding" "http://127.0.0.1:$port/64k.html" | tr -d '\r')
    [[ $head == "HTTP/1.1 200"* ]] || die "$t answered: $head"
    got=$(awk -F': ' 'tolower($1)=="content-encoding"{print $2}' <<<"$head")
    want=$([ "$coding" = identity ] && echo "" || echo "$coding")
    [ "$got" = "$want" ] || die "$t answered Content-Encoding '$got', expected '$want'"
done
for s in 1k 64k; do for t in "${TARGETS[@]}"; do measure 0 "$s" "$t" >/dev/null; done; done
sed -i '2,$d' "$CSV"

LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
for ((r = 1; r <= ROUNDS; r++)); do
    log "round $r of $ROUNDS"
    n=${#TARGETS[@]}
    for s in 1k 64k; do
        for ((i = 0; i < n; i++)); do measure "$r" "$s" "${TARGETS[$(((i + r) % n))]}"; done
    done
done
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)

# The table: medians per size and target, ratios against HAProxy's gzip.
med() { awk -F, -v s="$1" -v t="$2" -v c="$3" '$2==s && $3==t {print $c}' "$CSV" | sort -g | awk '{v[NR]=$1} END {if (NR) print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
mkdir -p "$RESULTS_DIR"
stamp=$(date -u +%Y%m%d-%H%M)
md=$RESULTS_DIR/compression-$stamp.md
{
    echo "Compression, $(date -u +%Y-%m-%dT%H:%MZ), load average $LOAD_START -> $LOAD_END;"
    echo "wrk -t1 -c$CONNS -d${DURATION}s, $ROUNDS interleaved rounds, medians; proxy on CPU 0, wrk and nginx on CPU 1;"
    echo "rdmalb $(cd "$ROOT" && git rev-parse --short HEAD), $(haproxy -v | head -1 | cut -d' ' -f1-3) (gzip: libslz)."
    echo
    echo "| body | target | req/s | bytes/response | proxy CPU µs/response | CPU vs HAProxy gzip | bytes vs HAProxy gzip | p99 ms |"
    echo "|---|---|---:|---:|---:|---:|---:|---:|"
    for s in 1k 64k; do
        hc=$(med "$s" haproxy:gzip 7) hb=$(med "$s" haproxy:gzip 6)
        for t in "${TARGETS[@]}"; do
            c=$(med "$s" "$t" 7) b=$(med "$s" "$t" 6)
            printf '| %s | %s | %.0f | %.0f | %.1f | %sx | %sx | %.2f |\n' "$s" "${t/:/ }" "$(med "$s" "$t" 5)" "$b" "$c" \
                "$(ratio "$c" "$hc")" "$(ratio "$b" "$hb")" "$(med "$s" "$t" 8)"
        done
    done
} >"$md"
cp "$CSV" "${md%.md}.csv"
cat "$md"
log "results: $md"
