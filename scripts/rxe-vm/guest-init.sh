#!/bin/sh
# /init (PID 1) of rdmalb's Soft-RoCE guest; scripts/rxe-vm/run.sh builds the
# initramfs around it. Busybox sh, root. Everything it prints goes to the
# serial console, which run.sh reads. The lines run.sh looks for:
#   RXE_GUEST_INIT            /init started: the kernel booted
#   [guest 3.1s] PASS NAME    one per check (FAIL NAME when it failed)
#   RXE_GUEST_STATUS=N        the number of failed checks; last, then power off
# Checks: modules (every module in /etc/rxe-modules loaded), share (the host
# folder mounted at /share, when run.sh shared one), rxe-device (rxe0 on
# dummy0 10.77.0.1/24, port ACTIVE, /dev/infiniband/uverbs0), guest-test
# (/share/guest-test.sh exits 0; run only when rxe0 is up).
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
# sideway dlopens libibverbs.so.1; the image has no ld.so.cache.
export LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu
export HOME=/root
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
# verbs memory registration pins pages (busybox sh has ulimit -l)
# shellcheck disable=SC3045
ulimit -l unlimited
echo RXE_GUEST_INIT

FAILED=0
FAILED_NAMES=""
say() { echo "[guest $(cut -d' ' -f1 /proc/uptime)s] $*"; }
# check NAME CMD...: runs CMD, records PASS or FAIL for NAME.
check() {
    name=$1
    shift
    if "$@"; then
        say "PASS $name"
    else
        say "FAIL $name"
        FAILED=$((FAILED + 1))
        FAILED_NAMES="$FAILED_NAMES $name"
    fi
}
finish() {
    say "done: $FAILED failed check(s)$FAILED_NAMES"
    echo "RXE_GUEST_STATUS=$FAILED"
    sync
    poweroff -f
    # PID 1 must not return; should poweroff fail, sysrq powers off.
    sleep 5
    echo o >/proc/sysrq-trigger
}

say "kernel $(uname -r), $(nproc) cpus, $(awk '/MemTotal/ { print int($2 / 1024) }' /proc/meminfo) MiB"

load_modules() {
    ok=0
    while read -r ko; do
        [ -n "$ko" ] || continue
        if ! insmod "$ko" 2>/tmp/insmod.err && ! grep -q 'File exists' /tmp/insmod.err; then
            cat /tmp/insmod.err
            echo "insmod $ko failed"
            ok=1
        fi
    done </etc/rxe-modules
    return $ok
}
check modules load_modules

# The host folder (9p over virtio), when run.sh shares one.
tag=$(sed -n 's/.*rxe_share=\([^ ]*\).*/\1/p' /proc/cmdline)
if [ -n "$tag" ]; then
    check share mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 "$tag" /share
fi

# The verbs device: Soft-RoCE on a dummy netdev. `ip` is busybox's applet.
rxe_device() {
    ip link set lo up || return 1
    ip link show dummy0 >/dev/null 2>&1 || ip link add dummy0 type dummy || return 1
    ip addr add 10.77.0.1/24 dev dummy0 && ip link set dummy0 up || return 1
    rdma link add rxe0 type rxe netdev dummy0 || return 1
    i=0
    until [ -e /dev/infiniband/uverbs0 ] && rdma link show rxe0/1 | grep -q 'state ACTIVE'; do
        if [ $i -ge 50 ]; then
            echo "rxe0 not ready after 5 s:"
            rdma link show
            ls -l /dev/infiniband
            return 1
        fi
        sleep 0.1
        i=$((i + 1))
    done
    rdma link show rxe0/1
}
check rxe-device rxe_device
if [ $FAILED -gt 0 ]; then
    dmesg | tail -n 30
    finish
fi

if [ -x /share/guest-test.sh ]; then
    say "running /share/guest-test.sh"
    check guest-test /share/guest-test.sh
fi
finish
