#!/usr/bin/env bash
# rdmalb demo: a small web farm on loopback, fronted by rdmalb.
#
#   bash scripts/demo.sh            # set up, build, run until Ctrl-C
#   bash scripts/demo.sh --smoke    # start, check every site, tear down (CI)
#
# What it starts (all on 127.0.0.1, all torn down on exit):
#   - 8 backend nodes n1..n8, each a real nginx instance on its own port that
#     serves a page naming its site and node, /health and /nginx_status;
#   - one `rdmalb sidecar` per node, publishing the node's load (system +
#     nginx stub_status collectors) into a shared-memory window
#     /dev/shm/rdmalb-demo-<node>, and applying roles: it renders the node's
#     nginx site.conf for the site the node serves and reloads nginx;
#   - one `rdmalb proxy` with three sites in the 3:3:2 layout of seed 001:
#     shop.localhost (n1-n3), blog.localhost (n4-n6), news.localhost (n7-n8),
#     shop also being the default site, weighted-least-load routing over the
#     windows, the reconfiguration agent (POST /reconfig/move moves a node by
#     hand), plus an admin listener (/stats, /status, /metrics);
#   - a local ACME server, Debian's pebble (its own test CA) with
#     pebble-challtestsrv as its DNS (every name is 127.0.0.1): the proxy
#     orders a certificate for each site from it (`acme = true`, http-01
#     answered on the proxy's HTTP port) and serves the sites over HTTPS
#     too; pebble's root, to verify them with, is saved in the work dir.
#     Without pebble (or if it fails) the demo runs over HTTP and says why.
# Browsers and curl resolve *.localhost to the loopback address, so
# http://shop.localhost:8080/ works with no /etc/hosts change.
#
# Options (each also as an environment variable):
#   --smoke               DEMO_SMOKE=1       start, check, stop; exit status = result
#   --port N              DEMO_PORT=8080     proxy listener port
#   --admin-port N        DEMO_ADMIN_PORT=9100
#   --backend-port N      DEMO_BACKEND_PORT=8181   first backend port (n1; n2 = +1 ...)
#   --sidecar-port N      DEMO_SIDECAR_PORT=9201   first sidecar admin port
#   --https-port N        DEMO_HTTPS_PORT=8443     proxy HTTPS listener port
#   --no-https            DEMO_HTTPS=0       no pebble, no HTTPS listener
#                         DEMO_PEBBLE=/usr/bin/pebble, DEMO_CHALLTESTSRV=
#                         /usr/bin/pebble-challtestsrv   the ACME server's binaries
#   --dir DIR             RDMALB_DEMO_DIR=/tmp/rdmalb-demo   configs and logs
#   --no-setup            DEMO_SETUP=0       skip scripts/setup.sh
#                         DEMO_PUBLISH_INTERVAL=5ms   sidecars' publish interval
#   --bin PATH            RDMALB_BIN=PATH    use this rdmalb binary, do not build
#                         DEMO_PROFILE=release|debug  build profile (default:
#                         release; debug in smoke mode, which the tests have built)
# In smoke mode the defaults change so that a smoke run never collides with a
# running demo: ports are the first free ones above
# 18080/19100/18181/19201/18443 (pebble's: 24000 rather than 14000),
# the work dir is a fresh temp dir and the windows are named
# /dev/shm/rdmalb-demo-smoke<pid>-<node>.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
# shellcheck source=scripts/lib/common.sh
. "$HERE/lib/common.sh"
# shellcheck source=scripts/lib/pebble.sh
. "$HERE/lib/pebble.sh"
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"
umask 022

SMOKE=${DEMO_SMOKE:-0}
PORT=${DEMO_PORT:-}
ADMIN_PORT=${DEMO_ADMIN_PORT:-}
BACKEND_PORT=${DEMO_BACKEND_PORT:-}
SIDECAR_PORT=${DEMO_SIDECAR_PORT:-}
HTTPS_PORT=${DEMO_HTTPS_PORT:-}
HTTPS=${DEMO_HTTPS:-1}
DIR=${RDMALB_DEMO_DIR:-}
SETUP=${DEMO_SETUP:-1}
BIN=${RDMALB_BIN:-}
# All eight sidecars share this one machine, so they publish every 5 ms
# rather than the 1 ms default a real node's single sidecar uses (at 1 ms
# each costs ~5% of a CPU here).
PUBLISH_INTERVAL=${DEMO_PUBLISH_INTERVAL:-5ms}

usage() { sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
    case $1 in
        --smoke) SMOKE=1 ;;
        --port) PORT=${2:?--port needs a value}; shift ;;
        --admin-port) ADMIN_PORT=${2:?--admin-port needs a value}; shift ;;
        --backend-port) BACKEND_PORT=${2:?--backend-port needs a value}; shift ;;
        --sidecar-port) SIDECAR_PORT=${2:?--sidecar-port needs a value}; shift ;;
        --https-port) HTTPS_PORT=${2:?--https-port needs a value}; shift ;;
        --no-https) HTTPS=0 ;;
        --dir) DIR=${2:?--dir needs a value}; shift ;;
        --no-setup) SETUP=0 ;;
        --bin) BIN=${2:?--bin needs a value}; shift ;;
        -h | --help) usage; exit 0 ;;
        *) die "unknown argument: $1 (see --help)" ;;
    esac
    shift
done
for v in PORT ADMIN_PORT BACKEND_PORT SIDECAR_PORT HTTPS_PORT; do
    val=${!v}
    [ -z "$val" ] || [[ $val =~ ^[0-9]+$ && $val -ge 1 && $val -le 65535 ]] ||
        die "$v=$val is not a TCP port (1-65535)"
done
[[ $HTTPS == [01] ]] || die "DEMO_HTTPS=$HTTPS (accepted: 1, 0)"

# --------------------------------------------------------------- the farm
SITES=(shop blog news)
# node → site, 3:3:2 as in seed 001's first experiment.
NODES=(n1 n2 n3 n4 n5 n6 n7 n8)
NODE_SITE=(shop shop shop blog blog blog news news)
declare -A SITE_TITLE=([shop]="Shop" [blog]="Blog" [news]="News")
declare -A SITE_PRIORITY=([shop]=3 [blog]=2 [news]=1)
declare -A SITE_GUARANTEE=([shop]=500 [blog]=200 [news]=0)

# --------------------------------------------------------------- teardown
SHM_FILES=()
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    if [ ${#SPAWNED_PIDS[@]} -gt 0 ]; then
        log "stopping ${#SPAWNED_PIDS[@]} processes"
        stop_all 5
    fi
    local f
    for f in "${SHM_FILES[@]}"; do rm -f "$f"; done
    [ -n "${DIR:-}" ] && rm -f "$DIR/demo.pid"
    if [ "$SMOKE" = 1 ] && [ -n "${SMOKE_TMP:-}" ] && [ "$rc" = 0 ]; then
        rm -rf "$SMOKE_TMP"
    elif [ -n "${DIR:-}" ] && [ -d "$DIR" ]; then
        echo "logs kept in $DIR/logs"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'warn "failed at line $LINENO: $BASH_COMMAND"' ERR
trap 'exit 130' INT
trap 'exit 143' TERM

# --------------------------------------------------------------- set-up, build
if [ "$SETUP" = 1 ]; then
    bash "$HERE/setup.sh"
fi
command -v nginx >/dev/null || die "nginx not found (run scripts/setup.sh)"
if [ -z "$BIN" ]; then
    ensure_cargo
    # The smoke check tests behaviour, not speed: it uses the debug build the
    # test suite has already compiled rather than a second, release build.
    profile=${DEMO_PROFILE:-$([ "$SMOKE" = 1 ] && echo debug || echo release)}
    case $profile in
        release) build_args=(--release) ;;
        debug) build_args=() ;;
        *) die "DEMO_PROFILE=$profile (accepted: release, debug)" ;;
    esac
    log "building rdmalb (cargo build ${build_args[*]})"
    (cd "$ROOT" && cargo build "${build_args[@]}" --quiet --bin rdmalb) || die "cargo build ${build_args[*]} failed"
    BIN="${CARGO_TARGET_DIR:-$ROOT/target}/$profile/rdmalb"
    case $BIN in /*) ;; *) BIN="$ROOT/$BIN" ;; esac
fi
[ -x "$BIN" ] || die "rdmalb binary not found or not executable: $BIN"

# --------------------------------------------------------------- ports, dirs
if [ "$SMOKE" = 1 ]; then
    SMOKE_TMP=$(mktemp -d /tmp/rdmalb-demo-smoke.XXXXXX)
    chmod 755 "$SMOKE_TMP"
    DIR=${DIR:-$SMOKE_TMP}
    SHM_PREFIX=/dev/shm/rdmalb-demo-smoke$$-
    if [ -n "$PORT" ]; then require_free_port "$PORT" proxy; else free_port PORT 18080; fi
    if [ -n "$ADMIN_PORT" ]; then require_free_port "$ADMIN_PORT" admin; else free_port ADMIN_PORT 19100; fi
    first_backend=${BACKEND_PORT:-18181}
    first_sidecar=${SIDECAR_PORT:-19201}
    if [ -n "$HTTPS_PORT" ]; then require_free_port "$HTTPS_PORT" https; else free_port HTTPS_PORT 18443; fi
    first_pebble=24000
else
    DIR=${DIR:-/tmp/rdmalb-demo}
    SHM_PREFIX=/dev/shm/rdmalb-demo-
    PORT=${PORT:-8080}
    ADMIN_PORT=${ADMIN_PORT:-9100}
    require_free_port "$PORT" "proxy; use --port"
    require_free_port "$ADMIN_PORT" "admin; use --admin-port"
    first_backend=${BACKEND_PORT:-8181}
    first_sidecar=${SIDECAR_PORT:-9201}
    HTTPS_PORT=${HTTPS_PORT:-8443}
    [ "$HTTPS" = 0 ] || require_free_port "$HTTPS_PORT" "https; use --https-port or --no-https"
    first_pebble=14000
fi
case $DIR in /*) ;; *) DIR="$PWD/$DIR" ;; esac

# One demo per work dir: refuse to clobber a running one, and never wipe a
# folder this script did not create.
if [ -f "$DIR/demo.pid" ] && kill -0 "$(cat "$DIR/demo.pid")" 2>/dev/null; then
    other=$(cat "$DIR/demo.pid")
    DIR='' # keep cleanup away from the running demo's files
    die "a demo is already running from this work dir (pid $other); stop it or use --dir"
fi
if [ -d "$DIR" ] && [ -n "$(ls -A "$DIR")" ] && [ ! -f "$DIR/.rdmalb-demo" ]; then
    bad=$DIR
    DIR=''
    die "$bad exists and was not made by this script; choose another --dir"
fi
rm -rf "${DIR:?}"/{nodes,sidecars,proxy,logs,pebble}
mkdir -p "$DIR"/{nodes,sidecars,proxy,logs}
chmod 755 "$DIR"
touch "$DIR/.rdmalb-demo"
echo $$ >"$DIR/demo.pid"

BACKEND_PORTS=()
SIDECAR_PORTS=()
next_b=$first_backend
next_s=$first_sidecar
for i in "${!NODES[@]}"; do
    if [ "$SMOKE" = 1 ]; then
        free_port p "$next_b"
        free_port s "$next_s"
    else
        p=$next_b
        s=$next_s
        require_free_port "$p" "backend ${NODES[$i]}; use --backend-port"
        require_free_port "$s" "sidecar ${NODES[$i]} admin; use --sidecar-port"
    fi
    BACKEND_PORTS+=("$p")
    SIDECAR_PORTS+=("$s")
    next_b=$((p + 1))
    next_s=$((s + 1))
done

# --------------------------------------------------------------- configs
# Backend node: nginx.conf holds what every node has; site.conf holds what
# makes it serve one site. The node's sidecar renders site.conf from
# site.conf.tpl at start-up and again whenever a proxy moves the node to
# another site (role application, docs/sidecar.md), then reloads nginx with
# conf/role/nginx-reload.sh and checks /site-health answers for the new site.
write_site_template() { # → stdout; {{…}} are the sidecar's template variables
    cat <<'EOF'
# Rendered by the rdmalb sidecar of node {{node}} for site {{site}}
# (template written by scripts/demo.sh); replaced on every role change.
location = /site-health {
    access_log off;
    default_type text/plain;
    add_header X-Rdmalb-Site "{{site}}" always;
    return 200 "{{site}} ok\n";
}
location / {
    default_type text/html;
    add_header X-Served-By "{{node}}" always;
    add_header X-Site "{{site}}" always;
    add_header X-Rdmalb-Site "{{site}}" always;
    return 200 '<!doctype html>
<html><head><meta charset="utf-8"><title>{{title}} on {{node}}</title>
<style>body{font-family:sans-serif;margin:3em}code{background:#eee;padding:2px 4px}</style></head>
<body><h1>{{title}}</h1>
<p>site={{site}} node={{node}}</p>
<p>Served by backend node <b>{{node}}</b> (nginx on {{listen}}) through rdmalb.
You asked for <code>$host$request_uri</code>. Reload to see the balancer pick another node of this site.</p>
</body></html>
';
}
EOF
}

for i in "${!NODES[@]}"; do
    node=${NODES[$i]} site=${NODE_SITE[$i]} port=${BACKEND_PORTS[$i]}
    d=$DIR/nodes/$node
    mkdir -p "$d"
    write_site_template >"$d/site.conf.tpl"
    : >"$d/site.conf" # the sidecar renders it before it publishes any load
    cat >"$d/nginx.conf" <<EOF
# Generated by scripts/demo.sh: backend node $node.
worker_processes 1;
pid $d/nginx.pid;
error_log $DIR/logs/$node-nginx-error.log warn;
events { worker_connections 1024; }
http {
$(nginx_tempdirs "$d/tmp")
    access_log $DIR/logs/$node-access.log combined buffer=16k flush=1s;
    keepalive_requests 10000;
    server_tokens off;
    server {
        listen 127.0.0.1:$port;
        server_name _;
        include $d/site.conf;
        location = /health {
            access_log off;
            default_type text/plain;
            return 200 "ok $node\n";
        }
        location = /nginx_status {
            access_log off;
            stub_status;
            allow 127.0.0.1;
            allow ::1;
            deny all;
        }
    }
}
EOF
    cat >"$DIR/sidecars/$node.toml" <<EOF
# Generated by scripts/demo.sh: the sidecar of backend node $node.
node = "$node"
node_id = $((i + 1))
sites = [$(printf '"%s", ' "${SITES[@]}" | sed 's/, $//')]
site = "$site"
publish_interval = "$PUBLISH_INTERVAL"

[window.shm]
path = "${SHM_PREFIX}$node"

[[collector]]
kind = "system"
app_port = $port

[[collector]]
kind = "status"
url = "http://127.0.0.1:$port/nginx_status"
format = "nginx"
capacity = 1024

[admin]
listen = "127.0.0.1:${SIDECAR_PORTS[$i]}"

[role]
file = "$d/site.conf"
reload = ["sh", "$ROOT/conf/role/nginx-reload.sh", "$d/nginx.pid",
          "nginx", "-p", "$d", "-e", "$DIR/logs/$node-nginx-error.log", "-c", "$d/nginx.conf", "-s", "reload"]
reload_timeout = "10s"
verify = "127.0.0.1:$port"
verify_timeout = "5s"
verify_header = "x-rdmalb-site"
$(for st in "${SITES[@]}"; do printf '\n[role.site.%s]\ntemplate = "%s"\nhosts = ["%s.localhost", "%s.example.com", "www.%s.example.com"]\nhealth_path = "/site-health"\nvars = { title = "%s" }\n' "$st" "$d/site.conf.tpl" "$st" "$st" "$st" "${SITE_TITLE[$st]}"; done)
EOF
    SHM_FILES+=("${SHM_PREFIX}$node")
done
SHM_FILES+=("${SHM_PREFIX}proxy")

# --------------------------------------------------------------- pebble (HTTPS)
# pebble validates http-01 challenges on the proxy's HTTP port; its DNS
# resolves every site's names to 127.0.0.1, where the proxy listens.
# HTTPS_WHY says why the demo serves no HTTPS (empty while it does).
HTTPS_WHY=''
ROOT_PEM=$DIR/pebble/root.pem
if [ "$HTTPS" = 1 ]; then
    log "starting a local ACME server (pebble, with pebble-challtestsrv as its DNS)"
    # Certificates valid 90 days, as Let's Encrypt's.
    if ! pebble_start "$DIR/pebble" "$DIR/logs" "$PORT" "$HTTPS_PORT" "$first_pebble" 7776000; then
        HTTPS_WHY=$PEBBLE_WHY
        warn "no HTTPS in this demo, HTTP only: $HTTPS_WHY"
    fi
else
    HTTPS_WHY="turned off (--no-https / DEMO_HTTPS=0)"
fi

PROXY_CONF=$DIR/proxy/rdmalb.toml
# The admin token that POST /reconfig/move needs (docs/operations.md); a
# fresh one for every run.
ADMIN_TOKEN_FILE=$DIR/proxy/admin.token
rm -f "$ADMIN_TOKEN_FILE"
"$BIN" psk --out "$ADMIN_TOKEN_FILE"
{
    cat <<EOF
# Generated by scripts/demo.sh: one proxy, three sites, eight nodes (3:3:2).
[global]
proxy_id = 1
balance = "weighted-least-load"
default_site = "shop"
workers = 2
shutdown_grace = "2s"
access_log = "$DIR/logs/access.log"

[timeouts]
connect = "1s"

# The eight nodes share this one machine, so its CPU, run queue, memory and
# interrupts are one host's, sampled by each sidecar at its own instants:
# noise, not a difference between nodes. The demo scores what does differ:
# nginx's connections (stub_status) and this proxy's requests in flight.
# On real nodes, each its own machine, keep the defaults (docs/routing.md).
[weights]
cpu = 0.0
run_queue = 0.0
memory = 0.0
network = 0.0
irq = 0.0
connections = 0.4
app = 0.3
inflight = 0.3

[health]
path = "/health"
interval = "1s"
rise = 1
fall = 2

[admin]
listen = "127.0.0.1:$ADMIN_PORT"
token_file = "$ADMIN_TOKEN_FILE"

# The reconfiguration agent: moves an idle node to a site that stays hot
# (docs/reconfiguration.md); POST /reconfig/move moves one by hand.
[reconfig]
mode = "reconfigure"

[reconfig.window]
shm = "${SHM_PREFIX}proxy"

# The admission queue: at most 512 requests forwarded at once; beyond that
# each site queues and freed slots go in VirtualClock order by guarantee
# (docs/operations.md, "The admission queue").
[qos]
max_inflight = 512

[[listener]]
name = "http"
listen = "127.0.0.1:$PORT"
EOF
    if ip -6 addr show dev lo 2>/dev/null | grep -q 'inet6 ::1/128'; then
        # Browsers try ::1 first for *.localhost.
        printf '\n[[listener]]\nname = "http6"\nlisten = "[::1]:%s"\n' "$PORT"
        [ -n "$HTTPS_WHY" ] || printf '\n[[listener]]\nname = "https6"\nlisten = "[::1]:%s"\ntls = {}\n' "$HTTPS_PORT"
    fi
    if [ -z "$HTTPS_WHY" ]; then
        cat <<EOF

# Automatic HTTPS (docs/tls.md): a TLS listener with no certificate of its
# own serves those the proxy orders from the local pebble for every site
# with acme = true (http-01, answered on the listener above).
[[listener]]
name = "https"
listen = "127.0.0.1:$HTTPS_PORT"
tls = {}

[acme]
directory = "$PEBBLE_DIRECTORY"
ca_root = "$PEBBLE_CA"
storage = "$DIR/proxy/acme"
contact = ["demo@example.com"]
check_interval = "5s"
retry_min = "5s"
retry_max = "1m"
EOF
    fi
    for site in "${SITES[@]}"; do
        cat <<EOF

[[site]]
name = "$site"
hosts = ["$site.localhost", "$site.example.com", "www.$site.example.com"]
priority = ${SITE_PRIORITY[$site]}
guarantee = ${SITE_GUARANTEE[$site]}
min_nodes = 1
EOF
        [ -n "$HTTPS_WHY" ] || echo "acme = true"
    done
    for i in "${!NODES[@]}"; do
        cat <<EOF

[[node]]
name = "${NODES[$i]}"
address = "127.0.0.1:${BACKEND_PORTS[$i]}"
site = "${NODE_SITE[$i]}"
transport = "shm"
sidecar = "${SHM_PREFIX}${NODES[$i]}"
EOF
    done
} >"$PROXY_CONF"

log "checking the generated configs (rdmalb check)"
"$BIN" check -c "$PROXY_CONF" >"$DIR/logs/check.log" 2>&1 ||
    { cat "$DIR/logs/check.log" >&2; die "rdmalb check rejected $PROXY_CONF"; }
for node in "${NODES[@]}"; do
    "$BIN" check --sidecar -c "$DIR/sidecars/$node.toml" >>"$DIR/logs/check.log" 2>&1 ||
        { cat "$DIR/logs/check.log" >&2; die "rdmalb check rejected $DIR/sidecars/$node.toml"; }
done

# --------------------------------------------------------------- start
# Every process logs to a file: no colour escapes in those logs.
export NO_COLOR=1
log "starting ${#NODES[@]} backend nodes (nginx)"
for i in "${!NODES[@]}"; do
    node=${NODES[$i]}
    d=$DIR/nodes/$node
    nginx -t -q -p "$d" -e "$DIR/logs/$node-nginx-error.log" -c "$d/nginx.conf" \
        >>"$DIR/logs/$node-nginx.out" 2>&1 ||
        { cat "$DIR/logs/$node-nginx.out" >&2; die "nginx rejected $d/nginx.conf"; }
    spawn "nginx $node" "$DIR/logs/$node-nginx.out" \
        nginx -p "$d" -e "$DIR/logs/$node-nginx-error.log" -c "$d/nginx.conf" -g 'daemon off;'
done
for i in "${!NODES[@]}"; do
    wait_http "http://127.0.0.1:${BACKEND_PORTS[$i]}/health" 10 ||
        { check_spawned || true; die "backend ${NODES[$i]} did not answer on port ${BACKEND_PORTS[$i]}"; }
done

log "starting ${#NODES[@]} sidecars"
for i in "${!NODES[@]}"; do
    node=${NODES[$i]}
    spawn "sidecar $node" "$DIR/logs/$node-sidecar.log" "$BIN" sidecar -c "$DIR/sidecars/$node.toml"
done
for i in "${!NODES[@]}"; do
    wait_http "http://127.0.0.1:${SIDECAR_PORTS[$i]}/status" 15 ||
        { check_spawned || true; die "sidecar ${NODES[$i]} did not serve /status on port ${SIDECAR_PORTS[$i]}"; }
    [ -e "${SHM_PREFIX}${NODES[$i]}" ] || die "sidecar ${NODES[$i]} did not create its window ${SHM_PREFIX}${NODES[$i]}"
done

log "starting the proxy"
spawn "rdmalb proxy" "$DIR/logs/proxy.log" "$BIN" proxy -c "$PROXY_CONF"
wait_http "http://127.0.0.1:$ADMIN_PORT/status" 15 ||
    { check_spawned || true; die "the proxy's admin listener did not answer on port $ADMIN_PORT"; }
# Ready when the default site answers through the proxy (health checks need
# `rise` successes before a node takes traffic).
wait_http "http://127.0.0.1:$PORT/" 15 ||
    { check_spawned || true; die "the proxy did not serve http://127.0.0.1:$PORT/ (see $DIR/logs/proxy.log)"; }
if [ -z "$HTTPS_WHY" ]; then
    log "waiting for pebble to issue the sites' certificates"
    if ! why=$(acme_wait_issued "$ADMIN_PORT" "${#SITES[@]}" 30); then
        HTTPS_WHY="no certificate issued within 30 s ($why; see $DIR/logs/proxy.log and pebble.log); the proxy keeps retrying"
    elif ! pebble_root "$ROOT_PEM" 2>"$DIR/logs/pebble-root.log"; then
        HTTPS_WHY="pebble's root not fetched from https://$PEBBLE_MANAGEMENT/roots/0 ($(cat "$DIR/logs/pebble-root.log"))"
    fi
    [ -z "$HTTPS_WHY" ] || warn "no HTTPS in this demo: $HTTPS_WHY"
fi

# --------------------------------------------------------------- smoke check
if [ "$SMOKE" = 1 ]; then
    passed=0
    failed=0
    pass() { printf '  %sPASS%s %s\n' "$C_G" "$C_0" "$*"; passed=$((passed + 1)); }
    fail() { printf '  %sFAIL%s %s\n' "$C_R" "$C_0" "$*"; failed=$((failed + 1)); }
    nodes_of() {
        local i
        for i in "${!NODES[@]}"; do
            if [ "${NODE_SITE[$i]}" = "$1" ]; then printf '%s ' "${NODES[$i]}"; fi
        done
    }

    # The nodes serving SITE now, by the proxy's /status: the agent may
    # move an idle node to a hot site at any time (a busy host makes every
    # site look loaded), so a node's configured site is only where it began.
    serving_of() {
        curl -sS --max-time 5 "http://127.0.0.1:$ADMIN_PORT/status" 2>/dev/null |
            python3 -c 'import json, sys
try:
    doc = json.load(sys.stdin)
except ValueError:
    sys.exit(0)
print(" ".join(n["name"] for n in doc.get("nodes", [])
               if n.get("assigned_site") == sys.argv[1] and n.get("role_applied")
               and n.get("state") == "up"))' "$1"
    }

    # HTTPS with the certificates pebble issued: curl verifies each chain
    # against pebble's root and the site's name; the same request trusting
    # another CA must fail (so the first check does verify).
    smoke_https() {
        if [ -n "$HTTPS_WHY" ]; then
            if [ "$HTTPS" = 0 ]; then log "HTTPS not checked: $HTTPS_WHY"; else fail "HTTPS: $HTTPS_WHY"; fi
            return 0
        fi
        local site body bad=''
        for site in "${SITES[@]}"; do
            body=$(curl -sS --max-time 5 --cacert "$ROOT_PEM" "https://$site.localhost:$HTTPS_PORT/" 2>&1) ||
                { bad+=" $site: ${body:0:160};"; continue; }
            [[ $body == *"site=$site node="* ]] || bad+=" $site: the page does not name the site: ${body:0:120};"
        done
        body=$(curl -sS --max-time 5 --cacert "$ROOT_PEM" --resolve "www.blog.example.com:$HTTPS_PORT:127.0.0.1" \
            "https://www.blog.example.com:$HTTPS_PORT/" 2>&1) || bad+=" www.blog.example.com: ${body:0:160};"
        if [ -z "$bad" ]; then
            pass "https://<site>.localhost:$HTTPS_PORT/ (and www.blog.example.com) verify against pebble's root and reach their sites"
        else
            fail "HTTPS with pebble's root:$bad"
        fi
        if body=$(curl -sS --max-time 5 --cacert "$PEBBLE_CA" -o /dev/null "https://shop.localhost:$HTTPS_PORT/" 2>&1); then
            fail "https://shop.localhost:$HTTPS_PORT/ verified against a CA that did not issue it"
        else
            pass "the same request trusting another CA is refused (${body%%$'\n'*})"
        fi
        body=$(curl -sS --max-time 5 "http://127.0.0.1:$ADMIN_PORT/status" 2>&1 | python3 -c 'import json, sys
certs = json.load(sys.stdin).get("acme") or []
print(" ".join(sorted("%s:%s" % (c["certificate"], (c.get("issuer") or "none").replace(" ", "_")) for c in certs)))' 2>&1) || true
        if [[ $body =~ ^blog.localhost:Pebble_Intermediate_CA_[0-9a-f]+\ news.localhost:Pebble_[^\ ]+\ shop.localhost:Pebble_[^\ ]+$ ]]; then
            pass "admin /status lists the three sites' certificates, issued by pebble's intermediate CA"
        else
            fail "admin /status acme: ${body:0:200}"
        fi
        body=$(curl -sS --max-time 5 "http://127.0.0.1:$ADMIN_PORT/metrics" 2>&1) || true
        if [[ $body == *'rdmalb_cert_expiry_seconds{host="news.localhost"}'* ]]; then
            pass "admin /metrics has rdmalb_cert_expiry_seconds for the issued certificates"
        else
            fail "admin /metrics lacks rdmalb_cert_expiry_seconds{host=\"news.localhost\"}"
        fi
    }

    log "smoke check through http://127.0.0.1:$PORT/"
    hdr=$DIR/logs/smoke-headers.txt
    for site in "${SITES[@]}"; do
        want=" $(nodes_of "$site")"
        bad=''
        seen=' '
        for _ in 1 2 3 4 5 6 7 8 9; do
            body=$(curl -sS --max-time 5 -D "$hdr" -H "Host: $site.localhost:$PORT" \
                "http://127.0.0.1:$PORT/smoke" 2>&1) || { bad="request failed: $body"; break; }
            status=$(head -n1 "$hdr" | awk '{print $2}')
            node=$(tr -d '\r' <"$hdr" | awk -F': ' 'tolower($1)=="x-served-by"{print $2}')
            if [ "$status" != 200 ]; then bad="status $status"; break; fi
            if [[ $body != *"site=$site node="* ]]; then bad="body does not name site $site: ${body:0:120}"; break; fi
            if [[ $want != *" $node "* && " $(serving_of "$site") " != *" $node "* ]]; then
                bad="served by node '$node', which is not a $site node ($want; serving now: $(serving_of "$site"))"
                break
            fi
            [[ $seen == *" $node "* ]] || seen+="$node "
        done
        if [ -z "$bad" ]; then pass "$site.localhost → 200 from its own nodes (seen:$seen)"; else fail "$site.localhost: $bad"; fi
    done

    body=$(curl -sS --max-time 5 "http://127.0.0.1:$PORT/" 2>&1) || true
    if [[ $body == *"site=shop node="* ]]; then pass "unknown host → default site shop"; else fail "unknown host did not reach the default site: ${body:0:120}"; fi

    # Real clients send the host name, not a Host header we forged.
    body=$(curl -sS --max-time 5 "http://blog.localhost:$PORT/" 2>&1) || true
    if [[ $body == *"site=blog node="* ]]; then pass "http://blog.localhost:$PORT/ resolves and routes to blog"; else fail "http://blog.localhost:$PORT/: ${body:0:120}"; fi

    smoke_https

    status_json=$(curl -sS --max-time 5 "http://127.0.0.1:$ADMIN_PORT/status" 2>&1) || true
    missing=''
    for node in "${NODES[@]}" "${SITES[@]}"; do
        [[ $status_json == *"\"$node\""* ]] || missing+=" $node"
    done
    [[ $status_json == *'"max_inflight": 512'* ]] || missing+=" qos.max_inflight"
    if [ -z "$missing" ]; then pass "admin /status lists every site and node and the admission queue"; else fail "admin /status lacks:$missing (${status_json:0:200})"; fi
    serving=''
    for site in "${SITES[@]}"; do serving+=" $site: $(serving_of "$site");"; done
    if [[ $serving != *": ;"* ]]; then pass "admin /status shows who serves each site ($serving )"; else fail "a site has no serving node in /status ($serving )"; fi

    headers=$(curl -sS --max-time 5 -D - -o "$DIR/logs/stats.html" "http://127.0.0.1:$ADMIN_PORT/stats" 2>&1) || true
    if [[ $headers == *" 200 "* && $headers == *"text/html"* && $headers == *"content-security-policy: default-src 'none'"* ]] &&
        grep -q 'fetch("/status"' "$DIR/logs/stats.html"; then
        pass "admin /stats serves the stats page (HTML, its own Content-Security-Policy)"
    else
        fail "admin /stats: ${headers:0:200}"
    fi

    code=$(curl -sS --max-time 5 -o "$DIR/logs/metrics.txt" -w '%{http_code}' "http://127.0.0.1:$ADMIN_PORT/metrics" 2>&1) || true
    if [ "$code" = 200 ] && grep -q '^# TYPE' "$DIR/logs/metrics.txt"; then
        pass "admin /metrics serves Prometheus text ($(grep -c '^# TYPE' "$DIR/logs/metrics.txt") metric families)"
    else
        fail "admin /metrics: status $code"
    fi

    bad=''
    for i in "${!NODES[@]}"; do
        out=$(curl -sS --max-time 5 "http://127.0.0.1:${SIDECAR_PORTS[$i]}/status" 2>&1) || { bad+=" ${NODES[$i]}"; continue; }
        [[ $out == *"${NODES[$i]}"* ]] || bad+=" ${NODES[$i]}"
    done
    if [ -z "$bad" ]; then pass "every sidecar serves /status naming its node"; else fail "sidecar /status failed for:$bad"; fi

    # Reconfiguration end to end: move n8 from news to shop by hand (the
    # same site lock + role-word CAS the agent uses); n8's sidecar rewrites
    # its nginx site.conf and reloads nginx; the proxy sends shop requests to
    # n8 once the role is applied and checked, and news requests never again.
    out=$("$BIN" ctl -c "$PROXY_CONF" show stat 2>&1) || true
    if [[ $out == '# pxname,svname,'* && $out == *$'\nnews,n8,'* ]]; then pass "rdmalb ctl show stat prints HAProxy's CSV"; else fail "rdmalb ctl show stat: ${out:0:200}"; fi
    out=$("$BIN" ctl -c "$PROXY_CONF" move node n8 site shop 2>&1) || true
    if [[ $out == *'claimed for shop'* ]]; then pass "rdmalb ctl move node n8 site shop claimed the node"; else fail "rdmalb ctl move: ${out:0:200}"; fi
    moved=''
    for _ in $(seq 300); do
        body=$(curl -sS --max-time 5 -H "Host: shop.localhost" "http://127.0.0.1:$PORT/" 2>&1) || true
        if [[ $body == *"site=shop node=n8"* ]]; then moved=1; break; fi
        sleep 0.05
    done
    if [ -n "$moved" ]; then pass "n8 serves shop after the move (sidecar re-rendered nginx's config)"; else fail "n8 never served shop after the move"; fi
    # news keeps whatever else serves it (n7 unless the agent moved it):
    # never n8 again, and a 503 only while /status shows no node serving
    # news.
    bad=''
    served=' '
    for _ in $(seq 12); do
        body=$(curl -sS --max-time 5 -H "Host: news.localhost" "http://127.0.0.1:$PORT/" 2>&1) || { bad="request failed"; break; }
        if [[ $body == *"site=news node=n8"* ]]; then bad="n8 still served news: ${body:0:120}"; break; fi
        if [[ $body =~ site=news\ node=([a-z0-9]+) ]]; then
            [[ $served == *" ${BASH_REMATCH[1]} "* ]] || served+="${BASH_REMATCH[1]} "
            continue
        fi
        now=$(serving_of news)
        if [[ $body == *'no node of site `news` is up'* && -z $now ]]; then
            [[ $served == *" none (the agent had moved n7) "* ]] || served+="none (the agent had moved n7) "
            continue
        fi
        bad="${body:0:120} (serving news now: ${now:-none})"
        break
    done
    if [ -z "$bad" ]; then pass "news never reaches n8 after the move (served by:$served)"; else fail "news after the move: $bad"; fi

    if check_spawned; then pass "no process died during the check"; else fail "a process died during the check"; fi

    echo "smoke: $passed passed, $failed failed"
    if [ "$failed" -gt 0 ]; then
        echo "logs: $DIR/logs" >&2
        exit 1
    fi
    exit 0
fi

# --------------------------------------------------------------- interactive
https_help() {
    if [ -n "$HTTPS_WHY" ]; then
        printf '    %sno HTTPS%s: %s\n' "$C_Y" "$C_0" "$HTTPS_WHY"
        return
    fi
    cat <<EOF
    https://shop.localhost:$HTTPS_PORT/    the sites over HTTPS, with certificates the proxy
    https://blog.localhost:$HTTPS_PORT/    ordered from the local ACME server (pebble, http-01);
    https://news.localhost:$HTTPS_PORT/    a browser warns: it does not trust pebble's root
    curl --cacert $ROOT_PEM https://shop.localhost:$HTTPS_PORT/
                                     (pebble's root: a new one at every start of the demo)
EOF
}

cat <<EOF

${C_B}rdmalb demo is running${C_0}  (work dir: $DIR)

  Open in a browser:
    http://shop.localhost:$PORT/     site "shop" on n1 n2 n3
    http://blog.localhost:$PORT/     site "blog" on n4 n5 n6
    http://news.localhost:$PORT/     site "news" on n7 n8
    http://127.0.0.1:$PORT/          no matching host → default site "shop"
    http://127.0.0.1:$ADMIN_PORT/stats     live stats page: sites, nodes, load, moves
    http://127.0.0.1:$ADMIN_PORT/status    sites, nodes, health (JSON)
    http://127.0.0.1:$ADMIN_PORT/metrics   Prometheus metrics
$(https_help)

  Try:
    curl -i http://blog.localhost:$PORT/
    for i in \$(seq 6); do curl -s -o /dev/null -w '%header{x-served-by}\\n' http://shop.localhost:$PORT/; done
    curl -s http://127.0.0.1:$ADMIN_PORT/status
    $BIN ctl -c $PROXY_CONF show stat                 # HAProxy's stats CSV
    $BIN ctl -c $PROXY_CONF set node n2 state drain   # no new requests to n2
    $BIN ctl -c $PROXY_CONF move node n8 site shop    # move n8 to shop
    curl -s http://127.0.0.1:${SIDECAR_PORTS[0]}/status          # n1's sidecar: its load block
    wrk -t1 -c20 -d5s -H 'Host: news.localhost' http://127.0.0.1:$PORT/
    tail -f $DIR/logs/access.log

  Configs: $PROXY_CONF, $DIR/sidecars/, $DIR/nodes/
  Press Ctrl-C to stop everything.
EOF
while :; do
    check_spawned || exit 1
    sleep 1 &
    wait $! || true
done
