//! `show sess`: what is in flight now. HAProxy lists every stream with its
//! addresses; rdmalb keeps counts, not a record per request, so the answer
//! is the counts the request path keeps: the client connections open on
//! each listener, the requests in flight on each node against its cap
//! (`limits.max_inflight_per_node` or the node's own `max_inflight`,
//! HAProxy's `maxconn`; `0` for none), and with `[qos]` the admission
//! slots taken and the requests queued per site. One block per kind, each headed by a `#` line
//! naming its columns, as HAProxy's other `show` answers are.

use std::fmt::Write as _;
use std::sync::atomic::Ordering::Relaxed;

use super::{Admin, Outcome};

/// `show sess`.
pub fn show(state: &Admin) -> Outcome {
    let backends = state.backends.load();
    let mut out = String::from("# listener connections\n");
    for f in &state.frontends {
        let _ = writeln!(out, "{} {}", f.name, f.open.load(Relaxed));
    }
    out.push_str("# site node inflight max_inflight\n");
    for node in backends.nodes() {
        let site = backends.site_of(node).map_or("-", |s| s.name.as_str());
        let cap = node.own_max_inflight().unwrap_or(backends.max_inflight());
        let _ = writeln!(out, "{site} {} {} {cap}", node.name, node.inflight());
    }
    if let Some(admission) = &state.admission {
        let status = admission.status();
        let _ = writeln!(
            out,
            "# qos inflight {} max_inflight {}\n# site queued",
            status.inflight, status.max_inflight
        );
        for (site, queued) in &status.queued {
            let _ = writeln!(out, "{site} {queued}");
        }
    }
    Ok(out)
}
