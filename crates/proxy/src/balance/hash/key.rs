//! The request's hash key, extracted and hashed as HAProxy 2.6 does
//! (`get_server_sh`, `_uh`, `_ph`, `_hh`, `_expr` in `src/backend.c`).

use std::borrow::Cow;
use std::net::IpAddr;

use http::{HeaderMap, Uri};

use super::functions::{full_hash, hash};
use crate::config::{HashBalance, HashKey};

/// The hash of the request's key under `conf`, `None` when the request has
/// no such key (no query parameter, header or cookie of that name).
pub fn key_hash(conf: &HashBalance, uri: &Uri, headers: &HeaderMap, client: IpAddr) -> Option<u32> {
    let h = match &conf.key {
        // The address as a big-endian number (IPv6: its four words
        // xor-ed); the hash function does not apply.
        HashKey::Source => match client {
            IpAddr::V4(a) => u32::from(a),
            IpAddr::V6(a) => a
                .octets()
                .chunks_exact(4)
                .fold(0, |h, w| h ^ u32::from_be_bytes([w[0], w[1], w[2], w[3]])),
        },
        HashKey::Uri {
            whole,
            path_only,
            len,
            depth,
        } => {
            let target = target(uri, *path_only);
            hash(
                conf.function,
                uri_part(target.as_bytes(), *whole, *len, *depth),
            )
        }
        HashKey::UrlParam(name) => {
            let target = target(uri, false);
            hash(
                conf.function,
                url_param(target.as_bytes(), name.as_bytes())?,
            )
        }
        HashKey::Header { name, domain_only } => {
            let value = first_value(headers.get(name)?.as_bytes());
            if value.is_empty() {
                return None;
            }
            let part = if *domain_only { domain(value) } else { value };
            hash(conf.function, part)
        }
        // An empty cookie is no key (HAProxy balances the request then).
        HashKey::Cookie(name) => hash(
            conf.function,
            cookie(headers, name.as_bytes()).filter(|v| !v.is_empty())?,
        ),
    };
    Some(if conf.avalanche { full_hash(h) } else { h })
}

/// The request target as on the request line: origin form, or the whole
/// absolute form (HTTP/2, proxies) unless `path_only`.
fn target(uri: &Uri, path_only: bool) -> Cow<'_, str> {
    match uri.path_and_query() {
        Some(p) if path_only || uri.authority().is_none() => Cow::Borrowed(p.as_str()),
        _ if uri.authority().is_some() => Cow::Owned(uri.to_string()),
        _ => Cow::Borrowed("/"),
    }
}

/// The part of the target `balance uri` hashes: up to `?` unless `whole`,
/// at most `len` bytes (0: all), and at most `depth` directories (0: all).
fn uri_part(target: &[u8], whole: bool, len: usize, depth: usize) -> &[u8] {
    let target = if len > 0 && target.len() > len {
        &target[..len]
    } else {
        target
    };
    let mut slashes = 0;
    for (i, &c) in target.iter().enumerate() {
        if c == b'/' {
            slashes += 1;
            // The slash ending the `depth`-th directory is left out.
            if depth > 0 && slashes == depth + 1 {
                return &target[..i];
            }
        } else if c == b'?' && !whole {
            return &target[..i];
        }
    }
    target
}

/// The value of query parameter `name` (up to the next `&`), HAProxy's
/// scan: parameters are tested at each `&`, the name must be followed by
/// `=`.
fn url_param<'a>(target: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    let q = target.iter().position(|&c| c == b'?')?;
    let mut rest = &target[q + 1..];
    let n = name.len();
    while rest.len() > n {
        if rest[n] == b'=' && &rest[..n] == name {
            let v = &rest[n + 1..];
            let end = v.iter().position(|&c| c == b'&').unwrap_or(v.len());
            return Some(&v[..end]);
        }
        let amp = rest.iter().position(|&c| c == b'&')?;
        rest = &rest[amp + 1..];
    }
    None
}

/// A header's first comma-separated element, spaces around it trimmed.
fn first_value(v: &[u8]) -> &[u8] {
    let end = v.iter().position(|&c| c == b',').unwrap_or(v.len());
    v[..end].trim_ascii()
}

/// `use_domain_only`: the label before the last dot (`example` of
/// `www.example.com:8080`); the whole value when it has no dot.
fn domain(v: &[u8]) -> &[u8] {
    let Some(last) = v.iter().rposition(|&c| c == b'.') else {
        return v;
    };
    let start = v[..last]
        .iter()
        .rposition(|&c| c == b'.')
        .map_or(0, |p| p + 1);
    &v[start..last]
}

/// The value of the first cookie `name` of the request's `Cookie` headers
/// (HAProxy's `req.cook(name)`).
pub(crate) fn cookie<'a>(headers: &'a HeaderMap, name: &[u8]) -> Option<&'a [u8]> {
    headers
        .get_all(http::header::COOKIE)
        .iter()
        .find_map(|h| cookie_in(h.as_bytes(), name))
}

/// The value of cookie `name` in one `Cookie` header line (cookies end at
/// `;` or `,`, as HAProxy reads them).
pub(crate) fn cookie_in<'a>(line: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    line.split(|&c| c == b';' || c == b',').find_map(|pair| {
        let eq = pair.iter().position(|&c| c == b'=')?;
        (pair[..eq].trim_ascii() == name).then(|| pair[eq + 1..].trim_ascii())
    })
}
