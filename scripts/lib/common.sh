# shellcheck shell=bash
# Shared shell functions for rdmalb's scripts (demo, benchmarks).
#
# Source it from a script that runs with `set -euo pipefail`:
#     . "$(dirname "$0")/lib/common.sh"
#
# Process handling: every long-running process is started with `spawn`, which
# puts it in a new session (setsid) so that it and every child it forks
# (nginx workers, for example) share one process group whose id is the PID we
# recorded. `stop_all` signals exactly those groups, TERM first then KILL, so
# a script never leaves anything behind and never touches a process it did
# not start. Call `stop_all` from an EXIT trap.

# Colour only on a terminal (used by the scripts that source this file).
# shellcheck disable=SC2034
if [ -t 1 ]; then
    C_B=$'\033[1m' C_G=$'\033[32m' C_R=$'\033[31m' C_Y=$'\033[33m' C_0=$'\033[0m'
else
    C_B='' C_G='' C_R='' C_Y='' C_0=''
fi

log() { printf '%s==>%s %s\n' "$C_B" "$C_0" "$*"; }
warn() { printf '%swarning:%s %s\n' "$C_Y" "$C_0" "$*" >&2; }
die() {
    printf '%serror:%s %s\n' "$C_R" "$C_0" "$*" >&2
    exit 1
}

# Without job control a background job stays in our process group, so the
# setsid in `spawn` never needs to fork (see there). Job control is off in
# scripts anyway; this keeps it so when the file is sourced from a shell.
set +m

# Names and PIDs (= process-group ids) of everything `spawn` started.
SPAWNED_PIDS=()
SPAWNED_NAMES=()
SPAWNED_LOGS=()

# spawn NAME LOGFILE CMD [ARGS...]
# Starts CMD in the background in its own session, stdout+stderr to LOGFILE.
# Sets SPAWN_PID to its PID.
spawn() {
    local name=$1 logfile=$2
    shift 2
    # setsid does not fork here: a background job of a non-interactive shell
    # is never a process-group leader, so the PID of the job is the PID of CMD
    # and of its new process group.
    setsid "$@" </dev/null >"$logfile" 2>&1 &
    SPAWN_PID=$!
    SPAWNED_PIDS+=("$SPAWN_PID")
    SPAWNED_NAMES+=("$name")
    SPAWNED_LOGS+=("$logfile")
}

# group_alive PGID: true while any process of the group exists.
group_alive() {
    kill -0 -- "-$1" 2>/dev/null
}

# stop_all [GRACE_SECONDS]: TERM every spawned group, wait up to GRACE
# seconds (default 5) for them to exit, then KILL whatever is left.
stop_all() {
    local grace=${1:-5} pid i deadline left
    [ ${#SPAWNED_PIDS[@]} -eq 0 ] && return 0
    for pid in "${SPAWNED_PIDS[@]}"; do
        kill -TERM -- "-$pid" 2>/dev/null || true
    done
    deadline=$((SECONDS + grace))
    while :; do
        left=0
        for pid in "${SPAWNED_PIDS[@]}"; do
            group_alive "$pid" && left=1
        done
        [ "$left" = 0 ] && break
        if [ "$SECONDS" -ge "$deadline" ]; then
            for i in "${!SPAWNED_PIDS[@]}"; do
                pid=${SPAWNED_PIDS[$i]}
                if group_alive "$pid"; then
                    warn "${SPAWNED_NAMES[$i]} (pid $pid) ignored SIGTERM for ${grace}s; sending SIGKILL"
                    kill -KILL -- "-$pid" 2>/dev/null || true
                fi
            done
            sleep 0.2
            break
        fi
        sleep 0.1
    done
    # Reap our direct children so no zombie outlives the script.
    wait 2>/dev/null || true
    SPAWNED_PIDS=()
    SPAWNED_NAMES=()
    SPAWNED_LOGS=()
}

# stop_one PID [GRACE]: stop a single spawned group (and forget it).
stop_one() {
    local target=$1 grace=${2:-5} i deadline
    kill -TERM -- "-$target" 2>/dev/null || true
    deadline=$((SECONDS + grace))
    while group_alive "$target" && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.1; done
    group_alive "$target" && kill -KILL -- "-$target" 2>/dev/null
    wait "$target" 2>/dev/null || true
    for i in "${!SPAWNED_PIDS[@]}"; do
        if [ "${SPAWNED_PIDS[$i]}" = "$target" ]; then
            unset 'SPAWNED_PIDS[i]' 'SPAWNED_NAMES[i]' 'SPAWNED_LOGS[i]'
        fi
    done
    SPAWNED_PIDS=("${SPAWNED_PIDS[@]}")
    SPAWNED_NAMES=("${SPAWNED_NAMES[@]}")
    SPAWNED_LOGS=("${SPAWNED_LOGS[@]}")
}

# check_spawned: fails (printing the log tail) if a spawned process exited.
check_spawned() {
    local i
    for i in "${!SPAWNED_PIDS[@]}"; do
        if ! kill -0 "${SPAWNED_PIDS[$i]}" 2>/dev/null; then
            printf '%serror:%s %s (pid %s) exited; last lines of %s:\n' "$C_R" "$C_0" \
                "${SPAWNED_NAMES[$i]}" "${SPAWNED_PIDS[$i]}" "${SPAWNED_LOGS[$i]}" >&2
            tail -n 20 "${SPAWNED_LOGS[$i]}" >&2 || true
            return 1
        fi
    done
}

# port_in_use PORT: true when something listens on 127.0.0.1:PORT (or any address).
port_in_use() {
    ss -Htln "sport = :$1" 2>/dev/null | grep -q .
}

# free_port VAR START: sets VAR to the first port >= START that nobody
# listens on and that this script has not handed out yet. (A variable rather
# than output: $(...) would run it in a subshell and forget the hand-out.)
PORTS_HANDED_OUT=" "
free_port() {
    local _fp=$2
    while port_in_use "$_fp" || [[ $PORTS_HANDED_OUT == *" $_fp "* ]]; do
        _fp=$((_fp + 1))
        [ "$_fp" -lt 65535 ] || die "no free port above $2"
    done
    PORTS_HANDED_OUT+="$_fp "
    printf -v "$1" '%s' "$_fp"
}

# require_free_port PORT WHAT: dies with a clear message when PORT is taken.
require_free_port() {
    if port_in_use "$1"; then
        die "port $1 ($2) is already in use: $(ss -Htlnp "sport = :$1" 2>/dev/null | head -n1 | awk '{print $NF}')
       pick another one (see --help) or stop what listens there"
    fi
    PORTS_HANDED_OUT+="$1 "
}

# wait_tcp PORT SECONDS PID: waits until 127.0.0.1:PORT accepts, failing early
# if PID (the group that should open it) died.
wait_tcp() {
    local port=$1 pid=$3 deadline=$((SECONDS + $2))
    while ! port_in_use "$port"; do
        kill -0 "$pid" 2>/dev/null || return 1
        [ "$SECONDS" -lt "$deadline" ] || return 1
        sleep 0.1
    done
}

# wait_http URL SECONDS [CURL_ARGS...]: waits until URL answers 2xx.
wait_http() {
    local url=$1 deadline=$((SECONDS + $2))
    shift 2
    until curl -fsS -o /dev/null --max-time 2 "$@" "$url" 2>/dev/null; do
        [ "$SECONDS" -lt "$deadline" ] || return 1
        sleep 0.2
    done
}

# as_root CMD...: runs CMD as root, through sudo when we are not root.
as_root() {
    if [ "$(id -u)" = 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        die "need root for: $* (run as root or install sudo)"
    fi
}

# ensure_cargo: puts rustup's cargo on PATH when a login profile did not.
ensure_cargo() {
    if ! command -v cargo >/dev/null 2>&1 && [ -f "$HOME/.cargo/env" ]; then
        # shellcheck disable=SC1091
        . "$HOME/.cargo/env"
    fi
    command -v cargo >/dev/null 2>&1 || die "cargo not found: install Rust with rustup (https://rustup.rs) first"
}

# nginx_tempdirs DIR: directives that keep an nginx instance's temporary
# files inside DIR (Debian's defaults point into /var/lib/nginx, which a
# non-root user cannot write). nginx creates the folders itself and, when it
# runs as root, hands them to its worker user.
nginx_tempdirs() {
    local d=$1
    mkdir -p "$d"
    cat <<EOF
    client_body_temp_path $d/client_body;
    proxy_temp_path $d/proxy;
    fastcgi_temp_path $d/fastcgi;
    uwsgi_temp_path $d/uwsgi;
    scgi_temp_path $d/scgi;
EOF
}
