//! Header rewriting between client and node: hop-by-hop removal (RFC 9110
//! §7.6.1), `X-Forwarded-For`/`X-Forwarded-Proto`, `Forwarded` (RFC 7239;
//! kept from trusted clients only, see `global.forwarded_for`) and `Via`.

use std::fmt::Write as _;
use std::net::IpAddr;

use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::Version;

static X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
static X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
static PROXY_CONNECTION: HeaderName = HeaderName::from_static("proxy-connection");
static KEEP_ALIVE: HeaderName = HeaderName::from_static("keep-alive");

/// Whether the request asks for a protocol upgrade (WebSocket and the like):
/// HTTP/1.1 with `Connection: upgrade` and an `Upgrade` header. `present`
/// is [`Present::scan`] of `headers`.
pub fn is_upgrade_request(version: Version, headers: &HeaderMap, present: Present) -> bool {
    version == Version::HTTP_11
        && present.has(Present::UPGRADE)
        && present.has(Present::CONNECTION)
        && connection_has(headers, "upgrade")
}

/// Whether any `Connection` header lists `token` (case-insensitive).
pub fn connection_has(headers: &HeaderMap, token: &str) -> bool {
    headers.get_all(header::CONNECTION).iter().any(|v| {
        v.to_str()
            .map(|s| s.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
            .unwrap_or(false)
    })
}

/// Whether an HTTP/1 server connection ends after the response to a
/// request of `version` with `headers`, as hyper decides it: HTTP/1.1 with
/// `Connection: close`, HTTP/1.0 without `Connection: keep-alive`. HTTP/2
/// streams never close their connection.
pub fn closes_after(version: Version, headers: &HeaderMap) -> bool {
    match version {
        Version::HTTP_11 => connection_has(headers, "close"),
        Version::HTTP_10 | Version::HTTP_09 => !connection_has(headers, "keep-alive"),
        _ => false,
    }
}

/// The headers the rewriting in this module looks at, found in one pass
/// over a message's field names ([`Present::scan`]), so that removing or
/// merging a header the message does not carry costs no map lookup (a
/// request from a plain client carries none of them but `Host`). A flag
/// may stay set after its header was removed (the lookup is then made as
/// without the scan); a header added after the scan is not flagged, so a
/// scan is valid for the steps that only read the names they do not add.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Present(u16);

impl Present {
    pub const CONNECTION: u16 = 1;
    pub const KEEP_ALIVE: u16 = 1 << 1;
    pub const PROXY_CONNECTION: u16 = 1 << 2;
    pub const TE: u16 = 1 << 3;
    pub const TRANSFER_ENCODING: u16 = 1 << 4;
    pub const UPGRADE: u16 = 1 << 5;
    pub const EXPECT: u16 = 1 << 6;
    pub const X_FORWARDED_FOR: u16 = 1 << 7;
    pub const FORWARDED: u16 = 1 << 8;
    pub const VIA: u16 = 1 << 9;

    /// Which of the names above `headers` holds.
    pub fn scan(headers: &HeaderMap) -> Present {
        let mut bits = 0;
        for name in headers.keys() {
            bits |= match name.as_str() {
                "connection" => Self::CONNECTION,
                "keep-alive" => Self::KEEP_ALIVE,
                "proxy-connection" => Self::PROXY_CONNECTION,
                "te" => Self::TE,
                "transfer-encoding" => Self::TRANSFER_ENCODING,
                "upgrade" => Self::UPGRADE,
                "expect" => Self::EXPECT,
                "x-forwarded-for" => Self::X_FORWARDED_FOR,
                "forwarded" => Self::FORWARDED,
                "via" => Self::VIA,
                _ => 0,
            };
        }
        Present(bits)
    }

    /// Whether the scan saw `flag` (one of the constants above).
    pub fn has(self, flag: u16) -> bool {
        self.0 & flag != 0
    }
}

/// Removes hop-by-hop headers: `Connection` and every header it names,
/// `Keep-Alive`, `Proxy-Connection`, `TE` (unless it is just `trailers`),
/// `Transfer-Encoding`, and `Upgrade` unless `upgrade` is set, in which
/// case `Connection: upgrade` is kept so the node sees the upgrade.
/// `Trailer` is end to end (RFC 9110 section 6.6.2) and stays: hyper
/// forwards the trailer fields it declares, and only those. `present` is
/// [`Present::scan`] of `headers`.
pub fn strip_hop_by_hop(headers: &mut HeaderMap, present: Present, upgrade: bool) {
    if present.has(Present::CONNECTION) {
        let mut named: Vec<HeaderName> = Vec::new();
        for v in headers.get_all(header::CONNECTION) {
            let Ok(s) = v.to_str() else { continue };
            for t in s.split(',') {
                let t = t.trim();
                if t.is_empty()
                    || t.eq_ignore_ascii_case("close")
                    || t.eq_ignore_ascii_case("keep-alive")
                    || t.eq_ignore_ascii_case("upgrade")
                {
                    continue;
                }
                if let Ok(name) = HeaderName::from_bytes(t.to_ascii_lowercase().as_bytes()) {
                    named.push(name);
                }
            }
        }
        for name in named {
            headers.remove(name);
        }
        headers.remove(header::CONNECTION);
    }
    if present.has(Present::KEEP_ALIVE) {
        headers.remove(&KEEP_ALIVE);
    }
    if present.has(Present::PROXY_CONNECTION) {
        headers.remove(&PROXY_CONNECTION);
    }
    if present.has(Present::TRANSFER_ENCODING) {
        headers.remove(header::TRANSFER_ENCODING);
    }
    if present.has(Present::TE) {
        if let Some(te) = headers.get(header::TE) {
            let only_trailers = te
                .to_str()
                .map(|s| s.trim().eq_ignore_ascii_case("trailers"))
                .unwrap_or(false);
            if !only_trailers || headers.get_all(header::TE).iter().count() > 1 {
                headers.remove(header::TE);
            }
        }
    }
    if upgrade {
        headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    } else if present.has(Present::UPGRADE) {
        headers.remove(header::UPGRADE);
    }
}

/// Appends `value` to a comma-separated list header, merging existing
/// lines into one (many applications read only the first line).
fn append_list(headers: &mut HeaderMap, name: &HeaderName, value: String) {
    let mut joined = String::new();
    for v in headers.get_all(name) {
        if let Ok(s) = v.to_str() {
            let s = s.trim();
            if !s.is_empty() {
                joined.push_str(s);
                joined.push_str(", ");
            }
        }
    }
    let text = if joined.is_empty() {
        value
    } else {
        joined.push_str(&value);
        joined
    };
    // Takes the buffer over without copying it.
    if let Ok(v) = HeaderValue::from_maybe_shared(bytes::Bytes::from(text)) {
        headers.insert(name.clone(), v);
    }
}

/// What the forwarding headers say about one client connection, formatted
/// once per connection rather than once per request.
#[derive(Debug, Clone)]
pub struct ClientId {
    /// The client address as `X-Forwarded-For` wants it.
    ip: HeaderValue,
    /// `for=…;proto=…`, the constant part of the `Forwarded` element.
    for_proto: std::sync::Arc<str>,
    proto: &'static str,
}

impl ClientId {
    /// For a client at `client` connected over `proto` ("http"/"https").
    /// IPv4-mapped IPv6 addresses are shown as IPv4.
    pub fn new(client: IpAddr, proto: &'static str) -> ClientId {
        let ip = client.to_canonical();
        let ip_text = ip.to_string();
        let for_proto = match ip {
            IpAddr::V4(_) => format!("for={ip_text};proto={proto}"),
            IpAddr::V6(_) => format!("for=\"[{ip_text}]\";proto={proto}"),
        };
        ClientId {
            ip: HeaderValue::from_maybe_shared(bytes::Bytes::from(ip_text))
                .unwrap_or_else(|_| HeaderValue::from_static("unknown")),
            for_proto: std::sync::Arc::from(for_proto),
            proto,
        }
    }

    /// [`ClientId::new`], or a copy of the one this thread made last when
    /// it was for the same address and protocol: many connections come
    /// from one address (a proxy or NAT in front, a load generator), and a
    /// copy costs two reference counts where formatting costs three
    /// allocations per connection.
    pub fn cached(client: IpAddr, proto: &'static str) -> ClientId {
        thread_local! {
            static LAST: std::cell::RefCell<Option<(IpAddr, &'static str, ClientId)>> =
                const { std::cell::RefCell::new(None) };
        }
        LAST.with(|last| {
            let mut last = last.borrow_mut();
            match &*last {
                Some((ip, p, id)) if *ip == client && *p == proto => id.clone(),
                _ => {
                    let id = ClientId::new(client, proto);
                    *last = Some((client, proto, id.clone()));
                    id
                }
            }
        })
    }
}

/// Adds `X-Forwarded-For`, `X-Forwarded-Proto` (replaced) and a
/// `Forwarded` element for a request from `client` with the given Host.
/// With `keep_incoming` (a trusted client: `global.forwarded_for` and
/// `trusted_proxies`) the client's address and element are appended to the
/// `X-Forwarded-For` and `Forwarded` it sent; without, those are dropped
/// first, so the node sees only the address this proxy saw. `present` is
/// [`Present::scan`] of `headers`.
pub fn add_forwarding(
    headers: &mut HeaderMap,
    present: Present,
    client: &ClientId,
    host: Option<&str>,
    keep_incoming: bool,
) {
    let had_xff = present.has(Present::X_FORWARDED_FOR);
    let had_fwd = present.has(Present::FORWARDED);
    if !keep_incoming {
        if had_xff {
            headers.remove(&X_FORWARDED_FOR);
        }
        if had_fwd {
            headers.remove(header::FORWARDED);
        }
    }
    if keep_incoming && had_xff && headers.contains_key(&X_FORWARDED_FOR) {
        let ip = client.ip.to_str().unwrap_or("unknown").to_string();
        append_list(headers, &X_FORWARDED_FOR, ip);
    } else {
        headers.insert(X_FORWARDED_FOR.clone(), client.ip.clone());
    }
    headers.insert(
        X_FORWARDED_PROTO.clone(),
        HeaderValue::from_static(client.proto),
    );
    // `;host=h` for a token, `;host="h"` for other printable text, else
    // nothing; sized exactly, so the value takes the buffer over whole.
    let host = host.and_then(|h| {
        if is_token(h) {
            Some((h, false))
        } else if h
            .bytes()
            .all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\')
        {
            Some((h, true))
        } else {
            None
        }
    });
    let len = client.for_proto.len() + host.map_or(0, |(h, q)| h.len() + 6 + 2 * usize::from(q));
    let mut fwd = String::with_capacity(len);
    fwd.push_str(&client.for_proto);
    match host {
        Some((h, false)) => {
            let _ = write!(fwd, ";host={h}");
        }
        Some((h, true)) => {
            let _ = write!(fwd, ";host=\"{h}\"");
        }
        None => {}
    }
    if keep_incoming && had_fwd {
        append_list(headers, &header::FORWARDED, fwd);
    } else if let Ok(v) = HeaderValue::from_maybe_shared(bytes::Bytes::from(fwd)) {
        headers.insert(header::FORWARDED, v);
    }
}

/// Appends this proxy to `Via`. `present` is [`Present::scan`] of
/// `headers`.
pub fn add_via(headers: &mut HeaderMap, present: Present, via: &HeaderValue) {
    if present.has(Present::VIA) && headers.contains_key(header::VIA) {
        if let Ok(v) = via.to_str() {
            append_list(headers, &header::VIA, v.to_string());
            return;
        }
    }
    headers.insert(header::VIA, via.clone());
}

/// RFC 7230 token characters.
fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes().all(|b| {
            b.is_ascii_alphanumeric()
                || matches!(
                    b,
                    b'!' | b'#'
                        | b'$'
                        | b'%'
                        | b'&'
                        | b'\''
                        | b'*'
                        | b'+'
                        | b'-'
                        | b'.'
                        | b'^'
                        | b'_'
                        | b'`'
                        | b'|'
                        | b'~'
                )
        })
}

/// Whether every transfer coding the request names (over all its
/// `Transfer-Encoding` lines) is `chunked`: the only one the proxy
/// understands, so any other is answered 501 (RFC 9112 section 6.1)
/// rather than dropped when the body is re-framed for the node.
pub fn only_chunked(headers: &HeaderMap) -> bool {
    headers.get_all(header::TRANSFER_ENCODING).iter().all(|v| {
        v.to_str().is_ok_and(|s| {
            s.split(',')
                .map(|c| c.split(';').next().unwrap_or("").trim())
                .all(|c| c.is_empty() || c.eq_ignore_ascii_case("chunked"))
        })
    })
}

/// Marks a request body of unknown length (chunked from the client, or
/// HTTP/2 without `Content-Length`) as chunked for the node, whatever the
/// method: hyper sends a GET, HEAD or CONNECT whose body length it does
/// not know as `Content-Length: 0` and leaves the body unread, while the
/// framing of a message does not depend on its method (RFC 9112 section 6).
pub fn chunk_unknown_length(headers: &mut HeaderMap, has_body: bool) {
    if has_body && !headers.contains_key(header::CONTENT_LENGTH) {
        headers.insert(
            header::TRANSFER_ENCODING,
            HeaderValue::from_static("chunked"),
        );
    }
}

/// Whether the request names `chunked` more than once over all its
/// `Transfer-Encoding` lines. RFC 9112 section 6.1 forbids applying it
/// twice, so such a body has no reliable length (section 6.3): 400, not
/// a body decoded once and forwarded as if the framing were sound.
pub fn chunked_twice(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::TRANSFER_ENCODING)
        .iter()
        .flat_map(|v| v.as_bytes().split(|&b| b == b','))
        .filter(|c| {
            let c = c.split(|&b| b == b';').next().unwrap_or(&[]);
            c.trim_ascii().eq_ignore_ascii_case(b"chunked")
        })
        .count()
        > 1
}

#[cfg(test)]
mod tests;
