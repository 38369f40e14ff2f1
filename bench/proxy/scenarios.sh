#!/usr/bin/env bash
# Proxy cost by scenario (issue 14): rdmalb against HAProxy and nginx,
# configured equivalently, in one run, one table per scenario.
#
#   bash bench/proxy/scenarios.sh                    # 3 rounds x 10 s (~35 min)
#   ROUNDS=1 DURATION=3 bash bench/proxy/scenarios.sh    # quick look (~8 min)
#   SCENARIOS="close h2" UPDATE_DOCS=0 bash bench/proxy/scenarios.sh
#
# Scenarios (SCENARIOS, run in this order when listed; default all):
#   ka1k     HTTP/1.1 keep-alive, 1 KiB responses (wrk -c50; the table of
#            "Proxy cost", also made by run.sh), with a direct row
#   ka64k    HTTP/1.1 keep-alive, 64 KiB responses: MiB/s, proxy CPU per MiB
#   ka1m     the same with 1 MiB responses
#   close    a new client connection per request (wrk -H "Connection: close";
#            the TCP connects per request are counted to show wrk reconnects)
#   tls-ka   TLS 1.3 keep-alive (wrk over https), an ECDSA P-256 and an
#            RSA-2048 certificate (rows per certificate)
#   tls-hs   TLS with a full handshake every 10 requests (`httperf --ssl
#            --ssl-no-reuse --num-calls 10`: no session is offered, so no
#            resumption), both certificates
#   h2       HTTP/2 over TLS (ECDSA) with h2load -c50 -m10, HTTP/1.1 to the
#            node; the run checks every proxy negotiated h2 by ALPN
#   idle10k  IDLE_CONNS (10,000) idle keep-alive client connections held by
#            bench/proxy/idle_conns.py: RSS per connection (all processes of
#            the proxy, a fresh proxy per measurement), and wrk -c10 while
#            they are held
#   post16k  POST with a 16 KiB body (wrk -s, body streamed to the node)
#   two      two workers/threads per proxy, nothing pinned (ka1k's load with
#            wrk -t2): a scaling check on a 2-CPU machine
#
# Set-up as in run.sh (its header explains the choices): one nginx backend
# (bench/proxy/backend.nginx.conf.in) and the three proxies rendered from
# bench/proxy/*.in with one worker/thread each; the proxy pinned to CPU 0,
# the load generator and the backend to CPU 1 (PIN=1, except in `two`). In
# every scenario each round runs every target (and certificate) once, the
# order rotating by round; medians of the rounds are reported. CPU per
# request is the utime+stime delta (/proc/<pid>/stat) of every process of the
# proxy over the load run divided by the requests completed. Every process
# is started in its own process group and stopped by its PID at exit.
#
# Results: bench/results/proxy-scenarios-<date>.{md,csv}; with UPDATE_DOCS=1
# each scenario's generated block in docs/benchmarks.md is replaced
# (`proxy-cost` for ka1k, `proxy-<scenario>` for the others).
#
# Environment:
#   ROUNDS=3 DURATION=10 (seconds per load run) WARMUP=2 CONNS=50
#   SCENARIOS="ka1k ka64k ka1m close tls-ka tls-hs h2 idle10k post16k two"
#   TARGETS="haproxy nginx rdmalb"   PIN=1|0   UPDATE_DOCS=1|0
#   HS_CLIENTS=1 (parallel httperf processes: httperf busy-polls, so several
#   on the load CPU starve each other and the backend)  HS_CONNS_PER_S=300
#   (connections per httperf process per DURATION second: a fixed count, so
#   a run takes about DURATION seconds at 300 handshakes/s)  IDLE_CONNS=10000
#   RDMALB_BIN=path (else: cargo build --release -p rdmalb --bin rdmalb);
#   RDMALB_LABEL=name for its rows (else the binary's file name)
#   RESULTS_DIR=bench/results
#   PROFILE_SCENARIOS="ka1k close ..." or "all": after a scenario's rounds,
#       profile rdmalb with perf during one more load run of it (not idle10k);
#       PROFILE_CERT=ecdsa|rsa: the certificate of the TLS scenarios' profile
#       PERF_KEEP=DIR keeps the perf recordings (for deeper `perf report`s)
#   SYSCALL_SCENARIOS="ka1k close ..." or "all": after a scenario's rounds,
#       one more load run per target with `perf stat` counting its system
#       calls (all, and the data path's one by one), context switches and
#       CPU migrations: bench/results/proxy-syscalls-<scenario>-<date>.csv,
#       and per request side by side in .md
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
# shellcheck source=scripts/lib/common.sh
. "$ROOT/scripts/lib/common.sh"
# shellcheck source=bench/proxy/lib.sh
. "$HERE/lib.sh"
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"
umask 022

ALL_SCENARIOS="ka1k ka64k ka1m close tls-ka tls-hs h2 idle10k post16k two"
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
CONNS=${CONNS:-50}
SCENARIOS=${SCENARIOS:-$ALL_SCENARIOS}
TARGETS=${TARGETS:-"haproxy nginx rdmalb"}
UPDATE_DOCS=${UPDATE_DOCS:-1}
HS_CLIENTS=${HS_CLIENTS:-1}
HS_CONNS_PER_S=${HS_CONNS_PER_S:-300}
IDLE_CONNS=${IDLE_CONNS:-10000}
PROFILE_SCENARIOS=${PROFILE_SCENARIOS:-}
PROFILE_CERT=${PROFILE_CERT:-ecdsa}
SYSCALL_SCENARIOS=${SYSCALL_SCENARIOS:-}
RESULTS_DIR=${RESULTS_DIR:-$ROOT/bench/results}
BIN=${RDMALB_BIN:-}
NCPU=$(nproc)
PIN=${PIN:-$([ "$NCPU" -ge 2 ] && echo 1 || echo 0)}
for v in ROUNDS DURATION WARMUP CONNS HS_CLIENTS HS_CONNS_PER_S IDLE_CONNS; do
    [[ ${!v} =~ ^[0-9]+$ ]] || die "$v=${!v} is not a whole number"
done
if [ "$ROUNDS" -lt 1 ] || [ "$DURATION" -lt 1 ] || [ "$HS_CLIENTS" -lt 1 ] || [ "$IDLE_CONNS" -lt 1 ]; then
    die "ROUNDS, DURATION, HS_CLIENTS and IDLE_CONNS must be at least 1"
fi
[ "$PROFILE_SCENARIOS" = all ] && PROFILE_SCENARIOS=$SCENARIOS
[ "$SYSCALL_SCENARIOS" = all ] && SYSCALL_SCENARIOS=$SCENARIOS
case $PROFILE_CERT in ecdsa | rsa) ;; *) die "PROFILE_CERT=$PROFILE_CERT (accepted: ecdsa rsa)" ;; esac
for s in $SCENARIOS $PROFILE_SCENARIOS $SYSCALL_SCENARIOS; do
    [[ " $ALL_SCENARIOS " == *" $s "* ]] || die "unknown scenario $s (accepted: $ALL_SCENARIOS)"
done
for t in $TARGETS; do
    case $t in haproxy | nginx | rdmalb) ;; *) die "unknown target $t (accepted: haproxy nginx rdmalb)" ;; esac
done
[ -n "$PROFILE_SCENARIOS$SYSCALL_SCENARIOS" ] && { command -v perf >/dev/null || die "PROFILE_SCENARIOS and SYSCALL_SCENARIOS need perf (apt-get install linux-perf)"; }
tools="nginx haproxy wrk curl taskset openssl"
[[ " $SCENARIOS " == *" tls-hs "* ]] && tools+=" httperf"
[[ " $SCENARIOS " == *" h2 "* ]] && tools+=" h2load"
[[ " $SCENARIOS " == *" idle10k "* ]] && tools+=" python3"
for tool in $tools; do
    command -v "$tool" >/dev/null || die "$tool not found (run scripts/setup.sh)"
done

# Enough descriptors for the idle connections (the proxies inherit it;
# HAProxy and nginx also ask for what their maxconn needs, capped at the
# hard limit by nofile_for).
if [[ " $SCENARIOS " == *" idle10k "* ]]; then
    ulimit -n "$(ulimit -Hn)" || true
    [ "$(ulimit -n)" = unlimited ] || [ "$(ulimit -n)" -ge $((IDLE_CONNS + 1024)) ] ||
        die "idle10k needs $((IDLE_CONNS + 1024)) open files, the hard limit is $(ulimit -Hn) (lower IDLE_CONNS)"
fi

# On exit the idle-connection holders are released first (release-idle).
BENCH_ON_EXIT='touch "$WORK/release-idle" 2>/dev/null || true'
bench_work scenarios

if [ -z "$BIN" ] && [[ " $TARGETS " == *" rdmalb "* ]]; then
    ensure_cargo
    log "building rdmalb (cargo build --release -p rdmalb --bin rdmalb)"
    (cd "$ROOT" && cargo build --release --quiet -p rdmalb --bin rdmalb) || die "cargo build --release failed"
    BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/rdmalb"
    case $BIN in /*) ;; *) BIN="$ROOT/$BIN" ;; esac
fi
[[ " $TARGETS " == *" rdmalb "* ]] && { [ -x "$BIN" ] || die "rdmalb binary not found: $BIN"; }

# ----------------------------------------------------------------- set-up
# 1 KiB body: 64 x 16 characters; 64 KiB and 1 MiB files for ka64k/ka1m;
# a 16 KiB request body for post16k.
BODY=$(printf '%.0s0123456789abcdef' $(seq 64))
mkdir -p "$WORK/www/files"
head -c 65536 /dev/urandom >"$WORK/www/files/64k.bin"
head -c 1048576 /dev/urandom >"$WORK/www/files/1m.bin"
echo ok >"$WORK/www/ok.txt"
chmod 644 "$WORK/www/files/"*.bin "$WORK/www/ok.txt"
chmod 755 "$WORK/www" "$WORK/www/files"
POST_BYTES=16384
cat >"$WORK/post16k.lua" <<EOF
-- POST with a $POST_BYTES-byte body (wrk sends Content-Length).
wrk.method = "POST"
wrk.body = string.rep("x", $POST_BYTES)
wrk.headers["Content-Type"] = "application/octet-stream"
EOF

# Certificates for the TLS scenarios, made for this run: ECDSA P-256 and
# RSA-2048, self-signed for bench.localhost; the same files for every proxy.
# Every proxy offers TLS 1.2 and 1.3 (nginx 1.22's default lacks 1.3, so its
# servers say so) and ALPN h2, http/1.1; cipher suites are each one's
# defaults (the clients' OpenSSL order decides: TLS_AES_256_GCM_SHA384).
for kind in ecdsa rsa; do
    case $kind in
        ecdsa) newkey=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1) ;;
        rsa) newkey=(-newkey rsa:2048) ;;
    esac
    openssl req -x509 "${newkey[@]}" -nodes -days 1 -subj "/CN=bench.localhost" \
        -addext "subjectAltName=DNS:bench.localhost" \
        -keyout "$WORK/$kind.key" -out "$WORK/$kind.crt" >/dev/null 2>&1 ||
        die "openssl could not make the $kind certificate"
    cat "$WORK/$kind.crt" "$WORK/$kind.key" >"$WORK/$kind.pem" # HAProxy's crt: both in one file
    chmod 644 "$WORK/$kind".*
done
declare -A CERT_LABEL=([ecdsa]="ECDSA P-256" [rsa]="RSA-2048")

declare -A PORT TPORT PGID LOADCMD
free_port BACKEND_PORT 29000
port=29001
for t in haproxy nginx rdmalb; do
    free_port "PORT[$t]" "$port"
    free_port "TPORT[ecdsa/$t]" "$((port + 1))"
    free_port "TPORT[rsa/$t]" "$((port + 2))"
    port=$((port + 10))
done
PORT[direct]=$BACKEND_PORT
PGID[direct]=''

# Which proxy set-up a scenario runs on: `base` (one worker, 4096
# connections), `idle` (one worker, room for 2 x IDLE_CONNS: nginx starts
# closing idle keep-alive connections once fewer than 1/16 of its
# worker_connections are free; a fresh proxy per measurement) or `two` (two
# workers, nothing pinned).
setup_of() {
    case $1 in idle10k) echo idle ;; two) echo two ;; *) echo base ;; esac
}

# render_configs SETUP: the backend and the three proxies' configs for SETUP.
render_configs() {
    case $1 in
        base) WORKERS=1 MAXCONN=4096 ;;
        idle) WORKERS=1 MAXCONN=$((2 * IDLE_CONNS)) ;;
        two) WORKERS=2 MAXCONN=4096 ;;
    esac
    proxy_render "$HERE/backend.nginx.conf.in" "$WORK/backend.conf"
    local kind
    : >"$WORK/tls-haproxy" && : >"$WORK/tls-nginx" && : >"$WORK/tls-rdmalb"
    for kind in ecdsa rsa; do
        printf '    bind 127.0.0.1:%s ssl crt %s/%s.pem alpn h2,http/1.1\n' "${TPORT[$kind/haproxy]}" "$WORK" "$kind" >>"$WORK/tls-haproxy"
        cat >>"$WORK/tls-nginx" <<EOF
    server {
        listen 127.0.0.1:${TPORT[$kind/nginx]} ssl http2 backlog=4096;
        ssl_certificate $WORK/$kind.crt;
        ssl_certificate_key $WORK/$kind.key;
        ssl_protocols TLSv1.2 TLSv1.3;
        location / { proxy_pass http://be; }
    }
EOF
        cat >>"$WORK/tls-rdmalb" <<EOF
[[listener]]
name = "bench-tls-$kind"
listen = "127.0.0.1:${TPORT[$kind/rdmalb]}"
tls = { h2 = true, certificates = [{ cert = "$WORK/$kind.crt", key = "$WORK/$kind.key" }] }

EOF
    done
    proxy_render "$HERE/haproxy.cfg.in" "$WORK/haproxy.cfg" "${PORT[haproxy]}" "$WORK/tls-haproxy"
    proxy_render "$HERE/nginx-proxy.conf.in" "$WORK/nginx-proxy.conf" "${PORT[nginx]}" "$WORK/tls-nginx"
    printf '[[node]]\nname = "b1"\naddress = "127.0.0.1:%s"\nsite = "bench"\n' "$BACKEND_PORT" >"$WORK/rdmalb-node"
    proxy_render "$HERE/rdmalb.toml.in" "$WORK/rdmalb.toml.tmp" "${PORT[rdmalb]}" "$WORK/tls-rdmalb"
    sed -e "s|@BALANCE@|roundrobin|" -e "/@NODES@/{r $WORK/rdmalb-node" -e "d}" "$WORK/rdmalb.toml.tmp" >"$WORK/rdmalb.toml"
    rm -f "$WORK/rdmalb.toml.tmp"
    cp "$WORK/backend.conf" "$WORK/backend-$1.conf"
    cp "$WORK/haproxy.cfg" "$WORK/haproxy-$1.cfg"
    cp "$WORK/nginx-proxy.conf" "$WORK/nginx-proxy-$1.conf"
    cp "$WORK/rdmalb.toml" "$WORK/rdmalb-$1.toml"
}

export NO_COLOR=1
ON_PROXY_CPU=() ON_LOAD_CPU=()
# pinning SETUP: the taskset prefixes for SETUP (`two` is never pinned).
pinning() {
    if [ "$PIN" = 1 ] && [ "$1" != two ]; then
        ON_PROXY_CPU=(taskset -c 0) ON_LOAD_CPU=(taskset -c 1)
    else
        ON_PROXY_CPU=() ON_LOAD_CPU=()
    fi
}

start_backend() {
    nginx -t -q -p "$WORK" -e "$WORK/backend-error.log" -c "$WORK/backend.conf"
    spawn backend "$WORK/backend.out" "${ON_LOAD_CPU[@]}" \
        nginx -p "$WORK" -e "$WORK/backend-error.log" -c "$WORK/backend.conf" -g 'daemon off;'
    BACKEND_PGID=$SPAWN_PID
    wait_http "http://127.0.0.1:$BACKEND_PORT/health" 15 || die "the backend does not answer (logs in $WORK)"
}

# start_proxy TARGET: starts it with the rendered config, sets PGID[TARGET],
# and checks it answers the backend's body.
start_proxy() {
    local t=$1 got
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
}

stop_proxy() {
    stop_one "${PGID[$1]}" 5
    PGID[$1]=''
}

# verify_proxy TARGET: before anything is measured, every proxy must serve
# what the scenarios fetch, unchanged: both files, a whole 16 KiB POST body
# (the backend logs the length it read on /post-check), and on both TLS
# ports TLS 1.3 with the right certificate, HTTP/1.1 without ALPN and h2
# when offered. What openssl saw is kept for the results file.
verify_proxy() {
    local t=$1 f want got kind tport proto
    for f in 64k 1m; do
        want=$(md5sum <"$WORK/www/files/$f.bin")
        got=$(curl -fsS --max-time 10 -H "Host: bench.localhost" "http://127.0.0.1:${PORT[$t]}/files/$f.bin" | md5sum)
        [ "$got" = "$want" ] || die "$t served /files/$f.bin changed"
    done
    : >"$WORK/backend-post.log"
    head -c "$POST_BYTES" /dev/zero | tr '\0' x >"$WORK/post-body"
    curl -fsS --max-time 10 -H "Host: bench.localhost" -H "Content-Type: application/octet-stream" \
        --data-binary @"$WORK/post-body" -o /dev/null "http://127.0.0.1:${PORT[$t]}/post-check" ||
        die "$t: POST of $POST_BYTES bytes failed"
    sleep 0.2
    got=$(awk 'END { print $4 - 0 }' "$WORK/backend-post.log")
    [ "${got:-0}" -ge "$POST_BYTES" ] || die "$t: the backend read $got bytes of a $POST_BYTES-byte POST"
    echo "- $t: POST $POST_BYTES bytes, the backend read a request of $got bytes (line, head and body)" >>"$WORK/verify.md"
    for kind in ecdsa rsa; do
        tport=${TPORT[$kind/$t]}
        got=$(curl -fsS -k --max-time 5 --http1.1 -H "Host: bench.localhost" "https://127.0.0.1:$tport/")
        [ "$got" = "$BODY" ] || die "$t answered a different body over TLS ($kind)"
        proto=$(curl -fsS -k --max-time 5 --http2 -o /dev/null -w '%{http_version}' "https://127.0.0.1:$tport/")
        [ "$proto" = 2 ] || die "$t did not negotiate h2 by ALPN on its $kind port (curl saw HTTP/$proto)"
        timeout 10 openssl s_client -connect "127.0.0.1:$tport" -alpn h2,http/1.1 </dev/null >"$WORK/s_client-$t-$kind.txt" 2>&1 || true
        got=$(awk '/^New, / { v = $2; c = $NF } /^ALPN protocol:/ { a = $3 } /^Peer signature type:/ { s = $4 }
                   /^Server public key is/ { k = $5 }
                   END { printf "%s %s, ALPN %s, signature %s, %s-bit key", v, c, a, s, k }' "$WORK/s_client-$t-$kind.txt")
        [[ $got == TLSv1.3* ]] || die "$t: openssl s_client did not get TLS 1.3 on the $kind port ($got)"
        echo "- $t, $kind port: openssl s_client: $got; curl --http2: HTTP/$proto" >>"$WORK/verify.md"
    done
}

# ----------------------------------------------------------------- load
# Each scenario's keys are TARGET or TARGET@CERT; run_load SCEN KEY SECONDS
# OUT runs its load once, bounded in time, output to OUT.
wrk_cmd() { # SCEN KEY SECONDS: sets CMD
    local t=${2%@*} kind=${2#*@} url threads=1 conns=$CONNS extra=()
    url="http://127.0.0.1:${PORT[$t]}/"
    case $1 in
        ka64k) url+="files/64k.bin" ;;
        ka1m) url+="files/1m.bin" ;;
        close) extra=(-H "Connection: close") ;;
        tls-ka) url="https://127.0.0.1:${TPORT[$kind/$t]}/" ;;
        post16k) url+="post" && extra=(-s "$WORK/post16k.lua") ;;
        idle10k) conns=10 ;;
        two) threads=2 ;;
    esac
    CMD=(wrk -t"$threads" -c"$conns" -d"${3}s" --timeout 5s --latency -H "Host: bench.localhost" "${extra[@]}" "$url")
}
run_load() {
    local scen=$1 key=$2 secs=$3 out=$4 t=${2%@*} kind=${2#*@} i n pids=()
    case $scen in
        tls-hs)
            n=$((secs * HS_CONNS_PER_S))
            CMD=(httperf --hog --server 127.0.0.1 --port "${TPORT[$kind/$t]}" --ssl --ssl-no-reuse --uri /
                --num-conns "$n" --num-calls 10 --rate 0 --timeout 5)
            for ((i = 1; i <= HS_CLIENTS; i++)); do
                timeout $((secs * 10 + 30)) "${ON_LOAD_CPU[@]}" "${CMD[@]}" >"$out.$i" 2>&1 &
                pids+=($!)
            done
            for i in "${!pids[@]}"; do
                wait "${pids[$i]}" || { cat "$out.$((i + 1))" >&2; die "httperf failed against $key"; }
            done
            cat "$out".* >"$out"
            rm -f "$out".*
            LOADCMD[$scen]="$HS_CLIENTS x ${CMD[*]@Q}"
            ;;
        h2)
            CMD=(h2load -c50 -m10 -t1 -D "$secs" --log-file "$out.log" "https://127.0.0.1:${TPORT[ecdsa/$t]}/")
            timeout $((secs + 30)) "${ON_LOAD_CPU[@]}" "${CMD[@]}" >"$out" 2>&1 ||
                { cat "$out" >&2; die "h2load failed against $key"; }
            LOADCMD[$scen]="${CMD[*]@Q}"
            ;;
        *)
            wrk_cmd "$scen" "$key" "$secs"
            timeout $((secs + 30)) "${ON_LOAD_CPU[@]}" "${CMD[@]}" >"$out" 2>&1 ||
                { cat "$out" >&2; die "wrk failed against $key"; }
            LOADCMD[$scen]="${CMD[*]@Q}"
            ;;
    esac
    # For the text: quotes only where needed, no ports or work-dir paths.
    LOADCMD[$scen]=$(sed -e "s|'\([-A-Za-z0-9/.:=_]*\)'|\1|g" -e "s|127.0.0.1:[0-9]*|127.0.0.1:PORT|g" \
        -e "s|--port [0-9]*|--port PORT|" -e "s|--log-file [^ ]*|--log-file FILE|" -e "s|$WORK|WORK|g" <<<"${LOADCMD[$scen]}")
}

# parse_load SCEN OUT: prints "requests seconds req/s p50_ms p99_ms errors
# [connections conn_time_ms]" from the load tool's output.
parse_load() {
    case $1 in
        tls-hs)
            # One httperf report per client: sums, the longest test
            # duration, the median of the clients' mean connection times
            # (httperf's own median is in 1 ms bins).
            awk '/^Total: connections/ { conns += $3; reqs += $5; replies += $7; if ($9 > secs) secs = $9 }
                 /^Connection time \[ms\]: min/ { med[++n] = $7 }
                 /^Errors: total/ { err += $3 }
                 /^Reply status:/ { for (i = 1; i <= NF; i++) if ($i ~ /^[345]xx=/) { split($i, a, "="); err += a[2] } }
                 END { if (replies == 0) exit 1
                       for (i = 2; i <= n; i++) for (j = i; j > 1 && med[j - 1] > med[j]; j--) { x = med[j]; med[j] = med[j - 1]; med[j - 1] = x }
                       m = (n % 2) ? med[(n + 1) / 2] : (med[n / 2] + med[n / 2 + 1]) / 2
                       printf "%d %.3f %.1f - - %d %d %.3f\n", replies, secs, replies / secs, err, conns, m }' "$2"
            ;;
        h2)
            grep -q '^Application protocol: h2$' "$2" || { cat "$2" >&2; die "h2load did not negotiate h2"; }
            local pct
            pct=$(awk '{ print $3 / 1000 }' "$2.log" | sort -g |
                awk '{ v[NR] = $1 } END { if (NR == 0) print "- -"; else print v[int((NR - 1) * 0.50) + 1], v[int((NR - 1) * 0.99) + 1] }')
            rm -f "$2.log"
            awk -v pct="$pct" '/^finished in/ { secs = $3; sub(/s,?$/, "", secs); rps = $4 }
                 /^requests:/ { ok = $8; failed = $10 }
                 END { if (ok == 0) exit 1; printf "%d %s %s %s %d\n", ok, secs, rps, pct, failed }' "$2"
            ;;
        *)
            awk 'function ms(v,   n, u) { n = v + 0; u = v; sub(/^[0-9.]+/, "", u)
                    if (u == "us") n /= 1000; else if (u == "s") n *= 1000; else if (u == "m") n *= 60000
                    return n }
                /requests in/ { req = $1; secs = $4; sub(/s,?$/, "", secs) }
                /Requests\/sec:/ { rps = $2 }
                /^ +50%/ { p50 = ms($2) }
                /^ +99%/ { p99 = ms($2) }
                /Socket errors:/ { gsub(/,/, ""); err += $4 + $6 + $8 + $10 }
                /Non-2xx or 3xx responses:/ { err += $5 }
                END { if (req == 0) exit 1; printf "%d %s %s %.3f %.3f %d\n", req, secs, rps, p50, p99, err }' "$2"
            ;;
    esac
}

CSV_HEADER="round,position,key,requests,seconds,req_per_s,p50_ms,p99_ms,errors,proxy_cpu_us_per_req,proxy_cpu_util,backend_cpu_us_per_req,x1,x2,x3,x4"
# Scenario-specific columns x1..x4:
#   ka64k, ka1m  MiB/s of response bodies, proxy CPU µs per MiB
#   close, h2    TCP connects per request (all of the machine's, /proc/net/snmp):
#                new client connections and upstream connections not reused
#   tls-hs       connections (= full handshakes) per second, proxy CPU µs per
#                handshake (its 10 requests included), mean connection time ms
#   idle10k      connections held, RSS before (MiB), RSS while held (MiB),
#                KiB per held connection

# measure SCEN ROUND POSITION KEY: one load run with the proxy's CPU
# accounted; appends a row to the scenario's CSV.
measure() {
    local scen=$1 round=$2 pos=$3 key=$4 t=${4%@*} csv=$WORK/$1.csv out p0=0 p1=0 b0 b1 t0 t1 o0 o1 res
    local x1='' x2='' x3='' x4='' pgid=${PGID[${4%@*}]}
    out=$WORK/load-$scen-$key-$round.txt
    o0=$(tcp_active_opens)
    [ -n "$pgid" ] && p0=$(cpu_ticks "$pgid")
    b0=$(cpu_ticks "$BACKEND_PGID")
    t0=$(date +%s.%N)
    run_load "$scen" "$key" "$DURATION" "$out"
    t1=$(date +%s.%N)
    [ -n "$pgid" ] && p1=$(cpu_ticks "$pgid")
    b1=$(cpu_ticks "$BACKEND_PGID")
    o1=$(tcp_active_opens)
    check_spawned || die "a process died during the $scen run of $key"
    res=$(parse_load "$scen" "$out") || { cat "$out" >&2; die "could not parse the load output of $scen/$key"; }
    read -r req secs rps p50 p99 err c1 c2 <<<"$res"
    [ "$p50" = - ] && p50='' && p99=''
    local cpu='' util='' wall
    wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')
    if [ -n "$pgid" ]; then
        cpu=$(awk -v d=$((p1 - p0)) -v hz="$CLK_HZ" -v r="$req" 'BEGIN { printf "%.2f", d * 1e6 / hz / r }')
        util=$(awk -v d=$((p1 - p0)) -v hz="$CLK_HZ" -v w="$wall" 'BEGIN { printf "%.3f", d / hz / w }')
    fi
    case $scen in
        ka64k | ka1m)
            local size=65536
            [ "$scen" = ka1m ] && size=1048576
            x1=$(awk -v r="$rps" -v s="$size" 'BEGIN { printf "%.1f", r * s / 1048576 }')
            [ -n "$cpu" ] && x2=$(awk -v c="$cpu" -v s="$size" 'BEGIN { printf "%.1f", c * 1048576 / s }')
            ;;
        close | h2) x1=$(awk -v d=$((o1 - o0)) -v r="$req" 'BEGIN { printf "%.3f", d / r }') ;;
        tls-hs)
            x1=$(awk -v c="$c1" -v s="$secs" 'BEGIN { printf "%.1f", c / s }')
            [ -n "$pgid" ] && x2=$(awk -v d=$((p1 - p0)) -v hz="$CLK_HZ" -v c="$c1" 'BEGIN { printf "%.1f", d * 1e6 / hz / c }')
            x3=$c2
            ;;
    esac
    printf '%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%.2f,%s,%s,%s,%s\n' "$round" "$pos" "$key" "$req" "$secs" "$rps" "$p50" "$p99" "$err" \
        "$cpu" "$util" "$(awk -v d=$((b1 - b0)) -v hz="$CLK_HZ" -v r="$req" 'BEGIN { print d * 1e6 / hz / r }')" \
        "$x1" "$x2" "$x3" "$x4" >>"$csv"
    printf '    %-8s %-14s %9.0f req/s  p99 %7s ms  proxy %6s us/req  errors %d\n' "$scen" "$key" "$rps" "${p99:--}" "${cpu:--}" "$err"
}

# measure_idle ROUND POSITION TARGET: a fresh proxy, a short warm-up, its
# RSS, IDLE_CONNS idle keep-alive connections opened and held, its RSS
# again, wrk -c10 while they are held (CPU accounted), then all closed and
# the proxy stopped. A fresh process per measurement: memory a previous
# round freed would otherwise be reused and hide the cost.
measure_idle() {
    local round=$1 pos=$2 t=$3 csv=$WORK/idle10k.csv out hold r0 r1 ready='' opened failed closed p0 p1 b0 b1 t0 t1
    out=$WORK/load-idle10k-$t-$round.txt
    hold=$WORK/idle-$t-$round.out
    start_proxy "$t"
    run_load idle10k "$t" 1 "$WORK/warmup-idle-$t.txt"
    sleep 0.5
    r0=$(rss_kib "${PGID[$t]}")
    rm -f "$WORK/release-idle"
    spawn "idle-conns" "$hold" "${ON_LOAD_CPU[@]}" python3 "$HERE/idle_conns.py" --port "${PORT[$t]}" \
        --conns "$IDLE_CONNS" --release "$WORK/release-idle" --hold-max $((DURATION + 120))
    local helper=$SPAWN_PID
    for _ in $(seq 900); do
        ready=$(grep '^READY' "$hold" 2>/dev/null || true)
        [ -n "$ready" ] && break
        kill -0 "$helper" 2>/dev/null || break
        sleep 0.1
    done
    [ -n "$ready" ] || { cat "$hold" >&2; die "idle_conns.py did not open its connections to $t within 90 s"; }
    sleep 1
    r1=$(rss_kib "${PGID[$t]}")
    p0=$(cpu_ticks "${PGID[$t]}")
    b0=$(cpu_ticks "$BACKEND_PGID")
    t0=$(date +%s.%N)
    run_load idle10k "$t" "$DURATION" "$out"
    t1=$(date +%s.%N)
    p1=$(cpu_ticks "${PGID[$t]}")
    b1=$(cpu_ticks "$BACKEND_PGID")
    touch "$WORK/release-idle"
    for _ in $(seq 300); do grep -q '^DONE' "$hold" 2>/dev/null && break; sleep 0.1; done
    stop_one "$helper" 5
    check_spawned || die "a process died during the idle10k run of $t"
    opened=$(sed -n 's/^READY opened=\([0-9]*\) failed=\([0-9]*\).*/\1/p' "$hold")
    failed=$(sed -n 's/^READY opened=\([0-9]*\) failed=\([0-9]*\).*/\2/p' "$hold")
    closed=$(sed -n 's/^DONE held=[0-9]* closed_early=\([0-9]*\).*/\1/p' "$hold")
    [ -n "$closed" ] || { cat "$hold" >&2; die "idle_conns.py did not finish against $t"; }
    local res
    res=$(parse_load idle10k "$out") || { cat "$out" >&2; die "could not parse wrk output (idle10k, $t)"; }
    read -r req secs rps p50 p99 err <<<"$res"
    err=$((err + failed + closed))
    awk -v FS=, -v OFS=, -v round="$round" -v pos="$pos" -v t="$t" -v req="$req" -v secs="$secs" -v rps="$rps" \
        -v p50="$p50" -v p99="$p99" -v err="$err" -v dp=$((p1 - p0)) -v db=$((b1 - b0)) -v hz="$CLK_HZ" \
        -v wall="$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" -v held="$opened" -v r0="$r0" -v r1="$r1" 'BEGIN {
            printf "%s,%s,%s,%d,%s,%s,%s,%s,%d,%.2f,%.3f,%.2f,%d,%.1f,%.1f,%.2f\n", round, pos, t, req, secs, rps, p50, p99, err,
                dp * 1e6 / hz / req, dp / hz / wall, db * 1e6 / hz / req, held, r0 / 1024, r1 / 1024, held ? (r1 - r0) / held : 0 }' >>"$csv"
    stop_proxy "$t"
    printf '    idle10k  %-14s held %5d (failed %d, closed early %d)  RSS %7.1f -> %7.1f MiB  wrk -c10 p99 %s ms\n' \
        "$t" "$opened" "$failed" "$closed" "$(awk -v r="$r0" 'BEGIN { print r / 1024 }')" "$(awk -v r="$r1" 'BEGIN { print r / 1024 }')" "$p99"
    sleep 2
}

# keys_of SCEN: the rows of a scenario, in the round's starting order.
keys_of() {
    local t kind keys=()
    [ "$1" = ka1k ] && keys+=(direct)
    case $1 in
        tls-ka | tls-hs) for kind in ecdsa rsa; do for t in $TARGETS; do keys+=("$t@$kind"); done; done ;;
        *) for t in $TARGETS; do keys+=("$t"); done ;;
    esac
    echo "${keys[*]}"
}

# run_scenario SCEN: warm-up, then ROUNDS interleaved rounds, the order
# rotating every round; then the profile when asked for.
run_scenario() {
    local scen=$1 keys n r i key
    read -r -a keys <<<"$(keys_of "$scen")"
    n=${#keys[@]}
    echo "$CSV_HEADER" >"$WORK/$scen.csv"
    log "scenario $scen: ${keys[*]} ($ROUNDS rounds x ${DURATION}s)"
    if [ "$scen" != idle10k ] && [ "$WARMUP" -gt 0 ]; then
        for key in "${keys[@]}"; do run_load "$scen" "$key" "$WARMUP" "$WORK/warmup-$scen-$key.txt"; done
    fi
    for ((r = 1; r <= ROUNDS; r++)); do
        for ((i = 0; i < n; i++)); do
            key=${keys[$(((i + r - 1) % n))]}
            if [ "$scen" = idle10k ]; then measure_idle "$r" "$((i + 1))" "$key"; else measure "$scen" "$r" "$((i + 1))" "$key"; fi
        done
    done
    if [[ " $PROFILE_SCENARIOS " == *" $scen "* ]] && [ "$scen" != idle10k ] && [[ " $TARGETS " == *" rdmalb "* ]]; then
        key=rdmalb
        [[ $scen == tls-* ]] && key=rdmalb@$PROFILE_CERT
        local report=$RESULTS_DIR/proxy-profile-rdmalb-$scen-$RUN_STAMP.txt
        mkdir -p "$RESULTS_DIR"
        log "profiling rdmalb in $scen during one more ${DURATION}s load run"
        perf_profile "rdmalb-$scen" "${PGID[rdmalb]}" "$report" "rdmalb, scenario $scen ($key), under ${LOADCMD[$scen]}" \
            run_load "$scen" "$key" "$DURATION" "$WORK/profile-$scen.txt"
        PROFILES+=("$report")
    fi
    if [[ " $SYSCALL_SCENARIOS " == *" $scen "* ]] && [ "$scen" != idle10k ]; then
        local out req csv=$RESULTS_DIR/proxy-syscalls-$scen-$RUN_STAMP.csv
        mkdir -p "$RESULTS_DIR"
        echo "target,event,count,per_request" >"$csv"
        for key in "${keys[@]}"; do
            [ "$key" = direct ] && continue
            log "counting the system calls of $key in $scen during one more ${DURATION}s load run"
            out=$WORK/syscalls-$scen-$key.txt
            syscall_count "$scen-$key" "${PGID[${key%@*}]}" run_load "$scen" "$key" "$DURATION" "$out"
            req=$(parse_load "$scen" "$out" | cut -d' ' -f1)
            syscall_rows "$scen-$key" "${LABEL[${key%@*}]}${key#"${key%@*}"}" "$req" >>"$csv"
        done
        SYSCALL_FILES+=("$csv")
    fi
}

# ----------------------------------------------------------------- report
declare -A TITLE
TITLE[ka1k]="HTTP/1.1 keep-alive, 1 KiB responses"
TITLE[ka64k]="HTTP/1.1 keep-alive, 64 KiB responses"
TITLE[ka1m]="HTTP/1.1 keep-alive, 1 MiB responses"
TITLE[close]="HTTP/1.1, a new client connection per request"
TITLE[tls-ka]="TLS 1.3 keep-alive"
TITLE[tls-hs]="TLS, a full handshake every 10 requests"
TITLE[h2]="HTTP/2 over TLS to the proxy, HTTP/1.1 to the node"
TITLE[idle10k]="$IDLE_CONNS idle keep-alive client connections"
TITLE[post16k]="POST with a 16 KiB request body"
TITLE[two]="two workers per proxy, unpinned (a scaling check on $NCPU CPUs)"

# columns SCEN: the table's columns, "header:csv column:format" (format
# `sum` sums the rounds, anything else is a printf format of the median).
columns() {
    local common=("req/s:6:%.0f" "p50 ms:7:%.3f" "p99 ms:8:%.3f" "proxy CPU µs/req:10:%.1f" "proxy CPU use (cores):11:%.2f" "backend CPU µs/req:12:%.1f" "errors:9:sum")
    case $1 in
        ka64k | ka1m) printf '%s\n' "MiB/s:13:%.0f" "req/s:6:%.0f" "p50 ms:7:%.3f" "p99 ms:8:%.3f" "proxy CPU µs/MiB:14:%.0f" "proxy CPU use (cores):11:%.2f" "errors:9:sum" ;;
        close | h2) printf '%s\n' "${common[@]:0:6}" "TCP connects/req:13:%.3f" "errors:9:sum" ;;
        tls-hs) printf '%s\n' "req/s:6:%.0f" "handshakes/s:13:%.0f" "proxy CPU µs/req:10:%.1f" "proxy CPU µs/handshake (+10 req):14:%.0f" "mean connection ms:15:%.2f" "proxy CPU use (cores):11:%.2f" "errors:9:sum" ;;
        idle10k) printf '%s\n' "held:13:%.0f" "RSS before MiB:14:%.1f" "RSS held MiB:15:%.1f" "KiB per connection:16:%.2f" "req/s (wrk -c10):6:%.0f" "p50 ms:7:%.3f" "p99 ms:8:%.3f" "proxy CPU µs/req:10:%.1f" "errors:9:sum" ;;
        *) printf '%s\n' "${common[@]}" ;;
    esac
}
# comparisons SCEN: the ratio lines' metrics, "name:csv column".
comparisons() {
    case $1 in
        ka64k | ka1m) printf '%s\n' "throughput (bytes/s):13" "CPU per MiB:14" "p99 latency:8" ;;
        tls-hs) printf '%s\n' "throughput:6" "CPU per request:10" "CPU per handshake:14" "mean connection time:15" ;;
        idle10k) printf '%s\n' "memory per idle connection:16" "p99 latency of active requests:8" "CPU per request:10" ;;
        *) printf '%s\n' "throughput:6" "CPU per request:10" "p99 latency:8" ;;
    esac
}
# goals SCEN: issue 14's goals against HAProxy, "name:csv column:op:bound".
goals() {
    case $1 in
        ka1k | close | tls-ka | h2 | post16k) printf '%s\n' "CPU per request:10:<=:0.85" "req/s:6:>=:1.15" "p99 latency:8:<=:1.00" ;;
        tls-hs) printf '%s\n' "CPU per request:10:<=:0.85" "req/s:6:>=:1.15" ;;
        ka64k | ka1m) printf '%s\n' "bytes/s:13:>=:1.00" "p99 latency:8:<=:1.00" ;;
        idle10k) printf '%s\n' "memory per idle connection:16:<=:1.00" "p99 latency:8:<=:1.00" ;;
    esac
}

key_label() {
    local t=${1%@*} kind=${1#*@}
    if [ "$kind" = "$1" ]; then echo "${LABEL[$t]}"; else
        echo "${LABEL[$t]}, ${CERT_LABEL[$kind]}"
    fi
}

# scenario_block SCEN FILE: the generated text of one scenario.
scenario_block() {
    local scen=$1 csv=$WORK/$1.csv keys h c f key line kinds kind other name op bound r v
    read -r -a keys <<<"$(keys_of "$scen")"
    {
        echo "Measured $RUN_DATE on $NCPU CPUs ($CPU_MODEL), Linux $(uname -r); load average $LOAD_START at the start of the run and $LOAD_END at its end (the machine is shared with other work)."
        echo
        echo "Command: \`$COMMAND\`; load: \`${LOADCMD[$scen]}\`"
        if [ "$scen" = two ]; then
            echo "(two workers/threads per proxy, nothing pinned; $ROUNDS interleaved rounds, medians shown)."
        elif [ "$PIN" = 1 ]; then
            echo "(one worker/thread per proxy pinned to CPU 0, the load generator and the backend on CPU 1; $ROUNDS interleaved rounds, medians shown)."
        else
            echo "(one worker/thread per proxy, nothing pinned; $ROUNDS interleaved rounds, medians shown)."
        fi
        echo
        line="| target |"
        while IFS=: read -r h c f; do line+=" $h |"; done < <(columns "$scen")
        echo "$line"
        line="|---|"
        while IFS=: read -r h c f; do line+="---:|"; done < <(columns "$scen")
        echo "$line"
        for key in "${keys[@]}"; do
            line="| $(key_label "$key") |"
            while IFS=: read -r h c f; do
                if [ "$f" = sum ]; then v=$(column_sum "$csv" "$c" "$key"); else v=$(fmt "$f" "$(median "$csv" "$c" "$key")"); fi
                [ "$key" = direct ] && [ "$c" = 10 ] && v='–'
                [ "$key" = direct ] && [ "$c" = 11 ] && v='–'
                line+=" $v |"
            done < <(columns "$scen")
            echo "$line"
        done
        [[ " ${keys[*]} " == *" rdmalb"* ]] || return 0
        kinds=("")
        [[ $scen == tls-* ]] && kinds=(ecdsa rsa)
        for kind in "${kinds[@]}"; do
            local sfx='' cert=''
            if [ -n "$kind" ]; then sfx="@$kind" cert=" (${CERT_LABEL[$kind]})"; fi
            echo
            for other in haproxy nginx; do
                [[ " ${keys[*]} " == *" $other$sfx "* ]] || continue
                line="- rdmalb / ${LABEL[$other]}$cert:"
                while IFS=: read -r name c; do
                    line+=" $name **$(ratio "$(median "$csv" "$c" "rdmalb$sfx")" "$(median "$csv" "$c" "$other$sfx")")x**,"
                done < <(comparisons "$scen")
                echo "${line%,}"
            done
            if [[ " ${keys[*]} " == *" haproxy$sfx "* ]] && [ -n "$(goals "$scen")" ]; then
                line="- issue 14's goals against HAProxy$cert:"
                while IFS=: read -r name c op bound; do
                    r=$(ratio "$(median "$csv" "$c" "rdmalb$sfx")" "$(median "$csv" "$c" "haproxy$sfx")")
                    if [ "$r" = n/a ]; then v="not measured"
                    elif awk -v r="$r" -v b="$bound" -v op="$op" 'BEGIN { exit !((op == "<=") ? r <= b : r >= b) }'; then v=met
                    else v="**missed**"; fi
                    local sym=≥
                    [ "$op" = "<=" ] && sym=≤
                    line+=" $name ${r}x (goal $sym ${bound}x) $v;"
                done < <(goals "$scen")
                echo "${line%;}."
            fi
        done
        if [ "$scen" = ka1k ]; then
            echo
            echo "\"proxy CPU use\" is the proxy's CPU time over the run's wall time: well below 1.00 means the"
            echo "proxy was waiting for its core (other work on the machine) or for the load generator."
        fi
    } >"$2"
}

# ----------------------------------------------------------------- run
proxy_labels "$ROOT"
CPU_MODEL=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
RUN_DATE=$(date -u +%Y-%m-%dT%H:%MZ)
RUN_STAMP=$(date -u +%Y%m%d-%H%M)
PROFILES=() SYSCALL_FILES=()
: >"$WORK/verify.md"
COMMAND="SCENARIOS=\"$SCENARIOS\" ROUNDS=$ROUNDS DURATION=$DURATION CONNS=$CONNS PIN=$PIN bash bench/proxy/scenarios.sh"
log "work dir $WORK; scenarios: $SCENARIOS"
current=''
for scen in $SCENARIOS; do
    setup=$(setup_of "$scen")
    if [ "$setup" != "$current" ]; then
        [ -n "$current" ] && { log "stopping the $current set-up"; stop_all 5; }
        for t in $TARGETS; do PGID[$t]=''; done
        render_configs "$setup"
        pinning "$setup"
        log "starting the $setup set-up (workers $WORKERS, maxconn $MAXCONN)"
        start_backend
        if [ "$setup" != idle ]; then
            for t in $TARGETS; do
                start_proxy "$t"
                if [ "$setup" = base ] && [ ! -s "$WORK/verified" ]; then verify_proxy "$t"; fi
            done
            if [ "$setup" = base ]; then echo yes >"$WORK/verified"; fi
        fi
        current=$setup
    fi
    run_scenario "$scen"
done
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)
stop_all 5

mkdir -p "$RESULTS_DIR"
RESULT=$RESULTS_DIR/proxy-scenarios-$RUN_STAMP
{
    echo "# Proxy cost by scenario, $RUN_DATE"
    echo
    echo "Command: \`$COMMAND\`. Load average $LOAD_START at the start and $LOAD_END at the end."
    for scen in $SCENARIOS; do
        echo
        echo "## $scen: ${TITLE[$scen]}"
        echo
        scenario_block "$scen" "$WORK/block-$scen.md"
        cat "$WORK/block-$scen.md"
    done
    echo
    echo "## Checks before measuring"
    echo
    cat "$WORK/verify.md"
    echo
    echo "## Every run"
    for scen in $SCENARIOS; do
        echo
        echo "### $scen"
        echo
        echo "| round | order | key | requests | seconds | req/s | p50 ms | p99 ms | errors | proxy CPU µs/req | proxy CPU use | backend CPU µs/req | x1 | x2 | x3 | x4 |"
        echo "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
        awk -F, 'NR > 1 { line = "|"; for (i = 1; i <= NF; i++) line = line " " ($i == "" ? "–" : $i) " |"; print line }' "$WORK/$scen.csv"
    done
    echo
    echo "x1..x4: ka64k/ka1m MiB/s and proxy CPU µs per MiB; close and h2 TCP connects per request; tls-hs handshakes/s,"
    echo "proxy CPU µs per handshake (its 10 requests included) and the mean connection time (ms); idle10k"
    echo "connections held, RSS before and while held (MiB, all proxy processes) and KiB per held connection."
    echo
    echo "## Configurations (base set-up; idle: maxconn $((2 * IDLE_CONNS)); two: two workers)"
    for f in backend-base.conf haproxy-base.cfg nginx-proxy-base.conf rdmalb-base.toml; do
        [ -f "$WORK/$f" ] || continue
        echo
        echo "\`$f\`:"
        echo
        echo '```'
        sed "s|$BODY|<1 KiB body>|; s|$WORK|<workdir>|g" "$WORK/$f"
        echo '```'
    done
} >"$RESULT.md"
{
    echo "scenario,$CSV_HEADER"
    for scen in $SCENARIOS; do awk -v s="$scen" 'NR > 1 { print s "," $0 }' "$WORK/$scen.csv"; done
} >"$RESULT.csv"
for scen in $SCENARIOS; do
    echo
    echo "== $scen: ${TITLE[$scen]}"
    cat "$WORK/block-$scen.md"
done
echo
log "results: ${RESULT#"$ROOT"/}.md (+ .csv)"
for f in "${PROFILES[@]}"; do log "profile: ${f#"$ROOT"/}"; done
for f in "${SYSCALL_FILES[@]}"; do
    log "system calls per request: ${f#"$ROOT"/} (${f%.csv}.md)"
    syscall_table "$f" >"${f%.csv}.md"
done

if [ "$UPDATE_DOCS" = 1 ]; then
    for scen in $SCENARIOS; do
        name=proxy-$scen
        [ "$scen" = ka1k ] && name=proxy-cost
        { echo "Latest run: \`${RESULT#"$ROOT"/}.md\`."; echo; cat "$WORK/block-$scen.md"; } >"$WORK/doc-$scen.md"
        replace_doc_block "$ROOT/docs/benchmarks.md" "$name" "bench/proxy/scenarios.sh" "$WORK/doc-$scen.md" "### Proxy cost: ${TITLE[$scen]}"
    done
    log "updated the scenario blocks in docs/benchmarks.md"
fi
