//! The access log: one line per request in HAProxy's `option httplog`
//! format, exactly as HAProxy's lines look in a syslog file, so `halog`
//! and the other tools written for HAProxy logs read it. Written by a
//! dedicated thread so the data path never blocks on the terminal or the
//! disk.
//!
//! ```text
//! Nov 21 15:40:00 edge-1 rdmalb[4242]: 127.0.0.1:41234 [21/Nov/2026:15:40:00.123] web www/n1 0/0/1/2/3 200 1234 - - ---- 3/2/1/1/0 0/0 "GET /index.html HTTP/1.1"
//! ```
//!
//! Fields (HAProxy configuration manual, "HTTP log format"): the syslog
//! prefix (date of the line, host name, `rdmalb[pid]:`), client ip:port,
//! request date (its first byte, UTC, millisecond precision), frontend (the listener, with a
//! `~` suffix on TLS), backend/server (site/node; `<NOSRV>` when no node
//! was chosen, `<NOSITE>` as the backend when no site matched), timers
//! `TR/Tw/Tc/Tr/Ta` in milliseconds (HAProxy 2.x meaning, -1 when the phase
//! was not reached), status (-1 when none), bytes sent to the client (head
//! and body), captured request/response cookies (`- -`: rdmalb captures
//! none), the 4-character termination state, `actconn/feconn/beconn/
//! srv_conn/retries`, `srv_queue/backend_queue`, and the quoted request
//! line. Dates are UTC (HAProxy and syslog write local time).

use std::fmt::Write as _;
use std::io::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::mpsc;

use super::error::ProxyError;
use crate::config::AccessLog as Destination;

/// Milliseconds for the access-log timers.
pub fn ms(d: Duration) -> i64 {
    d.as_millis().min(i64::MAX as u128) as i64
}

/// Records waiting for the writer; beyond this, records are dropped (and
/// counted) rather than slowing the data path.
const QUEUE: usize = 64 * 1024;

/// One request, as logged.
/// HAProxy's timers of one request in milliseconds, -1 when not reached:
/// `tq` request head received, `tw` waiting (queue and node choice), `tc`
/// connection to the node, `tr` node response head, `ta` the whole exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timers {
    pub tq: i64,
    pub tw: i64,
    pub tc: i64,
    pub tr: i64,
    pub ta: i64,
}

impl Timers {
    /// None reached yet.
    pub const NONE: Timers = Timers {
        tq: -1,
        tw: -1,
        tc: -1,
        tr: -1,
        ta: -1,
    };
}

/// HAProxy's connection counts of one request, taken when it is logged
/// (this request included): `actconn` connections open on the process,
/// `feconn` on the listener, `beconn` requests in flight for the site,
/// `srv_conn` for the node, `retries` of this request (each one went to
/// another node, which HAProxy calls a redispatch and marks with `+`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub actconn: usize,
    pub feconn: usize,
    pub beconn: usize,
    pub srv_conn: usize,
    pub retries: u32,
}

/// One request, as logged.
#[derive(Debug, Clone)]
pub struct AccessRecord {
    pub client: SocketAddr,
    /// When the request's first byte arrived (HAProxy's `%tr`).
    pub date: SystemTime,
    pub listener: Arc<str>,
    /// The connection came over TLS (`~` after the frontend name).
    pub tls: bool,
    pub site: Option<Arc<str>>,
    pub node: Option<Arc<str>>,
    pub timers: Timers,
    /// 0 when no response was produced (logged as -1).
    pub status: u16,
    pub bytes: u64,
    /// The first two characters of HAProxy's termination state (the last
    /// two, cookie persistence, are always `--`).
    pub termination: &'static str,
    pub counts: Counts,
    /// `srv_queue/backend_queue`: requests ahead of this one in the node's
    /// queue (rdmalb has none: always 0) and in the proxy's `[qos]`
    /// admission queue when it arrived.
    pub queues: (usize, usize),
    /// `None` when the request could not be parsed (logged as `<BADREQ>`).
    pub method: Option<http::Method>,
    pub target: String,
    pub version: http::Version,
}

/// Handle used by the data path; cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct AccessLogger {
    tx: Option<mpsc::Sender<AccessRecord>>,
}

impl AccessLogger {
    /// Opens the destination and starts the writer thread (none for `off`).
    pub fn start(dest: &Destination) -> Result<AccessLogger, ProxyError> {
        let out: Box<dyn std::io::Write + Send> = match dest {
            Destination::Off => return Ok(AccessLogger { tx: None }),
            Destination::Stdout => Box::new(std::io::stdout()),
            Destination::File(path) => Box::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .map_err(|source| ProxyError::AccessLog {
                        path: path.clone(),
                        source,
                    })?,
            ),
        };
        let (tx, rx) = mpsc::channel(QUEUE);
        std::thread::Builder::new()
            .name("rdmalb-access-log".into())
            .spawn(move || writer(rx, out))
            .map_err(|source| ProxyError::AccessLog {
                path: "(writer thread)".into(),
                source,
            })?;
        Ok(AccessLogger { tx: Some(tx) })
    }

    /// Whether records are wanted at all (skip building them when off).
    pub fn enabled(&self) -> bool {
        self.tx.is_some()
    }

    /// Queues a record without waiting.
    pub fn log(&self, rec: AccessRecord) {
        if let Some(tx) = &self.tx {
            if tx.try_send(rec).is_err() {
                metrics::counter!("rdmalb_access_log_dropped_total").increment(1);
            }
        }
    }
}

fn writer(mut rx: mpsc::Receiver<AccessRecord>, out: Box<dyn std::io::Write + Send>) {
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, out);
    let mut line = String::with_capacity(256);
    let tag = SyslogTag::of_this_process();
    while let Some(rec) = rx.blocking_recv() {
        let mut next = Some(rec);
        while let Some(rec) = next {
            line.clear();
            format_record(&rec, &tag, SystemTime::now(), &mut line);
            line.push('\n');
            if out.write_all(line.as_bytes()).is_err() {
                return;
            }
            next = rx.try_recv().ok();
        }
        // Flush whenever the queue is drained: lines appear promptly at low
        // rates and are batched at high rates.
        if out.flush().is_err() {
            return;
        }
    }
    let _ = out.flush();
}

/// The host and program part of the syslog prefix, as a syslog daemon
/// writes it into a file: `host rdmalb[pid]:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyslogTag {
    pub host: String,
    pub program: String,
    pub pid: u32,
}

impl SyslogTag {
    /// This machine's short host name (as syslog daemons write it) and
    /// this process.
    pub fn of_this_process() -> SyslogTag {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        let host = host.trim().split('.').next().unwrap_or_default();
        SyslogTag {
            host: if host.is_empty() { "localhost" } else { host }.to_string(),
            program: "rdmalb".to_string(),
            pid: std::process::id(),
        }
    }
}

/// Formats one record (without the trailing newline); `now` is the date
/// of the syslog prefix.
pub fn format_record(r: &AccessRecord, tag: &SyslogTag, now: SystemTime, out: &mut String) {
    format_syslog_date(now, out);
    let _ = write!(
        out,
        " {} {}[{}]: {} [",
        tag.host, tag.program, tag.pid, r.client
    );
    format_date(r.date, out);
    let version = match r.version {
        http::Version::HTTP_09 => "HTTP/0.9",
        http::Version::HTTP_10 => "HTTP/1.0",
        http::Version::HTTP_2 => "HTTP/2.0",
        http::Version::HTTP_3 => "HTTP/3.0",
        _ => "HTTP/1.1",
    };
    let Timers { tq, tw, tc, tr, ta } = r.timers;
    let _ = write!(
        out,
        "] {}{} {}/{} {tq}/{tw}/{tc}/{tr}/{ta} ",
        r.listener,
        if r.tls { "~" } else { "" },
        r.site.as_deref().unwrap_or("<NOSITE>"),
        r.node.as_deref().unwrap_or("<NOSRV>"),
    );
    if r.status == 0 {
        out.push_str("-1");
    } else {
        let _ = write!(out, "{}", r.status);
    }
    let c = r.counts;
    let _ = write!(
        out,
        " {} - - {}-- {}/{}/{}/{}/{}{} {}/{} \"",
        r.bytes,
        r.termination,
        c.actconn,
        c.feconn,
        c.beconn,
        c.srv_conn,
        if c.retries > 0 { "+" } else { "" },
        c.retries,
        r.queues.0,
        r.queues.1,
    );
    let Some(method) = &r.method else {
        out.push_str("<BADREQ>\"");
        return;
    };
    let _ = write!(out, "{method} ");
    // The target came from the network: keep the line one line, and its
    // fields where halog counts them (no space, no quote).
    for ch in r.target.chars() {
        if ch.is_control() || ch == '"' || ch == ' ' {
            let _ = write!(out, "%{:02X}", ch as u32 & 0xff);
        } else {
            out.push(ch);
        }
    }
    let _ = write!(out, " {version}\"");
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// A UTC date broken down: year, month (1-12), day, hour, minute, second,
/// millisecond.
fn civil(t: SystemTime) -> (i64, usize, u32, u64, u64, u64, u32) {
    let d = rdmalb_base::time::since_epoch(t);
    let secs = d.as_secs();
    let (y, m, day) = civil_from_days((secs / 86_400) as i64);
    let rem = secs % 86_400;
    let (h, min, s) = (rem / 3600, (rem / 60) % 60, rem % 60);
    (y, m as usize, day, h, min, s, d.subsec_millis())
}

/// Syslog's (RFC 3164) `Nov  5 15:40:00`, day padded with a space (UTC).
fn format_syslog_date(t: SystemTime, out: &mut String) {
    let (_, m, day, h, min, s, _) = civil(t);
    let _ = write!(out, "{} {day:>2} {h:02}:{min:02}:{s:02}", MONTHS[m - 1]);
}

/// `21/Nov/2026:15:40:00.123` (UTC).
fn format_date(t: SystemTime, out: &mut String) {
    let (y, m, day, h, min, s, ms) = civil(t);
    let _ = write!(
        out,
        "{day:02}/{}/{y:04}:{h:02}:{min:02}:{s:02}.{ms:03}",
        MONTHS[m - 1]
    );
}

/// Days since 1970-01-01 → (year, month 1-12, day 1-31); Howard Hinnant's
/// `civil_from_days`.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests;
