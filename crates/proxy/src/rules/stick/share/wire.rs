//! The share datagram: one table's increments from one proxy, tagged.
//!
//! ```text
//! magic  [8]    "RDLBSHR1"
//! seq    u64 LE the sender's datagram counter (starts at its start time
//!               in µs, +1 a datagram: a receiver takes only increasing ones)
//! nlen   u8     table name length (1..=64), then the name
//! count  u16 LE entries that follow
//! entry  kind u8 (4: IPv4, 4 bytes; 6: IPv6, 16 bytes; 'S': u16 LE
//!        length and UTF-8 text), then 5 × u32 LE: requests, errors,
//!        trackings started, gpc0, gpc1
//! tag    [16]   HMAC-SHA256 (the window transport's `DatagramKey`) over
//!               the sender's address as text and all the bytes above
//! ```
//!
//! A datagram is at most [`MAX_DATAGRAM`] bytes (under a 1500-byte MTU
//! with its IP and UDP headers). [`decode`] checks the tag before reading
//! anything, never panics and allocates only the entries a datagram of
//! that size can hold.

use std::net::SocketAddr;

use rdmalb_window::tcp::frame::TAG_LEN;
use rdmalb_window::DatagramKey;

use super::Delta;
use crate::rules::stick::Key;

/// What opens every share datagram.
pub const MAGIC: [u8; 8] = *b"RDLBSHR1";
/// The largest datagram sent or taken (bytes).
pub const MAX_DATAGRAM: usize = 1400;
/// The purpose label of the share's key (derived from the PSK).
pub const KEY_LABEL: &[u8] = b"rdmalb-stick-share-v1";

const DELTA_LEN: usize = 5 * 4;

/// A decoded datagram.
#[derive(Debug, PartialEq, Eq)]
pub struct Datagram {
    pub seq: u64,
    pub table: String,
    pub entries: Vec<(Key, Delta)>,
}

/// Why a datagram was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireError {
    /// Too short or too long to be one, or not opened by [`MAGIC`].
    NotShare,
    /// The tag does not verify: another key, or altered bytes.
    BadTag,
    /// Tagged right but not well formed (a sender bug).
    Malformed,
}

impl WireError {
    /// The metric label and log word of the refusal.
    pub fn reason(self) -> &'static str {
        match self {
            WireError::NotShare => "not_share",
            WireError::BadTag => "bad_tag",
            WireError::Malformed => "malformed",
        }
    }
}

fn key_len(k: &Key) -> usize {
    match k {
        Key::V4(_) => 1 + 4,
        Key::V6(_) => 1 + 16,
        Key::Str(s) => 1 + 2 + s.len(),
    }
}

fn put_key(out: &mut Vec<u8>, k: &Key) {
    match k {
        Key::V4(a) => {
            out.push(4);
            out.extend_from_slice(a);
        }
        Key::V6(a) => {
            out.push(6);
            out.extend_from_slice(a);
        }
        Key::Str(s) => {
            out.push(b'S');
            out.extend_from_slice(&(s.len() as u16).to_le_bytes());
            out.extend_from_slice(s.as_bytes());
        }
    }
}

/// The datagrams carrying `entries` of table `table` from `from`, each
/// tagged under `key`; `seq` is advanced by one a datagram. Keys longer
/// than a datagram holds (none a valid table makes) are skipped.
pub fn encode(
    key: &DatagramKey,
    from: SocketAddr,
    seq: &mut u64,
    table: &str,
    entries: &[(Key, Delta)],
) -> Vec<Vec<u8>> {
    let from = from.to_string();
    let name = &table.as_bytes()[..table.len().min(64)];
    let head = MAGIC.len() + 8 + 1 + name.len() + 2;
    let mut out = Vec::new();
    let mut rest = entries.iter().peekable();
    while rest.peek().is_some() {
        let mut d = Vec::with_capacity(MAX_DATAGRAM);
        d.extend_from_slice(&MAGIC);
        d.extend_from_slice(&seq.to_le_bytes());
        d.push(name.len() as u8);
        d.extend_from_slice(name);
        d.extend_from_slice(&[0, 0]);
        let mut count: u16 = 0;
        while let Some((k, delta)) = rest.peek() {
            let len = key_len(k) + DELTA_LEN;
            if head + len + TAG_LEN > MAX_DATAGRAM {
                rest.next();
                continue;
            }
            if d.len() + len + TAG_LEN > MAX_DATAGRAM {
                break;
            }
            put_key(&mut d, k);
            for v in [delta.req, delta.err, delta.conn, delta.gpc[0], delta.gpc[1]] {
                d.extend_from_slice(&v.to_le_bytes());
            }
            count += 1;
            rest.next();
        }
        if count == 0 {
            break;
        }
        d[head - 2..head].copy_from_slice(&count.to_le_bytes());
        let tag = key.tag(&[from.as_bytes(), &d]);
        d.extend_from_slice(&tag);
        *seq = seq.wrapping_add(1);
        out.push(d);
    }
    out
}

/// Reads the bytes of a datagram.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        if self.0.len() < n {
            return Err(WireError::Malformed);
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], WireError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    fn u32(&mut self) -> Result<u32, WireError> {
        Ok(u32::from_le_bytes(self.array()?))
    }
}

/// The datagram `bytes` received from `from`, its tag checked under `key`
/// first.
pub fn decode(key: &DatagramKey, from: SocketAddr, bytes: &[u8]) -> Result<Datagram, WireError> {
    let least = MAGIC.len() + 8 + 1 + 2 + TAG_LEN;
    if bytes.len() < least || bytes.len() > MAX_DATAGRAM || bytes[..MAGIC.len()] != MAGIC {
        return Err(WireError::NotShare);
    }
    let (body, tag) = bytes.split_at(bytes.len() - TAG_LEN);
    key.verify(&[from.to_string().as_bytes(), body], tag)
        .map_err(|_| WireError::BadTag)?;
    let mut r = Reader(&body[MAGIC.len()..]);
    let seq = u64::from_le_bytes(r.array()?);
    let nlen = usize::from(r.array::<1>()?[0]);
    let table = std::str::from_utf8(r.take(nlen)?)
        .map_err(|_| WireError::Malformed)?
        .to_string();
    let count = usize::from(u16::from_le_bytes(r.array()?));
    // Each entry takes at least 25 bytes: a count beyond what the bytes
    // hold is refused before allocating for it.
    if count > r.0.len() / (5 + DELTA_LEN) + 1 {
        return Err(WireError::Malformed);
    }
    let mut entries = Vec::with_capacity(count);
    for _ in 0..count {
        let k = match r.array::<1>()?[0] {
            4 => Key::V4(r.array()?),
            6 => Key::V6(r.array()?),
            b'S' => {
                let n = usize::from(u16::from_le_bytes(r.array()?));
                let s = std::str::from_utf8(r.take(n)?).map_err(|_| WireError::Malformed)?;
                Key::Str(s.into())
            }
            _ => return Err(WireError::Malformed),
        };
        let d = Delta {
            req: r.u32()?,
            err: r.u32()?,
            conn: r.u32()?,
            gpc: [r.u32()?, r.u32()?],
        };
        entries.push((k, d));
    }
    if !r.0.is_empty() {
        return Err(WireError::Malformed);
    }
    Ok(Datagram {
        seq,
        table,
        entries,
    })
}
