#!/bin/sh
# Reload nginx and return only once its old worker processes have exited.
#
# `nginx -s reload` returns as soon as the signal is sent; the master then
# starts new workers and asks the old ones to stop, and until they have
# closed their listening sockets a new connection may still be answered with
# the old config. The rdmalb sidecar publishes "applied" once the reload
# command has returned and its probe passes, so the reload command must not
# return before the new config is the only one live. If nginx keeps the old
# workers (it rejected the new config), this never returns and the sidecar's
# reload_timeout turns the switch into RELOAD_FAILED.
#
# Usage: nginx-reload.sh PIDFILE NGINX-COMMAND...
#   e.g. sh nginx-reload.sh /run/nginx.pid nginx -s reload
set -eu
pidfile=$1
shift
master=$(cat "$pidfile")
old=$(pgrep -P "$master" || true)
"$@"
for pid in $old; do
    while kill -0 "$pid" 2>/dev/null; do
        sleep 0.005
    done
done
