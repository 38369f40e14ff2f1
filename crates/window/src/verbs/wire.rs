//! Wire format of the verbs control channel (after the PSK handshake).
//!
//! The sidecar's control port only sets up queue pairs; reads and atomics then
//! go over RDMA and never touch this channel. One exchange per connection:
//! the proxy sends a [`ConnectRequest`] with its queue pair's address, the
//! sidecar answers with a [`ConnectReply`] (its queue pair's address and the
//! two memory regions) or a [`Refusal`]. The TCP connection then stays open
//! for the life of the queue pair: either side closing it ends the pairing.
//!
//! Every message is a frame `u16 length (LE) | payload`, the payload starting
//! with [`MAGIC`], a version and a message type. All integers are little
//! endian. The decoder never panics on arbitrary bytes.

use std::io::{Read, Write};

use crate::tcp::auth::{
    AuthError, ClientHandshake, Psk, ServerHandshake, CLIENT_FINISH_LEN, CLIENT_HELLO_LEN,
    SERVER_CHALLENGE_LEN,
};

/// First four bytes of every payload.
pub const MAGIC: [u8; 4] = *b"RLBV";
/// Version of this control protocol.
pub const PROTOCOL_VERSION: u16 = 1;
/// Largest payload accepted (a refusal message is truncated to fit).
pub const MAX_PAYLOAD: usize = 1024;

const TYPE_REQUEST: u8 = 1;
const TYPE_REPLY: u8 = 2;
const TYPE_REFUSAL: u8 = 3;

/// Why a control message could not be decoded.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WireError {
    /// The payload is shorter than its message type requires.
    #[error("control message truncated: {0} bytes")]
    Truncated(usize),
    /// The payload does not start with the protocol magic.
    #[error("control message has bad magic {0:02x?}")]
    BadMagic([u8; 4]),
    /// The peer speaks another protocol version.
    #[error("control protocol version {0} not supported (expected {PROTOCOL_VERSION})")]
    Version(u16),
    /// An unknown or unexpected message type.
    #[error("unexpected control message type {0}")]
    Type(u8),
    /// The frame length is zero or above [`MAX_PAYLOAD`].
    #[error("control frame length {0} out of range")]
    Length(usize),
}

/// Address of one side's queue pair, as the other side needs it for RTR.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpEndpoint {
    /// Queue pair number (24 bits).
    pub qpn: u32,
    /// First packet sequence number this side sends (24 bits).
    pub psn: u32,
    /// Port LID (InfiniBand; 0 on RoCE).
    pub lid: u16,
    /// Active MTU of the port as the verbs enum value (1 = 256 … 5 = 4096).
    pub mtu: u8,
    /// GID table index used by this side (for logs; the peer needs only the GID).
    pub gid_index: u8,
    /// RDMA READ / atomic depth: initiator depth on the proxy, responder
    /// resources on the sidecar.
    pub rd_atomic: u8,
    /// The GID (RoCE: IPv4-mapped or IPv6 address; InfiniBand: subnet prefix + GUID).
    pub gid: [u8; 16],
}

/// A registered memory region the proxy may address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegionInfo {
    /// Virtual address of the region's first byte in the sidecar.
    pub addr: u64,
    /// Remote key.
    pub rkey: u32,
    /// Length in bytes.
    pub len: u32,
}

/// Proxy → sidecar: "create a queue pair connected to mine".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectRequest {
    /// The proxy's id (logs and peer listings).
    pub proxy_id: u16,
    /// The proxy's queue pair.
    pub qp: QpEndpoint,
}

/// Sidecar → proxy: the connected queue pair and the two regions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectReply {
    /// The sidecar's queue pair (already in RTS when this is sent).
    pub qp: QpEndpoint,
    /// Words 0..32 of the window, remote-read only.
    pub read_region: RegionInfo,
    /// Words 32..192, remote read and atomics.
    pub atomic_region: RegionInfo,
}

/// Sidecar → proxy: the request was not served (reason for the proxy's log).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// Human-readable reason.
    pub reason: String,
}

/// A decoded sidecar answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// The queue pair is ready.
    Reply(ConnectReply),
    /// The sidecar refused.
    Refused(Refusal),
}

fn header(kind: u8) -> Vec<u8> {
    let mut v = Vec::with_capacity(96);
    v.extend_from_slice(&MAGIC);
    v.extend_from_slice(&PROTOCOL_VERSION.to_le_bytes());
    v.push(kind);
    v.push(0);
    v
}

fn put_endpoint(v: &mut Vec<u8>, e: &QpEndpoint) {
    v.extend_from_slice(&e.qpn.to_le_bytes());
    v.extend_from_slice(&e.psn.to_le_bytes());
    v.extend_from_slice(&e.lid.to_le_bytes());
    v.push(e.mtu);
    v.push(e.gid_index);
    v.push(e.rd_atomic);
    v.extend_from_slice(&[0u8; 3]);
    v.extend_from_slice(&e.gid);
}

fn put_region(v: &mut Vec<u8>, r: &RegionInfo) {
    v.extend_from_slice(&r.addr.to_le_bytes());
    v.extend_from_slice(&r.rkey.to_le_bytes());
    v.extend_from_slice(&r.len.to_le_bytes());
}

/// A bounds-checked little-endian cursor: every getter fails instead of panicking.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        let end = self
            .pos
            .checked_add(n)
            .ok_or(WireError::Truncated(self.buf.len()))?;
        let s = self
            .buf
            .get(self.pos..end)
            .ok_or(WireError::Truncated(self.buf.len()))?;
        self.pos = end;
        Ok(s)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], WireError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }
    fn u8(&mut self) -> Result<u8, WireError> {
        Ok(self.array::<1>()?[0])
    }
    fn u16(&mut self) -> Result<u16, WireError> {
        Ok(u16::from_le_bytes(self.array()?))
    }
    fn u32(&mut self) -> Result<u32, WireError> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    fn u64(&mut self) -> Result<u64, WireError> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    fn endpoint(&mut self) -> Result<QpEndpoint, WireError> {
        let qpn = self.u32()?;
        let psn = self.u32()?;
        let lid = self.u16()?;
        let mtu = self.u8()?;
        let gid_index = self.u8()?;
        let rd_atomic = self.u8()?;
        self.take(3)?;
        let gid = self.array::<16>()?;
        Ok(QpEndpoint {
            qpn,
            psn,
            lid,
            mtu,
            gid_index,
            rd_atomic,
            gid,
        })
    }
    fn region(&mut self) -> Result<RegionInfo, WireError> {
        Ok(RegionInfo {
            addr: self.u64()?,
            rkey: self.u32()?,
            len: self.u32()?,
        })
    }
}

/// Checks magic and version, returns the message type and a cursor past the header.
fn open(payload: &[u8]) -> Result<(u8, Cursor<'_>), WireError> {
    let mut c = Cursor {
        buf: payload,
        pos: 0,
    };
    let magic = c.array::<4>()?;
    if magic != MAGIC {
        return Err(WireError::BadMagic(magic));
    }
    let version = c.u16()?;
    if version != PROTOCOL_VERSION {
        return Err(WireError::Version(version));
    }
    let kind = c.u8()?;
    c.u8()?;
    Ok((kind, c))
}

impl ConnectRequest {
    /// Payload bytes (without the frame length).
    pub fn encode(&self) -> Vec<u8> {
        let mut v = header(TYPE_REQUEST);
        v.extend_from_slice(&self.proxy_id.to_le_bytes());
        v.extend_from_slice(&[0u8; 2]);
        put_endpoint(&mut v, &self.qp);
        v
    }

    /// Decodes a payload; never panics.
    pub fn decode(payload: &[u8]) -> Result<Self, WireError> {
        let (kind, mut c) = open(payload)?;
        if kind != TYPE_REQUEST {
            return Err(WireError::Type(kind));
        }
        let proxy_id = c.u16()?;
        c.take(2)?;
        Ok(ConnectRequest {
            proxy_id,
            qp: c.endpoint()?,
        })
    }
}

impl ConnectReply {
    /// Payload bytes (without the frame length).
    pub fn encode(&self) -> Vec<u8> {
        let mut v = header(TYPE_REPLY);
        put_endpoint(&mut v, &self.qp);
        put_region(&mut v, &self.read_region);
        put_region(&mut v, &self.atomic_region);
        v
    }
}

impl Refusal {
    /// Payload bytes (without the frame length); the reason is cut to fit.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = header(TYPE_REFUSAL);
        let room = MAX_PAYLOAD - v.len() - 2;
        let mut end = self.reason.len().min(room);
        while !self.reason.is_char_boundary(end) {
            end -= 1;
        }
        let text = &self.reason.as_bytes()[..end];
        v.extend_from_slice(&(text.len() as u16).to_le_bytes());
        v.extend_from_slice(text);
        v
    }
}

impl Answer {
    /// Decodes the sidecar's answer; never panics.
    pub fn decode(payload: &[u8]) -> Result<Self, WireError> {
        let (kind, mut c) = open(payload)?;
        match kind {
            TYPE_REPLY => Ok(Answer::Reply(ConnectReply {
                qp: c.endpoint()?,
                read_region: c.region()?,
                atomic_region: c.region()?,
            })),
            TYPE_REFUSAL => {
                let n = usize::from(c.u16()?);
                let text = c.take(n)?;
                Ok(Answer::Refused(Refusal {
                    reason: String::from_utf8_lossy(text).into_owned(),
                }))
            }
            other => Err(WireError::Type(other)),
        }
    }
}

/// Writes one frame (blocking stream).
pub fn write_frame(w: &mut impl Write, payload: &[u8]) -> std::io::Result<()> {
    if payload.is_empty() || payload.len() > MAX_PAYLOAD {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            WireError::Length(payload.len()),
        ));
    }
    let mut buf = Vec::with_capacity(payload.len() + 2);
    buf.extend_from_slice(&(payload.len() as u16).to_le_bytes());
    buf.extend_from_slice(payload);
    w.write_all(&buf)?;
    w.flush()
}

/// Reads one frame (blocking stream); rejects lengths of 0 or above [`MAX_PAYLOAD`]
/// before allocating.
pub fn read_frame(r: &mut impl Read) -> std::io::Result<Vec<u8>> {
    let mut len = [0u8; 2];
    r.read_exact(&mut len)?;
    let len = usize::from(u16::from_le_bytes(len));
    if len == 0 || len > MAX_PAYLOAD {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            WireError::Length(len),
        ));
    }
    let mut payload = vec![0u8; len];
    r.read_exact(&mut payload)?;
    Ok(payload)
}

/// Why the pre-shared-key handshake failed.
#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    /// The key proofs did not verify.
    #[error(transparent)]
    Auth(#[from] AuthError),
    /// The connection failed or timed out.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Server side of the tcp transport's PSK handshake on a blocking stream;
/// returns the proxy id the client announced.
pub fn server_handshake(s: &mut (impl Read + Write), psk: &Psk) -> Result<u64, HandshakeError> {
    let mut hello = [0u8; CLIENT_HELLO_LEN];
    s.read_exact(&mut hello)?;
    let (pending, challenge) = ServerHandshake::respond(psk, &hello)?;
    s.write_all(&challenge)?;
    let mut fin = [0u8; CLIENT_FINISH_LEN];
    s.read_exact(&mut fin)?;
    // The session keys tag tcp frames; the verbs control exchange is one
    // request and one reply on the authenticated connection (see `server`).
    let (proxy_id, _keys) = pending.finish(&fin)?;
    Ok(proxy_id)
}

/// Client side of the PSK handshake on a blocking stream.
pub fn client_handshake(
    s: &mut (impl Read + Write),
    psk: &Psk,
    proxy_id: u64,
) -> Result<(), HandshakeError> {
    let (pending, hello) = ClientHandshake::start(psk, proxy_id);
    s.write_all(&hello)?;
    let mut challenge = [0u8; SERVER_CHALLENGE_LEN];
    s.read_exact(&mut challenge)?;
    let (fin, _keys) = pending.finish(&challenge)?;
    s.write_all(&fin)?;
    s.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests;
