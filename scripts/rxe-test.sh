#!/usr/bin/env bash
# Real RDMA test of the verbs window transport in a Soft-RoCE (rdma_rxe) QEMU guest.
#
# Builds the `verbs_guest` example, boots the project's own guest runner
# (scripts/rxe-vm/run.sh: Debian kernel with rdma_rxe, busybox initramfs, rxe0
# on a dummy netdev, the test binaries shared with it over 9p) and runs inside it:
#   1. `solo`: a VerbsServer over a live window (publisher thread) and 3 clients
#      in one process, then the "sidecar gone" check;
#   2. the window conformance suite (tests/window_conformance.rs cases, via
#      tests/verbs_guest.rs) against verbs: freshness, seqlock, CAS, FAA, refusals, headers;
#      and the shared completion poller (tests/verbs_guest/poller.rs): 64 windows
#      served by one process, read and CAS-ed through one completion thread
#      (every read's contents and every CAS/FAA result checked), a failed queue
#      pair isolated, the thread stopping with the last window; and proxy windows
#      over verbs (tests/verbs_guest/peers.rs: site-lock races, update counters);
#   3. a `serve` process plus 3 concurrent `client` processes (header checks,
#      refusals, live seqlock-valid READs, a CAS race, FAAs, a claim race through
#      rdmalb::reconfig::protocol) and `verify` (exactly one CAS winner per
#      round, FAA totals, distinct FAA old values, exactly one claim per hot
#      event, update counters and site locks consistent).
# Exit 0 only if every check passed, or - with a visible "SKIPPED:" line - when
# QEMU cannot run here (run.sh exit >= 100: not x86_64, the host tools missing
# and no way to install them, no kernel package to be had).
# Latency inside the guest is emulated CPU time: this is pass/fail only.
#
# Env: RDMALB_RXE_PROFILE=debug|release (default debug), RXE_WORK (default
# /tmp/rdmalb-rxe/guest, kept between runs: the kernel is cached there),
# RXE_TIMEOUT (default 900), RDMALB_RXE_RUN (another runner with the same
# contract as scripts/rxe-vm/run.sh), RDMALB_RXE_ROUNDS / RDMALB_RXE_FAA (sizes),
# RDMALB_RXE_BIN / RDMALB_RXE_TESTBIN (use these prebuilt verbs_guest example /
# tests/verbs_guest.rs binaries instead of building).
set -euo pipefail

ROOT=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
RUN=${RDMALB_RXE_RUN:-$ROOT/scripts/rxe-vm/run.sh}
PROFILE=${RDMALB_RXE_PROFILE:-debug}
ROUNDS=${RDMALB_RXE_ROUNDS:-200}
FAA=${RDMALB_RXE_FAA:-300}
CACHE=/tmp/rdmalb-rxe
export RXE_WORK=${RXE_WORK:-$CACHE/guest}
export RXE_TIMEOUT=${RXE_TIMEOUT:-900}
T0=$(date +%s)

skip() { echo "SKIPPED: verbs Soft-RoCE guest test: $*"; exit 0; }
fail() { echo "rxe-test: FAIL: $*"; exit 1; }

[ -f "$RUN" ] || fail "guest runner not found at $RUN"
[ "$(uname -m)" = x86_64 ] || skip "the guest runs an x86_64 Debian kernel and this host's binaries; this is $(uname -m)"
# The runner's host tools (QEMU, busybox-static, kmod, rdma-core...) come from
# scripts/setup.sh; install them when they are missing and we may.
if [ -z "${RDMALB_RXE_RUN:-}" ] && ! missing=$(bash "$RUN" --check); then
    missing=$(echo "$missing" | paste -sd, - | sed "s/,/, /g")
    command -v apt-get >/dev/null || skip "missing $missing and no apt-get to install it"
    if [ "$(id -u)" -ne 0 ] && ! sudo -n true 2>/dev/null; then
        skip "missing $missing; installing it (scripts/setup.sh) needs root or sudo"
    fi
    echo ">> missing $missing: running scripts/setup.sh"
    bash "$ROOT/scripts/setup.sh" || fail "scripts/setup.sh failed"
    bash "$RUN" --check >/dev/null || fail "still missing after scripts/setup.sh: $(bash "$RUN" --check | paste -sd, - | sed "s/,/, /g")"
fi

# ------------------------------------------------------------------ build
profile_flag=()
[ "$PROFILE" = release ] && profile_flag=(--release)
if [ -n "${RDMALB_RXE_BIN:-}" ]; then
    BIN=$RDMALB_RXE_BIN
    echo ">> using prebuilt $BIN"
else
    echo ">> building examples/verbs_guest ($PROFILE)"
    (cd "$ROOT" && cargo build "${profile_flag[@]}" --example verbs_guest) \
        || fail "cargo build of the verbs_guest example failed"
    TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
    [[ $TARGET = /* ]] || TARGET=$ROOT/$TARGET
    BIN=$TARGET/$PROFILE/examples/verbs_guest
fi
if [ -n "${RDMALB_RXE_TESTBIN:-}" ]; then
    TESTBIN=$RDMALB_RXE_TESTBIN
    echo ">> using prebuilt $TESTBIN"
else
    echo ">> building tests/verbs_guest.rs (the conformance suite for verbs)"
    out=$(cd "$ROOT" && cargo test "${profile_flag[@]}" --test verbs_guest --no-run 2>&1) \
        || { echo "$out"; fail "cargo test --no-run of tests/verbs_guest.rs failed"; }
    TESTBIN=$(echo "$out" | sed -n 's/.*Executable tests\/verbs_guest.rs (\(.*\))/\1/p' | tail -1)
    [[ -z $TESTBIN || $TESTBIN = /* ]] || TESTBIN=$ROOT/$TESTBIN
fi
[ -x "$BIN" ] || fail "built binary not found at $BIN"
[ -n "$TESTBIN" ] && [ -x "$TESTBIN" ] || fail "conformance test binary not found (${TESTBIN:-none})"

# ------------------------------------------------------------------ share dir
mkdir -p "$CACHE"
SHARE=$(mktemp -d "$CACHE/share.XXXXXX")
# This run's log; it becomes last-run.log at the end (runs from several
# clones may overlap; the runner itself takes one at a time).
RUNLOG=$SHARE.log
trap 'rm -rf "$SHARE"; [ ! -e "$RUNLOG" ] || mv -f "$RUNLOG" "$CACHE/last-run.log"' EXIT
# The guest reads the binary over 9p; without debug info it is a fraction of the size.
objcopy --strip-debug "$BIN" "$SHARE/verbs_guest" 2>/dev/null || cp "$BIN" "$SHARE/verbs_guest"
objcopy --strip-debug "$TESTBIN" "$SHARE/verbs_conformance" 2>/dev/null || cp "$TESTBIN" "$SHARE/verbs_conformance"
chmod 0755 "$SHARE/verbs_guest" "$SHARE/verbs_conformance"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$SHARE/psk"
chmod 0600 "$SHARE/psk"

cat > "$SHARE/guest-test.sh" <<EOF
#!/bin/sh
# Runs inside the guest (busybox sh, root). Results go to /share/results.
cd /tmp
cp /share/psk /tmp/psk && chmod 600 /tmp/psk
B=/share/verbs_guest
C="--psk-file /tmp/psk"
R=/share/results
: > \$R
rc=0
note() { echo "\$*"; echo "\$*" >> \$R; }

note "== solo (server + 3 clients in one process)"
timeout 300 \$B solo \$C --clients 3 --rounds $ROUNDS --faa-ops $FAA > /tmp/solo.log 2>&1; s=\$?
cat /tmp/solo.log; grep -E '^(CHECK|RESULT)' /tmp/solo.log >> \$R
[ \$s -eq 0 ] || { note "solo exited \$s"; rc=1; }

note "== conformance suite (tests/window_conformance.rs cases on verbs)"
timeout 600 /share/verbs_conformance --ignored --test-threads=1 --nocapture verbs:: > /tmp/conf.log 2>&1; s=\$?
cat /tmp/conf.log
grep -E '^test verbs::' /tmp/conf.log | sed 's/^test \\(verbs::[a-z0-9_]*\\) \\.\\.\\. \\(.*\\)/CHECK conformance-\\1 \\2/; s/ FAILED\$/ FAIL/' >> \$R
grep -E '^CHECK (shared-poller|proxy-windows)' /tmp/conf.log >> \$R
grep -q 'test result: ok. 9 passed' /tmp/conf.log || { note "CHECK conformance-suite FAIL (exit \$s)"; rc=1; }

note "== multi-process (serve + 3 clients + verify)"
\$B serve \$C --listen 127.0.0.1:18700 --max-secs 400 > /tmp/serve.log 2>&1 &
SP=\$!
i=0; until grep -q '^READY' /tmp/serve.log 2>/dev/null || [ \$i -ge 100 ]; do sleep 0.2; i=\$((i+1)); done
grep -q '^READY' /tmp/serve.log || { cat /tmp/serve.log; note "serve did not start"; kill \$SP; echo "GUEST_SUITE FAIL" >> \$R; exit 1; }
P=""
for id in 1 2 3; do
    timeout 300 \$B client \$C --connect 127.0.0.1:18700 --id \$id --rounds $ROUNDS --faa-ops $FAA --out /tmp/out\$id > /tmp/client\$id.log 2>&1 &
    P="\$P \$!"
done
for p in \$P; do wait \$p || rc=1; done
for id in 1 2 3; do echo "--- client \$id"; cat /tmp/client\$id.log; grep -E '^(CHECK|RESULT)' /tmp/client\$id.log | sed "s/^/client\$id: /" >> \$R; done
timeout 120 \$B verify \$C --connect 127.0.0.1:18700 --rounds $ROUNDS --faa-total \$((3 * $FAA)) --outs /tmp/out1 /tmp/out2 /tmp/out3 > /tmp/verify.log 2>&1 || rc=1
cat /tmp/verify.log; grep -E '^(CHECK|RESULT)' /tmp/verify.log | sed 's/^/verify: /' >> \$R
kill -TERM \$SP; wait \$SP || { note "serve exited non-zero"; rc=1; }
echo "--- serve"; cat /tmp/serve.log
if [ \$rc -eq 0 ] && ! grep -q FAIL \$R; then echo "GUEST_SUITE PASS" >> \$R; else echo "GUEST_SUITE FAIL" >> \$R; rc=1; fi
sync
exit \$rc
EOF
chmod 0755 "$SHARE/guest-test.sh"

# ------------------------------------------------------------------ boot
echo ">> booting the Soft-RoCE guest (RXE_WORK=$RXE_WORK)"
set +e
RXE_SHARE=$SHARE bash "$RUN" > "$RUNLOG" 2>&1
RC=$?
set -e
grep -E '^(CHECK|RESULT|==|\[guest)' "$RUNLOG" | grep -vE '^\[guest [0-9.]+s\] (kernel|running)' || true
ELAPSED=$(( $(date +%s) - T0 ))
if [ "$RC" -ge 100 ]; then
    tail -20 "$RUNLOG"
    skip "QEMU guest could not run on this host (run.sh exit $RC; log: $CACHE/last-run.log)"
fi
# 0..98: failed guest checks (rxe0 not made, guest-test.sh failing...); 99: the guest did not finish
case $RC in
    0) runner="the runner's guest checks passed" ;;
    99) runner="the guest did not finish within RXE_TIMEOUT=${RXE_TIMEOUT}s or crashed (run.sh exit 99)" ;;
    *) runner="$RC guest check(s) failed (run.sh exit $RC)" ;;
esac
RES=$SHARE/results
[ -s "$RES" ] || fail "no results from the guest: $runner; log: $CACHE/last-run.log"
cp "$RES" "$CACHE/last-results"
NCHECK=$(grep -c ' ok' "$RES" || true)
NFAIL=$(grep -c 'FAIL' "$RES" || true)
if [ "$RC" -eq 0 ] && grep -q '^GUEST_SUITE PASS' "$RES"; then
    echo "rxe-test: PASS: verbs transport in Soft-RoCE guest, $NCHECK checks ok, 0 failed, ${ELAPSED}s"
    exit 0
fi
grep FAIL "$RES" || true
fail "verbs guest suite: $NFAIL failure line(s), $NCHECK checks ok, $runner, ${ELAPSED}s (log: $CACHE/last-run.log)"
