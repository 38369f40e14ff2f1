# shellcheck shell=bash
# Shared pieces of the proxy benchmarks (bench/proxy/run.sh and
# bench/proxy/scenarios.sh): rendering the configs, the CPU and memory
# accounting of a proxy's processes, medians and ratios, a perf profile of a
# running proxy, and replacing a generated block of docs/benchmarks.md.
#
# Source it after scripts/lib/common.sh. The caller sets WORK (its temp dir),
# BACKEND_PORT and BODY before rendering; WORKERS, MAXCONN and TLS_SNIPPET
# default to one worker, 4096 connections and no TLS.

# proxy_render TEMPLATE OUT [LISTEN_PORT] [TLS_SNIPPET_FILE]: fills the
# @...@ placeholders of a bench/proxy/*.in template. @TLS@ is replaced by
# the file's lines (or removed), @TEMPDIRS@ by nginx_tempdirs.
proxy_render() {
    local tdir tls=${4:-/dev/null}
    tdir=$WORK/tmp-$(basename "$2" | tr . -)
    sed -e "s|@DIR@|$WORK|g" -e "s|@BACKEND_PORT@|$BACKEND_PORT|g" \
        -e "s|@LISTEN_PORT@|${3:-0}|g" -e "s|@BODY@|$BODY|g" \
        -e "s|@WORKERS@|${WORKERS:-1}|g" -e "s|@MAXCONN@|${MAXCONN:-4096}|g" \
        -e "s|@NOFILE@|$(nofile_for "${MAXCONN:-4096}")|g" \
        -e "/@TLS@/{r $tls" -e "d}" \
        -e "/@TEMPDIRS@/{r /dev/stdin" -e "d}" "$1" >"$2" < <(nginx_tempdirs "$tdir")
}

# nofile_for MAXCONN: the open-file limit a proxy should ask for (two per
# connection and some spare), capped at this shell's hard limit (a container
# may not let even root raise it).
nofile_for() {
    local want=$((2 * $1 + 1024)) hard
    hard=$(ulimit -Hn)
    if [ "$hard" != unlimited ] && [ "$want" -gt "$hard" ]; then want=$hard; fi
    echo "$want"
}

# cpu_ticks PGID: CPU ticks (utime+stime) of every process in a process
# group (all threads included). The comm field may contain spaces, so fields
# are counted after the last ')'.
cpu_ticks() {
    local pgid=$1 total=0 pid t
    for pid in $(pgrep -g "$pgid"); do
        t=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | awk '{print $12 + $13}') || continue
        total=$((total + ${t:-0}))
    done
    echo "$total"
}
# shellcheck disable=SC2034 # used by the scripts that source this file
CLK_HZ=$(getconf CLK_TCK)

# rss_kib PGID: resident set size (VmRSS, KiB) summed over every process of
# a process group.
rss_kib() {
    local pgid=$1 total=0 pid r
    for pid in $(pgrep -g "$pgid"); do
        r=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2>/dev/null) || continue
        total=$((total + ${r:-0}))
    done
    echo "$total"
}

# tcp_active_opens: the kernel's count of connect()s (TCP ActiveOpens in
# /proc/net/snmp) in this network namespace.
tcp_active_opens() {
    awk '/^Tcp:/ { if (!h) { for (i = 1; i <= NF; i++) if ($i == "ActiveOpens") c = i; h = 1 } else print $c }' /proc/net/snmp
}

# median CSV COLUMN KEY: median of a numeric column over the rows whose
# third column is KEY (empty cells skipped; empty output when none).
median() {
    awk -F, -v c="$2" -v t="$3" 'NR > 1 && $3 == t && $c != "" { print $c }' "$1" | sort -g |
        awk '{ v[NR] = $1 } END { if (NR == 0) print ""; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# column_sum CSV COLUMN KEY: sum of a column over KEY's rows.
column_sum() {
    awk -F, -v c="$2" -v t="$3" 'NR > 1 && $3 == t { s += $c } END { print s + 0 }' "$1"
}

# ratio A B: A / B with two decimals, n/a when either is missing or B is 0.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b == 0) print "n/a"; else printf "%.2f", a / b }'; }

# fmt FORMAT VALUE: printf, or an en dash for a missing value.
# shellcheck disable=SC2059 # the format is the argument
fmt() { if [ -n "$2" ]; then printf "$1" "$2"; else printf '–'; fi; }

# Display names of the targets, by target (read by the scripts that source
# this file).
declare -A LABEL

# proxy_labels ROOT: fills LABEL[haproxy|nginx|rdmalb|direct] with names and
# versions (rdmalb: the commit, +changes when src/ or crates/ differ; a
# binary given by RDMALB_BIN is named by RDMALB_LABEL, else by its file
# name, since the checkout's commit says nothing about it).
# shellcheck disable=SC2034
proxy_labels() {
    LABEL[direct]="direct (no proxy)"
    LABEL[haproxy]="HAProxy $(haproxy -v 2>/dev/null | awk 'NR==1{sub(/-.*/, "", $3); print $3}')"
    LABEL[nginx]="nginx $(nginx -v 2>&1 | sed 's|.*nginx/||')"
    if [ -n "${RDMALB_LABEL:-}" ]; then
        LABEL[rdmalb]="rdmalb $RDMALB_LABEL"
    elif [ -n "${RDMALB_BIN:-}" ]; then
        LABEL[rdmalb]="rdmalb ($(basename "$RDMALB_BIN"))"
    else
        LABEL[rdmalb]="rdmalb $(git -C "$1" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$1" diff --quiet HEAD -- src crates 2>/dev/null || echo '+changes')"
    fi
}

# perf_profile NAME PGID REPORT DESCRIPTION CMD...: records every process of
# the group with perf (cpu-clock samples, DWARF call graphs) while CMD runs
# (CMD is the load; it must take DURATION seconds), then writes three
# reports into REPORT: self time by shared object, self time by symbol, and
# inclusive time (self + callees) by symbol (PERF_KEEP=DIR keeps the
# recording itself). cpu-clock is a software event,
# so this works where hardware counters are not exposed (VMs); release
# builds carry line tables (profile.release debug=1) for DWARF unwinding.
perf_profile() {
    local name=$1 pgid=$2 report=$3 what=$4 pids data perf_pid
    shift 4
    pids=$(pgrep -g "$pgid" | paste -sd,)
    data=$WORK/perf-$name.data
    perf record -q -e cpu-clock -F 999 --call-graph dwarf,16384 -o "$data" \
        -p "$pids" -- sleep "$((DURATION + 1))" >"$WORK/perf-$name.out" 2>&1 &
    perf_pid=$!
    sleep 0.5
    "$@"
    wait "$perf_pid" || { cat "$WORK/perf-$name.out" >&2; die "perf record failed for $name"; }
    # Reports go through files: `head` on a pipe would SIGPIPE perf report.
    _perf_rep() { perf report -i "$data" --stdio "$@" 2>/dev/null | grep -v '^$' >"$WORK/perf-report.txt" || true; }
    {
        echo "# perf profile of $what ($(date -u +%FT%H:%MZ))"
        echo "# Self time by shared object:"
        _perf_rep --no-children --sort dso -g none --percent-limit 0.5
        cat "$WORK/perf-report.txt"
        echo
        echo "# Self time by symbol (top entries):"
        _perf_rep --no-children --sort dso,symbol -g none --percent-limit 0.3
        head -n 90 "$WORK/perf-report.txt"
        echo
        echo "# Inclusive time (self + callees) by symbol (top entries):"
        _perf_rep --children --sort symbol -g none --percent-limit 1.5
        head -n 160 "$WORK/perf-report.txt"
    } >"$report"
    # PERF_KEEP=DIR keeps the recording for deeper reports (perf report -i).
    if [ -n "${PERF_KEEP:-}" ]; then mkdir -p "$PERF_KEEP" && mv "$data" "$PERF_KEEP/"; else rm -f "$data"; fi
}

# The system calls syscall_count tallies one by one (perf tracepoints
# syscalls:sys_enter_NAME); every other call is in `all` only.
SYSCALL_NAMES="read readv recvfrom recvmsg write writev sendto sendmsg sendfile64 splice
    epoll_wait epoll_pwait epoll_ctl futex accept4 connect socket setsockopt getsockopt
    getsockname getpeername shutdown close fcntl ioctl sched_yield clock_gettime madvise mmap munmap"

# syscall_count NAME PGID CMD...: counts the system calls (every one, and
# SYSCALL_NAMES one by one), context switches and CPU migrations of every
# thread of every process of the group with `perf stat` while CMD runs (the
# load; it must take DURATION seconds). The counts are left in
# $WORK/perfstat-NAME.csv for syscall_rows.
syscall_count() {
    local name=$1 pgid=$2 pids perf_pid events n
    shift 2
    pids=$(pgrep -g "$pgid" | paste -sd,)
    if [ -z "${SYSCALL_EVENTS:-}" ]; then
        # Only the tracepoints this kernel has (perf list lists them).
        SYSCALL_EVENTS="raw_syscalls:sys_enter,context-switches,cpu-migrations"
        perf list 'syscalls:sys_enter_*' 2>/dev/null >"$WORK/perf-list.txt" || true
        for n in $SYSCALL_NAMES; do
            grep -q "syscalls:sys_enter_$n " "$WORK/perf-list.txt" && SYSCALL_EVENTS+=",syscalls:sys_enter_$n"
        done
    fi
    events=$SYSCALL_EVENTS
    perf stat -x, -e "$events" -o "$WORK/perfstat-$name.csv" -p "$pids" -- sleep "$((DURATION + 1))" \
        >"$WORK/perfstat-$name.out" 2>&1 &
    perf_pid=$!
    sleep 0.5
    cpu_split "$pgid" >"$WORK/cpusplit-$name.txt"
    "$@"
    cpu_split "$pgid" >>"$WORK/cpusplit-$name.txt"
    wait "$perf_pid" || { cat "$WORK/perfstat-$name.out" >&2; die "perf stat failed for $name"; }
}

# cpu_split PGID: "utime stime" in ticks, summed over every process of a
# process group (all threads included), as cpu_ticks reads them.
cpu_split() {
    local pid u=0 s=0 a b
    for pid in $(pgrep -g "$1"); do
        read -r a b < <(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | awk '{print $12, $13}') || continue
        u=$((u + ${a:-0})) s=$((s + ${b:-0}))
    done
    echo "$u $s"
}

# syscall_rows NAME LABEL REQUESTS: "label,event,count,per_request" rows of
# syscall_count NAME's counts (events counted at least once; `all` is every
# system call), then its user and kernel CPU (count: ticks; per request: µs). The load ran inside the counting window, so every call it
# caused is counted, plus at most 1.5 s of idleness.
syscall_rows() {
    awk -F, -v t="$2" -v r="$3" '!/^#/ && NF > 3 && $1 ~ /^[0-9]+$/ {
            e = $3; sub(/^syscalls:sys_enter_/, "", e); sub(/^raw_syscalls:sys_enter$/, "all", e)
            if ($1 > 0 || e == "all") printf "%s,%s,%d,%.3f\n", t, e, $1, $1 / r }' "$WORK/perfstat-$1.csv"
    # User and kernel CPU of the load run (/proc/<pid>/stat), µs per request.
    awk -v t="$2" -v r="$3" -v hz="$CLK_HZ" 'NR == 1 { u = $1; s = $2 } NR == 2 {
            printf "%s,user CPU µs,%d,%.2f\n", t, $1 - u, ($1 - u) * 1e6 / hz / r
            printf "%s,kernel CPU µs,%d,%.2f\n", t, $2 - s, ($2 - s) * 1e6 / hz / r }' "$WORK/cpusplit-$1.txt"
}

# syscall_table CSV: syscall_rows' rows as a markdown table, an event per
# row and a target per column (per request).
syscall_table() {
    awk -F, 'NR > 1 { if (!($1 in seen)) { seen[$1] = 1; t[++nt] = $1 }
                      if (!($2 in seenev)) { seenev[$2] = 1; e[++ne] = $2 }
                      v[$1, $2] = $4 }
        END { printf "| per request |"; for (i = 1; i <= nt; i++) printf " %s |", t[i]; print ""
              printf "|---|"; for (i = 1; i <= nt; i++) printf "---:|"; print ""
              for (j = 1; j <= ne; j++) { printf "| %s |", e[j]
                  for (i = 1; i <= nt; i++) printf " %s |", ((t[i], e[j]) in v) ? v[t[i], e[j]] : "0"; print "" } }' "$1"
}

# replace_doc_block DOC NAME SCRIPT BLOCKFILE [HEADING]: replaces what lies
# between `<!-- NAME:begin ... -->` and `<!-- NAME:end -->` in DOC with
# BLOCKFILE; everything else in DOC is left as it is. When DOC has no such
# block, a section HEADING with an empty block is appended first.
replace_doc_block() {
    local doc=$1 name=$2 script=$3 block=$4 heading=${5:-} begin end
    begin="<!-- $name:begin (generated by $script; edits inside are overwritten) -->"
    end="<!-- $name:end -->"
    if [ ! -f "$doc" ] || ! grep -qF "<!-- $name:begin" "$doc"; then
        { printf '\n%s\n\n%s\n%s\n' "${heading:-## $name}" "$begin" "$end"; } >>"$doc"
    fi
    awk -v blockfile="$block" -v begin="$begin" -v b="<!-- $name:begin" -v e="$end" '
        index($0, b) == 1 { print begin; while ((getline line < blockfile) > 0) print line; skip = 1; next }
        index($0, e) == 1 { skip = 0 }
        !skip { print }' "$doc" >"$doc.new.$$"
    cat "$doc.new.$$" >"$doc"
    rm -f "$doc.new.$$"
}

# bench_work NAME: a fresh work dir in WORK (removed on success, kept for
# inspection when the script fails) and the traps that stop every process
# the script spawned (stop_all) however it ends. BENCH_ON_EXIT, when set, is
# run first.
bench_work() {
    WORK=$(mktemp -d "/tmp/rdmalb-bench-$1.XXXXXX")
    chmod 755 "$WORK"
    trap bench_finish EXIT
    trap 'warn "failed at line $LINENO: $BASH_COMMAND"' ERR
    trap 'exit 130' INT
    trap 'exit 143' TERM
}

bench_finish() {
    local rc=$?
    trap - EXIT INT TERM
    if [ -n "${BENCH_ON_EXIT:-}" ]; then eval "$BENCH_ON_EXIT"; fi
    stop_all 5
    if [ "$rc" = 0 ]; then rm -rf "$WORK"; else echo "work dir kept for inspection: $WORK" >&2; fi
    exit "$rc"
}
