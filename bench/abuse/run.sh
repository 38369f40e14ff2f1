#!/usr/bin/env bash
# Service under attack (issue 27): rdmalb and HAProxy side by side under the
# same attacks, same backend, one run. Hold the benchmark lock:
#
#   flock /tmp/rdmalb-bench.lock bash bench/abuse/run.sh
#   ATTACKS="slowloris rapid-reset" ROUNDS=3 flock /tmp/rdmalb-bench.lock bash bench/abuse/run.sh
#
# Set-up as bench/proxy/run.sh (whose lib.sh renders the configs from the
# same templates, bench/proxy/*.in): one nginx backend with a 1 KiB body,
# /files/1m.bin and /post; rdmalb and HAProxy with one worker/thread each,
# max_connections/maxconn MAXCONN, the same timeouts (request head 10 s,
# client and server inactivity 30 s, keep-alive 60 s: the templates'
# HAProxy values are rdmalb's defaults), a plain listener (HTTP/1.1 and h2c
# prior knowledge) and a TLS one (ECDSA P-256, ALPN h2, http/1.1). The proxy
# runs on CPU 0; the backend, the well-behaved client and the attacker share
# CPU 1 (the floods are paced so the attacker does not starve the others).
#
# For every attack both proxies are started afresh; then, per round and per
# proxy (the order alternating by round):
#   1. baseline: the well-behaved client alone for DURATION s — wrk -c CONNS
#      for the HTTP/1 attacks (over TLS for tls-flood), h2load -c H2_CONNS
#      -m H2_STREAMS over h2c for the HTTP/2 attacks; its figure is requests
#      per second answered 2xx/3xx (wrk) or 2xx (h2load), and their p99;
#   2. attack: `rdmalb-testbed abuse` from 127.0.0.2 against the same
#      listener; after WARM s the same client runs for DURATION s; the
#      proxy's RSS (all its processes, /proc/PID/status VmRSS) is sampled
#      every 250 ms and the peak kept; rdmalb's /metrics is read before and
#      after, and the counters the attack moved are recorded;
#   3. the proxy must still answer 200 afterwards.
# Results: OUT/runs.csv, OUT/attack-*.json (what the attacker did and saw),
# and `rdmalb-testbed abuse-report`'s table OUT/abuse.{txt,json}. The
# transport is TCP over loopback (no RDMA is involved in these paths).
#
# Environment:
#   ATTACKS="slowloris slow-post slow-read conn-flood tls-flood rapid-reset
#            continuation hpack-bomb ping-flood settings-flood tiny-data
#            window-stall"   (default: all)
#   ROUNDS=1 DURATION=8 WARM=3 CONNS=50 H2_CONNS=10 H2_STREAMS=10 MAXCONN=4096
#   TARGETS="rdmalb haproxy"   PIN=1|0
#   SLOW_CONNS=2000 SLOW_READ_CONNS=500 H2_ATTACK_CONNS=8 RATE=20000
#   TLS_CONNS=16 TLS_RATE=2000 BOMB_RATE=200 CONT_RATE=2000 INTERVAL=3s
#   RDMALB_BIN, TESTBED_BIN (else: cargo build --release)   OUT=dir
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
# shellcheck source=scripts/lib/common.sh
. "$ROOT/scripts/lib/common.sh"
# shellcheck source=bench/proxy/lib.sh
. "$ROOT/bench/proxy/lib.sh"
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"
umask 022

ALL_ATTACKS="slowloris slow-post slow-read conn-flood tls-flood rapid-reset continuation hpack-bomb ping-flood settings-flood tiny-data window-stall"
ATTACKS=${ATTACKS:-$ALL_ATTACKS}
ROUNDS=${ROUNDS:-1}
DURATION=${DURATION:-8}
WARM=${WARM:-3}
CONNS=${CONNS:-50}
H2_CONNS=${H2_CONNS:-10}
H2_STREAMS=${H2_STREAMS:-10}
MAXCONN=${MAXCONN:-4096}
TARGETS=${TARGETS:-"rdmalb haproxy"}
SLOW_CONNS=${SLOW_CONNS:-2000}
SLOW_READ_CONNS=${SLOW_READ_CONNS:-500}
H2_ATTACK_CONNS=${H2_ATTACK_CONNS:-8}
RATE=${RATE:-20000}
TLS_CONNS=${TLS_CONNS:-16}
TLS_RATE=${TLS_RATE:-2000}
BOMB_RATE=${BOMB_RATE:-200}
CONT_RATE=${CONT_RATE:-2000}
INTERVAL=${INTERVAL:-3s}
STAMP=$(date -u +%Y%m%d-%H%M)
OUT=${OUT:-$ROOT/bench/results/abuse-$STAMP}
NCPU=$(nproc)
PIN=${PIN:-$([ "$NCPU" -ge 2 ] && echo 1 || echo 0)}
for v in ROUNDS DURATION WARM CONNS H2_CONNS H2_STREAMS MAXCONN SLOW_CONNS SLOW_READ_CONNS H2_ATTACK_CONNS RATE TLS_CONNS TLS_RATE BOMB_RATE CONT_RATE; do
    [[ ${!v} =~ ^[0-9]+$ ]] || die "$v=${!v} is not a whole number"
done
for a in $ATTACKS; do
    [[ " $ALL_ATTACKS " == *" $a "* ]] || die "unknown attack $a (accepted: $ALL_ATTACKS)"
done
for t in $TARGETS; do
    case $t in rdmalb | haproxy) ;; *) die "unknown target $t (accepted: rdmalb haproxy)" ;; esac
done
for tool in nginx haproxy wrk h2load curl taskset openssl; do
    command -v "$tool" >/dev/null || die "$tool not found (run scripts/setup.sh)"
done
# The floods hold thousands of sockets: the attacker's and the proxies'.
ulimit -n "$(ulimit -Hn)" || true

BIN=${RDMALB_BIN:-}
TESTBED=${TESTBED_BIN:-}
if [ -z "$BIN" ] || [ -z "$TESTBED" ]; then
    ensure_cargo
    log "building rdmalb and rdmalb-testbed (cargo build --release)"
    (cd "$ROOT" && cargo build --release --quiet -p rdmalb --bin rdmalb -p rdmalb-testbed --bin rdmalb-testbed) ||
        die "cargo build --release failed"
    TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
    BIN=${BIN:-$TARGET_DIR/release/rdmalb}
    TESTBED=${TESTBED:-$TARGET_DIR/release/rdmalb-testbed}
fi
[ -x "$BIN" ] || die "rdmalb binary not found: $BIN"
[ -x "$TESTBED" ] || die "rdmalb-testbed binary not found: $TESTBED"

bench_work abuse
mkdir -p "$OUT"

# ----------------------------------------------------------------- set-up
BODY=$(printf '%.0s0123456789abcdef' $(seq 64))
mkdir -p "$WORK/www/files"
head -c 1048576 /dev/urandom >"$WORK/www/files/1m.bin"
echo ok >"$WORK/www/ok.txt"
chmod 644 "$WORK/www/files/1m.bin" "$WORK/www/ok.txt"
chmod 755 "$WORK/www" "$WORK/www/files"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \
    -subj "/CN=bench.localhost" -addext "subjectAltName=DNS:bench.localhost" \
    -keyout "$WORK/ecdsa.key" -out "$WORK/ecdsa.crt" >/dev/null 2>&1 || die "openssl could not make a certificate"
cat "$WORK/ecdsa.crt" "$WORK/ecdsa.key" >"$WORK/ecdsa.pem"
chmod 644 "$WORK"/ecdsa.*

declare -A PORT TPORT PGID
free_port BACKEND_PORT 30000
free_port 'PORT[haproxy]' 30001
free_port 'TPORT[haproxy]' 30002
free_port 'PORT[rdmalb]' 30011
free_port 'TPORT[rdmalb]' 30012
free_port ADMIN_PORT 30013

WORKERS=1
proxy_render "$HERE/../proxy/backend.nginx.conf.in" "$WORK/backend.conf"
printf '    bind 127.0.0.1:%s ssl crt %s/ecdsa.pem alpn h2,http/1.1\n' "${TPORT[haproxy]}" "$WORK" >"$WORK/tls-haproxy"
proxy_render "$HERE/../proxy/haproxy.cfg.in" "$WORK/haproxy.cfg" "${PORT[haproxy]}" "$WORK/tls-haproxy"
cat >"$WORK/tls-rdmalb" <<EOF
[[listener]]
name = "bench-tls"
listen = "127.0.0.1:${TPORT[rdmalb]}"
tls = { h2 = true, certificates = [{ cert = "$WORK/ecdsa.crt", key = "$WORK/ecdsa.key" }] }

[admin]
listen = "127.0.0.1:$ADMIN_PORT"
EOF
printf '[[node]]\nname = "b1"\naddress = "127.0.0.1:%s"\nsite = "bench"\n' "$BACKEND_PORT" >"$WORK/rdmalb-node"
proxy_render "$HERE/../proxy/rdmalb.toml.in" "$WORK/rdmalb.toml.tmp" "${PORT[rdmalb]}" "$WORK/tls-rdmalb"
sed -e "s|@BALANCE@|roundrobin|" -e "/@NODES@/{r $WORK/rdmalb-node" -e "d}" "$WORK/rdmalb.toml.tmp" >"$WORK/rdmalb.toml"
rm -f "$WORK/rdmalb.toml.tmp"
cp "$WORK/haproxy.cfg" "$WORK/rdmalb.toml" "$WORK/backend.conf" "$OUT/"

export NO_COLOR=1
if [ "$PIN" = 1 ]; then
    ON_PROXY_CPU=(taskset -c 0) ON_LOAD_CPU=(taskset -c 1)
else
    ON_PROXY_CPU=() ON_LOAD_CPU=()
fi

nginx -t -q -p "$WORK" -e "$WORK/backend-error.log" -c "$WORK/backend.conf"
spawn backend "$WORK/backend.out" "${ON_LOAD_CPU[@]}" \
    nginx -p "$WORK" -e "$WORK/backend-error.log" -c "$WORK/backend.conf" -g 'daemon off;'
wait_http "http://127.0.0.1:$BACKEND_PORT/health" 15 || die "the backend does not answer (logs in $WORK)"

# start_proxy TARGET: starts it afresh, sets PGID[TARGET], checks it serves
# the body over plain HTTP/1.1, h2c and TLS.
start_proxy() {
    local t=$1 got
    case $t in
        haproxy)
            haproxy -c -q -f "$WORK/haproxy.cfg" || die "haproxy rejected $WORK/haproxy.cfg"
            spawn haproxy "$WORK/haproxy.out" "${ON_PROXY_CPU[@]}" haproxy -db -f "$WORK/haproxy.cfg"
            ;;
        rdmalb)
            "$BIN" check -c "$WORK/rdmalb.toml" >"$WORK/rdmalb-check.out" 2>&1 ||
                { cat "$WORK/rdmalb-check.out" >&2; die "rdmalb check rejected $WORK/rdmalb.toml"; }
            spawn rdmalb "$WORK/rdmalb.out" "${ON_PROXY_CPU[@]}" "$BIN" proxy -c "$WORK/rdmalb.toml"
            ;;
    esac
    PGID[$t]=$SPAWN_PID
    wait_http "http://127.0.0.1:${PORT[$t]}/" 15 -H "Host: bench.localhost" ||
        { check_spawned || true; die "$t does not answer 200 on port ${PORT[$t]} (logs in $WORK)"; }
    got=$(curl -fsS --max-time 5 -H "Host: bench.localhost" "http://127.0.0.1:${PORT[$t]}/")
    [ "$got" = "$BODY" ] || die "$t answered a different body (${#got} bytes)"
    got=$(curl -fsS --max-time 5 --http2-prior-knowledge -o /dev/null -w '%{http_version}' -H "Host: bench.localhost" "http://127.0.0.1:${PORT[$t]}/")
    [ "$got" = 2 ] || die "$t does not speak h2c with prior knowledge on its plain port"
    got=$(curl -fsS -k --max-time 5 --http2 -o /dev/null -w '%{http_version}' "https://127.0.0.1:${TPORT[$t]}/")
    [ "$got" = 2 ] || die "$t did not negotiate h2 by ALPN on its TLS port"
}

# ----------------------------------------------------------------- measuring
# client_of ATTACK: the well-behaved client beside it.
client_of() {
    case $1 in
        tls-flood) echo wrk-tls ;;
        rapid-reset | continuation | hpack-bomb | ping-flood | settings-flood | tiny-data | window-stall) echo h2load ;;
        *) echo wrk ;;
    esac
}

# measure CLIENT TARGET OUTFILE: runs the well-behaved client for DURATION
# seconds; prints "rps p99_ms".
measure() {
    local client=$1 t=$2 out=$3
    case $client in
        h2load)
            # No Host header: h2load sends :authority from the URL, and both
            # proxies route it to the only site (rdmalb refuses a Host that
            # differs from :authority with 400, as RFC 9113 section 8.3.1 allows).
            timeout $((DURATION + 30)) "${ON_LOAD_CPU[@]}" h2load -c"$H2_CONNS" -m"$H2_STREAMS" -t1 -D "$DURATION" \
                --log-file "$out.log" "http://127.0.0.1:${PORT[$t]}/" >"$out" 2>&1 || true
            local p99
            p99=$(awk '$2 >= 200 && $2 < 300 { print $3 / 1000 }' "$out.log" 2>/dev/null | sort -g |
                awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else print v[int((NR - 1) * 0.99) + 1] }')
            rm -f "$out.log"
            # Requests per second answered 2xx: a proxy that answers errors
            # fast does not keep the service.
            awk -v p99="$p99" '/^finished in/ { secs = $3; sub(/s,?$/, "", secs) }
                 /^status codes:/ { ok = $3 }
                 END { printf "%s %s\n", (secs > 0 ? ok / secs : 0), p99 }' "$out"
            ;;
        wrk | wrk-tls)
            local url="http://127.0.0.1:${PORT[$t]}/"
            [ "$client" = wrk-tls ] && url="https://127.0.0.1:${TPORT[$t]}/"
            timeout $((DURATION + 30)) "${ON_LOAD_CPU[@]}" wrk -t1 -c"$CONNS" -d"${DURATION}s" --timeout 5s --latency \
                -H "Host: bench.localhost" "$url" >"$out" 2>&1 || true
            awk 'function ms(v,   n, u) { n = v + 0; u = v; sub(/^[0-9.]+/, "", u)
                    if (u == "us") n /= 1000; else if (u == "s") n *= 1000; else if (u == "m") n *= 60000
                    return n }
                 /requests in/ { req = $1; secs = $4; sub(/s,?$/, "", secs) }
                 /Non-2xx or 3xx responses:/ { bad = $5 }
                 /^ +99%/ { p99 = ms($2) }
                 END { printf "%s %s\n", (secs > 0 ? (req - bad) / secs : 0), (p99 == "" ? "nan" : p99) }' "$out"
            ;;
    esac
}

# attack_args ATTACK TARGET: the attacker's command line.
attack_args() {
    local a=$1 t=$2 port=${PORT[$2]}
    local common=(--source 127.0.0.2 --attack "$a" --duration "$((WARM + DURATION + 2))s" --interval "$INTERVAL")
    case $a in
        slowloris | slow-post) echo "${common[*]} --connections $SLOW_CONNS --target 127.0.0.1:$port" ;;
        slow-read) echo "${common[*]} --connections $SLOW_READ_CONNS --target 127.0.0.1:$port" ;;
        # Opened fast enough to be past MAXCONN before the client starts.
        conn-flood) echo "${common[*]} --connections $((MAXCONN + 1000)) --ramp 5000 --target 127.0.0.1:$port" ;;
        tls-flood) echo "${common[*]} --connections $TLS_CONNS --rate $TLS_RATE --target 127.0.0.1:${TPORT[$t]}" ;;
        hpack-bomb) echo "${common[*]} --connections $H2_ATTACK_CONNS --rate $BOMB_RATE --target 127.0.0.1:$port" ;;
        continuation) echo "${common[*]} --connections $H2_ATTACK_CONNS --rate $CONT_RATE --target 127.0.0.1:$port" ;;
        *) echo "${common[*]} --connections $H2_ATTACK_CONNS --rate $RATE --target 127.0.0.1:$port" ;;
    esac
}

# metrics_snapshot FILE: rdmalb's counters and gauges (name{labels} value).
metrics_snapshot() {
    curl -fsS --max-time 5 "http://127.0.0.1:$ADMIN_PORT/metrics" 2>/dev/null |
        grep -E '^rdmalb_(client_errors_total|connections|h2_|requests_total\{site="none"|requests_total\{[^}]*code_class="(4xx|5xx|err)")' >"$1" || true
}

# metric_delta BEFORE AFTER: the counters that moved, largest first
# ("name{labels} +N; ..."), without commas.
metric_delta() {
    awk 'NR == FNR { v[$1] = $2; next } { d = $2 - v[$1]; if (d != 0) printf "%d %s\n", d, $1 }' "$1" "$2" |
        sort -rn -k1,1 | head -n 4 | awk '{ printf "%s%s %+d", (NR > 1 ? "; " : ""), $2, $1 }' | tr ',' ' '
}

RUNS=$OUT/runs.csv
echo "round,proxy,attack,client,base_rps,base_p99_ms,attack_rps,attack_p99_ms,rss_before_kib,rss_peak_kib,metric" >"$RUNS"
read -r -a ORDER <<<"$TARGETS"
N=${#ORDER[@]}
log "attacks: $ATTACKS; $ROUNDS round(s) x ${N} proxies; ${DURATION}s per client run (work dir $WORK, results $OUT)"
for a in $ATTACKS; do
    client=$(client_of "$a")
    for t in "${ORDER[@]}"; do start_proxy "$t"; done
    for ((r = 1; r <= ROUNDS; r++)); do
        for ((i = 0; i < N; i++)); do
            t=${ORDER[$(((i + r - 1) % N))]}
            read -r base_rps base_p99 < <(measure "$client" "$t" "$WORK/base-$a-$t-$r.txt")
            [ "$t" = rdmalb ] && metrics_snapshot "$WORK/m0"
            rss0=$(rss_kib "${PGID[$t]}")
            # shellcheck disable=SC2046 # word splitting of the argument list is intended
            "${ON_LOAD_CPU[@]}" "$TESTBED" abuse $(attack_args "$a" "$t") --json "$OUT/attack-$a-$t-$r.json" \
                >"$WORK/attack-$a-$t-$r.out" 2>&1 &
            apid=$!
            peak=$rss0
            (
                p=0
                while kill -0 "$apid" 2>/dev/null; do
                    v=$(rss_kib "${PGID[$t]}")
                    [ "$v" -gt "$p" ] && p=$v && echo "$p" >"$WORK/peak"
                    sleep 0.25
                done
            ) &
            sampler=$!
            sleep "$WARM"
            read -r at_rps at_p99 < <(measure "$client" "$t" "$WORK/attack-$a-$t-$r.txt")
            wait "$apid" || { cat "$WORK/attack-$a-$t-$r.out" >&2; die "the attacker failed ($a against $t)"; }
            wait "$sampler" || true
            [ -s "$WORK/peak" ] && peak=$(cat "$WORK/peak")
            rm -f "$WORK/peak"
            [ "$peak" -ge "$rss0" ] || peak=$rss0
            metric=""
            if [ "$t" = rdmalb ]; then
                metrics_snapshot "$WORK/m1"
                metric=$(metric_delta "$WORK/m0" "$WORK/m1")
            fi
            if curl -fsS --max-time 10 -o /dev/null -H "Host: bench.localhost" "http://127.0.0.1:${PORT[$t]}/"; then
                metric="${metric:+$metric; }serving after: yes"
            else
                metric="${metric:+$metric; }serving after: NO"
            fi
            check_spawned || die "a process died during $a against $t"
            echo "$r,$t,$a,$client,$base_rps,$base_p99,$at_rps,$at_p99,$rss0,$peak,$metric" >>"$RUNS"
            printf '    %-14s %-8s base %8.0f req/s p99 %7.2f ms | attack %8.0f req/s p99 %7.2f ms | RSS %6d -> %6d KiB | %s\n' \
                "$a" "$t" "$base_rps" "$base_p99" "$at_rps" "$at_p99" "$rss0" "$peak" "$metric"
        done
    done
    for t in "${ORDER[@]}"; do stop_one "${PGID[$t]}" 5; done
done

"$TESTBED" abuse-report --runs "$RUNS" --output "$OUT" \
    --title "Service under attack, tcp loopback, $(date -u +%FT%H:%MZ): $ROUNDS round(s), ${DURATION}s client runs; $(haproxy -v | awk 'NR==1{print "HAProxy " $3}'), rdmalb $(git -C "$ROOT" rev-parse --short HEAD)"
log "results: $OUT/abuse.txt (+ abuse.json, runs.csv, attack-*.json)"
