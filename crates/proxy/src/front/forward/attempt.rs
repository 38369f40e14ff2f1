//! Phase 5: pick a node, connect, send the request, wait for the response
//! head; and the decisions after each failure (send again or answer), as
//! [`retry`](super::retry) rules them.

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::{Response, StatusCode};
use tokio::time::Sleep;

use super::super::access_log::ms;
use super::super::body::{ClientBodyError, RequestBody};
use super::super::error::{ErrorKind, RetryType};
use super::super::exchange::Exchange;
use super::super::serve1;
use super::super::state::{ConnCtx, Snapshot};
use super::super::upstream::{ConnectError, NodeBody, NodeConn, NodeError, NodePool};
use super::retry::Attempts;
use super::{name_of, RetryReason, Stop};
use crate::balance::sticky::Pinned;
use crate::balance::{NoNode, Outcome, PickError, PickKey};

/// The request on its way to a node: its head (only borrowed by a send,
/// so a request without a body is sent again from it, uncopied) and its
/// body until sent.
pub(super) struct Outgoing {
    parts: http::request::Parts,
    body: Option<RequestBody>,
    has_body: bool,
    /// When the request body last made progress (ms after the start), for
    /// `timeouts.server`.
    progress: Option<Arc<AtomicU64>>,
}

impl Outgoing {
    pub fn new(
        parts: http::request::Parts,
        body: RequestBody,
        progress: Option<Arc<AtomicU64>>,
    ) -> Outgoing {
        Outgoing {
            parts,
            has_body: progress.is_some(),
            body: Some(body),
            progress,
        }
    }

    /// The request is sent again (a replay has no body).
    fn again(&mut self) {
        self.body = Some(RequestBody::empty());
    }
}

/// The node's response head; its body holds the connection it came on.
pub(in super::super) struct Answered {
    pub resp: Response<NodeBody>,
    /// The client's side of a protocol upgrade it asked for.
    pub client_upgrade: Option<ClientUpgrade>,
}

/// The client's side of a protocol upgrade: an HTTP/1 connection's own
/// ([`super::super::serve1`]), or hyper's (HTTP/2).
pub(in super::super) enum ClientUpgrade {
    H1(super::super::serve1::OnUpgrade),
    Hyper(hyper::upgrade::OnUpgrade),
}

impl ClientUpgrade {
    /// Takes the upgrade out of `req`.
    pub fn of<B>(req: &mut http::Request<B>) -> ClientUpgrade {
        match super::super::serve1::on_upgrade(req) {
            Some(u) => ClientUpgrade::H1(u),
            None => ClientUpgrade::Hyper(hyper::upgrade::on(req)),
        }
    }
}

/// What the earlier phases settled for the pick: how long the request
/// waited for admission, and its hash key.
pub(super) struct Admitted {
    pub wait: Duration,
    pub key: PickKey,
}

/// Phase 5: tries nodes until one answers, or a failure is final. The
/// node's response deadline runs on the client connection's `timer` when
/// there is one (HTTP/1), else on a timer of its own.
pub(super) async fn forward(
    ex: &mut Exchange,
    ctx: &ConnCtx,
    snap: &Snapshot,
    site: usize,
    out: &mut Outgoing,
    admitted: Admitted,
    mut timer: Option<Pin<&mut Sleep>>,
) -> Result<Answered, Stop> {
    let Admitted {
        wait: admit_wait,
        key,
    } = admitted;
    // Nodes tried and retry budgets, on the stack (`retry`).
    let mut attempts = Attempts::new(snap.config.global.retries, snap.config.global.retry_on);
    let idempotent = ex.method().is_idempotent();
    loop {
        let Some((node, t_conn)) = pick(ex, snap, site, &mut attempts, admit_wait, &key).await?
        else {
            continue;
        };
        let Some((pool, conn, reused)) =
            connect(ex, ctx, snap, &mut attempts, node, t_conn).await?
        else {
            continue;
        };
        let Some(body) = out.body.take() else {
            return Err(ErrorKind::UpstreamProtocol.into());
        };
        // Sent again from the same head when the node answers 421 (it
        // moved to another site after this proxy last read its role word)
        // or its connection breaks before answering an idempotent request:
        // only without a body, only while a budget is left.
        let replay = attempts.may_replay(out.has_body, idempotent, snap.roles_move);
        let t_send = Instant::now();
        let sent = conn.send(&out.parts, body, pool);
        let limit = snap.config.timeouts.server;
        let resp = match wait_response(
            sent,
            (t_send, limit),
            out.progress.as_deref(),
            ex.start(),
            timer.as_mut().map(|t| t.as_mut()),
        )
        .await
        {
            Ok(resp) => resp,
            Err(failed) => {
                let reused = reused && idempotent && !out.has_body;
                failed_before_head(ex, snap, &mut attempts, out, failed, replay, reused)?;
                continue;
            }
        };
        let head_at = Instant::now();
        let head_time = head_at.saturating_duration_since(t_send);
        ex.timers.tr = ms(head_time);
        if let Some(pick) = &ex.pick {
            pick.node.observe_latency_at(head_time, head_at);
        }
        if resp.status() == StatusCode::MISDIRECTED_REQUEST
            && snap.roles_move
            && replay
            && attempts.misdirected()
        {
            misdirected(ex, snap);
            out.again();
            continue;
        }
        return Ok(Answered {
            resp,
            client_upgrade: None,
        });
    }
}

/// Picks a node of `site` not tried yet (waiting in the site's queue when
/// every node is at its limit). `None`: try again (every node was tried
/// and an empty response allows another round).
async fn pick(
    ex: &mut Exchange,
    snap: &Snapshot,
    site: usize,
    attempts: &mut Attempts,
    admit_wait: Duration,
    key: &PickKey,
) -> Result<Option<(usize, Instant)>, Stop> {
    let t_pick = Instant::now();
    let pick = match snap.backends.pick_for(site, attempts.tried(), key).await {
        Ok((p, pinned)) => {
            if pinned.is_some() {
                pinned_outcome(ex, snap, site, pinned);
            }
            p
        }
        Err(PickError::QueueTimeout(_)) => {
            tracing::warn!(site = %name_of(&snap.site_names, site), "every node of the site stayed busy for timeouts.queue");
            return Err(ErrorKind::QueueTimeout.into());
        }
        Err(PickError::NoNode(NoNode::Exhausted)) if attempts.retry_tried_nodes() => {
            return Ok(None)
        }
        Err(PickError::NoNode(no)) => {
            let kind = attempts.last_error.unwrap_or(match no {
                NoNode::Empty => ErrorKind::NoNodes,
                NoNode::AllDown | NoNode::Exhausted => ErrorKind::AllDown,
            });
            return Err(kind.into());
        }
    };
    // One clock read ends the wait and starts the connect.
    let t_conn = Instant::now();
    ex.timers.tw = ms(t_conn.saturating_duration_since(t_pick) + admit_wait);
    let node = pick.node.index;
    attempts.picking(node);
    ex.node = Some(node);
    ex.pick = Some(pick);
    ex.update_inflight(node);
    Ok(Some((node, t_conn)))
}

/// Records how the node a request's cookie named fared (for the response's
/// cookie), and counts a session that left it.
fn pinned_outcome(ex: &mut Exchange, snap: &Snapshot, site: usize, pinned: Option<Pinned>) {
    if let Some(seen) = ex.sticky.as_mut() {
        seen.pinned = pinned;
    }
    if let Some(Pinned::Left(why)) = pinned {
        if let Some(s) = snap.stats.sites.get(site) {
            s.sticky_moves[why.index()].increment(1);
        }
        tracing::debug!(site = %name_of(&snap.site_names, site), reason = why.label(), "sticky session left its node");
    }
}

/// A connection to `node`, pooled or new. `None`: the connect failed and
/// another node is to be tried.
async fn connect(
    ex: &mut Exchange,
    ctx: &ConnCtx,
    snap: &Snapshot,
    attempts: &mut Attempts,
    node: usize,
    t_conn: Instant,
) -> Result<Option<(Arc<NodePool>, NodeConn, bool)>, Stop> {
    let Some(pool) = snap.pools.get(node).cloned() else {
        tracing::error!(node, "no connection pool for node (snapshot mismatch)");
        return Err(ErrorKind::ConnectFailed.into());
    };
    let fresh = std::mem::take(&mut attempts.fresh);
    match pool.checkout(ctx.client, ctx.local, t_conn, fresh).await {
        Ok(c) => {
            ex.timers.tc = if c.reused { 0 } else { ms(t_conn.elapsed()) };
            Ok(Some((pool, c.conn, c.reused)))
        }
        Err(e) => {
            let kind = match e {
                ConnectError::Timeout { .. } => ErrorKind::ConnectTimeout,
                _ => ErrorKind::ConnectFailed,
            };
            let again = attempts.connect_failed(kind);
            tracing::warn!(
                site = %ex.site.map_or("?", |s| name_of(&snap.site_names, s)),
                node = %name_of(&snap.node_names, node),
                error = %e,
                retry = again,
                "cannot connect to node"
            );
            ex.attempt_failed(Outcome::ConnectFailed);
            if !again {
                return Err(kind.into());
            }
            // Nothing was sent: safe to replay on another node.
            ex.retried(RetryReason::ConnFailure);
            Ok(None)
        }
    }
}

/// No response head came: `Ok` when the request is to be sent again (its
/// body, if any, is back in `out`), else the error to answer. `stale`: the
/// connection was a pooled one and the request may be repeated (idempotent,
/// no body): a node that closed it before answering anything is not
/// counted as failing (it may have timed the connection out as the request
/// went out).
fn failed_before_head(
    ex: &mut Exchange,
    snap: &Snapshot,
    attempts: &mut Attempts,
    out: &mut Outgoing,
    failed: Waited,
    replay: bool,
    stale: bool,
) -> Result<(), Stop> {
    let node = ex.node.unwrap_or(usize::MAX);
    let err = match failed {
        Waited::Failed(e) => e,
        Waited::Timeout => {
            tracing::warn!(site = %ex.site.map_or("?", |s| name_of(&snap.site_names, s)), node = %name_of(&snap.node_names, node), "node response timeout");
            ex.attempt_failed(Outcome::Timeout);
            return Err(ErrorKind::UpstreamTimeout.into());
        }
    };
    if let NodeError::ClientBody(c) = &err {
        tracing::debug!(error = %c, "client failed while its request was forwarded");
        return Err(match c {
            ClientBodyError::Timeout => ErrorKind::ClientTimeout,
            ClientBodyError::Aborted(_) => ErrorKind::ClientAborted,
        }
        .into());
    }
    if stale && matches!(err, NodeError::Closed) && attempts.stale(node) {
        out.again();
        // Not a failure of the node: it may be picked again.
        ex.pick = None;
        return Ok(());
    }
    ex.attempt_failed(Outcome::ProtocolError);
    let kind = ErrorKind::UpstreamProtocol;
    let broke = kind.retry() == RetryType::Idempotent && err.broke_before_response();
    let again = broke && attempts.empty_response(kind, replay);
    tracing::warn!(site = %ex.site.map_or("?", |s| name_of(&snap.site_names, s)), node = %name_of(&snap.node_names, node), error = %err, retry = again, "node failed before its response headers");
    if again {
        ex.retried(RetryReason::EmptyResponse);
        out.again();
        return Ok(());
    }
    Err(kind.into())
}

/// The node answered 421 and the request goes to another node. RFC 9110
/// 15.5.20: a 421 may be retried on another connection, whatever the
/// method. The node serves another site now: routing skips it until its
/// role word is read again.
fn misdirected(ex: &mut Exchange, snap: &Snapshot) {
    if let Some(pick) = ex.pick.take() {
        pick.node.follow_role(pick.node.assigned_site(), false);
    }
    let (site, node) = (ex.site.unwrap_or(usize::MAX), ex.node.unwrap_or(usize::MAX));
    tracing::warn!(site = %name_of(&snap.site_names, site), node = %name_of(&snap.node_names, node),
        "node answered 421 (it no longer serves the site): request replayed on another node");
    ex.retried(RetryReason::Misdirected);
}

enum Waited {
    Timeout,
    Failed(NodeError),
}

/// Waits for the node's response head. `timeouts.server` counts from the
/// last progress: while a request body is still being uploaded the clock
/// restarts with each chunk sent (an upload longer than the timeout is not
/// a slow node).
async fn wait_response<F>(
    sent: F,
    (sent_at, limit): (Instant, Duration),
    progress: Option<&AtomicU64>,
    start: Instant,
    timer: Option<Pin<&mut Sleep>>,
) -> Result<Response<NodeBody>, Waited>
where
    F: std::future::Future<Output = Result<Response<NodeBody>, NodeError>>,
{
    tokio::pin!(sent);
    let mut seen = progress.map(|p| p.load(Ordering::Relaxed));
    let mut deadline = sent_at + limit;
    let mut own = None;
    let mut timer = match timer {
        Some(t) => t,
        None => own
            .insert(Box::pin(tokio::time::sleep_until(deadline.into())))
            .as_mut(),
    };
    loop {
        serve1::arm(timer.as_mut(), deadline);
        tokio::select! {
            biased;
            r = &mut sent => return r.map_err(Waited::Failed),
            _ = timer.as_mut() => {
                if !serve1::due(deadline) {
                    continue;
                }
                let now = progress.map(|p| p.load(Ordering::Relaxed));
                if now == seen {
                    return Err(Waited::Timeout);
                }
                seen = now;
                // Restart from the last chunk's time.
                let last = Duration::from_millis(now.unwrap_or(0));
                deadline = start + last + limit;
                let now = Instant::now();
                if deadline <= now {
                    deadline = now + limit;
                }
            }
        }
    }
}
