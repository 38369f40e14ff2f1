//! The stick-table share task (`[stick_share]`, `docs/rate-limits.md`):
//! every `interval` it sends each shared table's pending increments to
//! the other proxies (UDP, from `listen`), and it adds what they send into
//! this proxy's tables. One task; the request path only records its
//! increments in the table's pending map (`rules/stick/share.rs`).
//!
//! A datagram is taken only when it comes from a listed peer, its tag
//! verifies under the key, its sequence number is above the last one
//! taken from that peer and not older than [`MAX_AGE`] (so a captured
//! datagram cannot be replayed, even across a restart of this proxy), and
//! it names a shared table. Anything else is dropped, counted in
//! `rdmalb_stick_share_dropped_total{reason}` and logged (the first of a
//! reason, then at most once per [`LOG_EVERY`] with the count since).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use tokio::net::UdpSocket;
use tokio::sync::watch;

use super::state::{Runtime, Snapshot};
use crate::rules::stick::now_ms;
use crate::rules::stick::share::wire::{self, MAX_DATAGRAM};
use crate::rules::stick::share::{MergeRefusal, Share};

/// `rdmalb_stick_share_datagrams_sent_total` counter.
pub const SENT: &str = "rdmalb_stick_share_datagrams_sent_total";
/// `rdmalb_stick_share_datagrams_received_total` counter: taken.
pub const RECEIVED: &str = "rdmalb_stick_share_datagrams_received_total";
/// `rdmalb_stick_share_dropped_total{reason}` counter: datagrams refused
/// (unknown_peer, not_share, bad_tag, malformed, replay, unknown_table)
/// and not sent (send_error).
pub const DROPPED: &str = "rdmalb_stick_share_dropped_total";
/// `rdmalb_stick_share_keys_refused_total{table,reason}` counter: keys
/// whose increments were not shared (pending_full) or not added
/// (table_full, wrong_key).
pub const KEYS_REFUSED: &str = "rdmalb_stick_share_keys_refused_total";

/// The oldest datagram taken, by its sequence number (µs since the
/// epoch): proxies' clocks must agree within this.
pub const MAX_AGE: Duration = Duration::from_secs(30);
/// Drops of one reason are logged at most this often.
pub const LOG_EVERY: Duration = Duration::from_secs(10);

fn unix_micros() -> u64 {
    rdmalb_base::time::since_epoch(SystemTime::now()).as_micros() as u64
}

/// The socket bound to a `[stick_share] listen` address.
struct Bound {
    addr: SocketAddr,
    socket: UdpSocket,
}

/// Per-reason drop logging, throttled.
#[derive(Default)]
struct DropLog {
    last: HashMap<&'static str, (Instant, u64)>,
}

impl DropLog {
    fn drop(&mut self, reason: &'static str, from: SocketAddr, detail: &str) {
        ::metrics::counter!(DROPPED, "reason" => reason).increment(1);
        let now = Instant::now();
        let e = self.last.entry(reason).or_insert((now - LOG_EVERY, 0));
        e.1 += 1;
        if now.duration_since(e.0) >= LOG_EVERY {
            tracing::warn!(
                %from, reason, dropped = e.1,
                "stick_share: datagram dropped: {detail} ({} such since the last report)", e.1
            );
            *e = (now, 0);
        }
    }
}

/// State of the task between ticks.
struct Sharing {
    bound: Option<Bound>,
    seq: u64,
    last_seq: HashMap<SocketAddr, u64>,
    log: DropLog,
}

impl Sharing {
    /// Binds `listen` unless bound there already (a reload may move it).
    async fn bind(&mut self, listen: SocketAddr) -> bool {
        if self.bound.as_ref().is_some_and(|b| b.addr == listen) {
            return true;
        }
        self.bound = None;
        match UdpSocket::bind(listen).await {
            Ok(socket) => {
                tracing::info!(address = %listen, "stick_share: listening");
                self.bound = Some(Bound {
                    addr: listen,
                    socket,
                });
                true
            }
            Err(e) => {
                tracing::error!(address = %listen, error = %e, "stick_share: cannot bind stick_share.listen; shared tables count locally only (retried every second)");
                false
            }
        }
    }

    /// Sends every shared table's pending increments to every peer.
    async fn flush(&mut self, snap: &Snapshot, share: &Share) {
        let Some(b) = &self.bound else { return };
        for t in snap.config.rules.tables.iter().filter(|t| t.is_shared()) {
            let refused = t.take_pending_refused();
            if refused > 0 {
                ::metrics::counter!(KEYS_REFUSED, "table" => t.name.clone(), "reason" => "pending_full")
                    .increment(refused);
            }
            let entries = t.take_pending();
            if entries.is_empty() {
                continue;
            }
            self.seq = self.seq.max(unix_micros());
            for d in wire::encode(&share.key, share.listen, &mut self.seq, &t.name, &entries) {
                for peer in &share.peers {
                    match b.socket.send_to(&d, peer).await {
                        Ok(_) => ::metrics::counter!(SENT).increment(1),
                        Err(e) => self.log.drop("send_error", *peer, &e.to_string()),
                    }
                }
            }
        }
    }

    /// Takes one received datagram.
    fn receive(&mut self, snap: &Snapshot, share: &Share, from: SocketAddr, bytes: &[u8]) {
        if !share.peers.contains(&from) {
            return self.log.drop(
                "unknown_peer",
                from,
                "not from an address in stick_share.peers",
            );
        }
        let d = match wire::decode(&share.key, from, bytes) {
            Ok(d) => d,
            Err(e) => {
                let why = match e {
                    wire::WireError::BadTag => "its tag does not verify (another key, or altered)",
                    wire::WireError::NotShare => "not a share datagram",
                    wire::WireError::Malformed => "malformed after a valid tag",
                };
                return self.log.drop(e.reason(), from, why);
            }
        };
        let oldest = unix_micros().saturating_sub(MAX_AGE.as_micros() as u64);
        let last = self.last_seq.get(&from).copied().unwrap_or(0);
        if d.seq <= last || d.seq < oldest {
            return self.log.drop("replay", from, "sequence number already seen or too old (a replay, or clocks apart by more than 30 s)");
        }
        self.last_seq.insert(from, d.seq);
        let Some(t) = snap.config.rules.table(&d.table).filter(|t| t.is_shared()) else {
            return self.log.drop(
                "unknown_table",
                from,
                &format!("no shared [[stick_table]] named `{}` here", d.table),
            );
        };
        ::metrics::counter!(RECEIVED).increment(1);
        let now = now_ms();
        for (k, delta) in d.entries {
            if let Err(r) = t.merge(k, &delta, now) {
                let reason = match r {
                    MergeRefusal::Full => "table_full",
                    MergeRefusal::WrongKey => "wrong_key",
                };
                ::metrics::counter!(KEYS_REFUSED, "table" => t.name.clone(), "reason" => reason)
                    .increment(1);
            }
        }
    }
}

/// Runs the share while the proxy runs; idle while the config has no
/// `[stick_share]`. On shutdown the last increments are sent.
pub async fn run(runtime: Arc<Runtime>, mut shutdown: watch::Receiver<bool>) {
    let mut s = Sharing {
        bound: None,
        seq: unix_micros(),
        last_seq: HashMap::new(),
        log: DropLog::default(),
    };
    let mut buf = vec![0u8; MAX_DATAGRAM + 1];
    let mut next_flush = tokio::time::Instant::now();
    loop {
        let snap = runtime.snapshot.load_full();
        let Some(share) = snap.config.rules.share.clone() else {
            s.bound = None;
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_secs(1)) => continue,
                _ = rdmalb_base::shutdown::requested(&mut shutdown) => return,
            }
        };
        if !s.bind(share.listen).await {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_secs(1)) => continue,
                _ = rdmalb_base::shutdown::requested(&mut shutdown) => return,
            }
        }
        let Some(b) = &s.bound else { continue };
        tokio::select! {
            _ = tokio::time::sleep_until(next_flush) => {
                next_flush = tokio::time::Instant::now() + share.interval;
                s.flush(&snap, &share).await;
            }
            r = b.socket.recv_from(&mut buf) => match r {
                Ok((n, from)) => s.receive(&snap, &share, from, &buf[..n]),
                // ICMP port unreachable from a peer that is down, on Linux.
                Err(e) => tracing::debug!(error = %e, "stick_share: receive"),
            },
            _ = rdmalb_base::shutdown::requested(&mut shutdown) => {
                s.flush(&snap, &share).await;
                return;
            }
        }
    }
}
