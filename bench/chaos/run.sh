#!/usr/bin/env bash
# The long fault-injection campaign (issue 12; docs/reliability.md):
#
#   bash bench/chaos/run.sh                 # 30 min over shm, then 30 min over tcp
#   DURATION=5m SEEDS="7 8" bash bench/chaos/run.sh
#
# Each run is `rdmalb-testbed chaos` (3 proxies, 9 testsrv nodes with real
# sidecars, faults from a seeded schedule; see crates/testbed/src/chaos.rs)
# against release builds. Prints each run's summary and writes
# bench/results/chaos-<date>.md with the faults by kind, the seeds and the
# result; each run's configs, logs, faults.txt and chaos.json stay in
# $OUT (default /tmp/rdmalb-chaos-<date>).
#
# Environment: DURATION (default 30m, fault phase of each run), TRANSPORTS
# (default "shm tcp"), SEEDS (one per transport, default "1001 2002"), GAP
# (mean gap between faults, default 1500ms), PROFILE (release or dev).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
# shellcheck source=scripts/lib/common.sh
. "$ROOT/scripts/lib/common.sh"

DURATION=${DURATION:-30m}
TRANSPORTS=${TRANSPORTS:-"shm tcp"}
SEEDS=${SEEDS:-"1001 2002"}
GAP=${GAP:-1500ms}
PROFILE=${PROFILE:-release}
STAMP=$(date -u +%Y%m%d-%H%M)
OUT=${OUT:-/tmp/rdmalb-chaos-$STAMP}
RESULTS_DIR=${RESULTS_DIR:-$ROOT/bench/results}

cd "$ROOT"
log "chaos: building (cargo build --profile $PROFILE --bin rdmalb --bin rdmalb-testbed)"
cargo build --locked --profile "$PROFILE" --bin rdmalb --bin rdmalb-testbed
dir=target/$([ "$PROFILE" = dev ] && echo debug || echo "$PROFILE")
mkdir -p "$OUT" "$RESULTS_DIR"
report=$RESULTS_DIR/chaos-$STAMP.md
{
    echo "# rdmalb-testbed chaos, $(date -u '+%Y-%m-%d %H:%M') UTC, commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
    echo
    echo "\`DURATION=$DURATION TRANSPORTS=\"$TRANSPORTS\" SEEDS=\"$SEEDS\" GAP=$GAP PROFILE=$PROFILE bash bench/chaos/run.sh\`"
    echo
} >"$report"
read -r -a seeds <<<"$SEEDS"
i=0
status=0
for t in $TRANSPORTS; do
    seed=${seeds[$i]:-$((1001 + i))}
    i=$((i + 1))
    log "chaos: $t, seed $seed, $DURATION of faults"
    rc=0
    "$dir/rdmalb-testbed" chaos --seed "$seed" --duration "$DURATION" --gap "$GAP" \
        --transport "$t" -o "$OUT/$t" >"$OUT/$t.txt" 2>"$OUT/$t.log" || rc=$?
    cat "$OUT/$t.txt"
    {
        echo "## $t, seed $seed (exit $rc)"
        echo
        echo '```'
        cat "$OUT/$t.txt"
        echo '```'
        echo
    } >>"$report"
    [ "$rc" -eq 0 ] || status=1
done
log "chaos: results in $report; runs in $OUT"
exit "$status"
