#!/usr/bin/env bash
# Instructions per request of rdmalb binaries, counted, not timed:
#
#   bash bench/proxy/instructions.sh BIN [BIN ...]
#   e.g. bash bench/proxy/instructions.sh /tmp/rdmalb-before target/release/rdmalb
#
# Timing figures on a shared 2-core machine move by several percent from run
# to run; this one does not. Each binary runs `rdmalb proxy` (the config of
# bench/proxy/rdmalb.toml.in: one worker, roundrobin, one nginx node with a
# 1 KiB body) under valgrind's callgrind, and httperf sends exactly N1 and
# then, in a second run, N2 keep-alive requests through it. Instructions per
# request = (I(N2) - I(N1)) / (N2 - N1): start-up and shutdown cancel out.
# The figure includes every thread of the proxy (the data path, the control
# runtime, health checks every 10 s, metrics upkeep), less the start-up
# calibration of quanta's clock, whose count varies from run to run.
#
# Environment: N1=2000 N2=12000 CONNS=20 (keep-alive connections; requests
# are spread evenly over them); GLOBAL='key = value' adds a line to the
# proxy's [global] (e.g. GLOBAL='retry_on = ["conn-failure", "empty-response"]');
# APPEND=FILE adds FILE's sections at the end of the config (e.g. the rules
# `RULES_OUT=DIR bash bench/proxy/rules.sh` writes);
# KEEP=DIR keeps each callgrind profile as
# DIR/<binary>.<N>.callgrind, for callgrind_annotate. Prints one line per binary and writes
# bench/results/instructions-<date>.md.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
# shellcheck source=scripts/lib/common.sh
. "$ROOT/scripts/lib/common.sh"
# shellcheck source=bench/proxy/lib.sh
. "$HERE/lib.sh"
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

[ $# -ge 1 ] || die "usage: $0 BIN [BIN ...] (rdmalb binaries to compare)"
N1=${N1:-2000}
N2=${N2:-12000}
CONNS=${CONNS:-20}
RESULTS_DIR=${RESULTS_DIR:-$ROOT/bench/results}
for t in valgrind httperf nginx; do
    command -v "$t" >/dev/null 2>&1 || die "$t is not installed (bash scripts/setup.sh installs it)"
done
(( N2 > N1 && N1 % CONNS == 0 && N2 % CONNS == 0 )) ||
    die "need N2 > N1, both multiples of CONNS ($N1, $N2, $CONNS)"

WORK=$(mktemp -d /tmp/rdmalb-instructions.XXXXXX)
BACKEND_PID=
PROXY_PID=
cleanup() {
    [ -n "$PROXY_PID" ] && kill "$PROXY_PID" 2>/dev/null || true
    [ -n "$BACKEND_PID" ] && kill "$BACKEND_PID" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

BODY=$(printf '%.0s0123456789abcdef' $(seq 64))
free_port BACKEND_PORT 29000
free_port LISTEN_PORT 29001
# The templates as run.sh and scenarios.sh render them (one worker, 4096
# connections, no TLS): one renderer, so a new placeholder cannot be
# missed here again.
proxy_render "$HERE/backend.nginx.conf.in" "$WORK/backend.conf"
printf '[[node]]\nname = "b1"\naddress = "127.0.0.1:%s"\nsite = "bench"\n' "$BACKEND_PORT" >"$WORK/rdmalb-node"
proxy_render "$HERE/rdmalb.toml.in" "$WORK/rdmalb.toml.tmp" "$LISTEN_PORT"
# GLOBAL: extra [global] lines (e.g. GLOBAL='retry_on = ["conn-failure", "empty-response"]').
sed -e "s|@BALANCE@|roundrobin|" -e "/@NODES@/{r $WORK/rdmalb-node" -e "d}" \
    -e "s|^shutdown_grace = \"1s\"|shutdown_grace = \"1s\"\n${GLOBAL:-}|" \
    "$WORK/rdmalb.toml.tmp" >"$WORK/rdmalb.toml"
if [ -n "${APPEND:-}" ]; then
    [ -r "$APPEND" ] || die "APPEND=$APPEND is not a readable file"
    printf '\n' >>"$WORK/rdmalb.toml"
    cat "$APPEND" >>"$WORK/rdmalb.toml"
fi
if grep -q '@[A-Z_]*@' "$WORK/rdmalb.toml" "$WORK/backend.conf"; then
    die "a placeholder is left unfilled: $(grep -ho '@[A-Z_]*@' "$WORK/rdmalb.toml" "$WORK/backend.conf" | sort -u | tr '\n' ' ')"
fi

nginx -p "$WORK" -e "$WORK/backend-error.log" -c "$WORK/backend.conf" -g 'daemon off;' &
BACKEND_PID=$!
wait_port() { # PORT: until it accepts (bounded: 60 s)
    local i
    for ((i = 0; i < 600; i++)); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.1
    done
    die "nothing listens on port $1"
}
wait_port "$BACKEND_PORT"

# One callgrind run: the proxy's instructions for N requests.
count() { # BIN N -> instructions
    local bin=$1 n=$2 out="$WORK/cg.$RANDOM"
    valgrind --tool=callgrind --callgrind-out-file="$out" -q \
        "$bin" proxy -c "$WORK/rdmalb.toml" >"$WORK/proxy.log" 2>&1 &
    PROXY_PID=$!
    wait_port "$LISTEN_PORT"
    httperf --hog --server 127.0.0.1 --port "$LISTEN_PORT" --uri / \
        --num-conns "$CONNS" --num-calls $((n / CONNS)) --rate 0 >"$WORK/httperf.out" 2>&1
    grep -q "Reply status: 1xx=0 2xx=$n " "$WORK/httperf.out" ||
        die "httperf did not get $n 2xx replies: $(grep 'Reply status' "$WORK/httperf.out")"
    kill -TERM "$PROXY_PID"
    wait "$PROXY_PID" || true
    PROXY_PID=
    if [ -n "${KEEP:-}" ]; then
        mkdir -p "$KEEP" && cp "$out" "$KEEP/$(basename "$bin").$n.callgrind"
    fi
    # Every thread's events are in the one file: its "summary:" line, less
    # quanta's clock calibration (metrics-util's clock, once at start-up),
    # which runs until the clock looks stable: its count varies by up to
    # 1.6 M instructions from run to run (1 000 per request at N2 - N1 =
    # 1 600), with the machine's load, not with the code.
    local total cal
    total=$(awk '/^summary:/ {print $2}' "$out")
    cal=$(callgrind_annotate --inclusive=yes --threshold=100 "$out" 2>/dev/null |
        awk '/quanta::Calibration::calibrate \[/ {gsub(",", "", $1); if ($1 + 0 > m) m = $1 + 0}
             END {print m + 0}')
    echo $((total - cal))
}

mkdir -p "$RESULTS_DIR"
report=$RESULTS_DIR/instructions-$(date +%Y%m%d-%H%M)${APPEND:+-$(basename "$APPEND" .toml)}.md
{
    echo "Instructions per request (callgrind), rdmalb proxy, one worker, roundrobin, 1 KiB from nginx,"
    echo "httperf $CONNS keep-alive connections, (I($N2) - I($N1)) / ($N2 - $N1). Command: ${APPEND:+APPEND=$APPEND }bash bench/proxy/instructions.sh $*"
    echo
    echo "| binary | instructions / request |"
    echo "|---|---:|"
} >"$report"
for bin in "$@"; do
    [ -x "$bin" ] || die "not an executable: $bin"
    i1=$(count "$bin" "$N1")
    i2=$(count "$bin" "$N2")
    per=$(( (i2 - i1) / (N2 - N1) ))
    printf '%s: %d instructions per request\n' "$bin" "$per"
    printf '| `%s` | %d |\n' "$bin" "$per" >>"$report"
done
log "results: $report"
