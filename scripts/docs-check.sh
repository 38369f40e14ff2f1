#!/usr/bin/env bash
# Checks the configuration reference against the code:
#   bash scripts/docs-check.sh [CONF_DIR]
# 1. docs/configuration.md is exactly what `rdmalb config-reference` prints
#    (it is generated from the config types and their doc comments;
#    regenerate: cargo run -q -- config-reference > docs/configuration.md);
# 2. every example config under CONF_DIR (default conf/; *.toml and */*.toml)
#    uses only keys the reference has: rdmalb*.toml files are proxy configs,
#    sidecar*.toml files sidecar configs, testsrv*.toml files the test
#    backend's (docs/testbed.md, not in the reference); any other name is an
#    error, so a new example cannot go unchecked.
# 3. the headline table of docs/benchmarks.md is what bench/headline.toml
#    says, and every row's section and result file exist
#    (python3 bench/headline.py --check; rewrite: python3 bench/headline.py).
# Uses $RDMALB_BIN when set, else builds the debug binary. Exits 1 naming
# each problem.
set -euo pipefail
cd "$(dirname "$0")/.."
conf=${1:-conf}
rdmalb=${RDMALB_BIN:-}
if [ -z "$rdmalb" ]; then
    cargo build -q --locked --bin rdmalb
    rdmalb=${CARGO_TARGET_DIR:-target}/debug/rdmalb
fi

proxy=() sidecar=() bad=0
shopt -s nullglob
for f in "$conf"/*.toml "$conf"/*/*.toml; do
    case $(basename "$f") in
        rdmalb*.toml) proxy+=("$f") ;;
        sidecar*.toml) sidecar+=("$f") ;;
        testsrv*.toml) ;;
        *)
            echo "$f: not named as a proxy (rdmalb*.toml), sidecar (sidecar*.toml) or testsrv (testsrv*.toml) config, so its keys cannot be checked"
            bad=1
            ;;
    esac
done

args=(--check docs/configuration.md)
[ ${#proxy[@]} -gt 0 ] && args+=(--proxy-conf "${proxy[@]}")
[ ${#sidecar[@]} -gt 0 ] && args+=(--sidecar-conf "${sidecar[@]}")
if ! "$rdmalb" config-reference "${args[@]}"; then
    bad=1
fi
if ! python3 bench/headline.py --check; then
    bad=1
fi
if [ "$bad" = 0 ]; then
    echo "docs: docs/configuration.md matches the code; ${#proxy[@]} proxy and ${#sidecar[@]} sidecar examples use only its keys"
fi
exit "$bad"
