//! Where the rule set (`crate::rules`) meets the request's phases: the
//! global request rules at the end of [`request_filter`](super::request_filter),
//! the site rules in [`choose_site`](super::choose_site), the chosen
//! site's request rules before [`admit`](super::admit), the response
//! rules in [`response_filter`](super::answer::response_filter), and the
//! error pages of the proxy's own answers. With no rules configured, each
//! is one check of an empty list.

use std::time::Instant;

use http::{HeaderMap, Request, StatusCode};

use super::super::exchange::Exchange;
use super::super::state::{ConnCtx, Snapshot};
use super::{Reply, Stop};
use crate::rules::stick::{self, track, Tracking};
use crate::rules::{Answer, Chosen, Conn, Rule};

/// What the connection tells the rules about a request that started at
/// `start`.
fn conn(ctx: &ConnCtx, start: Instant) -> Conn<'_> {
    let info = ctx.tls_info.get();
    Conn {
        client: ctx.client.ip(),
        listener: &ctx.listener,
        tls: ctx.tls,
        sni: info.and_then(|i| i.sni.as_deref()),
        cert: info.map(|i| i.cert).unwrap_or_default(),
        now: stick::ms_at(start),
        recent: Some(&ctx.stick),
    }
}

/// A rule's answer as the proxy's reply.
pub fn answer(a: Answer) -> Stop {
    Stop::Reply(Box::new(Reply {
        status: a.status,
        headers: a.headers,
        body: a.body,
    }))
}

/// Runs request rules `list` on the head of a request that started at
/// `start`; a rule that answers ends the request with its answer.
/// `track-sc` rules fill `track`.
pub fn request<B>(
    ctx: &ConnCtx,
    snap: &Snapshot,
    list: &[Rule],
    req: &mut Request<B>,
    start: Instant,
    track: &mut Tracking,
) -> Result<(), Stop> {
    if list.is_empty() {
        return Ok(());
    }
    let said = snap
        .config
        .rules
        .run_request(list, &conn(ctx, start), req, track);
    match said {
        Some(a) => Err(answer(a)),
        None => Ok(()),
    }
}

/// The site the site rules choose, `Ok(None)` when none decides.
pub fn site<B>(
    ctx: &ConnCtx,
    snap: &Snapshot,
    req: &Request<B>,
    start: Instant,
    track: &Tracking,
) -> Result<Option<usize>, Stop> {
    let rules = &snap.config.rules;
    if rules.site_rules.is_empty() {
        return Ok(None);
    }
    let status = match rules.choose_site(
        &conn(ctx, start),
        req.method(),
        req.uri(),
        req.headers(),
        track,
    ) {
        Chosen::NoRule => return Ok(None),
        Chosen::Site(i) => return Ok(Some(i)),
        Chosen::Default => match snap.config.global.default_site {
            Some(i) => return Ok(Some(i)),
            None => StatusCode::SERVICE_UNAVAILABLE,
        },
        Chosen::Answer(s) => s,
    };
    Err(answer(rules.page(status)))
}

/// Runs the site's and the global response rules on a node's response
/// head; a rule that answers replaces the response.
pub fn response(ex: &Exchange, status: StatusCode, headers: &mut HeaderMap) -> Option<Answer> {
    let rules = &ex.snap.config.rules;
    if status.is_client_error() {
        // HAProxy's http_err: a 4xx from the node counts on every tracked
        // entry.
        track::error(&ex.track, &rules.tables, stick::now_ms());
    }
    let site = ex.site.map_or(&[][..], |s| rules.response_of_site(s));
    if site.is_empty() && rules.response.is_empty() {
        return None;
    }
    let uri = ex.rule_uri.clone().unwrap_or_default();
    let conn = conn(ex.ctx(), ex.start());
    for list in [site, rules.response.as_slice()] {
        if let Some(a) =
            rules.run_response(list, &conn, ex.method(), &uri, status, headers, &ex.track)
        {
            return Some(a);
        }
    }
    None
}

/// The configured page for a status the proxy answers itself, if any.
pub fn page(snap: &Snapshot, status: StatusCode) -> Option<Answer> {
    snap.config.rules.error_pages.get(&status.as_u16()).cloned()
}
