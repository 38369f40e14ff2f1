//! `POST /reconfig/move?node=NAME&site=SITE`: moves a node by hand through
//! the agent's own site lock and role-word CAS (so it is safe against every
//! proxy's agent). `site=idle` sends the node to the idle pool.
//!
//! A mutating call: it needs `Authorization: Bearer <token>` and is refused
//! from another origin ([`super::guard`]; 401 / 403 before anything else
//! is looked at but the method).
//!
//! Answers JSON: 200 with `{"outcome":"claimed",...}` when the role word
//! changed; 409 when the lock was busy, the CAS lost, or the node cannot
//! move now (the reason says why); 404 for an unknown node or site; 400 for
//! a bad query; 503 when the proxy runs no agent; 502 when a window could
//! not be reached.

use std::net::SocketAddr;

use bytes::Bytes;
use http::{header, HeaderValue, Request, Response, StatusCode};
use http_body_util::Full;

use super::AdminState;
use crate::reconfig::{ClaimOutcome, MoveError};

/// The endpoint's path.
pub const MOVE_PATH: &str = "/reconfig/move";

fn json(status: StatusCode, v: serde_json::Value) -> Response<Full<Bytes>> {
    let mut body = serde_json::to_vec_pretty(&v).unwrap_or_default();
    body.push(b'\n');
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

fn error(status: StatusCode, message: impl Into<String>) -> Response<Full<Bytes>> {
    json(status, serde_json::json!({ "error": message.into() }))
}

/// `node` and `site` from the query; names are plain (a-z, 0-9, `-_.`),
/// so no percent-decoding is needed and anything else is refused.
fn params(query: Option<&str>) -> Result<(String, String), String> {
    let (mut node, mut site) = (None, None);
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        if v.is_empty() || !v.chars().all(rdmalb_base::name::is_name_char) {
            return Err(format!("`{k}` needs a plain name (got `{v}`)"));
        }
        match k {
            "node" => node = Some(v.to_string()),
            "site" => site = Some(v.to_string()),
            other => {
                return Err(format!(
                    "unknown parameter `{other}` (expected node and site)"
                ))
            }
        }
    }
    match (node, site) {
        (Some(n), Some(s)) => Ok((n, s)),
        _ => Err("expected ?node=NAME&site=SITE (site=idle for the idle pool)".into()),
    }
}

/// Answers `POST /reconfig/move` on a connection that came in on `local`.
pub async fn move_node<B>(
    state: &AdminState,
    req: &Request<B>,
    local: SocketAddr,
) -> Response<Full<Bytes>> {
    if req.method() != http::Method::POST {
        let mut r = error(StatusCode::METHOD_NOT_ALLOWED, "use POST");
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("POST"));
        return r;
    }
    if let Some(refused) = super::guard::refusal(state, req, local) {
        return refused;
    }
    let Some(agent) = &state.reconfig else {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "this proxy runs no reconfiguration agent (no node has a sidecar window)",
        );
    };
    let (node, site) = match params(req.uri().query()) {
        Ok(p) => p,
        Err(e) => return error(StatusCode::BAD_REQUEST, e),
    };
    let result = agent.move_node(&node, &site).await;
    tracing::info!(node = %node, site = %site, result = ?result, "admin move");
    let status = move_status(&result);
    match result {
        Ok(o) => json(status, serde_json::json!(o)),
        Err(e) => error(status, e.to_string()),
    }
}

/// The HTTP status of a move's result (here and in the runtime API): 200
/// claimed; 409 not now (lock busy, lost CAS, not movable, no window);
/// 404 unknown node or site; 502 a window not reached.
pub(super) fn move_status(result: &Result<ClaimOutcome, MoveError>) -> StatusCode {
    match result {
        Ok(ClaimOutcome::Claimed { .. }) => StatusCode::OK,
        Ok(_) => StatusCode::CONFLICT,
        Err(e) => move_error_status(e),
    }
}

/// The HTTP status of a refused manual action ([`move_status`]).
pub(super) fn move_error_status(e: &MoveError) -> StatusCode {
    match e {
        MoveError::NoWindow(_) | MoveError::NotMovable { .. } => StatusCode::CONFLICT,
        MoveError::UnknownNode(_) | MoveError::UnknownSite(_) => StatusCode::NOT_FOUND,
        MoveError::Protocol(_) => StatusCode::BAD_GATEWAY,
    }
}

#[cfg(test)]
mod tests;
