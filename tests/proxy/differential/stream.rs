//! The seeded stream of valid requests the differential test sends through
//! both proxies: raw bytes, so nothing normalises them on the way out.
//!
//! Deterministic for a seed (rand's `StdRng`, locked in Cargo.lock) and
//! bounded: [`CONNECTIONS`] connections of at most [`MAX_PER_CONNECTION`]
//! requests, each connection's requests sent in pipelined batches.

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

pub const CONNECTIONS: usize = 10;
pub const MAX_PER_CONNECTION: usize = 32;
/// Requests sent back to back before the first response is read.
const MAX_BATCH: usize = 5;

/// One request as sent.
pub struct Request {
    /// Also its `X-Diff-Id` header: how the node's record is found.
    pub id: String,
    pub method: &'static str,
    pub bytes: Vec<u8>,
}

/// One client connection: its requests in pipelined batches.
pub struct Connection {
    pub batches: Vec<Vec<Request>>,
}

const METHODS: [&str; 7] = ["GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"];
const HOSTS: [&str; 6] = [
    "www.example.com",
    "Example.ORG",
    "api.example.com:8080",
    "127.0.0.1",
    "[::1]:8443",
    "xn--bcher-kva.example",
];
/// End-to-end headers a browser or API client sends, with plausible values.
const COMMON: [(&str, &str); 12] = [
    ("Accept", "text/html,application/xhtml+xml;q=0.9,*/*;q=0.8"),
    ("Accept-Language", "en-GB, fr;q=0.5"),
    ("Accept-Encoding", "gzip, deflate, br"),
    ("User-Agent", "Mozilla/5.0 (X11; Linux x86_64) diff/1.0"),
    ("Cookie", "session=abc123; theme=dark"),
    ("Authorization", "Bearer eyJhbGciOiJIUzI1NiJ9.e30.x"),
    ("Cache-Control", "no-cache"),
    ("If-None-Match", "\"v1\", W/\"v2\""),
    ("Referer", "http://www.example.com/a?b=c"),
    ("Origin", "http://www.example.com"),
    ("Content-Type", "application/json; charset=utf-8"),
    ("Range", "bytes=0-99"),
];
/// `x-diff-status` values: the echo node answers with that status.
const STATUSES: [&str; 7] = ["200", "200", "201", "204", "301", "404", "410"];

/// The stream for `seed`.
pub fn stream(seed: u64) -> Vec<Connection> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut next_id = 0usize;
    (0..CONNECTIONS)
        .map(|c| {
            let n = rng.gen_range(1..=MAX_PER_CONNECTION);
            let mut reqs: Vec<Request> = (0..n)
                .map(|i| {
                    next_id += 1;
                    let last = i + 1 == n;
                    request(&mut rng, format!("c{c}-{next_id}"), last)
                })
                .collect();
            let mut batches = Vec::new();
            while !reqs.is_empty() {
                let k = rng.gen_range(1..=MAX_BATCH).min(reqs.len());
                batches.push(reqs.drain(..k).collect());
            }
            Connection { batches }
        })
        .collect()
}

fn request(rng: &mut StdRng, id: String, last: bool) -> Request {
    let method = *METHODS.choose(rng).unwrap();
    // HTTP/1.0 closes after its response: only a connection's last
    // request may use it.
    let http10 = last && rng.gen_bool(0.3);
    let host = *HOSTS.choose(rng).unwrap();
    let target = if method == "OPTIONS" && rng.gen_bool(0.2) {
        "*".to_string()
    } else if rng.gen_bool(0.08) {
        // Absolute form naming the Host it carries (RFC 9112 3.2: a client
        // MUST send a Host identical to the authority; a mismatch is in the
        // malformed stream).
        format!("http://{host}{}", origin_form(rng))
    } else {
        origin_form(rng)
    };

    let mut long = true;
    let mut fields: Vec<(String, Vec<u8>)> = Vec::new();
    fields.push((mixed_case(rng, "Host"), host.as_bytes().to_vec()));
    fields.push(("X-Diff-Id".into(), id.clone().into_bytes()));
    if rng.gen_bool(0.4) {
        let s = *STATUSES.choose(rng).unwrap();
        fields.push(("x-diff-status".into(), s.into()));
    }
    if rng.gen_bool(0.3) {
        fields.push(("X-Diff-Reply".into(), b"chunked".to_vec()));
    }
    for _ in 0..rng.gen_range(0..=10) {
        if rng.gen_bool(0.4) {
            let (name, value) = *COMMON.choose(rng).unwrap();
            fields.push((mixed_case(rng, name), value.as_bytes().to_vec()));
        } else {
            fields.push((random_name(rng), value(rng, &mut long)));
        }
    }
    // A field name repeated, in another case, with its own value.
    if fields.len() > 2 && rng.gen_bool(0.3) {
        let name = fields[rng.gen_range(2..fields.len())].0.clone();
        for _ in 0..rng.gen_range(1..=3) {
            let v = value(rng, &mut long);
            fields.push((mixed_case(rng, &name), v));
        }
    }
    // Forwarding headers from a client that is itself a proxy.
    if rng.gen_bool(0.15) {
        fields.push(("X-Forwarded-For".into(), b"203.0.113.7".to_vec()));
    }
    if rng.gen_bool(0.1) {
        fields.push(("Via".into(), b"1.1 upstream-cache".to_vec()));
    }
    if rng.gen_bool(0.1) {
        fields.push(("Forwarded".into(), b"for=198.51.100.1;proto=https".to_vec()));
    }
    // Hop-by-hop fields a proxy must not forward (RFC 9110 section 7.6.1),
    // among them one that Connection names.
    if rng.gen_bool(0.2) {
        fields.push((
            mixed_case(rng, "Connection"),
            b"keep-alive, X-Hop-Secret".to_vec(),
        ));
        fields.push(("X-Hop-Secret".into(), b"not for the node".to_vec()));
    }
    if rng.gen_bool(0.1) {
        fields.push(("Keep-Alive".into(), b"timeout=5, max=100".to_vec()));
    }
    if rng.gen_bool(0.1) {
        fields.push(("TE".into(), b"trailers".to_vec()));
    }
    fields.shuffle(rng);

    // The body and its framing, inserted at a random place.
    let body_wanted = match method {
        "POST" | "PUT" | "PATCH" => rng.gen_bool(0.85),
        "HEAD" => false,
        // HAProxy 2.6 answers 413 to an HTTP/1.0 GET or DELETE with a body
        // (an allowed difference, in the second stream).
        "GET" | "DELETE" if http10 => false,
        _ => rng.gen_bool(0.1),
    };
    let mut body = Vec::new();
    if body_wanted {
        let data = random_bytes(rng);
        if !http10 && rng.gen_bool(0.45) {
            let trailers = chunked(rng, &data, &mut body);
            let at = rng.gen_range(0..=fields.len());
            fields.insert(
                at,
                (
                    mixed_case(rng, "Transfer-Encoding"),
                    if rng.gen_bool(0.2) {
                        b"Chunked".to_vec()
                    } else {
                        b"chunked".to_vec()
                    },
                ),
            );
            if !trailers.is_empty() && rng.gen_bool(0.6) {
                let at = rng.gen_range(0..=fields.len());
                fields.insert(at, ("Trailer".into(), trailers.join(", ").into_bytes()));
            }
        } else {
            let len = if rng.gen_bool(0.1) {
                // Leading zeros are still 1*DIGIT (RFC 9110 section 8.6).
                format!("00{}", data.len())
            } else {
                data.len().to_string()
            };
            let at = rng.gen_range(0..=fields.len());
            fields.insert(at, (mixed_case(rng, "Content-Length"), len.into_bytes()));
            body = data;
        }
    }
    if last && !http10 && rng.gen_bool(0.4) {
        fields.push(("Connection".into(), b"close".to_vec()));
    }

    let version = if http10 { "HTTP/1.0" } else { "HTTP/1.1" };
    let mut bytes = format!("{method} {target} {version}\r\n").into_bytes();
    for (name, value) in &fields {
        bytes.extend_from_slice(name.as_bytes());
        bytes.push(b':');
        bytes.extend_from_slice(ows(rng));
        bytes.extend_from_slice(value);
        bytes.extend_from_slice(ows(rng));
        bytes.extend_from_slice(b"\r\n");
    }
    bytes.extend_from_slice(b"\r\n");
    bytes.extend_from_slice(&body);
    Request { id, method, bytes }
}

/// `data` as chunks of random sizes (hex in either case, sometimes with
/// leading zeros or an extension) and 0-2 trailer fields; returns the
/// trailer names.
fn chunked(rng: &mut StdRng, data: &[u8], out: &mut Vec<u8>) -> Vec<String> {
    let mut rest = data;
    while !rest.is_empty() {
        let n = rng.gen_range(1..=700).min(rest.len());
        let size = match rng.gen_range(0..4) {
            0 => format!("{n:X}"),
            1 => format!("0{n:x}"),
            _ => format!("{n:x}"),
        };
        out.extend_from_slice(size.as_bytes());
        if rng.gen_bool(0.1) {
            out.extend_from_slice(b";ext=1");
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(&rest[..n]);
        out.extend_from_slice(b"\r\n");
        rest = &rest[n..];
    }
    out.extend_from_slice(b"0\r\n");
    let mut names = Vec::new();
    for i in 0..rng.gen_range(0..=2) {
        let name = format!("X-Trailer-{i}");
        out.extend_from_slice(format!("{name}: t{}\r\n", rng.gen_range(0..1000)).as_bytes());
        names.push(name);
    }
    out.extend_from_slice(b"\r\n");
    names
}

/// An origin-form target: path segments of pchar (RFC 3986 section 3.3)
/// with percent-encodings in either case, and sometimes a query.
fn origin_form(rng: &mut StdRng) -> String {
    let mut t = String::new();
    for _ in 0..rng.gen_range(0..=4) {
        t.push('/');
        t.push_str(&uri_text(rng, "-._~!$&'()*+,;=:@"));
    }
    if t.is_empty() || rng.gen_bool(0.2) {
        t.push('/');
    }
    if rng.gen_bool(0.5) {
        t.push('?');
        let pairs: Vec<String> = (0..rng.gen_range(1..=4))
            .map(|_| {
                format!(
                    "{}={}",
                    uri_text(rng, "-._~!$'()*+,;:@/?"),
                    uri_text(rng, "-._~!$'()*+,;:@/?=")
                )
            })
            .collect();
        t.push_str(&pairs.join("&"));
    }
    t
}

fn uri_text(rng: &mut StdRng, specials: &str) -> String {
    let specials: Vec<char> = specials.chars().collect();
    (0..rng.gen_range(0..=12))
        .map(|_| match rng.gen_range(0..10) {
            0 => format!("%{:02X}", rng.gen::<u8>()),
            1 => format!("%{:02x}", rng.gen::<u8>()),
            2 => specials.choose(rng).unwrap().to_string(),
            _ => char::from(
                *b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                    .choose(rng)
                    .unwrap(),
            )
            .to_string(),
        })
        .collect()
}

/// A header name: a token (RFC 9110 section 5.6.2) in mixed case, under
/// `X-` so it never names a field either proxy interprets.
fn random_name(rng: &mut StdRng) -> String {
    const TCHAR: &[u8] =
        b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$%&'*+-.^_`|~";
    let body: String = (0..rng.gen_range(1..=20))
        .map(|_| char::from(*TCHAR.choose(rng).unwrap()))
        .collect();
    mixed_case(rng, &format!("X-{body}"))
}

/// A field value (RFC 9110 section 5.5): empty, short, with inner spaces
/// and tabs, long, or with obs-text bytes.
/// At most one long value per request (`long` is that budget), so every
/// head stays far below both proxies' limits (8 KiB here).
fn value(rng: &mut StdRng, long: &mut bool) -> Vec<u8> {
    let vchar = |rng: &mut StdRng| rng.gen_range(0x21u8..=0x7e);
    match rng.gen_range(0..10) {
        0 => Vec::new(),
        1 if std::mem::take(long) => (0..rng.gen_range(500..=2500)).map(|_| vchar(rng)).collect(),
        2 => {
            let mut v: Vec<u8> = (0..rng.gen_range(1..=30))
                .map(|_| {
                    if rng.gen_bool(0.2) {
                        rng.gen_range(0x80u8..=0xff)
                    } else {
                        vchar(rng)
                    }
                })
                .collect();
            v[0] = vchar(rng);
            v
        }
        3 | 4 => {
            let words: Vec<Vec<u8>> = (0..rng.gen_range(2..=5))
                .map(|_| (0..rng.gen_range(1..=8)).map(|_| vchar(rng)).collect())
                .collect();
            words.join(if rng.gen_bool(0.7) {
                &b" "[..]
            } else {
                b" \t "
            })
        }
        _ => (0..rng.gen_range(1..=40)).map(|_| vchar(rng)).collect(),
    }
}

/// Optional whitespace around a value (RFC 9112 section 5: not part of it).
fn ows(rng: &mut StdRng) -> &'static [u8] {
    [&b""[..], b"", b"", b"", b" ", b"  ", b"\t", b" \t"]
        .choose(rng)
        .copied()
        .unwrap()
}

fn mixed_case(rng: &mut StdRng, name: &str) -> String {
    match rng.gen_range(0..4) {
        0 => name.to_ascii_lowercase(),
        1 => name.to_ascii_uppercase(),
        2 => name.to_string(),
        _ => name
            .chars()
            .map(|c| {
                if rng.gen_bool(0.5) {
                    c.to_ascii_uppercase()
                } else {
                    c.to_ascii_lowercase()
                }
            })
            .collect(),
    }
}

fn random_bytes(rng: &mut StdRng) -> Vec<u8> {
    let n = match rng.gen_range(0..6) {
        0 => 0,
        1 => rng.gen_range(1000..=4000),
        _ => rng.gen_range(1..=300),
    };
    (0..n).map(|_| rng.gen()).collect()
}
