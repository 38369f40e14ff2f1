#!/usr/bin/env bash
# The appliance built without the `verbs` Cargo feature (no rdma-core, no
# cmake, no bindgen):
#   bash scripts/no-verbs-check.sh
# builds `rdmalb` with `cargo build -p rdmalb --no-default-features`, checks
# that nothing of rdma-core is in its dependency tree, and that a proxy and a
# sidecar whose configs ask for verbs stop at start-up with a message saying
# verbs is not compiled in (exit status 1, no panic). Leaves a binary
# built with default features in target/ again.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib/common.sh
. "$HERE/lib/common.sh"
ROOT=$(cd "$HERE/.." && pwd)
cd "$ROOT"
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
WORK=$(mktemp -d /tmp/rdmalb-no-verbs.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

if cargo tree -p rdmalb --no-default-features -e normal --prefix none --locked |
    grep -E '^(sideway|rdma-mummy-sys) ' >"$WORK/tree"; then
    die "rdma-core crates in the tree of rdmalb --no-default-features: $(tr '\n' ' ' <"$WORK/tree")"
fi
log "no-verbs: dependency tree has no sideway / rdma-mummy-sys"

cargo build -p rdmalb --no-default-features --locked --quiet --bin rdmalb
cp "$TARGET/debug/rdmalb" "$WORK/rdmalb"

"$WORK/rdmalb" psk --out "$WORK/cluster.psk"
cat >"$WORK/proxy.toml" <<TOML
[admin]
listen = "127.0.0.1:0"
[cluster]
psk_file = "cluster.psk"
[[listener]]
name = "web"
listen = "127.0.0.1:0"
[[site]]
name = "www"
hosts = ["www.example"]
[[node]]
name = "n1"
address = "127.0.0.1:9"
site = "www"
transport = "verbs"
sidecar = "127.0.0.1:7201"
TOML
cat >"$WORK/sidecar.toml" <<TOML
node = "n1"
node_id = 1
sites = ["www"]
[window.verbs]
control = "127.0.0.1:0"
psk_file = "cluster.psk"
[[collector]]
kind = "system"
TOML

expect_refusal() { # WHAT CMD...: exit 1, a message naming the missing feature
    local what=$1 rc=0
    shift
    timeout 20 "$@" >"$WORK/out" 2>&1 || rc=$?
    if [ "$rc" -ne 1 ] || ! grep -q 'not compiled into this binary' "$WORK/out" ||
        grep -q panicked "$WORK/out"; then
        cat "$WORK/out" >&2
        die "no-verbs: $what: expected exit 1 and 'not compiled into this binary', got exit $rc"
    fi
    log "no-verbs: $what refused: $(grep -m1 'not compiled' "$WORK/out")"
}
"$WORK/rdmalb" check -c "$WORK/proxy.toml" >/dev/null || die "no-verbs: the proxy test config is invalid"
expect_refusal "proxy with a verbs node" "$WORK/rdmalb" proxy -c "$WORK/proxy.toml"
expect_refusal "sidecar serving verbs" "$WORK/rdmalb" sidecar -c "$WORK/sidecar.toml"

# Put the default build back for the stages that follow.
cargo build -p rdmalb --locked --quiet --bin rdmalb
log "no-verbs: ok"
