#!/usr/bin/env bash
# The load tools operators use, through rdmalb, over plain HTTP and TLS:
# wrk and httperf against `rdmalb proxy` in front of a real nginx backend.
#
#   bash bench/proxy/loadtools.sh          # ~1 minute
#
# Starts one nginx backend (1 KiB body), generates a self-signed certificate
# with openssl, starts rdmalb with a plain and a TLS listener, then runs, each
# bounded in time: wrk over http and https, httperf over http and https
# (--ssl). Prints a table (tool, scheme, requests, req/s, errors) and writes
# it to bench/results/loadtools-<date>.md. This shows the proxy serves the
# real tools' traffic; the cost comparison with HAProxy and nginx is
# bench/proxy/run.sh.
#
# Environment: DURATION=5 (wrk seconds)  HTTPERF_CONNS=2000 (httperf
# connections, 10 calls each)  RDMALB_BIN=path (else cargo build --release)
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
# shellcheck source=scripts/lib/common.sh
. "$ROOT/scripts/lib/common.sh"
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"
DURATION=${DURATION:-5}
HTTPERF_CONNS=${HTTPERF_CONNS:-2000}
for v in DURATION HTTPERF_CONNS; do
    [[ ${!v} =~ ^[0-9]+$ ]] || die "$v=${!v} is not a whole number"
done
for tool in wrk httperf nginx openssl curl; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool is missing: run scripts/setup.sh"
done
BIN=${RDMALB_BIN:-}
if [ -z "$BIN" ]; then
    log "building rdmalb (cargo build --release)"
    (cd "$ROOT" && cargo build --release --quiet) || die "cargo build --release failed"
    BIN=$ROOT/target/release/rdmalb
    [ -n "${CARGO_TARGET_DIR:-}" ] && BIN=$CARGO_TARGET_DIR/release/rdmalb
fi
[ -x "$BIN" ] || die "no rdmalb binary at $BIN"

DIR=$(mktemp -d /tmp/rdmalb-loadtools.XXXXXX)
cleanup() {
    stop_all 3
    rm -rf "$DIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port BACKEND 18500
free_port PLAIN 18600
free_port TLS 18700
body=$(head -c 1024 /dev/zero | tr '\0' 'x')
cat >"$DIR/backend.conf" <<CONF
daemon off;
master_process off;
worker_processes 1;
pid $DIR/backend.pid;
error_log $DIR/backend-error.log warn;
events { worker_connections 4096; }
http {
$(nginx_tempdirs "$DIR/tmp")
    access_log off;
    keepalive_requests 1000000;
    server {
        listen 127.0.0.1:$BACKEND;
        location / { default_type text/plain; return 200 "$body"; }
    }
}
CONF
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=bench.localhost" \
    -addext "subjectAltName=DNS:bench.localhost" \
    -keyout "$DIR/key.pem" -out "$DIR/cert.pem" >/dev/null 2>&1 || die "openssl could not make a certificate"
cat >"$DIR/rdmalb.toml" <<CONF
[global]
default_site = "bench"
workers = 1
access_log = "off"
shutdown_grace = "1s"

[[listener]]
name = "plain"
listen = "127.0.0.1:$PLAIN"

[[listener]]
name = "tls"
listen = "127.0.0.1:$TLS"
tls = { certificates = [{ cert = "cert.pem", key = "key.pem" }] }

[[site]]
name = "bench"
hosts = ["bench.localhost"]

[[node]]
name = "b1"
address = "127.0.0.1:$BACKEND"
site = "bench"
CONF

spawn backend "$DIR/backend.log" nginx -p "$DIR" -c "$DIR/backend.conf"
wait_tcp "$BACKEND" 10 "$SPAWN_PID" || die "nginx backend did not start: $(cat "$DIR/backend-error.log" 2>/dev/null)"
spawn rdmalb "$DIR/rdmalb.log" env NO_COLOR=1 "$BIN" proxy -c "$DIR/rdmalb.toml"
wait_tcp "$TLS" 10 "$SPAWN_PID" || die "rdmalb did not start: $(tail -n 5 "$DIR/rdmalb.log")"
curl -fsS -o /dev/null "http://127.0.0.1:$PLAIN/" || die "plain request through rdmalb failed"
curl -fsS -o /dev/null -k "https://127.0.0.1:$TLS/" || die "TLS request through rdmalb failed"

rows=()
# wrk: total requests, req/s, socket errors + non-2xx.
run_wrk() {
    local scheme=$1 port=$2 out
    out=$(wrk -t1 -c20 -d"${DURATION}s" "$scheme://127.0.0.1:$port/" 2>&1) || die "wrk failed: $out"
    local reqs rps errs non2xx
    reqs=$(awk '/requests in/ {print $1}' <<<"$out")
    rps=$(awk '/^Requests\/sec/ {print $2}' <<<"$out")
    errs=$(awk '/Socket errors/ {gsub(",", ""); print $4 + $6 + $8 + $10}' <<<"$out")
    non2xx=$(awk '/Non-2xx/ {print $NF}' <<<"$out")
    rows+=("| wrk -t1 -c20 -d${DURATION}s | $scheme | $reqs | $rps | $((${errs:-0} + ${non2xx:-0})) |")
}
# httperf: 10 calls per connection, a fixed number of connections.
run_httperf() {
    local scheme=$1 port=$2 ssl=() out
    [ "$scheme" = https ] && ssl=(--ssl)
    out=$(timeout 120 httperf --hog --server 127.0.0.1 --port "$port" "${ssl[@]}" --uri / \
        --num-conns "$HTTPERF_CONNS" --num-calls 10 --rate 0 2>&1) || die "httperf failed: $out"
    local replies rps errs
    replies=$(awk '/^Total:/ {for (i = 1; i < NF; i++) if ($i == "replies") print $(i + 1)}' <<<"$out")
    rps=$(awk '/^Request rate:/ {print $3}' <<<"$out")
    errs=$(awk '/^Errors: total/ {print $3}' <<<"$out")
    local bad
    bad=$(awk '/^Reply status:/ {for (i = 1; i <= NF; i++) if ($i ~ /^[345]xx=/) {split($i, a, "="); s += a[2]}} END {print s + 0}' <<<"$out")
    rows+=("| httperf --num-conns $HTTPERF_CONNS --num-calls 10 | $scheme | $replies | $rps | $((${errs:-0} + bad)) |")
}
log "wrk over http and https"
run_wrk http "$PLAIN"
run_wrk https "$TLS"
log "httperf over http and https"
run_httperf http "$PLAIN"
run_httperf https "$TLS"
check_spawned || die "a process died during the run"

mkdir -p "$ROOT/bench/results"
out=$ROOT/bench/results/loadtools-$(date -u +%Y%m%d-%H%M).md
{
    echo "# Load tools through rdmalb, $(date -u +%Y-%m-%dT%H:%MZ)"
    echo
    echo "Command: \`DURATION=$DURATION HTTPERF_CONNS=$HTTPERF_CONNS bash bench/proxy/loadtools.sh\`;"
    echo "rdmalb $(cd "$ROOT" && git describe --always --dirty 2>/dev/null || echo unknown), one worker, nginx backend (1 KiB body), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)."
    echo "TLS: rustls, self-signed RSA-2048 certificate made by openssl for this run; wrk and httperf negotiate TLS 1.2/1.3 as they support."
    echo
    echo "| tool | scheme | requests (wrk) / replies (httperf) | req/s | errors + non-2xx |"
    echo "|---|---|---:|---:|---:|"
    printf '%s\n' "${rows[@]}"
} >"$out"
cat "$out"
log "written to ${out#"$ROOT"/}"
