//! The invariant checker: reads every node's window (its shm file, mapped
//! read-only beside the proxies, whatever transport they use) every few
//! milliseconds and records what breaks the protocol's claims:
//!
//! - a node's role epoch never decreases (sidecar restarts included);
//! - a claim record (node, epoch) never names two proxies;
//!
//! and keeps what the end-of-run checks need: the claim records seen and
//! each node's last role, applied epoch and status.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdmalb_window::layout::word;
use rdmalb_window::{Expect, RemoteWindow, RoleStatus, RoleWord, ShmWindow};

/// One node's window as last read.
#[derive(Debug, Clone, Default)]
pub struct Seen {
    pub role: Option<RoleWord>,
    pub applied: u64,
    pub status: Option<RoleStatus>,
    /// When the window was last read.
    pub read_at: Option<Instant>,
}

/// What the checker found.
#[derive(Debug, Clone, Default)]
pub struct Findings {
    /// Invariant violations, with the time since the start.
    pub violations: Vec<String>,
    /// Claim records: (node, epoch) → (proxy, claim time in unix ms).
    pub claims: BTreeMap<(usize, u64), (u64, u64)>,
    /// Role changes seen, per node.
    pub moves: Vec<u64>,
    /// Sidecar restarts noticed (a new window file).
    pub reopened: Vec<u64>,
    pub nodes: Vec<Seen>,
    /// Polls made.
    pub polls: u64,
}

struct Node {
    path: PathBuf,
    ino: Option<u64>,
    window: Option<ShmWindow>,
    last_epoch: u64,
}

/// Polls `paths` every `every` until `stop` is set; findings go to `out`.
pub async fn run(
    paths: Vec<PathBuf>,
    every: Duration,
    start: Instant,
    out: Arc<Mutex<Findings>>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut nodes: Vec<Node> = paths
        .into_iter()
        .map(|path| Node {
            path,
            ino: None,
            window: None,
            last_epoch: 0,
        })
        .collect();
    if let Ok(mut f) = out.lock() {
        f.moves = vec![0; nodes.len()];
        f.reopened = vec![0; nodes.len()];
        f.nodes = vec![Seen::default(); nodes.len()];
    }
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            _ = tick.tick() => {}
        }
        for (i, n) in nodes.iter_mut().enumerate() {
            poll(i, n, start, &out).await;
        }
        if let Ok(mut f) = out.lock() {
            f.polls += 1;
        }
    }
}

async fn poll(i: usize, n: &mut Node, start: Instant, out: &Mutex<Findings>) {
    // A restarted sidecar makes a new file (new inode): map that one.
    let ino = std::fs::metadata(&n.path).ok().map(|m| m.ino());
    if ino != n.ino || n.window.is_none() {
        n.window = ino.and_then(|_| ShmWindow::open(&n.path, &Expect::default()).ok());
        if n.window.is_some() && n.ino.is_some() && ino != n.ino {
            if let Ok(mut f) = out.lock() {
                f.reopened[i] += 1;
            }
        }
        n.ino = if n.window.is_some() { ino } else { None };
    }
    let Some(w) = &n.window else { return };
    // The claim record is whole when its epoch word is the same non-zero
    // value before and after the other two (the writer clears it first).
    let (Ok(ce), Ok(cp), Ok(ct), Ok(ce2), Ok(role), Ok(applied), Ok(status)) = (
        w.read_word(word::CLAIM_EPOCH).await,
        w.read_word(word::CLAIM_PROXY).await,
        w.read_word(word::CLAIM_TIME).await,
        w.read_word(word::CLAIM_EPOCH).await,
        w.read_word(word::ROLE).await,
        w.read_word(word::ROLE_APPLIED).await,
        w.read_word(word::ROLE_STATUS).await,
    ) else {
        return;
    };
    let ce = if ce == ce2 { ce } else { 0 };
    let Ok(role) = RoleWord::decode(role) else {
        return;
    };
    let at = start.elapsed().as_secs_f64();
    let Ok(mut f) = out.lock() else { return };
    if role.epoch == 0 {
        // A window being created: the sidecar has not written its role yet.
        return;
    }
    if role.epoch < n.last_epoch {
        f.violations.push(format!(
            "t={at:.2}s n{}: role epoch went back from {} to {} ({role})",
            i + 1,
            n.last_epoch,
            role.epoch
        ));
    } else if role.epoch > n.last_epoch && n.last_epoch != 0 {
        f.moves[i] += 1;
    }
    n.last_epoch = n.last_epoch.max(role.epoch);
    if cp != 0 && ce != 0 {
        match f.claims.get(&(i, ce)) {
            Some((p, _)) if *p != cp => {
                let was = *p;
                f.violations.push(format!(
                    "t={at:.2}s n{}: epoch {ce} claimed by proxy {was} and by proxy {cp}",
                    i + 1
                ));
            }
            Some(_) => {}
            None => {
                f.claims.insert((i, ce), (cp, ct));
            }
        }
    }
    f.nodes[i] = Seen {
        role: Some(role),
        applied,
        status: RoleStatus::decode(status).ok(),
        read_at: Some(Instant::now()),
    };
}

/// Claims per proxy id made at or after `since_ms` (unix ms).
pub fn claims_by_proxy(f: &Findings, since_ms: &BTreeMap<u64, u64>) -> BTreeMap<u64, u64> {
    let mut by = BTreeMap::new();
    for (proxy, at) in f.claims.values() {
        if since_ms.get(proxy).is_some_and(|s| at >= s) {
            *by.entry(*proxy).or_insert(0) += 1;
        }
    }
    by
}

/// The nodes (0-based) not settled: not ACTIVE with their status OK, or
/// not read since `since`.
pub fn unsettled(f: &Findings, since: Instant) -> BTreeSet<usize> {
    f.nodes
        .iter()
        .enumerate()
        .filter(|(_, s)| {
            if s.read_at.is_none_or(|t| t < since) {
                return true;
            }
            let Some(r) = s.role else { return true };
            let ok = s.status.is_some_and(|st| {
                st.epoch == r.epoch && st.code == rdmalb_window::RoleStatusCode::Ok
            });
            s.applied != r.epoch || !ok
        })
        .map(|(i, _)| i)
        .collect()
}
