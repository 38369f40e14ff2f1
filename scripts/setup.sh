#!/usr/bin/env bash
# Installs everything rdmalb's build, tests, demo and benchmarks need on a
# Debian 12 (bookworm) machine that has only Rust (rustup) on it.
#
#   bash scripts/setup.sh            # as root, or as a user with sudo
#
# Idempotent: packages already installed are skipped, and when nothing is
# missing it touches neither apt nor the network. It never starts, stops or
# depends on the nginx/haproxy system services: the scripts and tests run
# their own instances (`nginx -c FILE -g 'daemon off;'`, pid files in a temp
# dir). While it installs, a temporary policy-rc.d (only when the machine has
# none) keeps the new packages from starting their services, so a busy port 80
# cannot make the nginx package fail to configure.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib/common.sh
. "$HERE/lib/common.sh"

# What each group is for:
PACKAGES=(
    # build: sideway (verbs) needs cmake and libclang for its bindings
    build-essential pkg-config cmake clang libclang-dev
    # real backends and the comparison proxies, load generators; haproxy also
    # brings halog, which the tests run over rdmalb's access log
    haproxy wrk httperf curl openssl
    # h2load, the HTTP/2 load generator of bench/proxy/scenarios.sh
    nghttp2-client
    # HAProxy's operator tools the stats socket tests drive unchanged
    # (tests/proxy/stats_socket): socat, hatop (in tmux), haproxy_exporter
    socat hatop prometheus-haproxy-exporter tmux
    # Let's Encrypt's test ACME server and its DNS (tests/proxy/acme.rs)
    pebble
    # process and socket tools the scripts use (pgrep, ss, taskset is in util-linux);
    # systemd for `systemd-analyze verify` of the shipped units (conf/systemd/)
    procps iproute2 systemd
    # run-time libraries of the verbs transport (loaded with dlopen)
    rdma-core ibverbs-providers libibverbs1 librdmacm1
    # the Soft-RoCE guest runner, scripts/rxe-vm/run.sh (QEMU, busybox
    # initramfs, kernel modules; xz unpacks the kernel). Its kernel,
    # linux-image-amd64, is fetched by the runner with `apt-get download` into
    # its cache and never installed on this machine.
    qemu-system-x86 busybox-static cpio kmod xz-utils
    # plots of benchmark results (bench/plot.py draws docs/img/ with
    # matplotlib); the reconfiguration experiments' driver
    gnuplot-nox python3 python3-matplotlib
    # the operations recipes (docs/recipes.md, run by tests/docs/recipes.rs)
    # read /status with jq
    jq
    # the stats page's browser test (tests/browser/): Debian's Chromium, and
    # a venv for Playwright (below)
    chromium python3-venv
)

if [ ! -r /etc/debian_version ] || ! command -v apt-get >/dev/null 2>&1; then
    die "this script supports Debian 12 (bookworm) with apt-get; install the equivalents of: nginx ${PACKAGES[*]}"
fi
case "$(cat /etc/debian_version)" in
    12* | bookworm*) ;;
    *) warn "tested on Debian 12; this is Debian $(cat /etc/debian_version), trying anyway" ;;
esac

installed() {
    [ "$(dpkg-query -W -f='${db:Status-Abbrev}' "$1" 2>/dev/null)" = "ii " ]
}

missing=()
for p in "${PACKAGES[@]}"; do
    installed "$p" || missing+=("$p")
done
# Any nginx flavour will do (the scripts need the stub_status module, which
# every Debian flavour has); install the plain one only when none is there.
if ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ]; then
    missing+=(nginx)
fi

if [ ${#missing[@]} -eq 0 ]; then
    log "setup: all ${#PACKAGES[@]} packages and nginx are already installed; nothing to do"
else
    log "setup: installing ${#missing[@]} packages: ${missing[*]}"
    aptlog=$(mktemp /tmp/rdmalb-setup-apt.XXXXXX)
    policy=/usr/sbin/policy-rc.d
    made_policy=0
    cleanup_setup() {
        if [ "$made_policy" = 1 ]; then as_root rm -f "$policy"; fi
        rm -f "$aptlog"
    }
    trap cleanup_setup EXIT
    if [ ! -e "$policy" ]; then
        # Exit code 101 = "action forbidden": invoke-rc.d and
        # deb-systemd-invoke then skip starting services during this install.
        printf '#!/bin/sh\n# temporary, from rdmalb scripts/setup.sh\nexit 101\n' |
            as_root tee "$policy" >/dev/null
        as_root chmod 755 "$policy"
        made_policy=1
    fi
    apt_run() {
        if ! as_root env DEBIAN_FRONTEND=noninteractive apt-get -q -y \
            -o DPkg::Lock::Timeout=300 "$@" >>"$aptlog" 2>&1; then
            printf '%serror:%s apt-get %s failed; its last output lines:\n' "$C_R" "$C_0" "$1" >&2
            tail -n 25 "$aptlog" >&2
            exit 1
        fi
    }
    apt_run update
    apt_run install --no-install-recommends "${missing[@]}"
    still=()
    for p in "${missing[@]}"; do installed "$p" || still+=("$p"); done
    [ ${#still[@]} -eq 0 ] || die "apt-get reported success but these are not installed: ${still[*]}"
    for p in "${missing[@]}"; do
        printf '    installed %-20s %s\n' "$p" "$(dpkg-query -W -f='${Version}' "$p")"
    done
fi

# Tools the scripts call directly must now resolve.
for tool in nginx haproxy halog wrk httperf curl jq cmake clang pgrep ss taskset chromium; do
    command -v "$tool" >/dev/null 2>&1 || [ -x "/usr/sbin/$tool" ] ||
        die "$tool is still not on PATH after installing; check the apt output above"
done

# Playwright for Python, pinned, in its own venv (Debian's python3 refuses
# pip installs into the system; the tests look for this venv, or
# RDMALB_BROWSER_VENV). Only the Python package: `playwright install` is never
# run, no browser build is downloaded; the tests drive /usr/bin/chromium.
PLAYWRIGHT_VERSION=1.65.2
BROWSER_VENV=${RDMALB_BROWSER_VENV:-/opt/rdmalb/browser-venv}
if ! "$BROWSER_VENV/bin/python" -c "import sys, importlib.metadata as m; sys.exit(m.version('playwright') != '$PLAYWRIGHT_VERSION')" 2>/dev/null; then
    log "setup: Playwright $PLAYWRIGHT_VERSION for Python in $BROWSER_VENV"
    as_root /usr/bin/python3 -m venv "$BROWSER_VENV"
    as_root "$BROWSER_VENV/bin/pip" install -q --disable-pip-version-check "playwright==$PLAYWRIGHT_VERSION" ||
        die "pip could not install playwright==$PLAYWRIGHT_VERSION into $BROWSER_VENV"
fi

# The guest runner's own list of what it needs (on x86_64, the only host it runs on).
if [ "$(uname -m)" = x86_64 ] && ! rxe_missing=$(bash "$HERE/rxe-vm/run.sh" --check); then
    die "the Soft-RoCE guest runner still lacks: $(echo "$rxe_missing" | paste -sd, - | sed "s/,/, /g")"
fi

if ! command -v cargo >/dev/null 2>&1 && [ ! -x "$HOME/.cargo/bin/cargo" ]; then
    warn "cargo not found: install Rust with rustup (https://rustup.rs) before building"
fi
log "setup: done"
