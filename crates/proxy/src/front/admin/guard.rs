//! Who may change things through the admin listener. Reads (`GET`, `HEAD`)
//! are open; every mutating call (today `POST /reconfig/move`) passes
//! [`refusal`] first, in this order:
//!
//! 1. It must not be a request a web page could have made the browser send
//!    (403): an `Origin` other than the listener's own (`http://` and the
//!    address the connection came in on, or `localhost` with its port when
//!    that is a loopback address; `Origin: null` included), `Sec-Fetch-Site`
//!    of `cross-site` or `same-site`, or a `Content-Type` an HTML form or a
//!    CORS "simple request" can carry (`application/x-www-form-urlencoded`,
//!    `multipart/form-data`, `text/plain`), which browsers send without a
//!    preflight. The listener answers no preflight (`OPTIONS` gets 405
//!    without CORS headers), so a browser sends nothing else cross-origin.
//! 2. Mutations must be enabled by `[admin] token_file` (403 without it,
//!    saying how).
//! 3. `Authorization: Bearer <token>` must carry the file's token, compared
//!    in constant time; otherwise 401 with `WWW-Authenticate: Bearer`
//!    (RFC 9110 section 11.6.1, RFC 6750 section 3).
//!
//! The token file is read on every mutating call ([`files::admin_token`]),
//! so replacing the file rotates the token without a reload.

use std::net::SocketAddr;

use bytes::Bytes;
use http::{header, HeaderValue, Request, Response, StatusCode};
use http_body_util::Full;

use super::AdminState;
use crate::config::files;

/// Content types a browser sends cross-origin without a preflight.
const SIMPLE_CONTENT_TYPES: [&str; 3] = [
    "application/x-www-form-urlencoded",
    "multipart/form-data",
    "text/plain",
];

fn refuse(status: StatusCode, message: String) -> Response<Full<Bytes>> {
    let mut body =
        serde_json::to_vec_pretty(&serde_json::json!({ "error": message })).unwrap_or_default();
    body.push(b'\n');
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

fn unauthorized(challenge: &'static str, message: &str) -> Response<Full<Bytes>> {
    let mut r = refuse(StatusCode::UNAUTHORIZED, message.to_string());
    r.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static(challenge),
    );
    r
}

/// Whether `origin` is the listener's own origin for a connection that
/// arrived on `local`.
fn own_origin(origin: &[u8], local: SocketAddr) -> bool {
    let origin = String::from_utf8_lossy(origin);
    let origin = origin.trim_end_matches('/');
    if origin.eq_ignore_ascii_case(&format!("http://{local}")) {
        return true;
    }
    local.ip().is_loopback()
        && origin.eq_ignore_ascii_case(&format!("http://localhost:{}", local.port()))
}

/// Why a request looks like one a web page made a browser send, if it does.
fn cross_origin<B>(req: &Request<B>, local: SocketAddr) -> Option<String> {
    let h = req.headers();
    if let Some(origin) = h.get(header::ORIGIN) {
        if !own_origin(origin.as_bytes(), local) {
            return Some(format!(
                "cross-origin request refused (Origin `{}` is not http://{local})",
                String::from_utf8_lossy(origin.as_bytes())
            ));
        }
    }
    if let Some(site) = h.get("sec-fetch-site") {
        let site = site.as_bytes();
        if site.eq_ignore_ascii_case(b"cross-site") || site.eq_ignore_ascii_case(b"same-site") {
            return Some(format!(
                "cross-origin request refused (Sec-Fetch-Site: {})",
                String::from_utf8_lossy(site)
            ));
        }
    }
    if let Some(ct) = h.get(header::CONTENT_TYPE) {
        let ct = String::from_utf8_lossy(ct.as_bytes());
        let essence = ct.split(';').next().unwrap_or("").trim();
        if SIMPLE_CONTENT_TYPES
            .iter()
            .any(|t| essence.eq_ignore_ascii_case(t))
        {
            return Some(format!(
                "request refused: Content-Type `{essence}` is what a web form or a cross-origin \
                 page can send; send the parameters in the query and no body"
            ));
        }
    }
    None
}

/// Compares two secrets in time that depends on their lengths only.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    let mut diff = a.len() ^ b.len();
    for i in 0..a.len().max(b.len()) {
        let x = a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0);
        diff |= usize::from(x);
        diff = std::hint::black_box(diff);
    }
    diff == 0
}

/// The credentials of `Authorization: Bearer <credentials>` (scheme
/// case-insensitive, RFC 9110 section 11.1).
fn bearer<B>(req: &Request<B>) -> Option<&[u8]> {
    let v = req.headers().get(header::AUTHORIZATION)?.as_bytes();
    let scheme = v.get(..7)?;
    if !scheme.eq_ignore_ascii_case(b"bearer ") {
        return None;
    }
    let cred = v[7..].trim_ascii();
    (!cred.is_empty()).then_some(cred)
}

/// The answer (401 or 403, with a message saying why) that refuses a
/// mutating admin call arriving on `local`, or `None` when it may proceed.
/// Every refusal is logged.
pub fn refusal<B>(
    state: &AdminState,
    req: &Request<B>,
    local: SocketAddr,
) -> Option<Response<Full<Bytes>>> {
    let path = req.uri().path();
    if let Some(why) = cross_origin(req, local) {
        tracing::warn!(%path, reason = %why, "admin: mutation refused");
        return Some(refuse(StatusCode::FORBIDDEN, why));
    }
    let config = state.config.load();
    let Some(token_file) = config.admin.as_ref().and_then(|a| a.token_file.as_deref()) else {
        tracing::warn!(%path, "admin: mutation refused: no [admin] token_file");
        return Some(refuse(
            StatusCode::FORBIDDEN,
            "admin mutations are disabled: set `token_file` in [admin] to a file holding a \
             token (`rdmalb psk --out FILE` makes one) and send `Authorization: Bearer <token>`"
                .into(),
        ));
    };
    let token = match files::admin_token(token_file) {
        Ok(t) => t,
        Err(e) => {
            tracing::error!(%path, error = %e, "admin: mutation refused: admin.token_file unusable");
            return Some(refuse(
                StatusCode::FORBIDDEN,
                format!("admin mutations are disabled: admin.token_file {e}"),
            ));
        }
    };
    match bearer(req) {
        None => {
            tracing::warn!(%path, "admin: mutation refused: no bearer token");
            Some(unauthorized(
                "Bearer realm=\"rdmalb-admin\"",
                "send the admin token: `Authorization: Bearer <token>` (the content of admin.token_file)",
            ))
        }
        Some(cred) if !same_secret(cred, token.as_bytes()) => {
            tracing::warn!(%path, "admin: mutation refused: wrong bearer token");
            Some(unauthorized(
                "Bearer realm=\"rdmalb-admin\", error=\"invalid_token\"",
                "the bearer token does not match admin.token_file",
            ))
        }
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests;
