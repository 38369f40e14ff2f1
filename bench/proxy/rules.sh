#!/usr/bin/env bash
# What rules cost (issue 28): a 10,000-entry host map choosing the site and
# 20 rules (denies on admin paths, bots and dotfiles, redirects, a return,
# header and path rewrites, response headers), against the plain config,
# in rdmalb and in HAProxy with the same rules, in one run.
#
#   flock /tmp/rdmalb-bench.lock bash bench/proxy/rules.sh
#   ROUNDS=1 DURATION=3 flock /tmp/rdmalb-bench.lock bash bench/proxy/rules.sh   # quick look
#
# HAProxy's rules are written once (below); rdmalb's are `rdmalb import`ed
# from them and added to the plain rdmalb config of bench/proxy/run.sh, so
# both evaluate the same rules. The request (GET / for bench.localhost,
# which the map sends to the bench backend) fires the map lookup and the
# four header rules every request meets; the other conditions are tested
# and do not hold. Set-up as run.sh's: one nginx backend, one worker per
# proxy, the proxy on CPU 0 and wrk and the backend on CPU 1, wrk -c50
# keep-alive; CPU per request is utime+stime of the proxy's processes over
# the load run divided by the requests. Each round runs the four targets,
# the order rotating; medians are reported, with rules/plain per proxy.
#
# Results: bench/results/proxy-rules-<date>.{md,csv}.
# RULES_OUT=DIR writes rdmalb's imported rules (DIR/rules.toml, with
# DIR/hosts.map) and stops: `APPEND=DIR/rules.toml bash
# bench/proxy/instructions.sh BIN` then counts their instructions.
# Environment: ROUNDS=3 DURATION=10 WARMUP=2 CONNS=50 MAP_ENTRIES=10000
#   RDMALB_BIN=path (else cargo build --release) RESULTS_DIR=bench/results
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
# shellcheck source=scripts/lib/common.sh
. "$ROOT/scripts/lib/common.sh"
# shellcheck source=bench/proxy/lib.sh
. "$HERE/lib.sh"
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
CONNS=${CONNS:-50}
MAP_ENTRIES=${MAP_ENTRIES:-10000}
RESULTS_DIR=${RESULTS_DIR:-$ROOT/bench/results}
BIN=${RDMALB_BIN:-}
for v in ROUNDS DURATION WARMUP CONNS MAP_ENTRIES; do
    [[ ${!v} =~ ^[0-9]+$ ]] && [ "${!v}" -ge 1 ] || die "$v=${!v} is not a whole number >= 1"
done
for tool in nginx haproxy wrk curl taskset; do
    command -v "$tool" >/dev/null || die "$tool not found (run scripts/setup.sh)"
done
bench_work rules
if [ -z "$BIN" ]; then
    ensure_cargo
    log "building rdmalb (cargo build --release -p rdmalb --bin rdmalb)"
    (cd "$ROOT" && cargo build --release --quiet -p rdmalb --bin rdmalb) || die "cargo build --release failed"
    BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/rdmalb"
fi
[ -x "$BIN" ] || die "rdmalb binary not found: $BIN"

BODY=$(printf '%.0s0123456789abcdef' $(seq 64))
TARGETS="haproxy haproxy-rules rdmalb rdmalb-rules"
declare -A PORT PGID
free_port BACKEND_PORT 29500
port=29501
for t in $TARGETS; do
    free_port "PORT[$t]" "$port"
    port=$((port + 1))
done

# The map: MAP_ENTRIES customer hosts and the benchmark's own, all to the
# one backend (the lookup costs the same for any entry).
awk -v n="$MAP_ENTRIES" 'BEGIN { for (i = 0; i < n; i++) printf "customer%d.example.com bench\n", i; print "bench.localhost bench" }' >"$WORK/hosts.map"

# The 20 rules, as a hosting front end writes them.
rules_frontend() { # PORT
    cat <<EOF2
frontend fe
    bind 127.0.0.1:$1
    acl admin path_beg /admin /wp-admin /wp-login.php
    acl office src 10.0.0.0/8 192.168.0.0/16
    acl bots hdr_sub(User-Agent) -i bot crawler spider
    acl legacy hdr(host) -i old.example.com legacy.example.com
    acl dotfiles path_reg ^/\.
    acl beta req.cook(beta) -m str 1
    http-request deny if admin !office
    http-request deny deny_status 403 if bots
    http-request deny if dotfiles
    http-request redirect prefix http://www.example.com code 301 if legacy
    http-request return status 200 content-type text/plain string ok if { path /lb-health }
    http-request redirect scheme https code 301 if { hdr(host) -i secure.example.com }
    http-request deny deny_status 405 if { method TRACE }
    http-request set-header X-Forwarded-Proto http
    http-request set-header X-Beta 1 if beta
    http-request del-header X-Internal-Token
    http-request replace-path /old/(.*) /new/\1 if { path_beg /old/ }
    http-request set-query lb=1 if { path_beg /campaign }
    use_backend bench if { path_beg /api/ }
    use_backend %[req.hdr(host),lower,map($WORK/hosts.map,bench)]
    http-response set-header X-Frame-Options DENY
    http-response set-header X-Content-Type-Options nosniff
    http-response set-header Strict-Transport-Security max-age=63072000 if { ssl_fc }
    http-response del-header X-Powered-By
    http-response set-header Cache-Control no-store if { status 500:599 }
EOF2
}

render() {
    WORKERS=1 MAXCONN=4096
    proxy_render "$HERE/backend.nginx.conf.in" "$WORK/backend.conf"
    proxy_render "$HERE/haproxy.cfg.in" "$WORK/haproxy.cfg" "${PORT[haproxy]}"
    # The same global and defaults, the rules' frontend, backend `bench`.
    sed -n '/^frontend/q;p' "$WORK/haproxy.cfg" >"$WORK/haproxy-rules.cfg"
    rules_frontend "${PORT[haproxy-rules]}" >>"$WORK/haproxy-rules.cfg"
    printf '\nbackend bench\n    server b1 127.0.0.1:%s\n' "$BACKEND_PORT" >>"$WORK/haproxy-rules.cfg"
    local t node
    node=$(printf '[[node]]\nname = "b1"\naddress = "127.0.0.1:%s"\nsite = "bench"\n' "$BACKEND_PORT")
    for t in rdmalb rdmalb-rules; do
        proxy_render "$HERE/rdmalb.toml.in" "$WORK/$t.toml.tmp" "${PORT[$t]}"
        sed -e "s|@BALANCE@|roundrobin|" -e "s|@NODES@|$(tr '\n' '\a' <<<"$node")|" "$WORK/$t.toml.tmp" | tr '\a' '\n' >"$WORK/$t.toml"
        rm -f "$WORK/$t.toml.tmp"
    done
    # rdmalb's rules: imported from HAProxy's, everything from the first
    # rule section on, added to the plain config.
    (cd "$WORK" && "$BIN" import haproxy-rules.cfg -o imported.toml) >"$WORK/import.notes" 2>&1 ||
        { cat "$WORK/import.notes" >&2; die "rdmalb import did not carry every rule over"; }
    sed -n '/^\[\[\(map\|acl\|userlist\)\]\]/,$p' "$WORK/imported.toml" >>"$WORK/rdmalb-rules.toml"
    sed -i 's|^hosts = \["bench.localhost"\]|hosts = []|' "$WORK/rdmalb-rules.toml"
    "$BIN" check -c "$WORK/rdmalb-rules.toml" >/dev/null || die "rdmalb check rejected $WORK/rdmalb-rules.toml"
}

start() { # TARGET
    local t=$1
    case $t in
        haproxy*) spawn "$t" "$WORK/$t.out" taskset -c 0 haproxy -db -f "$WORK/$t.cfg" ;;
        rdmalb*) spawn "$t" "$WORK/$t.out" taskset -c 0 "$BIN" proxy -c "$WORK/$t.toml" ;;
    esac
    PGID[$t]=$SPAWN_PID
    wait_http "http://127.0.0.1:${PORT[$t]}/" 15 -H "Host: bench.localhost" || die "$t does not answer (logs in $WORK)"
    [ "$(curl -fsS -H "Host: bench.localhost" "http://127.0.0.1:${PORT[$t]}/")" = "$BODY" ] || die "$t answered another body"
    if [[ $t == *-rules ]]; then
        curl -fsS -o /dev/null -D "$WORK/$t.head" -H "Host: bench.localhost" "http://127.0.0.1:${PORT[$t]}/"
        grep -qi '^x-frame-options: DENY' "$WORK/$t.head" || die "$t: the response rules did not run"
        [ "$(curl -s -o /dev/null -w '%{http_code}' -H "Host: bench.localhost" "http://127.0.0.1:${PORT[$t]}/admin/")" = 403 ] ||
            die "$t: the admin deny did not run"
    fi
}

render
if [ -n "${RULES_OUT:-}" ]; then
    # Only the rules, for bench/proxy/instructions.sh (APPEND=...): the
    # rule sections rdmalb imported, with the map beside them.
    mkdir -p "$RULES_OUT"
    cp "$WORK/hosts.map" "$RULES_OUT/hosts.map"
    sed -n '/^\[\[\(map\|acl\|userlist\)\]\]/,$p' "$WORK/imported.toml" |
        sed "s|$WORK/hosts.map|$RULES_OUT/hosts.map|g" >"$RULES_OUT/rules.toml"
    log "rules written to $RULES_OUT/rules.toml"
    exit 0
fi
spawn backend "$WORK/backend.out" taskset -c 1 nginx -p "$WORK" -e "$WORK/backend-error.log" -c "$WORK/backend.conf" -g 'daemon off;'
wait_http "http://127.0.0.1:$BACKEND_PORT/health" 15 || die "the backend does not answer"

CSV="$WORK/rules.csv"
echo "round,position,key,requests,seconds,req_per_s,errors,cpu_us_per_req" >"$CSV"
read -r -a order <<<"$TARGETS"
for ((round = 1; round <= ROUNDS; round++)); do
    for ((pos = 0; pos < ${#order[@]}; pos++)); do
        t=${order[$(((pos + round - 1) % ${#order[@]}))]}
        start "$t"
        timeout $((WARMUP + 30)) taskset -c 1 wrk -t1 -c"$CONNS" -d"${WARMUP}s" -H "Host: bench.localhost" "http://127.0.0.1:${PORT[$t]}/" >/dev/null
        before=$(cpu_ticks "${PGID[$t]}")
        timeout $((DURATION + 30)) taskset -c 1 wrk -t1 -c"$CONNS" -d"${DURATION}s" --timeout 5s -H "Host: bench.localhost" \
            "http://127.0.0.1:${PORT[$t]}/" >"$WORK/wrk.out"
        after=$(cpu_ticks "${PGID[$t]}")
        read -r req secs rps err < <(awk '/requests in/ { r = $1; s = $4; sub(/s,?$/, "", s) } /Requests\/sec:/ { q = $2 }
            /Socket errors:/ { gsub(/,/, ""); e += $4 + $6 + $8 + $10 } /Non-2xx or 3xx responses:/ { e += $5 }
            END { printf "%d %s %s %d\n", r, s, q, e }' "$WORK/wrk.out")
        cpu=$(awk -v d=$((after - before)) -v hz="$CLK_HZ" -v n="$req" 'BEGIN { printf "%.2f", d * 1e6 / hz / n }')
        echo "$round,$pos,$t,$req,$secs,$rps,$err,$cpu" >>"$CSV"
        log "round $round: $t: $rps req/s, $cpu us CPU per request, $err errors"
        stop_one "${PGID[$t]}" 5
    done
done

mkdir -p "$RESULTS_DIR"
stamp=$(date -u +%Y%m%d-%H%M%S)
out="$RESULTS_DIR/proxy-rules-$stamp"
cp "$CSV" "$out.csv"
{
    echo "# Rules cost: a $MAP_ENTRIES-entry host map and 20 rules against the plain config"
    echo
    echo "wrk -t1 -c$CONNS -d${DURATION}s keep-alive, 1 KiB responses, one worker per proxy pinned to CPU 0; medians of $ROUNDS rounds ($(date -u +%F))."
    echo
    echo "| target | req/s | CPU µs/request | rules/plain CPU (medians) | rules/plain CPU (median of each round's ratio) |"
    echo "|---|---|---|---|---|"
    for t in $TARGETS; do
        cpu=$(median "$CSV" 8 "$t")
        base=$(median "$CSV" 8 "${t%-rules}")
        r='–' paired='–'
        if [[ $t == *-rules ]]; then
            r=$(ratio "$cpu" "$base")
            # The same round's runs share the machine's state: their ratio
            # is steadier than the ratio of medians on a shared machine.
            paired=$(awk -F, -v a="$t" -v b="${t%-rules}" 'NR > 1 && $3 == a { x[$1] = $8 } NR > 1 && $3 == b { y[$1] = $8 }
                END { for (k in x) if (y[k] > 0) print x[k] / y[k] }' "$CSV" | sort -g |
                awk '{ v[NR] = $1 } END { if (NR == 0) print "n/a"; else if (NR % 2) printf "%.2f", v[(NR + 1) / 2]; else printf "%.2f", (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
        fi
        echo "| $t | $(median "$CSV" 6 "$t") | $cpu | $r | $paired |"
    done
} >"$out.md"
cat "$out.md"
