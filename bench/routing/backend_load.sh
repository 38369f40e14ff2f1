#!/usr/bin/env bash
# Under backend load (issue 5, measurement 3; seed 002 sections 3 and 5:
# two-sided monitoring degrades exactly when the monitored side is busy):
# weighted-least-load reading the windows over shm (per-request), over tcp
# (its default interval:50ms, and per-request) and roundrobin, each without
# and with HOG_COUNT busy loops on the backend CPU. The fine-vs-coarse
# driver runs it (same cluster, trace and report; its header says how the
# CPUs are split and how the hogs are started and stopped).
#
#   bash bench/routing/backend_load.sh                # 3 rounds x 4 policies x 2 x 5 s (~4 min)
#   ROUNDS=1 DURATION=3 HOG_COUNT=4 bash bench/routing/backend_load.sh
#
# Writes bench/results/routing-backend-load-<stamp>.{md,csv}.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
HOG_COUNT=${HOG_COUNT:-3}
[[ $HOG_COUNT =~ ^[1-9][0-9]*$ ]] || { echo "HOG_COUNT=$HOG_COUNT is not a positive integer" >&2; exit 2; }
export ROUNDS=${ROUNDS:-3} DURATION=${DURATION:-5}
export POLICIES=${POLICIES:-"per-request per-request@tcp interval:50ms@tcp roundrobin"}
export HOGS="0 $HOG_COUNT" NAME=routing-backend-load
exec bash "$HERE/fine_coarse.sh"
