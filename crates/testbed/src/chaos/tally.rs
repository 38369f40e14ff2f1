//! What the campaign's clients saw, classified (docs/reliability.md, "What the errors were"): every
//! request by the state of the proxy it went to — live, killed, stopped
//! (SIGSTOP) or restarting, as the fault plan made it — and every failed
//! request by cause: no answer (connection refused, reset, closed, timed
//! out) or an answer (by status, by who answered it — the proxy itself or
//! a node — and the proxy's reason), with whether the site had a healthy
//! node at that moment. The first-class figure is the **live-proxy 5xx
//! share**: 5xx answered by a live proxy over the requests sent to live
//! proxies.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use serde::Serialize;

/// A proxy's state, as the fault plan made it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ProxyState {
    /// Running and answering.
    Live,
    /// SIGKILLed, not started again yet.
    Killed,
    /// SIGSTOPped.
    Stopped,
    /// Started again (after a kill or for a clock skew) and not answered
    /// any request yet.
    Restarting,
}

impl ProxyState {
    pub const ALL: [ProxyState; 4] = [
        ProxyState::Live,
        ProxyState::Killed,
        ProxyState::Stopped,
        ProxyState::Restarting,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ProxyState::Live => "live",
            ProxyState::Killed => "killed",
            ProxyState::Stopped => "stopped",
            ProxyState::Restarting => "restarting",
        }
    }

    fn code(self) -> u64 {
        match self {
            ProxyState::Live => 0,
            ProxyState::Killed => 1,
            ProxyState::Stopped => 2,
            ProxyState::Restarting => 3,
        }
    }

    fn from_code(c: u64) -> ProxyState {
        match c & 0xff {
            1 => ProxyState::Killed,
            2 => ProxyState::Stopped,
            3 => ProxyState::Restarting,
            _ => ProxyState::Live,
        }
    }
}

/// One proxy's state word: the current state (bits 0-7) and how many times
/// it was killed (8-23), stopped (24-39) and restarted (40-55), so a
/// request compares the words read when it started and when it ended and
/// knows what happened in between.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateWord(u64);

impl StateWord {
    pub fn state(self) -> ProxyState {
        ProxyState::from_code(self.0)
    }

    fn count(self, s: ProxyState) -> u64 {
        match s {
            ProxyState::Killed => (self.0 >> 8) & 0xffff,
            ProxyState::Stopped => (self.0 >> 24) & 0xffff,
            ProxyState::Restarting => (self.0 >> 40) & 0xffff,
            ProxyState::Live => 0,
        }
    }

    /// The word after entering `s`.
    fn enter(self, s: ProxyState) -> StateWord {
        let shift = match s {
            ProxyState::Killed => 8,
            ProxyState::Stopped => 24,
            ProxyState::Restarting => 40,
            ProxyState::Live => return StateWord(self.0 & !0xff),
        };
        let n = ((self.count(s) + 1) & 0xffff) << shift;
        StateWord((self.0 & !(0xffff << shift) & !0xff) | n | s.code())
    }

    /// The state a request is counted in, from the words read when it
    /// started and when it ended: a state in force at its end, else the
    /// worst one entered meanwhile (killed, stopped, restarting), else a
    /// kill or stop in force when it started; a proxy restarting when the
    /// request started counts as live once it answered (`answered`).
    pub fn during(start: StateWord, end: StateWord, answered: bool) -> ProxyState {
        if end.state() != ProxyState::Live {
            return end.state();
        }
        for s in [
            ProxyState::Killed,
            ProxyState::Stopped,
            ProxyState::Restarting,
        ] {
            if start.count(s) != end.count(s) {
                return s;
            }
        }
        match start.state() {
            ProxyState::Restarting if answered => ProxyState::Live,
            s => s,
        }
    }
}

/// The proxies' state words, set by the campaign as it injects and heals
/// faults, read by the clients.
#[derive(Debug)]
pub struct ProxyStates {
    words: Vec<AtomicU64>,
}

impl ProxyStates {
    pub fn new(proxies: usize) -> ProxyStates {
        ProxyStates {
            words: (0..proxies).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    pub fn read(&self, proxy: usize) -> StateWord {
        StateWord(
            self.words
                .get(proxy)
                .map_or(0, |w| w.load(Ordering::SeqCst)),
        )
    }

    /// Proxy `proxy` enters `state`.
    pub fn set(&self, proxy: usize, state: ProxyState) {
        if let Some(w) = self.words.get(proxy) {
            let _ = w.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |v| {
                Some(StateWord(v).enter(state).0)
            });
        }
    }

    /// Proxy `proxy` answered a request: a restarting one is live now.
    pub fn answered(&self, proxy: usize) {
        if let Some(w) = self.words.get(proxy) {
            let _ = w.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |v| {
                (StateWord(v).state() == ProxyState::Restarting)
                    .then(|| StateWord(v).enter(ProxyState::Live).0)
            });
        }
    }
}

/// Why a request failed.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Cause {
    /// No answer: the connection was refused.
    Refused,
    /// No answer: the connection was reset.
    Reset,
    /// No answer: the connection was closed before a response.
    Closed,
    /// No answer within the client's timeout.
    Timeout,
    /// No answer, another transport error.
    Transport { error: String },
    /// An answer that is not a success: its status, whether the proxy
    /// itself answered (no `X-Site` from a node) and its reason (the first
    /// line of the proxy's body).
    Status {
        status: u16,
        by_proxy: bool,
        reason: String,
    },
}

impl Cause {
    fn is_5xx(&self) -> bool {
        matches!(self, Cause::Status { status, .. } if *status >= 500)
    }

    /// Short label for the text summary.
    pub fn label(&self) -> String {
        match self {
            Cause::Refused => "no answer: connection refused".into(),
            Cause::Reset => "no answer: connection reset".into(),
            Cause::Closed => "no answer: connection closed".into(),
            Cause::Timeout => "no answer: timed out (5 s)".into(),
            Cause::Transport { error } => format!("no answer: {error}"),
            Cause::Status {
                status,
                by_proxy: true,
                reason,
            } => format!("{status} from the proxy: {reason}"),
            Cause::Status { status, .. } => format!("{status} from a node"),
        }
    }
}

/// Requests sent to proxies in one state.
#[derive(Debug, Default)]
struct StateCounts {
    requests: AtomicU64,
    ok: AtomicU64,
}

/// Client-side tallies of the whole run.
#[derive(Debug)]
pub struct Tally {
    by_state: [StateCounts; 4],
    /// (proxy state, cause, the site had a healthy node) → count.
    errors: Mutex<BTreeMap<(ProxyState, Cause, bool), u64>>,
}

impl Default for Tally {
    fn default() -> Self {
        Tally {
            by_state: Default::default(),
            errors: Mutex::new(BTreeMap::new()),
        }
    }
}

impl Tally {
    /// Counts one request: `ok` is a correct answer; `failed` its cause
    /// and whether the site had a healthy node (misrouted answers are
    /// neither: they are invariant violations).
    pub fn count(&self, state: ProxyState, ok: bool, failed: Option<(Cause, bool)>) {
        let s = &self.by_state[state.code() as usize];
        s.requests.fetch_add(1, Ordering::Relaxed);
        if ok {
            s.ok.fetch_add(1, Ordering::Relaxed);
        }
        if let Some((cause, healthy)) = failed {
            if let Ok(mut e) = self.errors.lock() {
                *e.entry((state, cause, healthy)).or_insert(0) += 1;
            }
        }
    }

    /// The classified result.
    pub fn report(&self) -> Classified {
        let errors = self.errors.lock().map(|e| e.clone()).unwrap_or_default();
        let mut by_state = BTreeMap::new();
        for st in ProxyState::ALL {
            let c = &self.by_state[st.code() as usize];
            let mine = errors.iter().filter(|((s, _, _), _)| *s == st);
            let (mut errs, mut fivexx, mut fivexx_healthy) = (0, 0, 0);
            for ((_, cause, healthy), n) in mine {
                errs += n;
                if cause.is_5xx() {
                    fivexx += n;
                    if *healthy {
                        fivexx_healthy += n;
                    }
                }
            }
            by_state.insert(
                st.name(),
                StateReport {
                    requests: c.requests.load(Ordering::Relaxed),
                    ok: c.ok.load(Ordering::Relaxed),
                    errors: errs,
                    answered_5xx: fivexx,
                    answered_5xx_site_had_healthy_node: fivexx_healthy,
                },
            );
        }
        let live = &by_state["live"];
        let share = |n: u64| {
            if live.requests == 0 {
                0.0
            } else {
                n as f64 / live.requests as f64
            }
        };
        Classified {
            live_proxy_5xx_share: share(live.answered_5xx),
            live_proxy_5xx_share_site_had_healthy_node: share(
                live.answered_5xx_site_had_healthy_node,
            ),
            by_proxy_state: by_state,
            error_classes: errors
                .into_iter()
                .map(|((proxy_state, cause, healthy), count)| ErrorClass {
                    proxy_state,
                    cause,
                    site_had_healthy_node: healthy,
                    count,
                })
                .collect(),
        }
    }
}

/// Requests to proxies in one state.
#[derive(Debug, Clone, Serialize)]
pub struct StateReport {
    pub requests: u64,
    pub ok: u64,
    pub errors: u64,
    pub answered_5xx: u64,
    pub answered_5xx_site_had_healthy_node: u64,
}

/// One class of errors.
#[derive(Debug, Clone, Serialize)]
pub struct ErrorClass {
    pub proxy_state: ProxyState,
    pub cause: Cause,
    pub site_had_healthy_node: bool,
    pub count: u64,
}

/// The classification of a run.
#[derive(Debug, Clone, Serialize)]
pub struct Classified {
    /// 5xx answered by a live proxy / requests sent to live proxies.
    pub live_proxy_5xx_share: f64,
    /// The same, counting only 5xx answered while the site had a healthy
    /// node (ACTIVE, applied, its app running).
    pub live_proxy_5xx_share_site_had_healthy_node: f64,
    pub by_proxy_state: BTreeMap<&'static str, StateReport>,
    pub error_classes: Vec<ErrorClass>,
}

impl Classified {
    /// The text summary's table.
    pub fn text(&self) -> String {
        let mut s = String::from("requests by proxy state (requests / ok / errors / 5xx answered / of them while the site had a healthy node):\n");
        for st in ProxyState::ALL {
            if let Some(r) = self.by_proxy_state.get(st.name()) {
                s.push_str(&format!(
                    "  {:<10} {} / {} / {} / {} / {}\n",
                    st.name(),
                    r.requests,
                    r.ok,
                    r.errors,
                    r.answered_5xx,
                    r.answered_5xx_site_had_healthy_node
                ));
            }
        }
        s.push_str(&format!(
            "live-proxy 5xx share: {:.4} % ({:.4} % while the site had a healthy node)\n",
            self.live_proxy_5xx_share * 100.0,
            self.live_proxy_5xx_share_site_had_healthy_node * 100.0
        ));
        s.push_str(
            "errors by proxy state and cause (count, of them while the site had a healthy node):\n",
        );
        let mut rows: BTreeMap<(ProxyState, String), (u64, u64)> = BTreeMap::new();
        for e in &self.error_classes {
            let r = rows
                .entry((e.proxy_state, e.cause.label()))
                .or_insert((0, 0));
            r.0 += e.count;
            if e.site_had_healthy_node {
                r.1 += e.count;
            }
        }
        for ((st, label), (n, healthy)) in rows {
            s.push_str(&format!("  {:<10} {label}: {n} ({healthy})\n", st.name()));
        }
        s
    }
}

/// Whether each node's app is down (a `kill-app` fault in force).
#[derive(Debug)]
pub struct AppsDown(Vec<AtomicBool>);

impl AppsDown {
    pub fn new(nodes: usize) -> AppsDown {
        AppsDown((0..nodes).map(|_| AtomicBool::new(false)).collect())
    }

    pub fn set(&self, node: usize, down: bool) {
        if let Some(b) = self.0.get(node) {
            b.store(down, Ordering::SeqCst);
        }
    }

    pub fn is_down(&self, node: usize) -> bool {
        self.0.get(node).is_some_and(|b| b.load(Ordering::SeqCst))
    }
}

/// What the fault plan did to the processes that serve requests, as the
/// clients need it: the proxies' states and the nodes' apps that are down.
#[derive(Debug)]
pub struct Conditions {
    pub proxies: ProxyStates,
    pub apps: AppsDown,
}

impl Conditions {
    pub fn new(proxies: usize, nodes: usize) -> Conditions {
        Conditions {
            proxies: ProxyStates::new(proxies),
            apps: AppsDown::new(nodes),
        }
    }
}

#[cfg(test)]
mod tests;
