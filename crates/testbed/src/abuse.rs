//! `rdmalb-testbed abuse`: an attack client for one listener, the hostile
//! half of the "service under attack" measurement (docs/reliability.md; the
//! well-behaved half is wrk or h2load, run beside it by
//! `bench/abuse/run.sh`, which also runs HAProxy under the same attacks).
//!
//! Each [`Attack`] runs from many connections for at most
//! [`Options::duration`] and at most [`Options::max_ops`] operations
//! (bytes, requests, frames or handshakes, whatever the attack counts), at
//! a paced rate where it floods, and only against loopback addresses
//! (127.0.0.0/8, ::1): it refuses any other target or source. Closed
//! connections are reopened until time or budget runs out. What the attack
//! did and what the server did back (closes, statuses, GOAWAYs, refused
//! streams) is counted in a [`Tally`] and printed as one JSON object.
//!
//! - [`slow`]: slowloris, slow POST body, slow reader (tiny receive buffer,
//!   never reads), connection flood past `max_connections`;
//! - [`h2`]: HTTP/2 attacks written frame by frame (rapid reset, CONTINUATION
//!   flood, HPACK bomb, PING and SETTINGS floods, tiny DATA frames, stream
//!   window stall), over h2c prior knowledge or TLS with ALPN h2;
//! - [`tls`]: the TLS client side (certificates are not checked: the
//!   target is our own proxy) and the handshake flood;
//! - [`report`]: `rdmalb-testbed abuse-report`, the side-by-side table
//!   from the bench script's measurements.

pub mod h2;
pub mod report;
pub mod slow;
pub mod tls;

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpSocket, TcpStream};

/// Why an attack could not run.
#[derive(Debug, thiserror::Error)]
pub enum AbuseError {
    #[error("{what} {addr} is not a loopback address: the attack client only runs on 127.0.0.0/8 or ::1")]
    NotLoopback { what: &'static str, addr: IpAddr },
    #[error("unknown attack `{0}` (accepted: {list})", list = Attack::names().join(", "))]
    UnknownAttack(String),
    #[error("{0}")]
    Invalid(String),
    #[error("TLS client set-up: {0}")]
    Tls(String),
    #[error("cannot start the async runtime: {0}")]
    Runtime(#[source] std::io::Error),
}

/// The attacks, by their command-line names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Attack {
    /// Many connections, each sending a request head one byte at a time.
    Slowloris,
    /// A POST announcing a large body, sent one byte at a time.
    SlowPost,
    /// Requests for a large response from sockets with a tiny receive
    /// buffer that are never read (a zero window).
    SlowRead,
    /// More idle connections than the listener admits, reopened as they close.
    ConnFlood,
    /// Full TLS handshakes (no resumption), each connection closed at once.
    TlsFlood,
    /// HTTP/2 streams opened and reset at once (CVE-2023-44487).
    RapidReset,
    /// A header block that never ends: CONTINUATION frames without
    /// END_HEADERS (the 2024 CONTINUATION flood class).
    Continuation,
    /// A large header entered once in the HPACK dynamic table, then
    /// referenced thousands of times per header block.
    HpackBomb,
    /// PING frames, never reading the ACKs.
    PingFlood,
    /// SETTINGS frames, never reading the ACKs.
    SettingsFlood,
    /// A POST body sent as empty DATA frames.
    TinyData,
    /// Streams for large responses with a zero stream window, never
    /// opened by WINDOW_UPDATE.
    WindowStall,
}

impl Attack {
    pub const ALL: [Attack; 12] = [
        Attack::Slowloris,
        Attack::SlowPost,
        Attack::SlowRead,
        Attack::ConnFlood,
        Attack::TlsFlood,
        Attack::RapidReset,
        Attack::Continuation,
        Attack::HpackBomb,
        Attack::PingFlood,
        Attack::SettingsFlood,
        Attack::TinyData,
        Attack::WindowStall,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Attack::Slowloris => "slowloris",
            Attack::SlowPost => "slow-post",
            Attack::SlowRead => "slow-read",
            Attack::ConnFlood => "conn-flood",
            Attack::TlsFlood => "tls-flood",
            Attack::RapidReset => "rapid-reset",
            Attack::Continuation => "continuation",
            Attack::HpackBomb => "hpack-bomb",
            Attack::PingFlood => "ping-flood",
            Attack::SettingsFlood => "settings-flood",
            Attack::TinyData => "tiny-data",
            Attack::WindowStall => "window-stall",
        }
    }

    fn names() -> Vec<&'static str> {
        Self::ALL.iter().map(|a| a.name()).collect()
    }

    pub fn parse(s: &str) -> Result<Attack, AbuseError> {
        Self::ALL
            .into_iter()
            .find(|a| a.name() == s)
            .ok_or_else(|| AbuseError::UnknownAttack(s.to_string()))
    }

    /// Whether the attack speaks HTTP/2 (the well-behaved client beside it
    /// should too: h2load rather than wrk).
    pub fn is_h2(self) -> bool {
        matches!(
            self,
            Attack::RapidReset
                | Attack::Continuation
                | Attack::HpackBomb
                | Attack::PingFlood
                | Attack::SettingsFlood
                | Attack::TinyData
                | Attack::WindowStall
        )
    }
}

/// One attack's parameters.
#[derive(Debug, Clone)]
pub struct Options {
    pub target: SocketAddr,
    /// Connect from this address (loopback), e.g. 127.0.0.2 so the
    /// attacker stands apart from the well-behaved client in logs.
    pub source: Option<IpAddr>,
    pub attack: Attack,
    /// Stop after this long.
    pub duration: Duration,
    /// Concurrent connections.
    pub connections: usize,
    /// Connections opened per second at the start (a ramp, so the attack
    /// does not begin with a SYN burst of its own).
    pub ramp: u64,
    /// Slow attacks: the gap between two bytes (or two pipelined requests).
    pub interval: Duration,
    /// Floods: operations per second over all connections (0: unpaced).
    pub rate: u64,
    /// Stop after this many operations.
    pub max_ops: u64,
    /// Speak TLS (ALPN h2 for the HTTP/2 attacks); always for `tls-flood`.
    pub tls: bool,
    /// Host header / :authority.
    pub host: String,
    /// Path of a large response (slow reader, window stall).
    pub large_path: String,
    /// Path of a POST (slow POST, tiny DATA).
    pub post_path: String,
}

impl Options {
    /// Refuses anything but loopback, and counts that make no sense.
    pub fn check(&self) -> Result<(), AbuseError> {
        if !self.target.ip().is_loopback() {
            return Err(AbuseError::NotLoopback {
                what: "target",
                addr: self.target.ip(),
            });
        }
        if let Some(s) = self.source {
            if !s.is_loopback() {
                return Err(AbuseError::NotLoopback {
                    what: "source",
                    addr: s,
                });
            }
        }
        if self.connections == 0 || self.connections > 60_000 {
            return Err(AbuseError::Invalid(format!(
                "--connections {}: expected 1..60000",
                self.connections
            )));
        }
        if self.duration.is_zero() || self.duration > Duration::from_secs(3600) {
            return Err(AbuseError::Invalid(
                "--duration: expected more than 0 and at most 1h".into(),
            ));
        }
        if self.ramp == 0 {
            return Err(AbuseError::Invalid("--ramp must be more than 0".into()));
        }
        if self.interval.is_zero() {
            return Err(AbuseError::Invalid("--interval must be more than 0".into()));
        }
        Ok(())
    }
}

/// What an attack did and what the server did back. Every field is a
/// count over the whole run.
#[derive(Debug, Default)]
pub struct Tally {
    /// Connections established.
    pub connected: AtomicU64,
    /// Connects that failed (refused, timed out: a full backlog).
    pub connect_failed: AtomicU64,
    /// Connections the server ended (EOF, reset, or a write that failed).
    pub closed_by_server: AtomicU64,
    /// Operations done (the budget's unit: bytes trickled, requests,
    /// streams, frames or handshakes).
    pub ops: AtomicU64,
    /// Bytes written.
    pub bytes_sent: AtomicU64,
    /// HTTP/1 responses (status lines) seen, and how many were 4xx/5xx.
    pub responses: AtomicU64,
    pub error_responses: AtomicU64,
    /// HTTP/2: HEADERS frames received (responses), RST_STREAM received
    /// (refused or cancelled streams), GOAWAY received.
    pub h2_headers: AtomicU64,
    pub h2_resets: AtomicU64,
    pub h2_goaways: AtomicU64,
    /// The error code of the last GOAWAY received (RFC 9113 section 7).
    pub h2_last_goaway_code: AtomicU64,
    /// TLS handshakes completed and failed.
    pub handshakes: AtomicU64,
    pub handshake_failed: AtomicU64,
}

/// [`Tally`] as printed.
#[derive(Debug, Serialize)]
pub struct Outcome {
    pub attack: Attack,
    pub target: SocketAddr,
    pub tls: bool,
    pub seconds: f64,
    pub connections: usize,
    pub connected: u64,
    pub connect_failed: u64,
    pub closed_by_server: u64,
    pub ops: u64,
    pub ops_unit: &'static str,
    pub bytes_sent: u64,
    pub responses: u64,
    pub error_responses: u64,
    pub h2_headers: u64,
    pub h2_resets: u64,
    pub h2_goaways: u64,
    pub h2_last_goaway_code: Option<u64>,
    pub handshakes: u64,
    pub handshake_failed: u64,
}

impl Outcome {
    /// One line per field that is not zero, for a terminal.
    pub fn text(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default() + "\n"
    }
}

fn ops_unit(a: Attack) -> &'static str {
    match a {
        Attack::Slowloris | Attack::SlowPost => "bytes trickled",
        Attack::SlowRead => "requests",
        Attack::ConnFlood => "connections",
        Attack::TlsFlood => "handshakes",
        Attack::RapidReset | Attack::HpackBomb | Attack::WindowStall => "streams",
        Attack::Continuation | Attack::PingFlood | Attack::SettingsFlood | Attack::TinyData => {
            "frames"
        }
    }
}

/// What every connection task of one run shares: the options, the tally,
/// the deadline and the operation budget.
pub struct Run {
    pub opts: Options,
    pub tally: Arc<Tally>,
    pub deadline: tokio::time::Instant,
    budget: AtomicU64,
    tls: Option<tls::Connector>,
}

impl Run {
    /// True once the time or the operation budget is used up.
    pub fn over(&self) -> bool {
        tokio::time::Instant::now() >= self.deadline || self.budget.load(Ordering::Relaxed) == 0
    }

    /// Takes up to `want` operations from the budget; returns how many
    /// were granted (0 when it is used up).
    pub fn take(&self, want: u64) -> u64 {
        let mut left = self.budget.load(Ordering::Relaxed);
        loop {
            let n = want.min(left);
            if n == 0 {
                return 0;
            }
            match self.budget.compare_exchange_weak(
                left,
                left - n,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    self.tally.ops.fetch_add(n, Ordering::Relaxed);
                    return n;
                }
                Err(now) => left = now,
            }
        }
    }

    /// A TCP connection to the target (from `--source`), with a receive
    /// buffer of `rcvbuf` bytes when given (set before connecting, so the
    /// advertised window is small from the handshake on). Counted.
    pub async fn connect(&self, rcvbuf: Option<u32>) -> Option<TcpStream> {
        let r = async {
            let sock = if self.opts.target.is_ipv4() {
                TcpSocket::new_v4()?
            } else {
                TcpSocket::new_v6()?
            };
            if let Some(n) = rcvbuf {
                sock.set_recv_buffer_size(n)?;
            }
            if let Some(src) = self.opts.source {
                sock.bind(SocketAddr::new(src, 0))?;
            }
            sock.connect(self.opts.target).await
        };
        let left = self
            .deadline
            .saturating_duration_since(tokio::time::Instant::now());
        match tokio::time::timeout(left.min(Duration::from_secs(5)), r).await {
            Ok(Ok(s)) => {
                let _ = s.set_nodelay(true);
                self.tally.connected.fetch_add(1, Ordering::Relaxed);
                Some(s)
            }
            _ => {
                self.tally.connect_failed.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// [`connect`](Self::connect), then TLS when `--tls` (ALPN `h2` when
    /// `h2`, else `http/1.1`).
    pub async fn connect_stream(&self, h2: bool) -> Option<Box<dyn Stream>> {
        let tcp = self.connect(None).await?;
        match &self.tls {
            None => Some(Box::new(tcp)),
            Some(c) => match c.handshake(tcp, h2).await {
                Ok(s) => {
                    self.tally.handshakes.fetch_add(1, Ordering::Relaxed);
                    Some(Box::new(s))
                }
                Err(_) => {
                    self.tally.handshake_failed.fetch_add(1, Ordering::Relaxed);
                    None
                }
            },
        }
    }

    pub fn closed(&self) {
        self.tally.closed_by_server.fetch_add(1, Ordering::Relaxed);
    }

    pub fn sent(&self, n: usize) {
        self.tally.bytes_sent.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// Sleeps `d`, or less when the run ends first; false when it ended.
    pub async fn pause(&self, d: Duration) -> bool {
        let until = (tokio::time::Instant::now() + d).min(self.deadline);
        tokio::time::sleep_until(until).await;
        !self.over()
    }
}

/// The pacing period of the floods: a paced connection sends its share of
/// `--rate` in batches this far apart.
pub const TICK: Duration = Duration::from_millis(10);

/// Paces one connection's operations at its share of `--rate`.
pub struct Pacer {
    next: tokio::time::Instant,
    /// Time per operation (`None`: unpaced).
    gap: Option<Duration>,
}

impl Pacer {
    pub fn new(r: &Run) -> Pacer {
        let gap = (r.opts.rate > 0)
            .then(|| Duration::from_secs_f64(r.opts.connections as f64 / r.opts.rate as f64));
        Pacer {
            next: tokio::time::Instant::now(),
            gap,
        }
    }

    /// Operations to send in one batch: a [`TICK`]'s worth (at least one),
    /// or 64 when unpaced.
    pub fn batch(&self) -> u64 {
        match self.gap {
            None => 64,
            Some(g) => ((TICK.as_secs_f64() / g.as_secs_f64()) as u64).max(1),
        }
    }

    /// The next batch of at most `max` operations: waits until it is due
    /// and takes it from the run's budget; `None` once the run is over
    /// (time or budget).
    pub async fn next(&mut self, r: &Run, max: u64) -> Option<u64> {
        let n = self.batch().min(max);
        if !self.wait(r, n).await {
            return None;
        }
        Some(r.take(n)).filter(|&n| n > 0)
    }

    /// Waits until `n` more operations are due; false once the run is over.
    pub async fn wait(&mut self, r: &Run, n: u64) -> bool {
        match self.gap {
            None => tokio::task::yield_now().await,
            Some(g) => {
                let now = tokio::time::Instant::now();
                // A connection that fell behind (a reconnect) does not burst.
                if self.next < now {
                    self.next = now;
                }
                self.next += g * n as u32;
                tokio::time::sleep_until(self.next.min(r.deadline)).await;
            }
        }
        !r.over()
    }
}

/// A client byte stream: TCP or TLS over it.
pub trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

/// Runs one attack to its end and returns what happened.
pub async fn run(opts: Options) -> Result<Outcome, AbuseError> {
    opts.check()?;
    let tls = if opts.tls || opts.attack == Attack::TlsFlood {
        Some(tls::Connector::new(&opts.host)?)
    } else {
        None
    };
    let started = Instant::now();
    let run = Arc::new(Run {
        deadline: tokio::time::Instant::now() + opts.duration,
        budget: AtomicU64::new(opts.max_ops),
        tally: Arc::default(),
        tls,
        opts,
    });
    let mut tasks = tokio::task::JoinSet::new();
    // Connections are opened in a ramp (`--ramp` per second).
    let ramp = Duration::from_secs_f64(1.0 / run.opts.ramp as f64);
    for i in 0..run.opts.connections {
        let r = Arc::clone(&run);
        tasks.spawn(async move {
            let attack = r.opts.attack;
            match attack {
                Attack::Slowloris | Attack::SlowPost => slow::trickle(&r, i).await,
                Attack::SlowRead => slow::slow_read(&r).await,
                Attack::ConnFlood => slow::hold_idle(&r).await,
                Attack::TlsFlood => tls::handshake_flood(&r).await,
                _ => h2::attack(&r).await,
            }
        });
        if !run.pause(ramp).await {
            break;
        }
    }
    // Every task watches the deadline; the abort is the bound for one
    // blocked in a write the server never drains.
    let grace = run
        .deadline
        .saturating_duration_since(tokio::time::Instant::now())
        + Duration::from_secs(2);
    let _ = tokio::time::timeout(grace, async { while tasks.join_next().await.is_some() {} }).await;
    tasks.abort_all();
    let t = &run.tally;
    let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
    Ok(Outcome {
        attack: run.opts.attack,
        target: run.opts.target,
        tls: run.tls.is_some(),
        seconds: (started.elapsed().as_secs_f64() * 10.0).round() / 10.0,
        connections: run.opts.connections,
        connected: get(&t.connected),
        connect_failed: get(&t.connect_failed),
        closed_by_server: get(&t.closed_by_server),
        ops: get(&t.ops),
        ops_unit: ops_unit(run.opts.attack),
        bytes_sent: get(&t.bytes_sent),
        responses: get(&t.responses),
        error_responses: get(&t.error_responses),
        h2_headers: get(&t.h2_headers),
        h2_resets: get(&t.h2_resets),
        h2_goaways: get(&t.h2_goaways),
        h2_last_goaway_code: (get(&t.h2_goaways) > 0).then(|| get(&t.h2_last_goaway_code)),
        handshakes: get(&t.handshakes),
        handshake_failed: get(&t.handshake_failed),
    })
}

#[cfg(test)]
mod tests;
