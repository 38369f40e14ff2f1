#!/usr/bin/env bash
# rdmalb's Soft-RoCE guest: boots a throw-away QEMU guest whose kernel has
# rdma_rxe, makes the verbs device rxe0 in it, and runs the project's guest
# test from a shared host folder. scripts/rxe-test.sh is its user.
#
#   RXE_SHARE=DIR bash scripts/rxe-vm/run.sh   # boot, check rxe0, run DIR/guest-test.sh
#   bash scripts/rxe-vm/run.sh --check         # list what the host lacks (exit 0 or 103)
#
# The host has no RDMA NIC and its kernel no rdma_rxe, and /dev/kvm (when
# there is one) is not usable for this guest, so QEMU emulates the CPU (TCG).
# What it does:
#   1. kernel: Debian's linux-image-amd64 (the -cloud- flavour has no
#      rdma_rxe), fetched with `apt-get download` into RXE_WORK and unpacked
#      there - never installed on the host. The compressed vmlinuz is
#      unpacked once into an ELF vmlinux, which QEMU boots through its PVH
#      entry: under TCG that skips the real-mode loader and the in-guest
#      decompression (seconds each).
#   2. initramfs (rebuilt every run, ~2 s): busybox-static, `rdma` from
#      iproute2, libibverbs with the rxe provider (sideway loads them with
#      dlopen, so ldd of our binaries does not name them), the shared
#      libraries of every ELF executable at the top of RXE_SHARE, the kernel
#      modules rdma_rxe, ib_uverbs, dummy and 9p need (crc32_generic first:
#      rxe asks for the "crc32" hash when the device registers), and
#      guest-init.sh as /init.
#   3. boot: RXE_SHARE is the guest's /share (virtio 9p, read-write); the
#      guest prints its console here as it runs ("[guest 3.1s] PASS rxe-device",
#      last "RXE_GUEST_STATUS=N") and powers off. QEMU runs in its own process
#      group and is stopped by its PID on timeout, Ctrl-C or any exit.
#
# Exit status:
#   0..98  the number of failed guest checks (modules, share, rxe-device,
#          guest-test: the exit status of RXE_SHARE/guest-test.sh)
#   99     the guest booted but never reported (RXE_TIMEOUT reached, or it
#          crashed): a failure
#   >= 100 this host cannot run the guest: 100 QEMU did not bring the guest
#          up to its /init, 101 no kernel package (no apt lists or network,
#          nothing cached), 102 the kernel package has no rdma_rxe, 103 host
#          tools missing (scripts/setup.sh installs them), 104 another run
#          held RXE_WORK for too long
#
# Env:
#   RXE_SHARE=DIR     host folder shared as /share; its guest-test.sh runs as root
#   RXE_WORK=DIR      cache and logs (default /tmp/rdmalb-rxe/guest; keep it:
#                     the kernel is ~70 MB); one run at a time per folder (flock)
#   RXE_TIMEOUT=S     limit for the guest, boot to power-off (default 900)
#   RXE_ACCEL=tcg|kvm (default tcg), RXE_MEM=MiB (1024), RXE_CPUS=N (2)
#   RXE_KPKG=NAME     kernel package (default: what linux-image-amd64 depends on)
# Output: the guest's console on stdout; RXE_WORK/guest.log keeps it.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib/common.sh
. "$HERE/../lib/common.sh"
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

W=${RXE_WORK:-/tmp/rdmalb-rxe/guest}
SHARE=${RXE_SHARE:-}
TIMEOUT=${RXE_TIMEOUT:-900}
ACCEL=${RXE_ACCEL:-tcg}
MEM=${RXE_MEM:-1024}
CPUS=${RXE_CPUS:-2}
LIBDIR=/usr/lib/x86_64-linux-gnu
T_START=$SECONDS

# cannot CODE MESSAGE: this host cannot run the guest (exit CODE >= 100).
cannot() {
    printf '%srxe-vm: cannot run here:%s %s\n' "$C_R" "$C_0" "$2" >&2
    exit "$1"
}

# ---------------------------------------------------------------- host tools
# missing_tools: prints "what (package)" for every tool or file the runner
# needs and the host lacks. Every package named is in scripts/setup.sh.
missing_tools() {
    local need cmd pkg
    for need in qemu-system-x86_64:qemu-system-x86 cpio:cpio depmod:kmod modprobe:kmod \
        dpkg-deb:dpkg apt-get:apt ldd:libc-bin xz:xz-utils gzip:gzip flock:util-linux \
        timeout:coreutils rdma:iproute2; do
        cmd=${need%%:*} pkg=${need#*:}
        command -v "$cmd" >/dev/null 2>&1 || echo "$cmd ($pkg)"
    done
    [ -x /bin/busybox ] || echo "/bin/busybox (busybox-static)"
    [ -e "$LIBDIR/libibverbs.so.1" ] || echo "$LIBDIR/libibverbs.so.1 (libibverbs1)"
    [ -e "$LIBDIR/librdmacm.so.1" ] || echo "$LIBDIR/librdmacm.so.1 (librdmacm1)"
    compgen -G "$LIBDIR/libibverbs/librxe-rdmav*.so" >/dev/null ||
        echo "$LIBDIR/libibverbs/librxe-rdmav*.so (ibverbs-providers)"
    [ -e /etc/libibverbs.d/rxe.driver ] || echo "/etc/libibverbs.d/rxe.driver (ibverbs-providers)"
}

[ "$(uname -m)" = x86_64 ] ||
    cannot 103 "the guest runs this host's x86_64 binaries and libraries; this is $(uname -m)"
missing=$(missing_tools)
case "${1:-}" in
    --check)
        [ -z "$missing" ] && exit 0
        echo "$missing"
        exit 103
        ;;
    "") ;;
    *) die "usage: [RXE_SHARE=DIR] bash $0 [--check]" ;;
esac
[ -z "$missing" ] ||
    cannot 103 "missing on this host: $(echo "$missing" | paste -sd, - | sed "s/,/, /g") (bash scripts/setup.sh installs them)"
[ -z "$SHARE" ] || [ -d "$SHARE" ] || die "RXE_SHARE=$SHARE is not a folder"
case $ACCEL in
    tcg) ACCEL_ARGS=(-accel "tcg,thread=multi" -cpu max) ;;
    kvm) ACCEL_ARGS=(-accel kvm -cpu host) ;;
    *) die "RXE_ACCEL=$ACCEL: use tcg or kvm" ;;
esac

# One run per work folder: runs from several clones share the cache.
mkdir -p "$W"
exec 9>"$W/.lock"
if ! flock -n 9; then
    log "rxe-vm: another run is using $W; waiting for it (at most $((TIMEOUT + 300)) s)"
    flock -w $((TIMEOUT + 300)) 9 || cannot 104 "$W stayed locked by another run"
fi

# Everything this script starts is stopped by its PID when it exits.
trap 'stop_all 5' EXIT
trap 'warn "rxe-vm: failed at line $LINENO: $BASH_COMMAND"' ERR
trap 'exit 130' INT
trap 'exit 143' TERM

# as_root_or CODE MESSAGE CMD...: runs CMD as root (sudo without a password
# prompt when we are not root); when that is impossible, `cannot` CODE.
as_root_or() {
    local code=$1 msg=$2
    shift 2
    if [ "$(id -u)" = 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        sudo -n "$@"
    else
        cannot "$code" "$msg (needs root for: $*)"
    fi
}

# ---------------------------------------------------------------- 1. kernel
# is_elf FILE
is_elf() { [ "$(head -c4 "$1" 2>/dev/null | od -An -tx1 | tr -d ' ')" = 7f454c46 ]; }

# kernel_package: the linux-image-<version>-amd64 that linux-image-amd64
# depends on (empty when apt knows no such package).
kernel_package() {
    apt-cache depends linux-image-amd64 2>/dev/null |
        awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9]/ { print $2; exit }'
}
mkdir -p "$W/debs"
KPKG=${RXE_KPKG:-$(kernel_package)}
if [ -z "$KPKG" ]; then
    log "rxe-vm: apt knows no linux-image-amd64; running apt-get update"
    as_root_or 101 "no apt package lists" timeout 300 apt-get -q update >/dev/null || true
    KPKG=$(kernel_package)
fi
deb=""
if [ -n "$KPKG" ]; then
    deb=$(compgen -G "$W/debs/${KPKG}_*.deb" | head -n1 || true)
    if [ -z "$deb" ]; then
        log "rxe-vm: downloading $KPKG (about 70 MB, kept in $W/debs)"
        if ! (cd "$W/debs" && timeout 600 apt-get -q download "$KPKG"); then
            warn "apt-get download $KPKG failed; updating the package lists and retrying"
            as_root_or 101 "cannot download $KPKG" timeout 300 apt-get -q update >/dev/null || true
            (cd "$W/debs" && timeout 600 apt-get -q download "$KPKG") || true
        fi
        deb=$(compgen -G "$W/debs/${KPKG}_*.deb" | head -n1 || true)
    fi
fi
if [ -z "$deb" ]; then
    # Offline: the newest kernel fetched earlier still does.
    deb=$(compgen -G "$W/debs/linux-image-*-amd64_*.deb" | sort -V | tail -n1 || true)
    [ -n "$deb" ] || cannot 101 "cannot get the Debian kernel package ${KPKG:-linux-image-amd64} (no apt lists, no network, or no such package) and none is cached in $W/debs"
    KPKG=$(basename "${deb%%_*}")
    warn "using the cached $KPKG"
fi
KVER=${KPKG#linux-image-}
# Older kernels fetched before are dropped: one kernel is kept.
for old in "$W"/debs/*.deb; do [ "$old" = "$deb" ] || rm -f "$old"; done
for old in "$W"/kernel/*; do [ ! -e "$old" ] || [ "$old" = "$W/kernel/$KVER" ] || rm -rf "$old"; done

K=$W/kernel/$KVER
if [ ! -e "$K/.ready" ]; then
    log "rxe-vm: unpacking $(basename "$deb")"
    rm -rf "$K"
    mkdir -p "$K"
    dpkg-deb -x "$deb" "$K/pkg"
    depmod -b "$K/pkg" "$KVER"
    # vmlinuz is a boot stub plus an xz stream holding the ELF vmlinux.
    off=$(LC_ALL=C grep -obUaP '\xfd7zXZ\x00' "$K/pkg/boot/vmlinuz-$KVER" | head -n1 | cut -d: -f1)
    # (xz reads from a process substitution: it stops at the stream's end,
    # and tail's SIGPIPE must not count as a failure under pipefail)
    if [ -n "$off" ] &&
        xz -dc --single-stream < <(tail -c +$((off + 1)) "$K/pkg/boot/vmlinuz-$KVER") >"$K/vmlinux" 2>/dev/null &&
        is_elf "$K/vmlinux"; then
        :
    else
        warn "could not unpack an ELF vmlinux from vmlinuz-$KVER; booting the compressed image (slower)"
        rm -f "$K/vmlinux"
    fi
    touch "$K/.ready"
fi
KIMG=$K/vmlinux
[ -s "$KIMG" ] || KIMG=$K/pkg/boot/vmlinuz-$KVER
KMODS=$K/pkg/lib/modules/$KVER
[ -n "$(find "$KMODS" -name 'rdma_rxe.ko*' -print -quit)" ] ||
    cannot 102 "$KPKG has no rdma_rxe module (a -cloud- kernel? set RXE_KPKG to a linux-image-*-amd64)"
T_KERNEL=$((SECONDS - T_START))

# ---------------------------------------------------------------- 2. initramfs
# A merged-/usr tree like Debian's: /bin, /sbin, /lib and /lib64 point into /usr.
R=$W/image
rm -rf "$R"
mkdir -p "$R"/usr/{bin,sbin,lib,lib64} "$R"/{etc/libibverbs.d,proc,sys,dev,tmp,run,share,root}
for d in bin sbin lib lib64; do ln -s "usr/$d" "$R/$d"; done

# stage FILE: copies a host file (links followed) to the same path in the
# image (/bin, /lib... land under /usr) and, for an ELF file, every shared
# library it loads (ldd resolves them recursively).
declare -A STAGED=()
stage() {
    local src=$1 rel lib
    [ -z "${STAGED[$src]:-}" ] || return 0
    STAGED[$src]=1
    rel=${src#/}
    rel=usr/${rel#usr/}
    mkdir -p "$(dirname "$R/$rel")"
    cp -L "$src" "$R/$rel"
    if is_elf "$src"; then
        for lib in $(ldd "$src" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }'); do
            stage "$lib"
        done
    fi
}

stage /bin/busybox
ln -s busybox "$R/usr/bin/sh" # for /init's #!; /init installs the other applets
stage "$(command -v rdma)"
stage "$LIBDIR/libibverbs.so.1"
stage "$LIBDIR/librdmacm.so.1"
for p in "$LIBDIR"/libibverbs/librxe-rdmav*.so; do stage "$p"; done
cp /etc/libibverbs.d/rxe.driver "$R/etc/libibverbs.d/"
stage "$LIBDIR/libgcc_s.so.1" # Rust binaries unwind with it
# The libraries of the test binaries the guest will run from /share.
if [ -n "$SHARE" ]; then
    while IFS= read -r -d '' f; do
        is_elf "$f" || continue
        for lib in $(ldd "$f" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }'); do
            stage "$lib"
        done
    done < <(find "$SHARE" -maxdepth 1 -type f -perm -u+x -print0)
fi
printf '127.0.0.1 localhost\n10.77.0.1 rxe-guest\n' >"$R/etc/hosts"
printf 'root:x:0:0:root:/root:/bin/sh\n' >"$R/etc/passwd"
printf 'root:x:0:\n' >"$R/etc/group"
printf 'hosts: files\npasswd: files\ngroup: files\n' >"$R/etc/nsswitch.conf"

# Kernel modules in load order, from the kernel's own modules.dep (-C
# /dev/null: the host's modprobe.d options, e.g. numdummies=0, must not leak in).
: >"$R/etc/rxe-modules"
for m in crc32_generic rdma_rxe ib_uverbs dummy virtio_pci 9pnet_virtio 9p; do
    modprobe -C /dev/null -d "$K/pkg" -S "$KVER" --show-depends "$m"
done | awk '$1 == "insmod" && !seen[$2]++ { print $2 }' | while read -r ko; do
    rel=lib/modules/$KVER/${ko#*/lib/modules/"$KVER"/}
    mkdir -p "$(dirname "$R/usr/$rel")"
    case $ko in
        *.ko.xz) xz -dc "$ko" >"$R/usr/${rel%.xz}" && rel=${rel%.xz} ;;
        *.ko) cp "$ko" "$R/usr/$rel" ;;
        *) die "cannot load $ko in the guest (only .ko and .ko.xz)" ;;
    esac
    echo "/$rel" >>"$R/etc/rxe-modules"
done
# modules.dep for the subset, so that the kernel's own module requests work.
cp "$KMODS"/modules.{order,builtin,builtin.modinfo} "$R/usr/lib/modules/$KVER/" 2>/dev/null || true
depmod -b "$R/usr" "$KVER"
install -m 0755 "$HERE/guest-init.sh" "$R/init"
(cd "$R" && find . -print0 | cpio --null -o -H newc --quiet | gzip -1 >"$W/initramfs.cpio.gz")
T_IMAGE=$((SECONDS - T_START))
log "rxe-vm: kernel $KVER, initramfs $(du -h "$W/initramfs.cpio.gz" | cut -f1), $(wc -l <"$R/etc/rxe-modules") modules"

# ---------------------------------------------------------------- 3. boot
share_args=()
append="console=ttyS0 quiet loglevel=3 panic=-1 rdinit=/init"
if [ -n "$SHARE" ]; then
    share_args=(-virtfs "local,path=$SHARE,mount_tag=rdmalb,security_model=none,id=share")
    append+=" rxe_share=rdmalb"
fi
log "rxe-vm: booting the guest (accel $ACCEL, ${CPUS} cpus, ${MEM} MiB, limit ${TIMEOUT}s)"
raw=$W/console.raw
spawn qemu "$raw" qemu-system-x86_64 "${ACCEL_ARGS[@]}" -m "$MEM" -smp "$CPUS" \
    -nodefaults -no-user-config -display none -no-reboot -serial stdio \
    "${share_args[@]}" -kernel "$KIMG" -initrd "$W/initramfs.cpio.gz" -append "$append"
QEMU_PID=$SPAWN_PID
T_BOOT=$SECONDS
# The console as it comes, without the carriage returns and terminal
# escapes of a serial line. The reader ends by itself once QEMU has exited
# (tail --pid), so it never outlives the guest.
clean_console() { sed -u 's/\r//g; s/\x1b\[[0-9;?]*[a-zA-Z]//g; s/\x1bc//g'; }
tail -n +1 -s 0.3 -f --pid="$QEMU_PID" "$raw" | clean_console &
CONSOLE_PID=$!
# Wait for QEMU in short sleeps rather than one long foreground command, so
# that a SIGTERM or Ctrl-C is acted on (stop_all) within half a second.
timed_out=0
deadline=$((SECONDS + TIMEOUT))
while kill -0 "$QEMU_PID" 2>/dev/null; do
    if [ "$SECONDS" -ge "$deadline" ]; then
        timed_out=1
        warn "rxe-vm: the guest did not finish within RXE_TIMEOUT=${TIMEOUT}s; stopping QEMU (pid $QEMU_PID)"
        stop_one "$QEMU_PID" 5
        break
    fi
    sleep 0.5
done
qemu_rc=stopped
if [ "$timed_out" = 0 ]; then
    qemu_rc=0
    wait "$QEMU_PID" || qemu_rc=$?
    # QEMU has exited and been reaped: nothing left to stop.
    SPAWNED_PIDS=() SPAWNED_NAMES=() SPAWNED_LOGS=()
fi
wait "$CONSOLE_PID" || true
clean_console <"$raw" >"$W/guest.log"
T_VM=$((SECONDS - T_BOOT))

echo
echo "================ rxe-vm summary ================"
grep -E '^\[guest [0-9.]+s\] (PASS|FAIL) ' "$W/guest.log" || true
echo "time: kernel ready ${T_KERNEL}s, image built ${T_IMAGE}s, guest ${T_VM}s, total $((SECONDS - T_START))s"
status=$(sed -n 's/^RXE_GUEST_STATUS=\([0-9][0-9]*\)$/\1/p' "$W/guest.log" | tail -n1)
if [ -z "$status" ]; then
    if grep -q '^RXE_GUEST_INIT' "$W/guest.log"; then
        if [ "$timed_out" = 1 ]; then
            echo "rxe-vm: FAIL: the guest booted but did not finish within ${TIMEOUT}s (console: $W/guest.log)"
        else
            echo "rxe-vm: FAIL: the guest booted but stopped without a status (QEMU exit $qemu_rc; console: $W/guest.log)"
        fi
        exit 99
    fi
    tail -n 20 "$W/guest.log"
    cannot 100 "QEMU did not bring the guest up to its /init (QEMU exit $qemu_rc; console: $W/guest.log)"
fi
echo "rxe-vm: $status failed guest check(s)"
[ "$status" -le 98 ] || status=98
exit "$status"
