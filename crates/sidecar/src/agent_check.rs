//! HAProxy's agent-check, served (`[agent_check] listen`): on each
//! connection the sidecar writes one line saying how much traffic its node
//! should get, then closes. HAProxy (`server … agent-check agent-port P`)
//! and the rdmalb proxy (`[[node]] agent_port`) read it.
//!
//! The line, e.g. `up ready 73%`, is made of three words and an optional
//! description ([`Answer`]):
//!
//! - **weight** `N%` from the node's load, as published in its window:
//!   `u = max(cpu, app)` with `cpu` the CPU utilisation (0..1) and `app`
//!   the app's `(busy + queue) / capacity` (0..1, 0 when the app publishes
//!   no capacity); `N = round(100 × (1 − u))`, at least [`MIN_PERCENT`]
//!   (a saturated node still gets a trickle, so it is noticed when it
//!   recovers; `drain` is the way to send nothing). An idle node says
//!   `100%`. Only these two bounded indices are used: the proxy's full load
//!   index weighs fields per site, which an agent asked by anyone cannot
//!   know.
//! - **administrative state** `ready` while the node serves a site with its
//!   role applied (role word ACTIVE for a site and `ROLE_APPLIED` = its
//!   epoch), otherwise `drain`: in the idle pool, while a proxy moves it to
//!   another site (SWITCHING, not applied yet), after a failed switch.
//! - **health** `down` while a `status` collector (the app's own status
//!   page) fails, otherwise `up`.
//! - **description** after `#`: why the node is drained or down.
//!
//! Connections are bounded ([`MAX_CONNECTIONS`] at once; more are closed at
//! once). The reply is written first, without reading: text HAProxy sends
//! with `agent-send` is read afterwards and discarded (bounded in size and
//! time), so the connection closes with FIN, not the RST that closing with
//! unread data would cause, which could cost HAProxy the reply.

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};

use crate::collect::Slot;
use crate::config::CollectorConfig;
use crate::SidecarConfig;
use rdmalb_window::layout::word;
use rdmalb_window::{LoadSample, RoleState, RoleWord, WindowMemory};

/// The smallest weight percentage sent (a saturated node).
pub const MIN_PERCENT: u32 = 1;
/// Connections served at once; more are closed without a reply.
pub const MAX_CONNECTIONS: usize = 64;
/// At most this much `agent-send` text is read (and discarded) per connection.
const MAX_DISCARD: usize = 4096;
/// How long a connection may take to write the reply and close.
const CONNECTION_DEADLINE: Duration = Duration::from_secs(2);
/// The longest description sent.
const MAX_DESCRIPTION: usize = 200;

/// The weight percentage for a published load sample (see the module doc).
pub fn weight_percent(s: &LoadSample) -> u32 {
    let cpu = (s.cpu_util_ppm as f64 / 1e6).clamp(0.0, 1.0);
    let app = if s.app_capacity > 0 {
        ((s.app_busy.saturating_add(s.app_queue_len)) as f64 / s.app_capacity as f64).min(1.0)
    } else {
        0.0
    };
    let u = cpu.max(app);
    ((100.0 * (1.0 - u)).round() as u32).clamp(MIN_PERCENT, 100)
}

/// One agent-check reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub up: bool,
    pub ready: bool,
    pub percent: u32,
    pub description: Option<String>,
}

impl fmt::Display for Answer {
    /// The reply line, without its line end.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {}%",
            if self.up { "up" } else { "down" },
            if self.ready { "ready" } else { "drain" },
            self.percent
        )?;
        if let Some(d) = &self.description {
            write!(f, " # {d}")?;
        }
        Ok(())
    }
}

/// What the answer is computed from: the node's window and its collectors.
#[derive(Debug)]
pub struct NodeView {
    pub memory: Arc<WindowMemory>,
    /// The `status` collectors' slots (they probe the app itself).
    pub app_probes: Vec<Arc<Slot>>,
    pub sites: Vec<String>,
}

impl NodeView {
    /// The view of a sidecar running `cfg` with collector `slots` (in
    /// config order).
    pub fn new(cfg: &SidecarConfig, memory: Arc<WindowMemory>, slots: &[Arc<Slot>]) -> NodeView {
        let app_probes = cfg
            .collectors
            .iter()
            .zip(slots)
            .filter(|(c, _)| matches!(c, CollectorConfig::Status(_)))
            .map(|(_, s)| Arc::clone(s))
            .collect();
        NodeView {
            memory,
            app_probes,
            sites: cfg.sites.clone(),
        }
    }

    /// The answer now.
    pub fn answer(&self) -> Answer {
        let sample = crate::admin::own_block(&self.memory)
            .map(|b| b.sample)
            .unwrap_or_default();
        let role = RoleWord::decode(self.memory.load(word::ROLE).unwrap_or(0)).ok();
        let applied = self.memory.load(word::ROLE_APPLIED).unwrap_or(0);
        let app_error = self
            .app_probes
            .iter()
            .find_map(|s| s.health().error.map(|e| format!("{}: {e}", s.name)));
        answer(&sample, role, applied, app_error, &self.sites)
    }
}

/// The answer for a load sample, a role word, the applied epoch and the
/// first failing app probe (see the module doc).
pub fn answer(
    sample: &LoadSample,
    role: Option<RoleWord>,
    applied: u64,
    app_error: Option<String>,
    sites: &[String],
) -> Answer {
    let site_name = |r: &RoleWord| {
        r.site
            .index()
            .and_then(|i| sites.get(i))
            .map_or("?", String::as_str)
            .to_string()
    };
    let drained = match role {
        None => Some("role word unreadable".to_string()),
        Some(r) if r.site.index().is_none() => Some("idle pool".to_string()),
        Some(r) if r.state == RoleState::Active && applied == r.epoch => None,
        Some(r) if r.state == RoleState::Active || r.state == RoleState::Switching => {
            Some(format!("switching to {}", site_name(&r)))
        }
        Some(r) => Some(format!("role {} for {}", r.state, site_name(&r))),
    };
    let description = match (&app_error, &drained) {
        (Some(e), _) => Some(format!("app down: {e}")),
        (None, Some(d)) => Some(d.clone()),
        (None, None) => None,
    }
    .map(|d| clean(&d));
    Answer {
        up: app_error.is_none(),
        ready: drained.is_none(),
        percent: weight_percent(sample),
        description,
    }
}

/// A description safe on one line: control characters become spaces,
/// at most [`MAX_DESCRIPTION`] characters.
fn clean(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(MAX_DESCRIPTION)
        .collect()
}

/// The bound responder.
#[derive(Debug)]
pub struct Server {
    listener: TcpListener,
    /// How long one connection may hold its slot ([`CONNECTION_DEADLINE`]).
    deadline: Duration,
}

impl Server {
    pub async fn bind(listen: SocketAddr) -> std::io::Result<Server> {
        Ok(Server {
            listener: TcpListener::bind(listen).await?,
            deadline: CONNECTION_DEADLINE,
        })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `shutdown`; every connection gets [`NodeView::answer`].
    pub async fn run(self, view: NodeView, node: String, mut shutdown: watch::Receiver<bool>) {
        let view = Arc::new(view);
        let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
        let mut conns = tokio::task::JoinSet::new();
        loop {
            while conns.try_join_next().is_some() {}
            let stream = tokio::select! {
                _ = rdmalb_base::shutdown::requested(&mut shutdown) => break,
                r = self.listener.accept() => match r {
                    Ok((s, _)) => s,
                    Err(e) => {
                        tracing::warn!(node = %node, error = %e, "agent-check accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
            };
            let Ok(permit) = Arc::clone(&slots).try_acquire_owned() else {
                metrics::counter!("rdmalb_sidecar_agent_checks_total", "node" => node.clone(), "result" => "refused")
                    .increment(1);
                continue;
            };
            let line = format!("{}\n", view.answer());
            metrics::counter!("rdmalb_sidecar_agent_checks_total", "node" => node.clone(), "result" => "answered")
                .increment(1);
            let deadline = self.deadline;
            conns.spawn(async move {
                let _ = tokio::time::timeout(deadline, reply(stream, line)).await;
                drop(permit);
            });
        }
        conns.shutdown().await;
    }
}

/// Writes `line`, half-closes, then reads and discards whatever the peer
/// sent (bounded) until it closes.
async fn reply(mut stream: TcpStream, line: String) {
    if stream.write_all(line.as_bytes()).await.is_err() {
        return;
    }
    let _ = stream.shutdown().await;
    let mut buf = [0u8; 512];
    let mut read = 0;
    while read < MAX_DISCARD {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => read += n,
        }
    }
}

#[cfg(test)]
mod tests;
