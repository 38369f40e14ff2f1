//! The agent's report: what the last round saw, for `/status` and the
//! `rdmalb_reconfig_nodes` gauge.

use tokio::time::Instant;

use super::claim::By;
use super::{shared_counter, Agent, AgentNode, Work};
use crate::reconfig::events::{Event, EventKind};
use crate::reconfig::status::{self, AgentStatus, NodeRole, RoleStatusView, SiteRole};
use crate::reconfig::view::{Effective, NodeView, ViewError};
use rdmalb_window::{RoleWord, SiteSlot};

impl Agent {
    pub(super) fn show(
        &self,
        work: &Work,
        views: &[Result<NodeView, ViewError>],
        loads: &[Option<f64>],
        now: Instant,
    ) {
        let sites = self
            .settings
            .sites
            .iter()
            .enumerate()
            .map(|(s, site)| SiteRole {
                name: site.name.clone(),
                load: loads[s],
                above_high_ms: work
                    .hot
                    .hot_since(s)
                    .map(|t| now.saturating_duration_since(t).as_millis() as u64),
                history_ms: work.hot.history_of(s).as_millis() as u64,
                local_counter: work.local[s],
                shared_counter: shared_counter(&self.own, s),
                priority: self.qos.priorities.get(s).copied().unwrap_or(0),
                qos: Agent::site_qos(work).get(s).copied().unwrap_or_default(),
                qos_meeting_percent: Agent::site_qos(work)
                    .get(s)
                    .and_then(|q| q.meeting_percent()),
            })
            .collect();
        let mut by_state = [0u32; 4];
        let mut parked = 0u32;
        let nodes = views
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let AgentNode {
                    name,
                    has_window: window,
                    ..
                } = &self.settings.nodes[i];
                let mut role = NodeRole {
                    name: name.clone(),
                    window: *window,
                    error: None,
                    site: None,
                    state: None,
                    epoch: None,
                    applied: None,
                    effective: None,
                    status: None,
                    freshness: None,
                    load: None,
                    cooling: self.cooling(work, i, now),
                    pinned_until_unix_ms: None,
                    pinned_by: None,
                    switching_ms: None,
                    parked: false,
                    consecutive_failures: work.track[i].failures(),
                    rollback_in_ms: None,
                };
                match r {
                    Err(e) if *window => role.error = Some(e.to_string()),
                    Err(_) => {}
                    Ok(v) => {
                        by_state[v.effective() as usize] += 1;
                        role.site = Some(self.settings.site_name(v.role.site));
                        role.state = Some(v.role.state.as_str());
                        role.epoch = Some(v.role.epoch);
                        role.applied = Some(v.applied);
                        role.effective = Some(v.effective());
                        role.status = v.status.map(|s| RoleStatusView {
                            code: s.code.as_str(),
                            epoch: s.epoch,
                            serving: self.settings.site_name(s.serving),
                        });
                        if v.pinned() {
                            role.pinned_until_unix_ms = Some(v.pin.until_ms);
                            role.pinned_by = Some(v.pin.proxy);
                        }
                        role.freshness = Some(v.freshness);
                        role.load = v.load;
                        let track = &work.track[i];
                        role.switching_ms = track.switching_for(now).map(|d| d.as_millis() as u64);
                        role.parked = track.parked(v);
                        parked += u32::from(role.parked);
                        let r = &self.settings.reconfig;
                        role.rollback_in_ms = (v.effective() == Effective::Failed)
                            .then(|| track.rollback_at(r.sensitivity, r.rollback_backoff_max))
                            .flatten()
                            .filter(|at| *at > now)
                            .map(|at| at.saturating_duration_since(now).as_millis() as u64);
                    }
                }
                role
            })
            .collect();
        for (e, n) in [
            Effective::Unset,
            Effective::Active,
            Effective::Switching,
            Effective::Failed,
        ]
        .iter()
        .zip(by_state)
        {
            metrics::gauge!(status::NODES, "state" => e.as_str()).set(f64::from(n));
        }
        metrics::gauge!(status::PARKED).set(f64::from(parked));
        if let Ok(mut g) = self.shown.lock() {
            *g = (sites, nodes);
        }
    }

    /// Adds a role change of node `node` to the event log.
    pub(super) fn event(
        &self,
        kind: EventKind,
        node: usize,
        from: Option<SiteSlot>,
        to: Option<SiteSlot>,
        epoch: Option<u64>,
        detail: Option<String>,
    ) {
        self.events.record(Event {
            at_unix_ms: rdmalb_base::time::unix_now_ms(),
            kind,
            node: self.settings.nodes[node].name.clone(),
            from: from.map(|s| self.settings.site_name(s)),
            to: to.map(|s| self.settings.site_name(s)),
            epoch,
            detail,
        });
    }

    /// Logs this proxy's claim (for a hot site, a loan going home or an
    /// operator's move: `by`) of node `node` from `from` to the role word
    /// `new`.
    pub(super) fn claim_event(
        &self,
        node: usize,
        from: SiteSlot,
        new: RoleWord,
        by: By,
        detail: Option<&str>,
    ) {
        let kind = match by {
            By::Admin => EventKind::AdminMove,
            By::Return => EventKind::Return,
            By::Agent => EventKind::Claim,
        };
        self.event(
            kind,
            node,
            Some(from),
            Some(new.site),
            Some(new.epoch),
            detail.map(str::to_string),
        );
    }

    /// The agent's part of `/status`, as of the last round.
    pub fn status(&self) -> AgentStatus {
        let (sites, nodes) = self.shown.lock().map(|g| g.clone()).unwrap_or_default();
        let r = &self.settings.reconfig;
        AgentStatus {
            mode: r.mode.as_str(),
            proxy_id: self.settings.proxy_id,
            lock_home: r.lock_home,
            sensitivity_ms: r.sensitivity.as_millis() as u64,
            history_ms: r.history.as_millis() as u64,
            counters: self.counters.snapshot(),
            sites,
            nodes,
            events: self.events.latest(),
        }
    }
}
