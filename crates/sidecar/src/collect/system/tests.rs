use super::*;

const STAT: &str = "cpu  100 5 50 800 20 3 2 0 0 0\ncpu0 50 2 25 400 10 1 1 0 0 0\nintr 1234 5 6\nctxt 99\nprocs_running 3\nprocs_blocked 0\n";

#[test]
fn stat_busy_excludes_idle_and_iowait() {
    let s = parse_stat(STAT).unwrap();
    assert_eq!(s.cpu.total, 980);
    assert_eq!(s.cpu.busy, 160);
    assert_eq!(s.procs_running, Some(3));
    let later = CpuTimes {
        busy: 210,
        total: 1080,
    };
    assert_eq!(cpu_ppm(s.cpu, later), Some(500_000));
    assert_eq!(cpu_ppm(later, s.cpu), None);
    assert_eq!(cpu_ppm(s.cpu, s.cpu), None);
}

#[test]
fn parsers_survive_garbage_and_truncation() {
    let garbage = [
        "",
        "\n\n",
        "cpu",
        "cpu 1 2",
        "cpu x y z w",
        "\u{0}\u{ff}::::",
        "procs_running",
        "cpu 18446744073709551615 18446744073709551615 1 1",
    ];
    for g in garbage {
        assert_eq!(parse_stat(g), None, "{g:?}");
        let _ = parse_loadavg_running(g);
        let _ = parse_meminfo_used_ppm(g);
        let _ = parse_net_dev(g, None);
        let _ = count_established(g, 80);
        let _ = sum_irq_table(g);
    }
    // Every prefix of real-shaped text parses or says unknown, never panics.
    for text in [STAT, MEMINFO, NET_DEV, TCP, INTERRUPTS] {
        for cut in 0..text.len() {
            if text.is_char_boundary(cut) {
                let t = &text[..cut];
                let _ = parse_stat(t);
                let _ = parse_meminfo_used_ppm(t);
                let _ = parse_net_dev(t, None);
                let _ = count_established(t, 8081);
                let _ = sum_irq_table(t);
                let _ = parse_loadavg_running(t);
            }
        }
    }
}

#[test]
fn loadavg_running_field() {
    assert_eq!(
        parse_loadavg_running("0.52 0.58 0.59 4/1034 12345\n"),
        Some(4)
    );
    assert_eq!(parse_loadavg_running("0.52 0.58 0.59\n"), None);
    assert_eq!(parse_loadavg_running("0.52 0.58 0.59 x/1 2"), None);
}

const MEMINFO: &str = "MemTotal:       16000000 kB\nMemFree:         1000000 kB\nMemAvailable:    4000000 kB\nBuffers:          100 kB\n";

#[test]
fn meminfo_uses_available_then_falls_back() {
    assert_eq!(parse_meminfo_used_ppm(MEMINFO), Some(750_000));
    let old = "MemTotal: 1000 kB\nMemFree: 100 kB\nBuffers: 100 kB\nCached: 300 kB\n";
    assert_eq!(parse_meminfo_used_ppm(old), Some(500_000));
    assert_eq!(
        parse_meminfo_used_ppm("MemTotal: 0 kB\nMemAvailable: 0 kB\n"),
        None
    );
    // More available than total (never on a sane kernel) clamps to 0 used.
    assert_eq!(
        parse_meminfo_used_ppm("MemTotal: 10 kB\nMemAvailable: 20 kB\n"),
        Some(0)
    );
}

const NET_DEV: &str = "Inter-|   Receive                                                |  Transmit\n face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    lo: 5000 50 0 0 0 0 0 0 5000 50 0 0 0 0 0 0\n  eth0: 1000 10 0 0 0 0 0 0 2000 20 0 0 0 0 0 0\n  eth1: 300 3 0 0 0 0 0 0 400 4 0 0 0 0 0 0\n";

#[test]
fn net_dev_sums_wanted_interfaces() {
    assert_eq!(
        parse_net_dev(NET_DEV, None),
        Some(NetBytes { rx: 1300, tx: 2400 })
    );
    let only = vec!["eth1".to_string()];
    assert_eq!(
        parse_net_dev(NET_DEV, Some(&only)),
        Some(NetBytes { rx: 300, tx: 400 })
    );
    let lo = vec!["lo".to_string()];
    assert_eq!(
        parse_net_dev(NET_DEV, Some(&lo)),
        Some(NetBytes { rx: 5000, tx: 5000 })
    );
    assert_eq!(rate(1000, 3000, 2.0), Some(1000));
    assert_eq!(rate(3000, 1000, 2.0), None);
    assert_eq!(rate(1, 2, 0.0), None);
}

const TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 0100007F:1F91 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 1 1 0 100 0 0 10 0\n   1: 0100007F:1F91 0100007F:C350 01 00000000:00000000 00:00000000 00000000  1000        0 2 1 0 20 4 30 10 -1\n   2: 0100007F:C350 0100007F:1F91 01 00000000:00000000 00:00000000 00000000  1000        0 3 1 0 20 4 30 10 -1\n   3: 0100007F:1F91 0100007F:C351 06 00000000:00000000 00:00000000 00000000  1000        0 4 1 0 20 4 30 10 -1\n";

#[test]
fn established_counts_local_port_only() {
    // 0x1F91 = 8081: one listener (0A), one established (01), one TIME_WAIT
    // (06), and the client end (remote port 8081) which must not count.
    assert_eq!(count_established(TCP, 8081), 1);
    assert_eq!(count_established(TCP, 50000), 1);
    assert_eq!(count_established(TCP, 80), 0);
}

const INTERRUPTS: &str = "           CPU0       CPU1\n  0:         10          5   IO-APIC   2-edge      timer\n  8:          1          0   IO-APIC   8-edge      rtc0\nNMI:          2          3   Non-maskable interrupts\nERR:          7\nMIS:          0\n";

#[test]
fn irq_tables_sum_per_cpu_columns() {
    assert_eq!(sum_irq_table(INTERRUPTS), Some(28));
    let soft = "                    CPU0       CPU1\n          HI:          1          2\n       TIMER:        100        200\n";
    assert_eq!(sum_irq_table(soft), Some(303));
    assert_eq!(sum_irq_table("no header\n 0: 1 2\n"), None);
}

proptest::proptest! {
    /// Arbitrary text, and arbitrary lines built from procfs-like tokens,
    /// never make a parser panic.
    #[test]
    fn parsers_never_panic(
        text in "\\PC*",
        tokens in proptest::collection::vec("(cpu|CPU0|procs_running|MemTotal:|lo:|eth0:|01|0A|[0-9A-F]{1,8}:[0-9A-F]{1,4}|[0-9]{1,25}|-1|:|\\|| |\n)", 0..60),
    ) {
        let built = tokens.join(" ");
        for t in [text.as_str(), built.as_str()] {
            let _ = parse_stat(t);
            let _ = parse_loadavg_running(t);
            let _ = parse_meminfo_used_ppm(t);
            let _ = parse_net_dev(t, None);
            let _ = count_established(t, 80);
            let _ = sum_irq_table(t);
            if let Some(s) = parse_stat(t) {
                proptest::prop_assert!(s.cpu.busy <= s.cpu.total);
            }
            if let Some(ppm) = parse_meminfo_used_ppm(t) {
                proptest::prop_assert!(ppm <= 1_000_000);
            }
        }
    }
}
