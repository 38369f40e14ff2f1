//! `GET /stats`: the live stats page, in the spirit of HAProxy's but
//! readable: sites, nodes with their load index and its parts, the
//! admission queue and the reconfiguration agent's latest role changes
//! (`docs/operations.md`, "The stats page").
//!
//! One self-contained HTML document (`stats.html`: inline CSS and script,
//! no external asset, no web font) that polls `GET /status` every second
//! and says when its figures are stale or the proxy cannot be reached. The
//! server side is only this constant page: what it shows is `/status`, so
//! the page can never disagree with the JSON.
//!
//! Read-only like `/status` (the same access rules). Its
//! Content-Security-Policy allows the page's own inline script and style
//! by their SHA-256 hashes (computed once from the page, so editing the
//! page cannot leave a stale hash), connections to this origin only, and
//! nothing else: no other script, style, frame, form target or image but
//! the empty inline favicon.

use std::sync::OnceLock;

use bytes::Bytes;
use http::{header, HeaderValue, Response};
use http_body_util::Full;
use sha2::{Digest, Sha256};

/// The page's path on the admin listener.
pub const PATH: &str = "/stats";

/// The page.
pub const PAGE: &str = include_str!("stats.html");

/// The response to `GET /stats` (hyper drops the body for `HEAD`).
pub fn page() -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from_static(PAGE.as_bytes())));
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(header::CONTENT_SECURITY_POLICY, policy().clone());
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    r
}

fn policy() -> &'static HeaderValue {
    static POLICY: OnceLock<HeaderValue> = OnceLock::new();
    POLICY.get_or_init(|| {
        HeaderValue::from_str(&content_security_policy(PAGE))
            .unwrap_or_else(|_| HeaderValue::from_static("default-src 'none'"))
    })
}

/// The policy for `page`: its inline `<script>` and `<style>` blocks by
/// hash, `fetch` to this origin, the `data:` favicon; nothing else.
pub fn content_security_policy(page: &str) -> String {
    let hashes = |tag: &str| {
        inline_blocks(page, tag)
            .iter()
            .map(|b| format!("'sha256-{}'", base64(&Sha256::digest(b.as_bytes()))))
            .collect::<Vec<_>>()
            .join(" ")
    };
    format!(
        "default-src 'none'; script-src {}; style-src {}; connect-src 'self'; img-src data:; \
         base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
        hashes("script"),
        hashes("style"),
    )
}

/// The text between each `<tag>` and `</tag>` of `page`, as the browser
/// hashes it (the page writes these tags without attributes).
fn inline_blocks<'a>(page: &'a str, tag: &str) -> Vec<&'a str> {
    let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
    let mut out = Vec::new();
    let mut rest = page;
    while let Some(start) = rest.find(&open) {
        let body = &rest[start + open.len()..];
        let Some(end) = body.find(&close) else { break };
        out.push(&body[..end]);
        rest = &body[end + close.len()..];
    }
    out
}

/// Standard base64 with padding (RFC 4648 section 4), as CSP hashes use.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
