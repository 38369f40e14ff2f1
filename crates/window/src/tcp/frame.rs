//! Frame codec of the tcp transport (after the handshake).
//!
//! Every frame, both directions:
//!
//! ```text
//! len  u32 LE   bytes that follow this field (kind + id + body + tag)
//! kind u8
//! id   u32 LE   request id; a reply carries its request's id
//! body          fixed size per kind (below)
//! tag  [u8; 16] HMAC-SHA256 tag, see `auth::FrameKey`
//! ```
//!
//! | kind | name | body |
//! |---|---|---|
//! | 0x01 | READ | none |
//! | 0x02 | READ_WORD | word u32 |
//! | 0x03 | CAS | word u32, expected u64, new u64 |
//! | 0x04 | FAA | word u32, delta u64 |
//! | 0x81 | BLOCK | 32 × u64 (words 0..32) |
//! | 0x82 | WORD | value u64 (the old value for CAS / FAA) |
//! | 0xE0 | ERROR | code u16, word u32 |
//!
//! [`decode`] never panics and never allocates more than one frame's worth:
//! lengths are checked against the kind's fixed size before anything else.

/// Bytes of the tag on every frame.
pub const TAG_LEN: usize = 16;

/// Bytes of the length prefix.
pub const LEN_PREFIX: usize = 4;
/// Bytes of kind + id.
pub const HEAD_LEN: usize = 1 + 4;
/// Largest value the length prefix may hold (the BLOCK reply).
pub const MAX_FRAME_LEN: u32 = (HEAD_LEN + 256 + TAG_LEN) as u32;

const K_READ: u8 = 0x01;
const K_READ_WORD: u8 = 0x02;
const K_CAS: u8 = 0x03;
const K_FAA: u8 = 0x04;
const K_BLOCK: u8 = 0x81;
const K_WORD: u8 = 0x82;
const K_ERROR: u8 = 0xE0;

/// A request from a client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// Read words 0..32.
    Read,
    /// Atomic read of one word.
    ReadWord {
        /// Word index.
        word: u32,
    },
    /// Compare-and-swap.
    Cas {
        /// Word index.
        word: u32,
        /// Expected value.
        expected: u64,
        /// Value to store if the word equals `expected`.
        new: u64,
    },
    /// Fetch-and-add.
    Faa {
        /// Word index.
        word: u32,
        /// Wrapping addend.
        delta: u64,
    },
}

/// Error codes carried by an ERROR reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    /// The word is outside the remote-atomic area.
    Refused,
    /// The request was malformed.
    BadRequest,
    /// A code this build does not know.
    Other(u16),
}

impl ErrorCode {
    fn to_wire(self) -> u16 {
        match self {
            ErrorCode::Refused => 1,
            ErrorCode::BadRequest => 2,
            ErrorCode::Other(c) => c,
        }
    }

    fn from_wire(c: u16) -> Self {
        match c {
            1 => ErrorCode::Refused,
            2 => ErrorCode::BadRequest,
            c => ErrorCode::Other(c),
        }
    }
}

/// A reply from the responder.
// BLOCK is the common reply; boxing it would allocate on every read.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    /// Words 0..32 for a READ.
    Block([u64; 32]),
    /// One word: the value for READ_WORD, the old value for CAS / FAA.
    Word(u64),
    /// The request was not served.
    Error {
        /// Why.
        code: ErrorCode,
        /// The word the request named (0 for READ).
        word: u32,
    },
}

/// One frame's content.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Message {
    /// Client to responder.
    Request(Request),
    /// Responder to client.
    Reply(Reply),
}

/// A decoded frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame {
    /// Request id.
    pub id: u32,
    /// Content.
    pub msg: Message,
}

/// A frame decoded from the front of a buffer, with what authentication
/// needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decoded<'a> {
    /// The frame.
    pub frame: Frame,
    /// The bytes the tag covers: length prefix, kind, id and body.
    pub authenticated: &'a [u8],
    /// The tag as received.
    pub tag: &'a [u8],
    /// Total bytes this frame took from the buffer.
    pub consumed: usize,
}

/// Why bytes are not a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Unknown kind byte.
    #[error("unknown frame kind {0:#04x}")]
    UnknownKind(u8),
    /// The length prefix does not match the kind's fixed size.
    #[error("frame kind {kind:#04x} with length {len}, expected {expected}")]
    BadLength {
        /// Kind byte.
        kind: u8,
        /// Length prefix.
        len: u32,
        /// Length this kind has.
        expected: u32,
    },
    /// The length prefix is too small for any frame or larger than the largest.
    #[error("frame length {0} out of range")]
    LengthOutOfRange(u32),
}

fn body_len(kind: u8) -> Option<usize> {
    Some(match kind {
        K_READ => 0,
        K_READ_WORD => 4,
        K_CAS => 4 + 8 + 8,
        K_FAA => 4 + 8,
        K_BLOCK => 256,
        K_WORD => 8,
        K_ERROR => 2 + 4,
        _ => return None,
    })
}

/// Little-endian reads from a slice whose length the caller checked; the
/// `get`s make an unexpected short slice an error instead of a panic.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn u16(&mut self) -> Option<u16> {
        let (b, rest) = self.0.split_first_chunk::<2>()?;
        self.0 = rest;
        Some(u16::from_le_bytes(*b))
    }
    fn u32(&mut self) -> Option<u32> {
        let (b, rest) = self.0.split_first_chunk::<4>()?;
        self.0 = rest;
        Some(u32::from_le_bytes(*b))
    }
    fn u64(&mut self) -> Option<u64> {
        let (b, rest) = self.0.split_first_chunk::<8>()?;
        self.0 = rest;
        Some(u64::from_le_bytes(*b))
    }
}

/// Decode the frame at the front of `buf`. `Ok(None)` means more bytes are
/// needed; an error means the stream is not speaking this protocol and the
/// connection must be closed. Never panics, whatever `buf` holds.
pub fn decode(buf: &[u8]) -> Result<Option<Decoded<'_>>, FrameError> {
    let Some((len_bytes, rest)) = buf.split_first_chunk::<LEN_PREFIX>() else {
        return Ok(None);
    };
    let len = u32::from_le_bytes(*len_bytes);
    if len < (HEAD_LEN + TAG_LEN) as u32 || len > MAX_FRAME_LEN {
        return Err(FrameError::LengthOutOfRange(len));
    }
    // Check the kind as soon as it is there, so garbage fails fast instead
    // of waiting for a plausible length's worth of bytes.
    let Some(&kind) = rest.first() else {
        return Ok(None);
    };
    let body = body_len(kind).ok_or(FrameError::UnknownKind(kind))?;
    let expected = (HEAD_LEN + body + TAG_LEN) as u32;
    if len != expected {
        return Err(FrameError::BadLength {
            kind,
            len,
            expected,
        });
    }
    let total = LEN_PREFIX + len as usize;
    let Some(frame_bytes) = buf.get(..total) else {
        return Ok(None);
    };
    let (authenticated, tag) = frame_bytes.split_at(total - TAG_LEN);
    let mut r = Reader(authenticated.get(LEN_PREFIX + 1..).unwrap_or_default());
    let parsed = (|| {
        let id = r.u32()?;
        let msg = match kind {
            K_READ => Message::Request(Request::Read),
            K_READ_WORD => Message::Request(Request::ReadWord { word: r.u32()? }),
            K_CAS => Message::Request(Request::Cas {
                word: r.u32()?,
                expected: r.u64()?,
                new: r.u64()?,
            }),
            K_FAA => Message::Request(Request::Faa {
                word: r.u32()?,
                delta: r.u64()?,
            }),
            K_BLOCK => {
                let mut words = [0u64; 32];
                for w in &mut words {
                    *w = r.u64()?;
                }
                Message::Reply(Reply::Block(words))
            }
            K_WORD => Message::Reply(Reply::Word(r.u64()?)),
            K_ERROR => Message::Reply(Reply::Error {
                code: ErrorCode::from_wire(r.u16()?),
                word: r.u32()?,
            }),
            _ => return None,
        };
        Some(Frame { id, msg })
    })();
    // Lengths were checked above, so parsing cannot run short; treat it as a
    // length error rather than trusting that.
    let frame = parsed.ok_or(FrameError::BadLength {
        kind,
        len,
        expected,
    })?;
    Ok(Some(Decoded {
        frame,
        authenticated,
        tag,
        consumed: total,
    }))
}

/// Append `frame` without its tag to `out`; returns the offset where it
/// starts, so the caller can compute the tag over `out[start..]` and append
/// it (see `auth::FrameKey::seal`).
pub fn encode_unsealed(frame: &Frame, out: &mut Vec<u8>) -> usize {
    let start = out.len();
    let kind = match frame.msg {
        Message::Request(Request::Read) => K_READ,
        Message::Request(Request::ReadWord { .. }) => K_READ_WORD,
        Message::Request(Request::Cas { .. }) => K_CAS,
        Message::Request(Request::Faa { .. }) => K_FAA,
        Message::Reply(Reply::Block(_)) => K_BLOCK,
        Message::Reply(Reply::Word(_)) => K_WORD,
        Message::Reply(Reply::Error { .. }) => K_ERROR,
    };
    let body = body_len(kind).unwrap_or(0);
    out.extend_from_slice(&((HEAD_LEN + body + TAG_LEN) as u32).to_le_bytes());
    out.push(kind);
    out.extend_from_slice(&frame.id.to_le_bytes());
    match frame.msg {
        Message::Request(Request::Read) => {}
        Message::Request(Request::ReadWord { word }) => out.extend_from_slice(&word.to_le_bytes()),
        Message::Request(Request::Cas {
            word,
            expected,
            new,
        }) => {
            out.extend_from_slice(&word.to_le_bytes());
            out.extend_from_slice(&expected.to_le_bytes());
            out.extend_from_slice(&new.to_le_bytes());
        }
        Message::Request(Request::Faa { word, delta }) => {
            out.extend_from_slice(&word.to_le_bytes());
            out.extend_from_slice(&delta.to_le_bytes());
        }
        Message::Reply(Reply::Block(words)) => {
            for w in words {
                out.extend_from_slice(&w.to_le_bytes());
            }
        }
        Message::Reply(Reply::Word(v)) => out.extend_from_slice(&v.to_le_bytes()),
        Message::Reply(Reply::Error { code, word }) => {
            out.extend_from_slice(&code.to_wire().to_le_bytes());
            out.extend_from_slice(&word.to_le_bytes());
        }
    }
    start
}

#[cfg(test)]
mod tests;
