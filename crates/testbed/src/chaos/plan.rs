//! The seeded fault schedule: every fault, its target, when it starts and
//! how long it lasts, drawn up front from the seed, so the same seed replays
//! the same schedule (the timing of the system under test is not replayed:
//! it is real processes on a real kernel).

use std::fmt;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// One kind of fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// SIGKILL a proxy, restart it after the fault's duration.
    KillProxy,
    /// SIGSTOP a proxy, SIGCONT after the duration.
    StopProxy,
    /// Restart a proxy with its wall clock skewed (within the allowance).
    SkewProxy,
    /// SIGKILL a sidecar (preferably mid-apply), restart it later.
    KillSidecar,
    /// SIGSTOP a sidecar, SIGCONT later.
    StopSidecar,
    /// The node's app reload command fails for the duration.
    ReloadFails,
    /// SIGKILL the node's app, restart it later.
    KillApp,
    /// Relay between proxies and the sidecar's responder: delay.
    LinkDelay,
    /// Relay: discard everything.
    LinkDrop,
    /// Relay: close every connection, refuse new ones.
    LinkCut,
    /// Relay: replies lost, requests delivered.
    LinkHalfOpen,
}

impl Kind {
    pub const ALL: [Kind; 11] = [
        Kind::KillProxy,
        Kind::StopProxy,
        Kind::SkewProxy,
        Kind::KillSidecar,
        Kind::StopSidecar,
        Kind::ReloadFails,
        Kind::KillApp,
        Kind::LinkDelay,
        Kind::LinkDrop,
        Kind::LinkCut,
        Kind::LinkHalfOpen,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::KillProxy => "kill-proxy",
            Kind::StopProxy => "stop-proxy",
            Kind::SkewProxy => "clock-skew-proxy",
            Kind::KillSidecar => "kill-sidecar",
            Kind::StopSidecar => "stop-sidecar",
            Kind::ReloadFails => "reload-fails",
            Kind::KillApp => "kill-app",
            Kind::LinkDelay => "link-delay",
            Kind::LinkDrop => "link-drop",
            Kind::LinkCut => "link-cut",
            Kind::LinkHalfOpen => "link-half-open",
        }
    }

    /// Whether the fault targets a proxy (else a node).
    pub fn on_proxy(self) -> bool {
        matches!(self, Kind::KillProxy | Kind::StopProxy | Kind::SkewProxy)
    }

    /// Whether the fault needs the tcp transport (a relay).
    pub fn needs_tcp(self) -> bool {
        matches!(
            self,
            Kind::LinkDelay | Kind::LinkDrop | Kind::LinkCut | Kind::LinkHalfOpen
        )
    }
}

/// One scheduled fault.
#[derive(Debug, Clone, PartialEq)]
pub struct Fault {
    /// Start, from the beginning of the fault phase.
    pub at: Duration,
    pub kind: Kind,
    /// Proxy index or node index.
    pub target: usize,
    pub lasts: Duration,
    /// A kind-specific amount: the delay (LinkDelay), the clock offset in
    /// ms, signed (SkewProxy).
    pub amount: i64,
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let who = if self.kind.on_proxy() {
            format!("proxy{}", self.target + 1)
        } else {
            format!("n{}", self.target + 1)
        };
        write!(
            f,
            "t={:>7.2}s {:<16} {:<7} for {:.2}s",
            self.at.as_secs_f64(),
            self.kind.name(),
            who,
            self.lasts.as_secs_f64()
        )?;
        match self.kind {
            Kind::LinkDelay => write!(f, " ({} ms)", self.amount),
            Kind::SkewProxy => write!(f, " (clock {:+} ms)", self.amount),
            _ => Ok(()),
        }
    }
}

/// What the schedule is drawn for.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub proxies: usize,
    pub nodes: usize,
    pub tcp: bool,
    /// How long faults are injected.
    pub span: Duration,
    /// Mean gap between fault starts.
    pub gap: Duration,
    /// Largest clock offset (the proxies' `lock_skew` minus one op timeout).
    pub max_skew_ms: i64,
}

/// The schedule for `seed`: faults start every `gap` on average (uniform in
/// 0.25..1.75 gap); a target is not hit again while a fault on it lasts.
pub fn schedule(seed: u64, shape: &Shape) -> Vec<Fault> {
    let mut rng = StdRng::seed_from_u64(seed);
    let kinds: Vec<Kind> = Kind::ALL
        .into_iter()
        .filter(|k| shape.tcp || !k.needs_tcp())
        .collect();
    let mut busy_proxy = vec![Duration::ZERO; shape.proxies];
    let mut busy_node = vec![Duration::ZERO; shape.nodes];
    let mut out = Vec::new();
    let mut t = Duration::ZERO;
    let gap_ms = shape.gap.as_millis() as u64;
    loop {
        t += Duration::from_millis(rng.gen_range(gap_ms / 4..=gap_ms * 7 / 4));
        if t >= shape.span {
            return out;
        }
        let kind = kinds[rng.gen_range(0..kinds.len())];
        let lasts = Duration::from_millis(match kind {
            Kind::SkewProxy => rng.gen_range(5_000..=15_000),
            Kind::StopProxy | Kind::StopSidecar => rng.gen_range(200..=3_000),
            _ => rng.gen_range(300..=4_000),
        });
        let amount = match kind {
            Kind::LinkDelay => rng.gen_range(20..=800),
            Kind::SkewProxy => rng.gen_range(-shape.max_skew_ms..=shape.max_skew_ms),
            _ => 0,
        };
        let busy = if kind.on_proxy() {
            &mut busy_proxy
        } else {
            &mut busy_node
        };
        let target = rng.gen_range(0..busy.len());
        if busy[target] > t {
            continue;
        }
        // A restart takes a moment beyond the fault itself.
        busy[target] = t + lasts + Duration::from_secs(1);
        out.push(Fault {
            at: t,
            kind,
            target,
            lasts,
            amount,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(tcp: bool) -> Shape {
        Shape {
            proxies: 3,
            nodes: 9,
            tcp,
            span: Duration::from_secs(600),
            gap: Duration::from_millis(1500),
            max_skew_ms: 400,
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_schedule_and_another_seed_another() {
        assert_eq!(schedule(7, &shape(true)), schedule(7, &shape(true)));
        assert_ne!(schedule(7, &shape(true)), schedule(8, &shape(true)));
    }

    #[test]
    fn every_kind_occurs_and_link_faults_only_over_tcp() {
        let tcp = schedule(1, &shape(true));
        for k in Kind::ALL {
            assert!(tcp.iter().any(|f| f.kind == k), "{k:?} never drawn");
        }
        assert!(schedule(1, &shape(false))
            .iter()
            .all(|f| !f.kind.needs_tcp()));
    }

    #[test]
    fn a_target_is_never_hit_twice_at_once() {
        let s = schedule(3, &shape(true));
        for (i, a) in s.iter().enumerate() {
            for b in &s[i + 1..] {
                if a.kind.on_proxy() == b.kind.on_proxy() && a.target == b.target {
                    assert!(b.at >= a.at + a.lasts, "{a} overlaps {b}");
                }
            }
        }
        assert!(s.iter().all(|f| f.amount.abs() <= 800));
    }
}
