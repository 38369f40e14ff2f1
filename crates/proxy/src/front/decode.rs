//! The HTTP/1 message body decoder both sides share (RFC 9112 sections 6
//! and 7): a length-delimited or chunked body read from a connection's
//! buffer, frame by frame, with chunk extensions skipped and trailer
//! fields returned as a trailers frame. The client side reads requests
//! with it ([`super::serve1`]), the node side responses
//! ([`super::upstream`]).

use bytes::Bytes;
use bytes::{Buf, BytesMut};
use http::header::{HeaderMap, HeaderName, HeaderValue};
use hyper::body::Frame;

/// The longest chunk-size line (with its extensions).
const MAX_CHUNK_LINE: usize = 4 * 1024;
/// The largest trailer section.
const MAX_TRAILERS: usize = 16 * 1024;
/// The most trailer fields.
const MAX_TRAILER_FIELDS: usize = 32;

/// Where the decoder stands in the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Length(u64),
    ChunkSize,
    ChunkData(u64),
    ChunkEnd,
    Trailers,
    Done,
}

/// One step of the decoder.
#[derive(Debug)]
pub enum Step {
    Frame(Frame<Bytes>),
    /// More bytes are needed.
    Read,
    /// The body ended.
    End,
}

/// The body's decoder.
#[derive(Debug)]
pub struct Decoder {
    state: State,
}

impl Decoder {
    /// A body of `n` bytes.
    pub fn length(n: u64) -> Decoder {
        Decoder {
            state: if n == 0 {
                State::Done
            } else {
                State::Length(n)
            },
        }
    }

    /// A chunked body.
    pub fn chunked() -> Decoder {
        Decoder {
            state: State::ChunkSize,
        }
    }

    /// The data bytes the current length or chunk still holds, if any.
    pub fn data_left(&self) -> Option<u64> {
        match self.state {
            State::Length(n) | State::ChunkData(n) => Some(n),
            _ => None,
        }
    }

    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// The exact length left, when the framing says it.
    pub fn remaining(&self) -> Option<u64> {
        match self.state {
            State::Length(n) => Some(n),
            State::Done => Some(0),
            _ => None,
        }
    }

    /// Decodes what `buf` holds into the next frame.
    pub fn step(&mut self, buf: &mut BytesMut) -> Result<Step, &'static str> {
        loop {
            match self.state {
                State::Done => return Ok(Step::End),
                State::Length(left) => {
                    let n = (buf.len() as u64).min(left) as usize;
                    if n == 0 {
                        return Ok(Step::Read);
                    }
                    let left = left - n as u64;
                    self.state = if left == 0 {
                        State::Done
                    } else {
                        State::Length(left)
                    };
                    return Ok(Step::Frame(Frame::data(buf.split_to(n).freeze())));
                }
                State::ChunkSize => {
                    let Some(eol) = buf.iter().position(|&b| b == b'\n') else {
                        if buf.len() > MAX_CHUNK_LINE {
                            return Err("chunk-size line too long");
                        }
                        return Ok(Step::Read);
                    };
                    if eol > MAX_CHUNK_LINE {
                        return Err("chunk-size line too long");
                    }
                    if eol == 0 || buf[eol - 1] != b'\r' {
                        return Err("chunk-size line without CRLF");
                    }
                    let (used, size) = match httparse::parse_chunk_size(&buf[..=eol]) {
                        Ok(httparse::Status::Complete(c)) => c,
                        _ => return Err("bad chunk size"),
                    };
                    buf.advance(used);
                    self.state = if size == 0 {
                        State::Trailers
                    } else {
                        State::ChunkData(size)
                    };
                }
                State::ChunkData(left) => {
                    let n = (buf.len() as u64).min(left) as usize;
                    if n == 0 {
                        return Ok(Step::Read);
                    }
                    let left = left - n as u64;
                    self.state = if left == 0 {
                        State::ChunkEnd
                    } else {
                        State::ChunkData(left)
                    };
                    return Ok(Step::Frame(Frame::data(buf.split_to(n).freeze())));
                }
                State::ChunkEnd => match &buf[..] {
                    [b'\r', b'\n', ..] => {
                        buf.advance(2);
                        self.state = State::ChunkSize;
                    }
                    [] | [b'\r'] => return Ok(Step::Read),
                    _ => return Err("chunk data longer than its size"),
                },
                State::Trailers => return self.trailers(buf),
            }
        }
    }

    fn trailers(&mut self, buf: &mut BytesMut) -> Result<Step, &'static str> {
        if buf.starts_with(b"\r\n") {
            buf.advance(2);
            self.state = State::Done;
            return Ok(Step::End);
        }
        let mut fields = [httparse::EMPTY_HEADER; MAX_TRAILER_FIELDS];
        match httparse::parse_headers(buf, &mut fields) {
            Ok(httparse::Status::Complete((used, fields))) => {
                let mut trailers = HeaderMap::with_capacity(fields.len());
                for f in fields.iter() {
                    let (Ok(name), Ok(value)) = (
                        HeaderName::from_bytes(f.name.as_bytes()),
                        HeaderValue::from_bytes(f.value),
                    ) else {
                        return Err("bad trailer field");
                    };
                    trailers.append(name, value);
                }
                buf.advance(used);
                self.state = State::Done;
                Ok(Step::Frame(Frame::trailers(trailers)))
            }
            Ok(httparse::Status::Partial) if buf.len() <= MAX_TRAILERS => Ok(Step::Read),
            Ok(httparse::Status::Partial) => Err("trailers too large"),
            Err(_) => Err("bad trailer section"),
        }
    }
}
