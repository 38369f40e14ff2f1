//! Sticky cookies and hash keys on the request path, as HAProxy's `cookie`
//! directive and `balance` keys: what a request brings to its pick
//! ([`pick_key`]), the persistence cookie taken out of (or unprefixed in)
//! the request the node gets ([`strip`]), and the cookie set, rewritten or
//! prefixed on the response ([`response`]).
//!
//! Sites with neither a hash `balance` nor `[site.sticky]` pay two
//! lookups, no allocation: [`pick_key`] returns the empty key at once.
//!
//! The inserted cookie's value is HAProxy's: `NODE`, and with `maxidle` or
//! `maxlife` `NODE|LAST|FIRST`, the dates in 4-second units since the
//! epoch as five base64 characters (HAProxy's `s30tob64`), so a client can
//! move between HAProxy and rdmalb without losing its session.

use std::net::IpAddr;

use http::header::{self, HeaderValue};
use http::{HeaderMap, Method, Request, StatusCode};

use super::super::exchange::Exchange;
use super::super::state::Snapshot;
use crate::balance::hash::{self, key_hash};
use crate::balance::sticky::Pinned;
use crate::balance::PickKey;
use crate::config::{CookieMode, Sticky};

/// What the request's persistence cookie said, kept for the response.
#[derive(Debug, Clone, Copy, Default)]
pub struct StickyIn {
    /// The node a valid cookie named.
    pub named: Option<usize>,
    /// The cookie's dates (unix seconds; 0 = none).
    pub first_date: u32,
    pub last_date: u32,
    /// The request allows a cacheable response (HAProxy's `TX_CACHEABLE`
    /// on the request side).
    pub cacheable: bool,
    /// How the pick fared with the named node.
    pub pinned: Option<Pinned>,
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// HAProxy's `s30tob64`: the low 30 bits of `v` as five base64 digits.
pub fn s30_to_b64(v: u32) -> [u8; 5] {
    std::array::from_fn(|i| B64[((v >> (24 - 6 * i)) & 0x3f) as usize])
}

/// HAProxy's `b64tos30`; `None` for a character outside the alphabet.
pub fn b64_to_s30(s: &[u8]) -> Option<u32> {
    s.get(..5)?.iter().try_fold(0u32, |v, &c| {
        let d = B64.iter().position(|&b| b == c)? as u32;
        Some((v << 6) | d)
    })
}

/// What the request brings to its pick: its hash key's hash and the node
/// its cookie names (recorded in `ex` for the response).
pub fn pick_key<B>(
    ex: &mut Exchange,
    snap: &Snapshot,
    site: usize,
    req: &Request<B>,
    client: IpAddr,
) -> PickKey {
    let b = &snap.backends;
    let mut key = PickKey::default();
    if let Some(h) = b.hashes(site) {
        key.hash = key_hash(h, req.uri(), req.headers(), client);
    }
    if let Some(st) = b.sticky(site) {
        let mut seen = StickyIn {
            cacheable: cacheable_request(req.method(), req.headers()),
            ..StickyIn::default()
        };
        if let Some(value) = hash::key::cookie(req.headers(), st.cookie.as_bytes()) {
            let now = unix_now();
            let (node, first, last) = parse_value(st, value);
            if let Some((first, last)) = live_dates(st, first, last, now) {
                seen.first_date = first;
                seen.last_date = last;
                if !node.is_empty() {
                    seen.named = b.cookie_node(site, node);
                }
            }
        }
        key.pinned = seen.named;
        ex.sticky = Some(seen);
    }
    key
}

/// The node part of a persistence cookie's value and its dates (HAProxy:
/// `NODE~APP` in prefix mode, else `NODE[|LAST[|FIRST]]`).
fn parse_value<'a>(st: &Sticky, v: &'a [u8]) -> (&'a [u8], u32, u32) {
    if st.mode == CookieMode::Prefix {
        let end = v.iter().position(|&c| c == b'~').unwrap_or(v.len());
        return (&v[..end], 0, 0);
    }
    let Some(bar) = v.iter().position(|&c| c == b'|') else {
        return (v, 0, 0);
    };
    let rest = &v[bar + 1..];
    let date = |s: &[u8]| b64_to_s30(s).filter(|d| *d > 0).map_or(0, |d| d << 2);
    let last = if rest.len() >= 5 { date(rest) } else { 0 };
    let first = match rest.iter().position(|&c| c == b'|') {
        Some(p) if rest.len() - p > 5 => date(&rest[p + 1..]),
        _ => 0,
    };
    (&v[..bar], first, last)
}

/// The dates of a cookie still valid under `maxlife` and `maxidle`, `None`
/// when it expired (then it names no node, as in HAProxy; dates more than
/// a day ahead count as expired too).
fn live_dates(st: &Sticky, first: u32, last: u32, now: u32) -> Option<(u32, u32)> {
    let stale = |date: u32, max: Option<std::time::Duration>| {
        let Some(max) = max else { return false };
        date != 0
            && ((now as i64 - date as i64) > max.as_secs() as i64
                || (date as i64 - now as i64) > 86_400)
    };
    if stale(first, st.maxlife) || stale(last, st.maxidle) {
        return None;
    }
    Some((first, last))
}

/// The persistence cookie as the node gets it: without its `NODE~` prefix
/// (prefix mode), or taken out (insert mode with `indirect`).
pub fn strip(st: &Sticky, headers: &mut HeaderMap) {
    let drop_it = st.mode == CookieMode::Insert && st.indirect;
    if !(drop_it || st.mode == CookieMode::Prefix) {
        return;
    }
    let name = st.cookie.as_bytes();
    let lines: Vec<HeaderValue> = headers.get_all(header::COOKIE).iter().cloned().collect();
    if !lines
        .iter()
        .any(|l| hash::key::cookie_in(l.as_bytes(), name).is_some())
    {
        return;
    }
    headers.remove(header::COOKIE);
    for line in lines {
        let mut kept: Vec<u8> = Vec::with_capacity(line.len());
        for pair in line
            .as_bytes()
            .split(|&c| c == b';' || c == b',')
            .map(<[u8]>::trim_ascii)
        {
            let eq = pair.iter().position(|&c| c == b'=');
            let ours = eq.filter(|&eq| pair[..eq].trim_ascii() == name);
            let tail = match ours {
                Some(_) if drop_it => continue,
                Some(eq) => {
                    let value = pair[eq + 1..].trim_ascii();
                    value
                        .iter()
                        .position(|&c| c == b'~')
                        .map(|t| &value[t + 1..])
                }
                None => None,
            };
            if pair.is_empty() {
                continue;
            }
            if !kept.is_empty() {
                kept.extend_from_slice(b"; ");
            }
            match tail {
                Some(app) => {
                    kept.extend_from_slice(name);
                    kept.push(b'=');
                    kept.extend_from_slice(app);
                }
                None => kept.extend_from_slice(pair),
            }
        }
        if kept.is_empty() {
            continue;
        }
        if let Ok(v) = HeaderValue::from_bytes(&kept) {
            headers.append(header::COOKIE, v);
        }
    }
}

/// HAProxy's request side of cacheability: a safe method, no
/// `Authorization`, no `Cache-Control: no-store`.
fn cacheable_request(method: &Method, headers: &HeaderMap) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE
    ) && !headers.contains_key(header::AUTHORIZATION)
        && !headers
            .get_all(header::CACHE_CONTROL)
            .iter()
            .flat_map(|v| v.as_bytes().split(|&c| c == b','))
            .any(|d| starts_with_ci(d.trim_ascii(), b"no-store"))
}

fn starts_with_ci(s: &[u8], prefix: &[u8]) -> bool {
    s.len() >= prefix.len() && s[..prefix.len()].eq_ignore_ascii_case(prefix)
}

/// HAProxy's response side: a status cacheable by default and no
/// directive forbidding it (`public` allows it again).
fn cacheable_response(status: StatusCode, headers: &HeaderMap) -> bool {
    if !matches!(
        status.as_u16(),
        200 | 203 | 204 | 206 | 300 | 301 | 404 | 405 | 410 | 414 | 501
    ) {
        return false;
    }
    if headers
        .get_all(header::PRAGMA)
        .iter()
        .any(|v| v.as_bytes().trim_ascii().eq_ignore_ascii_case(b"no-cache"))
    {
        return false;
    }
    // HAProxy 2.6 keeps a response cacheable only with freshness
    // information (max-age, s-maxage, Expires) or a validator (ETag,
    // Last-Modified).
    let fresh = headers.contains_key(header::EXPIRES)
        || headers
            .get_all(header::CACHE_CONTROL)
            .iter()
            .flat_map(|v| v.as_bytes().split(|&c| c == b','))
            .map(<[u8]>::trim_ascii)
            .any(|d| starts_with_ci(d, b"max-age") || starts_with_ci(d, b"s-maxage"));
    if !fresh && !headers.contains_key(header::ETAG) && !headers.contains_key(header::LAST_MODIFIED)
    {
        return false;
    }
    let mut ok = true;
    for d in headers
        .get_all(header::CACHE_CONTROL)
        .iter()
        .flat_map(|v| v.as_bytes().split(|&c| c == b','))
        .map(<[u8]>::trim_ascii)
    {
        if d.eq_ignore_ascii_case(b"public") {
            ok = true;
        } else if [
            &b"private"[..],
            b"no-cache",
            b"no-store",
            b"max-age=0",
            b"s-maxage=0",
        ]
        .iter()
        .any(|x| d.eq_ignore_ascii_case(x))
        {
            ok = false;
        }
    }
    ok
}

/// The response head's persistence cookie: the node's own `Set-Cookie`
/// of that name removed (insert mode, or a direct hit with `indirect`),
/// rewritten or prefixed; a `Set-Cookie` inserted when the node was chosen
/// by balancing or the dates need refreshing; `Cache-Control: private`
/// with `nocache`.
pub fn response(ex: &Exchange, status: StatusCode, headers: &mut HeaderMap) {
    let (Some(site), Some(node), Some(seen)) = (ex.site, ex.node, ex.sticky) else {
        return;
    };
    let b = &ex.snap.backends;
    let Some(st) = b.sticky(site) else { return };
    let node_cookie = b.node_cookie(site, node);
    let direct = seen.pinned == Some(Pinned::Kept) && seen.named == Some(node);
    server_cookies(st, headers, node_cookie, direct);
    if st.mode != CookieMode::Insert {
        return;
    }
    let now = unix_now();
    let dated = st.maxidle.is_some() || st.maxlife.is_some();
    let refresh = (dated || seen.last_date != 0) && (seen.last_date == 0 || seen.last_date < now);
    let first_needed = st.maxlife.is_some() && seen.first_date == 0;
    let first_dropped = st.maxlife.is_none() && seen.first_date != 0;
    if direct && !refresh && !first_needed && !first_dropped {
        return;
    }
    let mut v = format!("{}=", st.cookie);
    match node_cookie {
        None => v.push_str("; Expires=Thu, 01-Jan-1970 00:00:01 GMT; path=/"),
        Some(c) => {
            v.push_str(c);
            if dated {
                let stamp = (now + 3) >> 2;
                v.push('|');
                v.push_str(std::str::from_utf8(&s30_to_b64(stamp)).unwrap_or(""));
                if st.maxlife.is_some() {
                    let first = if seen.first_date != 0 {
                        seen.first_date >> 2
                    } else {
                        stamp
                    };
                    v.push('|');
                    v.push_str(std::str::from_utf8(&s30_to_b64(first)).unwrap_or(""));
                }
            }
            v.push_str("; path=/");
        }
    }
    for d in &st.domains {
        v.push_str("; domain=");
        v.push_str(d);
    }
    if st.httponly {
        v.push_str("; HttpOnly");
    }
    if st.secure {
        v.push_str("; Secure");
    }
    if let Ok(hv) = HeaderValue::from_str(&v) {
        let cacheable = seen.cacheable && cacheable_response(status, headers);
        headers.append(header::SET_COOKIE, hv);
        if st.nocache && cacheable {
            headers.append(header::CACHE_CONTROL, HeaderValue::from_static("private"));
        }
    }
}

/// The node's own `Set-Cookie` lines carrying the persistence cookie.
fn server_cookies(st: &Sticky, headers: &mut HeaderMap, node_cookie: Option<&str>, direct: bool) {
    let name = st.cookie.as_bytes();
    let ours = |v: &HeaderValue| {
        let b = v.as_bytes();
        let eq = b.iter().position(|&c| c == b'=');
        eq.is_some_and(|eq| b[..eq].trim_ascii() == name)
    };
    if !headers.get_all(header::SET_COOKIE).iter().any(ours) {
        return;
    }
    let lines: Vec<HeaderValue> = headers
        .get_all(header::SET_COOKIE)
        .iter()
        .cloned()
        .collect();
    headers.remove(header::SET_COOKIE);
    for line in lines {
        if !ours(&line) {
            headers.append(header::SET_COOKIE, line);
            continue;
        }
        if st.mode == CookieMode::Insert || (direct && st.indirect) {
            continue;
        }
        let Some(c) = node_cookie.filter(|_| st.mode != CookieMode::Passive) else {
            headers.append(header::SET_COOKIE, line);
            continue;
        };
        let b = line.as_bytes();
        let eq = b.iter().position(|&c| c == b'=').unwrap_or(0);
        let rest = &b[eq + 1..];
        let val_end = rest.iter().position(|&c| c == b';').unwrap_or(rest.len());
        let mut out = b[..=eq].to_vec();
        out.extend_from_slice(c.as_bytes());
        if st.mode == CookieMode::Prefix {
            out.push(b'~');
            out.extend_from_slice(rest[..val_end].trim_ascii_start());
        }
        out.extend_from_slice(&rest[val_end..]);
        if let Ok(v) = HeaderValue::from_bytes(&out) {
            headers.append(header::SET_COOKIE, v);
        }
    }
}

fn unix_now() -> u32 {
    rdmalb_base::time::unix_now_secs() as u32
}

#[cfg(test)]
mod tests;
