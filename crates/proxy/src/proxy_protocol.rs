//! The PROXY protocol, versions 1 (text) and 2 (binary), as HAProxy's
//! `proxy-protocol.txt` defines it: the header a proxy in front of us sends
//! before the client's bytes (`[[listener]] accept_proxy`), and the header
//! we send to a node before ours (`[[node]] send_proxy`).
//!
//! [`parse`] is a pure decoder over the bytes received so far (the unit
//! tests and the fuzz target drive it); [`read_header`] reads exactly the
//! header off a socket, peeking so that not one byte of what follows it (a
//! TLS ClientHello, an HTTP request) is consumed. A missing or malformed
//! header is an error: the listener closes the connection without a
//! response, as HAProxy does with `accept-proxy`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

use crate::config::SendProxy;

/// The 12 bytes every version 2 header starts with.
pub const V2_SIGNATURE: [u8; 12] = *b"\r\n\r\n\0\r\nQUIT\n";
/// What every version 1 header starts with.
const V1_PREFIX: &[u8] = b"PROXY ";
/// Longest version 1 header, CRLF included (`PROXY TCP6` with two longest
/// IPv6 addresses and ports).
pub const V1_MAX: usize = 107;
/// Largest version 2 address-and-TLV block accepted. The spec has senders
/// fit the whole header in a 536-byte segment; TLVs beyond that are not
/// worth buffering for.
pub const V2_MAX_BLOCK: usize = 2048;
/// Fixed part of a version 2 header: signature, version/command, family,
/// length.
const V2_FIXED: usize = 16;

/// What a valid header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Header {
    /// The connection was relayed for `source` (the client) connecting to
    /// `destination` (the address the client reached on the sender).
    Proxied {
        source: SocketAddr,
        destination: SocketAddr,
    },
    /// v1 `UNKNOWN`, v2 `LOCAL`, or a v2 family with no IP address
    /// (`AF_UNSPEC`, `AF_UNIX`): the real peer address stands.
    Local,
}

/// Why the bytes are not a PROXY header. Every variant closes the
/// connection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    #[error("no PROXY protocol signature")]
    Signature,
    #[error("connection closed inside the PROXY header ({0} bytes received)")]
    Truncated(usize),
    #[error("no PROXY header within {}", rdmalb_base::duration::format(*.0))]
    Timeout(Duration),
    #[error("reading the PROXY header failed: {0}")]
    Io(String),
    #[error("PROXY v1 line longer than {V1_MAX} bytes")]
    V1TooLong,
    #[error("PROXY v1 line is not printable ASCII")]
    V1NotAscii,
    #[error("PROXY v1 line does not end with CRLF")]
    V1BareLf,
    #[error("PROXY v1 protocol `{0}` (expected TCP4, TCP6 or UNKNOWN)")]
    V1Protocol(String),
    #[error("PROXY v1 line has {0} fields after the protocol (expected 4)")]
    V1Fields(usize),
    #[error("PROXY v1 address `{0}` is not an address of the line's family")]
    V1Address(String),
    #[error("PROXY v1 port `{0}` (expected 0 to 65535, no leading zero)")]
    V1Port(String),
    #[error("PROXY v2 version {0} (expected 2)")]
    V2Version(u8),
    #[error("PROXY v2 command {0} (expected 0 LOCAL or 1 PROXY)")]
    V2Command(u8),
    #[error("PROXY v2 family/protocol byte {0:#04x} is not a stream family")]
    V2Family(u8),
    #[error("PROXY v2 length {length} is too short for its addresses ({needed} bytes)")]
    V2Short { length: usize, needed: usize },
    #[error("PROXY v2 length {0} is larger than {V2_MAX_BLOCK}")]
    V2TooLong(usize),
}

/// Decodes the header at the start of `buf`. `Ok(None)`: `buf` is a valid
/// beginning of a header, more bytes are needed. `Ok(Some((header,
/// length)))`: the header is the first `length` bytes of `buf`.
pub fn parse(buf: &[u8]) -> Result<Option<(Header, usize)>, HeaderError> {
    let v1 = buf.len().min(V1_PREFIX.len());
    let v2 = buf.len().min(V2_SIGNATURE.len());
    if buf[..v1] == V1_PREFIX[..v1] {
        if buf.len() < V1_PREFIX.len() {
            return Ok(None);
        }
        parse_v1(buf)
    } else if buf[..v2] == V2_SIGNATURE[..v2] {
        parse_v2(buf)
    } else {
        Err(HeaderError::Signature)
    }
}

fn parse_v1(buf: &[u8]) -> Result<Option<(Header, usize)>, HeaderError> {
    let window = &buf[..buf.len().min(V1_MAX)];
    let Some(lf) = window.iter().position(|&b| b == b'\n') else {
        if window.iter().any(|&b| !is_v1_char(b) && b != b'\r') {
            return Err(HeaderError::V1NotAscii);
        }
        return if buf.len() >= V1_MAX {
            Err(HeaderError::V1TooLong)
        } else {
            Ok(None)
        };
    };
    if lf == 0 || window[lf - 1] != b'\r' {
        return Err(HeaderError::V1BareLf);
    }
    let line = &window[V1_PREFIX.len()..lf - 1];
    if !line.iter().all(|&b| is_v1_char(b)) {
        return Err(HeaderError::V1NotAscii);
    }
    // All printable ASCII, so valid UTF-8.
    let line = std::str::from_utf8(line).map_err(|_| HeaderError::V1NotAscii)?;
    let mut fields = line.split(' ');
    let protocol = fields.next().unwrap_or("");
    let v6 = match protocol {
        // The spec: the receiver ignores everything up to the CRLF.
        "UNKNOWN" => return Ok(Some((Header::Local, lf + 1))),
        "TCP4" => false,
        "TCP6" => true,
        other => return Err(HeaderError::V1Protocol(other.to_string())),
    };
    let rest: Vec<&str> = fields.collect();
    let [src, dst, sport, dport] = rest[..] else {
        return Err(HeaderError::V1Fields(rest.len()));
    };
    let ip = |text: &str| -> Result<IpAddr, HeaderError> {
        let bad = || HeaderError::V1Address(text.to_string());
        if v6 {
            text.parse::<Ipv6Addr>().map(IpAddr::V6).map_err(|_| bad())
        } else {
            text.parse::<Ipv4Addr>().map(IpAddr::V4).map_err(|_| bad())
        }
    };
    let header = Header::Proxied {
        source: SocketAddr::new(ip(src)?, v1_port(sport)?),
        destination: SocketAddr::new(ip(dst)?, v1_port(dport)?),
    };
    Ok(Some((header, lf + 1)))
}

/// Printable ASCII (space included): what a v1 line is made of.
fn is_v1_char(b: u8) -> bool {
    (0x20..0x7f).contains(&b)
}

fn v1_port(text: &str) -> Result<u16, HeaderError> {
    let bad = || HeaderError::V1Port(text.to_string());
    let digits = !text.is_empty() && text.len() <= 5 && text.bytes().all(|b| b.is_ascii_digit());
    if !digits || (text.len() > 1 && text.starts_with('0')) {
        return Err(bad());
    }
    text.parse::<u16>().map_err(|_| bad())
}

fn parse_v2(buf: &[u8]) -> Result<Option<(Header, usize)>, HeaderError> {
    if buf.len() < V2_FIXED {
        // Check what is there already, so garbage fails early.
        if let Some(&ver_cmd) = buf.get(12) {
            v2_version_command(ver_cmd)?;
        }
        return Ok(None);
    }
    let local = v2_version_command(buf[12])? == 0;
    let family = buf[13];
    let length = usize::from(u16::from_be_bytes([buf[14], buf[15]]));
    if length > V2_MAX_BLOCK {
        return Err(HeaderError::V2TooLong(length));
    }
    let needed = match (local, family) {
        (true, _) => 0,
        // AF_UNSPEC (any protocol): the real endpoints stand.
        (false, 0x00..=0x02) => 0,
        // TCP over IPv4, TCP over IPv6.
        (false, 0x11) => 12,
        (false, 0x21) => 36,
        // AF_UNIX stream: no IP address to take.
        (false, 0x31) => 216,
        (false, other) => return Err(HeaderError::V2Family(other)),
    };
    if length < needed {
        return Err(HeaderError::V2Short { length, needed });
    }
    let total = V2_FIXED + length;
    if buf.len() < total {
        return Ok(None);
    }
    let block = &buf[V2_FIXED..total];
    let port = |at: usize| u16::from_be_bytes([block[at], block[at + 1]]);
    let header = match (local, family) {
        (false, 0x11) => {
            let ip = |at: usize| {
                IpAddr::V4(Ipv4Addr::new(
                    block[at],
                    block[at + 1],
                    block[at + 2],
                    block[at + 3],
                ))
            };
            Header::Proxied {
                source: SocketAddr::new(ip(0), port(8)),
                destination: SocketAddr::new(ip(4), port(10)),
            }
        }
        (false, 0x21) => {
            let ip = |at: usize| {
                let mut octets = [0u8; 16];
                octets.copy_from_slice(&block[at..at + 16]);
                IpAddr::V6(Ipv6Addr::from(octets))
            };
            Header::Proxied {
                source: SocketAddr::new(ip(0), port(32)),
                destination: SocketAddr::new(ip(16), port(34)),
            }
        }
        _ => Header::Local,
    };
    Ok(Some((header, total)))
}

/// Checks the version/command byte; returns the command (0 LOCAL, 1 PROXY).
fn v2_version_command(b: u8) -> Result<u8, HeaderError> {
    if b >> 4 != 2 {
        return Err(HeaderError::V2Version(b >> 4));
    }
    match b & 0x0f {
        c @ (0 | 1) => Ok(c),
        c => Err(HeaderError::V2Command(c)),
    }
}

/// Reads the header at the start of `stream`, and nothing past it, within
/// `timeout`. Bytes are peeked first and only the header's are consumed.
pub async fn read_header(stream: &mut TcpStream, timeout: Duration) -> Result<Header, HeaderError> {
    match tokio::time::timeout(timeout, read_inner(stream)).await {
        Ok(r) => r,
        Err(_) => Err(HeaderError::Timeout(timeout)),
    }
}

async fn read_inner(stream: &mut TcpStream) -> Result<Header, HeaderError> {
    let io = |e: std::io::Error| HeaderError::Io(e.to_string());
    // Bytes consumed so far: all of them belong to the header, which was
    // incomplete when they were read.
    let mut have: Vec<u8> = Vec::with_capacity(V1_MAX);
    let mut peeked = [0u8; 512];
    loop {
        let n = stream.peek(&mut peeked).await.map_err(io)?;
        if n == 0 {
            return Err(HeaderError::Truncated(have.len()));
        }
        let seen = have.len();
        have.extend_from_slice(&peeked[..n]);
        match parse(&have)? {
            Some((header, length)) => {
                let mut rest = vec![0u8; length - seen];
                stream.read_exact(&mut rest).await.map_err(io)?;
                return Ok(header);
            }
            None => {
                // The header goes on past these bytes: consume them.
                let mut rest = [0u8; 512];
                stream.read_exact(&mut rest[..n]).await.map_err(io)?;
            }
        }
    }
}

/// The header announcing a connection from `source` to `destination`.
/// Mixed families are sent as IPv6 (IPv4-mapped), as the spec asks of v1
/// senders; an IPv4-mapped address next to an IPv4 one is sent as IPv4.
pub fn encode(version: SendProxy, source: SocketAddr, destination: SocketAddr) -> Vec<u8> {
    let (src, dst) = (source.ip().to_canonical(), destination.ip().to_canonical());
    let (src, dst) = match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => (IpAddr::V4(s), IpAddr::V4(d)),
        (s, d) => (IpAddr::V6(to_v6(s)), IpAddr::V6(to_v6(d))),
    };
    let (sport, dport) = (source.port(), destination.port());
    match version {
        SendProxy::V1 => {
            let family = if src.is_ipv4() { "TCP4" } else { "TCP6" };
            format!("PROXY {family} {src} {dst} {sport} {dport}\r\n").into_bytes()
        }
        SendProxy::V2 => {
            let mut out = Vec::with_capacity(V2_FIXED + 36);
            out.extend_from_slice(&V2_SIGNATURE);
            out.push(0x21); // version 2, PROXY
            match (src, dst) {
                (IpAddr::V4(s), IpAddr::V4(d)) => {
                    out.push(0x11);
                    out.extend_from_slice(&12u16.to_be_bytes());
                    out.extend_from_slice(&s.octets());
                    out.extend_from_slice(&d.octets());
                }
                (s, d) => {
                    out.push(0x21);
                    out.extend_from_slice(&36u16.to_be_bytes());
                    out.extend_from_slice(&to_v6(s).octets());
                    out.extend_from_slice(&to_v6(d).octets());
                }
            }
            out.extend_from_slice(&sport.to_be_bytes());
            out.extend_from_slice(&dport.to_be_bytes());
            out
        }
    }
}

/// The header of a connection made for no client (a health check): v1
/// `UNKNOWN`, v2 `LOCAL`, as HAProxy sends with its checks.
pub fn encode_local(version: SendProxy) -> &'static [u8] {
    match version {
        SendProxy::V1 => b"PROXY UNKNOWN\r\n",
        SendProxy::V2 => b"\r\n\r\n\0\r\nQUIT\n\x20\x00\x00\x00",
    }
}

fn to_v6(ip: IpAddr) -> Ipv6Addr {
    match ip {
        IpAddr::V4(a) => a.to_ipv6_mapped(),
        IpAddr::V6(a) => a,
    }
}

#[cfg(test)]
mod tests;
