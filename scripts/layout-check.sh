#!/usr/bin/env bash
# Checks that dependencies point one way, between crates and between the
# rooms (top-level modules) of the proxy crate:
#   bash scripts/layout-check.sh
#
#   base → window → sidecar            base → window → proxy → (root: rdmalb)
#                                      testbed → proxy, sidecar, window, base
#   in rdmalb-proxy:  config → proxy_protocol → balance, qos → reconfig
#                     → front → import
#
# A crate may depend only on crates to its left; a room of rdmalb-proxy may
# use only rooms to its left (tests excepted: `tests.rs` files may reach
# anywhere). A room names the rooms it uses one path at a time (`use
# crate::balance::…`), so grouped `use crate::{…}` imports are refused: the
# check could not see the rooms inside the braces. Prints each arrow that
# runs back, exits 1 if there is one, 2 if `cargo metadata` fails.
set -euo pipefail
cd "$(dirname "$0")/.."

bad=0
# Crates: the workspace members' path dependencies, from `cargo metadata`.
allowed() { # CRATE -> the crates it may depend on
    case $1 in
        rdmalb-base) echo "" ;;
        rdmalb-window) echo "rdmalb-base" ;;
        rdmalb-sidecar) echo "rdmalb-base rdmalb-window" ;;
        rdmalb-proxy) echo "rdmalb-base rdmalb-window" ;;
        rdmalb-testbed) echo "rdmalb-base rdmalb-window rdmalb-sidecar rdmalb-proxy" ;;
        rdmalb) echo "rdmalb-base rdmalb-window rdmalb-sidecar rdmalb-proxy" ;;
        *) echo "?" ;;
    esac
}
if ! metadata=$(cargo metadata --format-version 1 --no-deps --offline 2>&1); then
    echo "layout: cargo metadata failed, so the crates' dependencies were not checked:" >&2
    echo "$metadata" | sed 's/^/    /' >&2
    exit 2
fi
arrows=$(python3 -c '
import json, sys
m = json.load(sys.stdin)
names = {p["name"] for p in m["packages"]}
for p in m["packages"]:
    for d in p["dependencies"]:
        if d["name"] in names:
            print(p["name"], d["name"], d.get("kind") or "normal")
' <<<"$metadata")
while read -r crate dep kind; do
    [ -z "$crate" ] && continue
    [ "$kind" = dev ] && continue
    case " $(allowed "$crate") " in
        *" $dep "*) ;;
        *) echo "crate $crate depends on $dep (allowed: $(allowed "$crate"))"; bad=1 ;;
    esac
done <<<"$arrows"

# Rooms of rdmalb-proxy, in order; each may use those before it.
rooms=(config proxy_protocol balance qos reconfig front import)
room_files() { # ROOM -> its source files, tests left out
    echo "crates/proxy/src/$1.rs"
    find "crates/proxy/src/$1" -name '*.rs' ! -name tests.rs ! -path '*/tests/*' 2>/dev/null
}
for room in "${rooms[@]}"; do
    mapfile -t files < <(room_files "$room")
    if hits=$(grep -HnE '^\s*(pub(\([a-z]+\))?\s+)?use\s+crate::\{' "${files[@]}"); then
        echo "room $room groups rooms in one import (write one \`use crate::ROOM::…\` a room):"
        echo "$hits" | sed 's/^/    /'
        bad=1
    fi
done
for i in "${!rooms[@]}"; do
    room=${rooms[$i]}
    later=("${rooms[@]:$((i + 1))}")
    [ ${#later[@]} -eq 0 ] && continue
    pattern="crate::($(IFS='|'; echo "${later[*]}"))\b"
    mapfile -t files < <(room_files "$room")
    # Code only: doc comments may point anywhere.
    if hits=$(grep -HnE "$pattern" "${files[@]}" | grep -vE '^[^:]+:[0-9]+:\s*//'); then
        echo "room $room uses a room after it:"
        echo "$hits" | sed 's/^/    /'
        bad=1
    fi
done

if [ "$bad" = 0 ]; then
    echo "layout: crates and proxy rooms depend one way"
fi
exit "$bad"
