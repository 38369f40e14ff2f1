//! Per-site, per-interval results of a replay: the recorder the load
//! client feeds, and the CSV, JSON and summary-table outputs.
//!
//! A request is counted in the interval in which it completed. "Served"
//! means a 2xx or 3xx response; everything else is an error, keyed by
//! kind: the status code (`503`, `421`, ...), `connect`, `timeout`, `io`
//! (connection reset or protocol error), `backlog` (open loop only: the
//! client's own in-flight bound was hit, the request was never sent).
//! Latency percentiles are over served requests, nearest rank.
//! "Offered" counts the requests the client issued in an interval, by
//! start time (including those its own backlog bound refused): the
//! demand a site saw, which QoS accounting ([`super::qos`]) compares
//! with the site's guarantee.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::Serialize;

/// How one request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Status(u16),
    Connect,
    Timeout,
    Io,
    Backlog,
}

impl Outcome {
    fn served(self) -> bool {
        matches!(self, Outcome::Status(s) if (200..400).contains(&s))
    }

    fn kind(self) -> String {
        match self {
            Outcome::Status(s) => s.to_string(),
            Outcome::Connect => "connect".into(),
            Outcome::Timeout => "timeout".into(),
            Outcome::Io => "io".into(),
            Outcome::Backlog => "backlog".into(),
        }
    }
}

#[derive(Debug, Default, Clone)]
struct Bucket {
    offered: u64,
    requests: u64,
    served: u64,
    errors: BTreeMap<String, u64>,
    latencies_us: Vec<u64>,
}

impl Bucket {
    fn merge(&mut self, o: &Bucket) {
        self.offered += o.offered;
        self.requests += o.requests;
        self.served += o.served;
        for (k, v) in &o.errors {
            *self.errors.entry(k.clone()).or_default() += v;
        }
        self.latencies_us.extend_from_slice(&o.latencies_us);
    }
}

/// Collects outcomes; shared by the client's tasks.
#[derive(Debug)]
pub struct Recorder {
    start: Instant,
    interval: Duration,
    sites: Vec<String>,
    /// buckets[interval][site]
    buckets: Mutex<Vec<Vec<Bucket>>>,
}

impl Recorder {
    pub fn new(sites: Vec<String>, interval: Duration, start: Instant) -> Recorder {
        Recorder {
            start,
            interval: interval.max(Duration::from_millis(1)),
            sites,
            buckets: Mutex::new(Vec::new()),
        }
    }

    /// Counts one request issued for `site` at `at` (its demand).
    pub fn offer(&self, site: usize, at: Instant) {
        self.with_bucket(site, at, |b| b.offered += 1);
    }

    pub fn record(&self, site: usize, done: Instant, latency: Duration, outcome: Outcome) {
        self.with_bucket(site, done, |bucket| {
            bucket.requests += 1;
            if outcome.served() {
                bucket.served += 1;
                bucket.latencies_us.push(latency.as_micros() as u64);
            } else {
                *bucket.errors.entry(outcome.kind()).or_default() += 1;
            }
        });
    }

    fn with_bucket(&self, site: usize, at: Instant, f: impl FnOnce(&mut Bucket)) {
        let idx = (at.saturating_duration_since(self.start).as_nanos() / self.interval.as_nanos())
            as usize;
        let Ok(mut b) = self.buckets.lock() else {
            return;
        };
        while b.len() <= idx {
            b.push(vec![Bucket::default(); self.sites.len()]);
        }
        if let Some(bucket) = b[idx].get_mut(site) {
            f(bucket);
        }
    }

    /// The results, with `elapsed` the run's length (the last interval
    /// may be partial; its rate uses its real length). Completions in
    /// intervals after `elapsed` (at the deadline, while in-flight requests
    /// are abandoned) are not counted.
    pub fn finish(&self, elapsed: Duration) -> Report {
        let buckets = self.buckets.lock().map(|b| b.clone()).unwrap_or_default();
        let n_int = (elapsed.as_nanos().div_ceil(self.interval.as_nanos()) as usize).max(1);
        let iv = self.interval.as_secs_f64();
        let end = Duration::from_nanos(n_int as u64 * self.interval.as_nanos() as u64).min(elapsed);
        let mut rows = Vec::new();
        let mut totals = vec![Bucket::default(); self.sites.len()];
        for i in 0..n_int {
            let start = i as f64 * iv;
            let len = (end.as_secs_f64() - start).clamp(1e-3, iv);
            for (s, site) in self.sites.iter().enumerate() {
                let b = buckets
                    .get(i)
                    .and_then(|v| v.get(s))
                    .cloned()
                    .unwrap_or_default();
                totals[s].merge(&b);
                rows.push(Row::new(start, site, &b, len));
            }
        }
        let secs = elapsed.as_secs_f64().max(1e-3);
        let mut all = Bucket::default();
        let mut summary: Vec<Row> = self
            .sites
            .iter()
            .zip(&totals)
            .map(|(site, b)| {
                all.merge(b);
                Row::new(0.0, site, b, secs)
            })
            .collect();
        summary.push(Row::new(0.0, "TOTAL", &all, secs));
        Report {
            interval_s: iv,
            elapsed_s: secs,
            sites: self.sites.clone(),
            intervals: rows,
            summary,
        }
    }
}

/// One site's figures over one interval (or the whole run).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Row {
    pub time_s: f64,
    pub site: String,
    /// Requests issued (by start time): the demand.
    pub offered: u64,
    pub offered_per_s: f64,
    pub requests: u64,
    pub served: u64,
    pub served_per_s: f64,
    pub errors: u64,
    pub error_kinds: BTreeMap<String, u64>,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    /// p99 over every request, errors counted as slower than any served
    /// one (a policy cannot look better by refusing requests); `None`
    /// when more than 1 % of the requests failed.
    pub p99_all_ms: Option<f64>,
    pub max_ms: f64,
    /// Served requests answered within each of [`OBJECTIVES_MS`] ms (the
    /// goodput under a latency objective, as a cumulative histogram).
    pub served_within_ms: BTreeMap<u32, u64>,
}

/// Latency objectives of [`Row::served_within_ms`], in ms.
pub const OBJECTIVES_MS: [u32; 8] = [10, 25, 50, 100, 250, 500, 1000, 2500];

fn percentile(sorted: &[u64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1] as f64 / 1000.0
}

/// The `q` quantile of `requests` outcomes of which `served_sorted` are
/// the served latencies (µs, ascending) and the rest errors, ranked after
/// every served one; `None` when the rank falls on an error.
fn percentile_with_errors(served_sorted: &[u64], requests: u64, q: f64) -> Option<f64> {
    if requests == 0 {
        return Some(0.0);
    }
    let rank = ((q * requests as f64).ceil() as usize).max(1);
    served_sorted.get(rank - 1).map(|&us| us as f64 / 1000.0)
}

impl Row {
    fn new(time_s: f64, site: &str, b: &Bucket, len_s: f64) -> Row {
        let mut l = b.latencies_us.clone();
        l.sort_unstable();
        Row {
            time_s,
            site: site.to_string(),
            offered: b.offered,
            offered_per_s: b.offered as f64 / len_s,
            requests: b.requests,
            served: b.served,
            served_per_s: b.served as f64 / len_s,
            errors: b.requests - b.served,
            error_kinds: b.errors.clone(),
            p50_ms: percentile(&l, 0.50),
            p99_ms: percentile(&l, 0.99),
            p999_ms: percentile(&l, 0.999),
            p99_all_ms: percentile_with_errors(&l, b.requests, 0.99),
            max_ms: percentile(&l, 1.0),
            served_within_ms: OBJECTIVES_MS
                .iter()
                .map(|&ms| {
                    (
                        ms,
                        l.partition_point(|&us| us <= u64::from(ms) * 1000) as u64,
                    )
                })
                .collect(),
        }
    }

    fn kinds(&self) -> String {
        self.error_kinds
            .iter()
            .map(|(k, v)| format!("{k}:{v}"))
            .collect::<Vec<_>>()
            .join(";")
    }
}

/// The results of one replay.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Report {
    pub interval_s: f64,
    pub elapsed_s: f64,
    pub sites: Vec<String>,
    /// Every interval × every site, in time order.
    pub intervals: Vec<Row>,
    /// Per site over the whole run, then a `TOTAL` row.
    pub summary: Vec<Row>,
}

/// Header of [`Report::csv`].
pub const CSV_HEADER: &str =
    "time_s,site,requests,served,served_per_s,errors,p50_ms,p99_ms,max_ms,error_kinds,offered";

impl Report {
    /// Long CSV: one line per interval and site; `error_kinds` is
    /// `kind:count` pairs joined by `;`; `offered` = requests issued in
    /// the interval (by start time).
    pub fn csv(&self) -> String {
        let mut s = format!("{CSV_HEADER}\n");
        for r in &self.intervals {
            let _ = writeln!(
                s,
                "{:.3},{},{},{},{:.1},{},{:.3},{:.3},{:.3},{},{}",
                r.time_s,
                r.site,
                r.requests,
                r.served,
                r.served_per_s,
                r.errors,
                r.p50_ms,
                r.p99_ms,
                r.max_ms,
                r.kinds(),
                r.offered
            );
        }
        s
    }

    /// Wide CSV for plotting: `time_s,<site1>,<site2>,...` of served/s.
    pub fn throughput_csv(&self) -> String {
        let mut s = format!("time_s,{}\n", self.sites.join(","));
        for chunk in self.intervals.chunks(self.sites.len().max(1)) {
            let _ = write!(s, "{:.3}", chunk[0].time_s);
            for r in chunk {
                let _ = write!(s, ",{:.1}", r.served_per_s);
            }
            s.push('\n');
        }
        s
    }

    pub fn json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// The printed summary table.
    pub fn table(&self) -> String {
        let mut s = format!(
            "{:<12} {:>9} {:>9} {:>9} {:>10} {:>9} {:>9} {:>9}  errors by kind\n",
            "site", "requests", "served", "errors", "served/s", "p50 ms", "p99 ms", "max ms"
        );
        for r in &self.summary {
            let _ = writeln!(
                s,
                "{:<12} {:>9} {:>9} {:>9} {:>10.1} {:>9.2} {:>9.2} {:>9.2}  {}",
                r.site,
                r.requests,
                r.served,
                r.errors,
                r.served_per_s,
                r.p50_ms,
                r.p99_ms,
                r.max_ms,
                if r.error_kinds.is_empty() {
                    "-".to_string()
                } else {
                    r.kinds()
                }
            );
        }
        let _ = writeln!(
            s,
            "{:.1} s, interval {:.3} s",
            self.elapsed_s, self.interval_s
        );
        s
    }
}

#[cfg(test)]
mod tests;
