//! The scale bench's correctness checks, on the claims every agent reported
//! and the node windows at the end:
//!
//! - one burst, one claim: every claim for a site falls in a burst of that
//!   site (not in a calm phase, not before any phase), and no burst gets two
//!   (the quiet period after a burst is served keeps its window open long
//!   enough to catch a late second claim by another proxy);
//! - no node epoch is claimed twice (two proxies winning the same CAS);
//! - every node's role word matches the claims made: epoch = 1 + claims of
//!   the node, site = the last claim's site (or the initial one), applied.

use std::collections::{BTreeMap, HashMap};

use super::cluster::{Cluster, PhaseKind};
use super::proxy::{Claimed, ProxyReport};
use rdmalb_window::RoleState;

/// Bursts that did not get their node yet.
pub fn open_bursts(c: &Cluster) -> usize {
    c.phases
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .filter(|p| p.kind == PhaseKind::Burst && p.served.is_none())
        .count()
}

/// Every violation found, described.
pub fn violations(c: &Cluster, reports: &[ProxyReport]) -> Vec<String> {
    let mut out = Vec::new();
    let claims: Vec<&Claimed> = reports.iter().flat_map(|r| &r.claims).collect();
    let phases = c.phases.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let t0 = phases.first().map(|p| p.start);
    let at =
        |t: std::time::Instant| t0.map_or(0.0, |t0| t.saturating_duration_since(t0).as_secs_f64());

    // Two proxies winning the same node epoch.
    let mut by_epoch: HashMap<(usize, u64), Vec<u16>> = HashMap::new();
    for c in &claims {
        by_epoch.entry((c.node, c.epoch)).or_default().push(c.proxy);
    }
    for ((node, epoch), proxies) in &by_epoch {
        if proxies.len() > 1 {
            out.push(format!(
                "node n{node} epoch {epoch} claimed by proxies {proxies:?}"
            ));
        }
    }

    // One burst, one claim.
    let mut per_phase: BTreeMap<usize, Vec<&Claimed>> = BTreeMap::new();
    for c in &claims {
        let phase = phases
            .iter()
            .enumerate()
            .rfind(|(_, p)| p.site == c.site && p.start <= c.at);
        match phase {
            Some((i, p)) if p.kind == PhaseKind::Burst => per_phase.entry(i).or_default().push(c),
            Some((_, p)) => out.push(format!(
                "proxy {} claimed n{} for s{} at {:.2} s, in a calm phase of the site (started {:.2} s)",
                c.proxy,
                c.node,
                c.site,
                at(c.at),
                at(p.start)
            )),
            None => out.push(format!(
                "proxy {} claimed n{} for s{} at {:.2} s, before any burst of the site",
                c.proxy,
                c.node,
                c.site,
                at(c.at)
            )),
        }
    }
    for (i, cs) in &per_phase {
        if cs.len() > 1 {
            let who: Vec<String> = cs
                .iter()
                .map(|c| format!("proxy {} n{} at {:.2} s", c.proxy, c.node, at(c.at)))
                .collect();
            out.push(format!(
                "burst of s{} started at {:.2} s got {} claims: {}",
                phases[*i].site,
                at(phases[*i].start),
                cs.len(),
                who.join(", ")
            ));
        }
    }

    // The role words against the claims.
    let mut per_node: HashMap<usize, Vec<&Claimed>> = HashMap::new();
    for c in &claims {
        per_node.entry(c.node).or_default().push(c);
    }
    for i in 0..c.mems.len() {
        let (role, applied) = c.role(i);
        let Some(role) = role else {
            out.push(format!("node n{i}: role word does not decode"));
            continue;
        };
        let mut mine = per_node.remove(&i).unwrap_or_default();
        mine.sort_by_key(|c| c.epoch);
        let expected_epoch = 1 + mine.len() as u64;
        let expected_site = mine.last().map_or(c.initial[i], |c| {
            rdmalb_window::SiteSlot::Site(c.site as u16)
        });
        let epochs_ok = mine
            .iter()
            .enumerate()
            .all(|(k, c)| c.epoch == 2 + k as u64);
        if role.epoch != expected_epoch || role.site != expected_site || !epochs_ok {
            out.push(format!(
                "node n{i}: role {role} but {} claims were made (epochs {:?}; expected epoch {expected_epoch}, site {expected_site:?})",
                mine.len(),
                mine.iter().map(|c| c.epoch).collect::<Vec<_>>()
            ));
        }
        let state_ok = if mine.is_empty() {
            role.state == RoleState::Active
        } else {
            role.state == RoleState::Switching
        };
        if !state_ok {
            out.push(format!("node n{i}: unexpected role state in {role}"));
        }
        if applied != role.epoch {
            out.push(format!(
                "node n{i}: role {role} not applied at the end (applied {applied})"
            ));
        }
    }
    out
}
