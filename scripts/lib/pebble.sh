# shellcheck shell=bash
# A local ACME server for scripts/demo.sh: Debian's `pebble` (Let's
# Encrypt's test server, with its own test CA) and `pebble-challtestsrv` as
# its DNS server, every name resolving to 127.0.0.1, all offline on
# loopback; as tests/support/pebble.rs starts them for tests/proxy/acme.rs.
#
# Source it after common.sh (it uses spawn, stop_one, free_port, wait_http).
# pebble validates http-01 challenges on HTTP_PORT and tls-alpn-01 ones on
# TLS_PORT of the address a name resolves to: the demo proxy's listeners.

PEBBLE_BIN=${DEMO_PEBBLE:-/usr/bin/pebble}
CHALLTESTSRV_BIN=${DEMO_CHALLTESTSRV:-/usr/bin/pebble-challtestsrv}

# pebble_start DIR LOGDIR HTTP_PORT TLS_PORT FIRST_PORT VALIDITY_SECONDS
# Starts challtestsrv and pebble (their ports: the first free ones from
# FIRST_PORT). On success sets PEBBLE_DIRECTORY (the ACME directory URL),
# PEBBLE_CA (the CA of pebble's own HTTPS certificate, made here with
# openssl: the proxy's `ca_root`) and PEBBLE_MANAGEMENT (host:port of its
# management interface, where /roots/0 is the root of what it issues).
# On failure sets PEBBLE_WHY, stops whatever it started and returns 1.
pebble_start() {
    local dir=$1 logs=$2 http_port=$3 tls_port=$4 first=$5 validity=$6
    local dns dns_admin listen management dns_pid pebble_pid
    PEBBLE_WHY=''
    local b
    for b in "$PEBBLE_BIN" "$CHALLTESTSRV_BIN"; do
        if [ ! -x "$b" ]; then
            PEBBLE_WHY="$b is not installed (scripts/setup.sh installs Debian's pebble package)"
            return 1
        fi
    done
    command -v openssl >/dev/null || { PEBBLE_WHY="openssl is not installed (scripts/setup.sh installs it)"; return 1; }
    mkdir -p "$dir"
    if ! pebble_https_cert "$dir" >"$logs/pebble-openssl.log" 2>&1; then
        PEBBLE_WHY="openssl could not make pebble's HTTPS certificate (see $logs/pebble-openssl.log)"
        return 1
    fi
    free_port listen "$first"
    free_port management "$((listen + 1))"
    free_port dns "$((management + 1))"
    free_port dns_admin "$((dns + 1))"

    spawn "pebble-challtestsrv" "$logs/pebble-challtestsrv.log" "$CHALLTESTSRV_BIN" \
        -defaultIPv4 127.0.0.1 -defaultIPv6 '' -dns01 "127.0.0.1:$dns" \
        -http01 '' -https01 '' -tlsalpn01 '' -management "127.0.0.1:$dns_admin"
    dns_pid=$SPAWN_PID
    if ! wait_tcp "$dns_admin" 10 "$dns_pid"; then
        PEBBLE_WHY="pebble-challtestsrv did not start (see $logs/pebble-challtestsrv.log)"
        stop_one "$dns_pid" 2
        return 1
    fi

    cat >"$dir/pebble-config.json" <<EOF
{"pebble": {
  "listenAddress": "127.0.0.1:$listen",
  "managementListenAddress": "127.0.0.1:$management",
  "certificate": "$dir/pebble-cert.pem",
  "privateKey": "$dir/pebble-key.pem",
  "httpPort": $http_port,
  "tlsPort": $tls_port,
  "ocspResponderURL": "",
  "externalAccountBindingRequired": false,
  "certificateValidityPeriod": $validity
}}
EOF
    # Validate at once, afresh for every order, without pebble's
    # deliberately rejected nonces (its defaults test clients' retries).
    spawn "pebble" "$logs/pebble.log" env PEBBLE_VA_NOSLEEP=1 PEBBLE_VA_ALWAYS_VALID=0 \
        PEBBLE_AUTHZREUSE=0 PEBBLE_WFE_NONCEREJECT=0 \
        "$PEBBLE_BIN" -config "$dir/pebble-config.json" -dnsserver "127.0.0.1:$dns" -strict=false
    pebble_pid=$SPAWN_PID
    local deadline=$((SECONDS + 15))
    until curl -fsS -o /dev/null --max-time 2 --cacert "$dir/pebble-ca.pem" "https://127.0.0.1:$listen/dir" 2>/dev/null; do
        if ! kill -0 "$pebble_pid" 2>/dev/null || [ "$SECONDS" -ge "$deadline" ]; then
            PEBBLE_WHY="pebble did not serve its directory https://127.0.0.1:$listen/dir: $(tail -n 1 "$logs/pebble.log") (see $logs/pebble.log)"
            break
        fi
        sleep 0.2
    done
    if [ -n "$PEBBLE_WHY" ]; then
        stop_one "$pebble_pid" 2
        stop_one "$dns_pid" 2
        return 1
    fi
    PEBBLE_DIRECTORY="https://127.0.0.1:$listen/dir"
    PEBBLE_CA="$dir/pebble-ca.pem"
    PEBBLE_MANAGEMENT="127.0.0.1:$management"
}

# pebble_https_cert DIR: a throw-away CA and, signed by it, pebble's own
# HTTPS certificate for 127.0.0.1 (pebble-ca.pem, pebble-cert.pem,
# pebble-key.pem). Not the CA of what pebble issues: pebble makes that one
# afresh at every start.
pebble_https_cert() {
    local d=$1
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
        -subj '/CN=rdmalb demo: pebble HTTPS CA' -keyout "$d/pebble-ca.key" -out "$d/pebble-ca.pem" &&
        openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
            -subj '/CN=localhost' -keyout "$d/pebble-key.pem" -out "$d/pebble.csr" &&
        printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >"$d/pebble-ext.cnf" &&
        openssl x509 -req -in "$d/pebble.csr" -CA "$d/pebble-ca.pem" -CAkey "$d/pebble-ca.key" \
            -CAcreateserial -days 30 -extfile "$d/pebble-ext.cnf" -out "$d/pebble-cert.pem"
}

# pebble_root OUT: writes the root of the certificates pebble issues (its
# management interface's /roots/0) to OUT.
pebble_root() {
    curl -fsS --max-time 5 --cacert "$PEBBLE_CA" -o "$1" "https://$PEBBLE_MANAGEMENT/roots/0"
}

# acme_wait_issued ADMIN_PORT COUNT SECONDS: waits until the proxy's
# /status lists COUNT ACME certificates, each with a serial. On timeout
# prints the certificates still missing, with their last error, and fails.
acme_wait_issued() {
    local admin=$1 count=$2 deadline=$((SECONDS + $3)) out
    while :; do
        out=$(curl -sS --max-time 2 "http://127.0.0.1:$admin/status" 2>/dev/null |
            python3 -c 'import json, sys
try:
    certs = json.load(sys.stdin).get("acme") or []
except ValueError:
    certs = []
missing = [c for c in certs if not c.get("serial")]
if len(certs) == int(sys.argv[1]) and not missing:
    print("ok")
else:
    print("; ".join("%s: %s" % (c.get("certificate"), c.get("last_error") or "no certificate yet")
                    for c in missing) or "no certificate listed in /status")' "$count") || out="no /status"
        [ "$out" = ok ] && return 0
        if [ "$SECONDS" -ge "$deadline" ]; then
            echo "$out"
            return 1
        fi
        sleep 0.3
    done
}
