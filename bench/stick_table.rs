//! Stick tables with a million keys (docs/rate-limits.md): memory per
//! entry (the process's resident memory before and after filling a table
//! of 1 M IPv4 keys, divided by the entries, next to the
//! `rdmalb_stick_table_entry_bytes` estimate), inserts per second (new
//! keys), lookups per second (existing keys, the request path's
//! `track-sc0 src`: find, touch, count one request and read its rate) on
//! one thread and on two, and churn (10 M distinct keys through a table of
//! 1 M: every insert evicts), whose entries must stay at most the size.
//!
//! Run: `cargo bench --bench stick_table` (`-- --quick`: 100 k keys).
//! Prints a markdown table and writes it to `bench/results/stick_table.md`.
//! Times are for this machine and this run, not absolute claims.

use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use rdmalb_proxy::rules::stick::{entry_bytes, now_ms, Data, Key, KeyKind, StickTable, Store};

/// Resident memory of the process (bytes), from /proc/self/statm.
fn rss() -> usize {
    let text = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: usize = text
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

fn key(i: u32) -> Key {
    Key::V4(i.wrapping_mul(2_654_435_761).to_be_bytes())
}

fn table(size: usize) -> StickTable {
    let mut store = Store::default();
    store.add(Data::HttpReqRate, 10_000);
    store.add(Data::HttpReqCnt, 0);
    store.add(Data::ConnCur, 0);
    StickTable::new("bench", KeyKind::Ip, size, 60_000, store)
}

/// One request's work on a table: find or create the entry, count a
/// request, read the rate.
fn request(t: &StickTable, k: Key, now: u32) -> u32 {
    let e = t.entry(k, now).expect("room");
    let mut c = e.counters.lock();
    c.request(&t.store, now);
    c.get(Data::HttpReqRate, &t.store, now)
}

fn per_second(n: usize, secs: f64) -> String {
    format!("{:.2} M/s", n as f64 / secs / 1e6)
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let n: usize = if quick { 100_000 } else { 1_000_000 };
    let now = now_ms();
    let mut rows: Vec<(String, String)> = Vec::new();

    let before = rss();
    let t = Arc::new(table(n));
    let start = Instant::now();
    for i in 0..n as u32 {
        black_box(request(&t, key(i), now));
    }
    let insert = start.elapsed().as_secs_f64();
    let grown = rss().saturating_sub(before);
    assert_eq!(t.len(), n);
    rows.push((
        format!("memory per entry ({n} IPv4 keys, resident)"),
        format!("{} B", grown / n),
    ));
    rows.push((
        "memory per entry (estimate, the metric)".into(),
        format!("{} B", entry_bytes(KeyKind::Ip)),
    ));
    rows.push(("inserts (new keys), 1 thread".into(), per_second(n, insert)));

    let start = Instant::now();
    for i in 0..n as u32 {
        black_box(request(&t, key(i), now));
    }
    rows.push((
        "lookups (existing keys, one request counted), 1 thread".into(),
        per_second(n, start.elapsed().as_secs_f64()),
    ));

    let start = Instant::now();
    let threads: Vec<_> = (0..2u32)
        .map(|th| {
            let t = Arc::clone(&t);
            std::thread::spawn(move || {
                for i in (th..n as u32).step_by(2) {
                    black_box(request(&t, key(i), now));
                }
            })
        })
        .collect();
    for th in threads {
        th.join().unwrap();
    }
    rows.push((
        "lookups, 2 threads (sharded map, no global lock)".into(),
        per_second(n, start.elapsed().as_secs_f64()),
    ));
    drop(t);

    let size = n;
    let churn = table(size);
    let distinct = 10 * size as u32;
    let mut most = 0;
    let start = Instant::now();
    for i in 0..distinct {
        black_box(request(&churn, key(i), now.wrapping_add(i / 1000)));
        if i % 1024 == 0 {
            most = most.max(churn.len());
        }
    }
    let secs = start.elapsed().as_secs_f64();
    most = most.max(churn.len());
    assert!(most <= size, "{most} entries in a table of {size}");
    rows.push((
        format!("churn: {distinct} distinct keys through size {size}"),
        format!(
            "{} (at most {most} entries held)",
            per_second(distinct as usize, secs)
        ),
    ));

    let mut out = String::from("| stick table | figure |\n|---|---|\n");
    for (k, v) in &rows {
        out.push_str(&format!("| {k} | {v} |\n"));
    }
    print!("{out}");
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/results/stick_table.md");
    if let Err(e) = std::fs::write(&path, &out) {
        eprintln!("cannot write {}: {e}", path.display());
    }
}
