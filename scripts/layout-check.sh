#!/usr/bin/env bash
# Checks that dependencies point one way, between crates and between the
# rooms (top-level modules) of the proxy crate:
#   bash scripts/layout-check.sh
#
#   base → window → sidecar            base → window → proxy → (root: rdmalb)
#                                      testbed → proxy, sidecar, window, base
#   in rdmalb-proxy:  config → balance, qos → reconfig → front
#
# A crate may depend only on crates to its left; a room of rdmalb-proxy may
# use only rooms to its left (tests excepted: `tests.rs` files may reach
# anywhere). Prints each arrow that runs back, exits 1 if there is one.
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
while read -r crate dep kind; do
    [ "$kind" = dev ] && continue
    case " $(allowed "$crate") " in
        *" $dep "*) ;;
        *) echo "crate $crate depends on $dep (allowed: $(allowed "$crate"))"; bad=1 ;;
    esac
done < <(cargo metadata --format-version 1 --no-deps --offline 2>/dev/null | python3 -c '
import json, sys
m = json.load(sys.stdin)
names = {p["name"] for p in m["packages"]}
for p in m["packages"]:
    for d in p["dependencies"]:
        if d["name"] in names:
            print(p["name"], d["name"], d.get("kind") or "normal")
')

# Rooms of rdmalb-proxy, in order; each may use those before it.
rooms=(config balance qos reconfig front)
for i in "${!rooms[@]}"; do
    room=${rooms[$i]}
    later=("${rooms[@]:$((i + 1))}")
    [ ${#later[@]} -eq 0 ] && continue
    pattern="crate::($(IFS='|'; echo "${later[*]}"))\b"
    files=(crates/proxy/src/"$room".rs)
    while IFS= read -r f; do files+=("$f"); done < <(find "crates/proxy/src/$room" -name '*.rs' ! -name tests.rs ! -path '*/tests/*' 2>/dev/null)
    # Code only: doc comments may point anywhere.
    if hits=$(grep -nE "$pattern" "${files[@]}" | grep -vE '^[^:]+:[0-9]+:\s*//'); then
        echo "room $room uses a room after it:"
        echo "$hits" | sed 's/^/    /'
        bad=1
    fi
done

if [ "$bad" = 0 ]; then
    echo "layout: crates and proxy rooms depend one way"
fi
exit "$bad"
