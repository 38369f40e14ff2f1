//! Response compression: gzip, brotli and zstd. [`choose`] decides, from
//! the site's `[site.compression]`, the request and the node's response
//! head, whether a response is compressed and with which coding (RFC 9110
//! section 12.5.3 `Accept-Encoding` with q-values, the server's order of
//! preference breaking ties); [`Encoder`] is the streaming encoder the
//! response body runs through (`response.rs`). Leaf module: it knows only
//! the config.
//!
//! As HAProxy's `compression` filter, a response is not compressed when the
//! request is `HEAD` or HTTP/1.0, the status is not 200–203, the response
//! already has a `Content-Encoding`, says `Cache-Control: no-transform`, is
//! shorter than `min_size` by its `Content-Length`, is `multipart/*`, or
//! its type is not listed (`*/*` lists every type); a compressed response loses `Content-Length` and
//! `Accept-Ranges`, gets `Content-Encoding` and a weak `ETag`. Every
//! response that would be compressed for some client gets `Vary:
//! Accept-Encoding`, so caches keep the encodings apart.

use std::io::Write;
use std::sync::atomic::{AtomicU32, Ordering};

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, StatusCode, Version};

use crate::config::{Coding, Compression};

impl Coding {
    /// The coding's token in `Accept-Encoding` and `Content-Encoding`.
    pub fn token(self) -> &'static str {
        match self {
            Coding::Gzip => "gzip",
            Coding::Brotli => "br",
            Coding::Zstd => "zstd",
        }
    }

    fn header(self) -> HeaderValue {
        HeaderValue::from_static(self.token())
    }
}

/// The proxy's CPU use over the last second, in percent of its worker
/// threads (sampled by the control plane, `front::cpu_sampler`), against
/// `global.compression_max_cpu`: above it, new responses are sent
/// uncompressed (HAProxy's `maxcompcpuusage`).
#[derive(Debug, Default)]
pub struct CpuUse(AtomicU32);

impl CpuUse {
    pub fn set(&self, percent: u32) {
        self.0.store(percent, Ordering::Relaxed);
    }

    pub fn get(&self) -> u32 {
        self.0.load(Ordering::Relaxed)
    }
}

/// What [`choose`] decided for one response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Not a candidate (wrong type, status, too short…): sent as it is.
    No,
    /// A candidate, but this client accepts none of the site's codings, or
    /// the proxy is over its CPU cap: sent as it is, with `Vary`.
    Identity,
    /// Compressed with this coding.
    Encode(Coding),
}

/// The request's side of the decision, taken before the request is sent
/// on (its headers move to the node).
#[derive(Debug, Clone, Copy, Default)]
pub struct Offer {
    /// The best coding the client accepts among the site's; `None` when it
    /// accepts none (or the site does not compress).
    pub coding: Option<Coding>,
    /// The request may get a compressed response at all (not HEAD, not
    /// HTTP/1.0).
    pub eligible: bool,
}

/// Reads the request's side: method, version and `Accept-Encoding`.
pub fn offer(conf: &Compression, method: &Method, version: Version, req: &HeaderMap) -> Offer {
    let eligible = method != Method::HEAD && version >= Version::HTTP_11;
    Offer {
        coding: eligible
            .then(|| negotiate(req.get_all(header::ACCEPT_ENCODING).iter(), &conf.codings))
            .flatten(),
        eligible,
    }
}

/// Decides for a response head (`status`, `headers`) and rewrites the head
/// for it: `Vary`, and for [`Decision::Encode`] the encoding headers.
pub fn choose(
    conf: &Compression,
    offer: Offer,
    over_cpu: bool,
    status: StatusCode,
    headers: &mut HeaderMap,
) -> Decision {
    if !offer.eligible || !candidate(conf, status, headers) {
        return Decision::No;
    }
    add_vary(headers);
    let Some(coding) = offer.coding.filter(|_| !over_cpu) else {
        return Decision::Identity;
    };
    headers.remove(header::CONTENT_LENGTH);
    headers.remove(header::ACCEPT_RANGES);
    headers.insert(header::CONTENT_ENCODING, coding.header());
    if let Some(tag) = headers.get(header::ETAG) {
        if !tag.as_bytes().starts_with(b"W/") {
            let mut weak = Vec::with_capacity(tag.len() + 2);
            weak.extend_from_slice(b"W/");
            weak.extend_from_slice(tag.as_bytes());
            match HeaderValue::from_bytes(&weak) {
                Ok(v) => {
                    headers.insert(header::ETAG, v);
                }
                Err(_) => {
                    headers.remove(header::ETAG);
                }
            }
        }
    }
    Decision::Encode(coding)
}

/// Whether a response could be compressed for some client.
fn candidate(conf: &Compression, status: StatusCode, headers: &HeaderMap) -> bool {
    if !matches!(status.as_u16(), 200..=203) || headers.contains_key(header::CONTENT_ENCODING) {
        return false;
    }
    if headers
        .get_all(header::CACHE_CONTROL)
        .iter()
        .any(|v| has_token(v.as_bytes(), b"no-transform"))
    {
        return false;
    }
    // A `Transfer-Encoding` other than chunked is an encoding already.
    if headers
        .get_all(header::TRANSFER_ENCODING)
        .iter()
        .any(|v| !v.as_bytes().eq_ignore_ascii_case(b"chunked"))
    {
        return false;
    }
    if let Some(len) = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
    {
        if len < conf.min_size {
            return false;
        }
    }
    // The media type without its parameters, case-insensitively.
    let ty = headers.get(header::CONTENT_TYPE).map(|t| {
        let t = t.as_bytes();
        t.split(|&b| b == b';').next().unwrap_or(t).trim_ascii()
    });
    // Multipart bodies carry their own framing: never (as HAProxy).
    if ty.is_some_and(|t| t.len() >= 10 && t[..10].eq_ignore_ascii_case(b"multipart/")) {
        return false;
    }
    // `*/*`: every type, and responses without one (HAProxy without
    // `compression type`).
    if conf.types.iter().any(|t| t == "*/*") {
        return true;
    }
    let Some(ty) = ty else {
        return false;
    };
    conf.types.iter().any(|t| {
        let t = t.as_bytes();
        if let Some(prefix) = t.strip_suffix(b"/*") {
            ty.len() > prefix.len()
                && ty[..prefix.len()].eq_ignore_ascii_case(prefix)
                && ty[prefix.len()] == b'/'
        } else {
            ty.eq_ignore_ascii_case(t)
        }
    })
}

/// Adds `Accept-Encoding` to `Vary` unless it is there (or `*` is).
fn add_vary(headers: &mut HeaderMap) {
    let present = headers
        .get_all(header::VARY)
        .iter()
        .any(|v| has_token(v.as_bytes(), b"accept-encoding") || has_token(v.as_bytes(), b"*"));
    if !present {
        headers.append(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    }
}

/// Whether a comma-separated list holds `token` (case-insensitive).
fn has_token(list: &[u8], token: &[u8]) -> bool {
    list.split(|&b| b == b',').any(|t| {
        let t = t.trim_ascii();
        let t = t.split(|&b| b == b'=').next().unwrap_or(t).trim_ascii();
        t.eq_ignore_ascii_case(token)
    })
}

/// The best of `offered` (in the server's order of preference) that the
/// `Accept-Encoding` values accept, by their q-values (RFC 9110 section
/// 12.5.3): a coding listed with q > 0, else `*` with q > 0; `x-gzip` is
/// `gzip`. Ties go to the earlier of `offered`. `None` when none is
/// acceptable (no header at all accepts none: identity).
pub fn negotiate<'a>(
    values: impl Iterator<Item = &'a HeaderValue>,
    offered: &[Coding],
) -> Option<Coding> {
    // Per offered coding its explicit weight (thousandths), and `*`'s.
    let mut explicit = [None::<u16>; 3];
    let mut star = None::<u16>;
    let mut any = false;
    for v in values {
        any = true;
        for element in v.as_bytes().split(|&b| b == b',') {
            let mut parts = element.split(|&b| b == b';');
            let name = parts.next().unwrap_or_default().trim_ascii();
            if name.is_empty() {
                continue;
            }
            let mut q = Some(1000);
            for p in parts {
                let p = p.trim_ascii();
                if p.len() >= 2 && p[..2].eq_ignore_ascii_case(b"q=") {
                    q = qvalue(&p[2..]);
                }
            }
            // A malformed weight: the element is ignored.
            let Some(q) = q else { continue };
            if name == b"*" {
                star = Some(q);
            } else if let Some(i) = offered.iter().position(|c| {
                name.eq_ignore_ascii_case(c.token().as_bytes())
                    || (*c == Coding::Gzip && name.eq_ignore_ascii_case(b"x-gzip"))
            }) {
                explicit[i.min(2)] = Some(q);
            }
        }
    }
    if !any {
        return None;
    }
    let mut best: Option<(Coding, u16)> = None;
    for (i, &c) in offered.iter().enumerate().take(3) {
        let q = explicit[i].or(star).unwrap_or(0);
        if q > 0 && best.is_none_or(|(_, b)| q > b) {
            best = Some((c, q));
        }
    }
    best.map(|(c, _)| c)
}

/// An RFC 9110 `qvalue` in thousandths: `0`, `0.d{0,3}`, `1`, `1.0{0,3}`.
fn qvalue(v: &[u8]) -> Option<u16> {
    let (int, frac) = match v.iter().position(|&b| b == b'.') {
        Some(i) => (&v[..i], &v[i + 1..]),
        None => (v, &b""[..]),
    };
    if int.len() != 1 || frac.len() > 3 || !frac.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut thousandths = 0u16;
    for i in 0..3 {
        thousandths = thousandths * 10 + frac.get(i).map_or(0, |d| u16::from(d - b'0'));
    }
    match int[0] {
        b'0' => Some(thousandths),
        b'1' if thousandths == 0 => Some(1000),
        _ => None,
    }
}

/// A streaming encoder: bytes in, compressed bytes out as the encoder
/// releases them. gzip and zstd states are reused: a worker keeps a few
/// finished ones ([`POOL`]), so a small response does not pay for
/// allocating and clearing the hundreds of KiB of tables each coding keeps
/// (measured: most of the cost of a 1 KiB response before the pool).
pub struct Encoder {
    state: Option<State>,
    coding: Coding,
    level: u32,
    /// Input written since the output was last flushed.
    unflushed: bool,
    pub bytes_in: u64,
    pub bytes_out: u64,
}

enum State {
    /// Raw deflate inside the gzip framing this module writes (RFC 1952):
    /// the header before the first bytes, CRC-32 and length after the last.
    Gzip {
        deflate: flate2::Compress,
        crc: flate2::Crc,
        header_sent: bool,
    },
    /// Not pooled: the brotli crate has no way to reset a state.
    Brotli(Box<brotli::CompressorWriter<Vec<u8>>>),
    Zstd(zstd::stream::raw::Encoder<'static>),
}

/// The window of brotli and zstd, as a power of two: 256 KiB, so a
/// compressed response holds about a megabyte at most, not the
/// libraries' defaults of 4–8 MiB.
const WINDOW_LOG: u32 = 18;

/// Finished gzip and zstd states kept per worker thread for the next
/// responses (at most this many; each holds its coding's tables).
const POOLED: usize = 8;

thread_local! {
    static POOL: std::cell::RefCell<Vec<(Coding, u32, State)>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The gzip header: no name, no time, unknown OS (RFC 1952 section 2.3).
const GZIP_HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];

impl Encoder {
    pub fn new(coding: Coding, level: u32) -> std::io::Result<Encoder> {
        let pooled = POOL.with(|p| {
            let mut p = p.borrow_mut();
            let i = p.iter().position(|(c, l, _)| *c == coding && *l == level)?;
            Some(p.swap_remove(i).2)
        });
        let state = match pooled {
            Some(s) => s,
            None => match coding {
                Coding::Gzip => State::Gzip {
                    deflate: flate2::Compress::new(flate2::Compression::new(level.min(9)), false),
                    crc: flate2::Crc::new(),
                    header_sent: false,
                },
                Coding::Brotli => State::Brotli(Box::new(brotli::CompressorWriter::new(
                    Vec::new(),
                    16 * 1024,
                    level.min(11),
                    WINDOW_LOG,
                ))),
                Coding::Zstd => {
                    let mut e = zstd::stream::raw::Encoder::new(level.min(19) as i32)?;
                    e.set_parameter(zstd::zstd_safe::CParameter::WindowLog(WINDOW_LOG))?;
                    State::Zstd(e)
                }
            },
        };
        Ok(Encoder {
            state: Some(state),
            coding,
            level,
            unflushed: false,
            bytes_in: 0,
            bytes_out: 0,
        })
    }

    /// Compresses `data`; returns what the encoder released (often
    /// nothing: it keeps a block until it is full).
    pub fn write(&mut self, data: &[u8]) -> std::io::Result<Bytes> {
        self.bytes_in += data.len() as u64;
        self.unflushed |= !data.is_empty();
        self.step(data, Step::Write)
    }

    /// Whether input was written since the last flush.
    pub fn unflushed(&self) -> bool {
        self.unflushed
    }

    /// Everything written so far, decodable now (the node paused: a
    /// streamed response reaches the client without waiting for a full
    /// block).
    pub fn flush(&mut self) -> std::io::Result<Bytes> {
        self.unflushed = false;
        self.step(&[], Step::Flush)
    }

    /// The end of the stream (trailer and checksum); the state goes back
    /// to the worker's pool.
    pub fn finish(&mut self) -> std::io::Result<Bytes> {
        self.unflushed = false;
        let out = self.step(&[], Step::Finish);
        self.release();
        out
    }

    fn step(&mut self, data: &[u8], step: Step) -> std::io::Result<Bytes> {
        let mut out = Vec::new();
        match &mut self.state {
            None => return Err(std::io::Error::other("encoder already finished")),
            Some(State::Gzip {
                deflate,
                crc,
                header_sent,
            }) => {
                if !*header_sent {
                    out.extend_from_slice(&GZIP_HEADER);
                    *header_sent = true;
                }
                crc.update(data);
                deflate_step(deflate, data, &mut out, step)?;
                if step == Step::Finish {
                    out.extend_from_slice(&crc.sum().to_le_bytes());
                    out.extend_from_slice(&crc.amount().to_le_bytes());
                }
            }
            Some(State::Brotli(e)) => {
                match step {
                    Step::Write => e.write_all(data)?,
                    Step::Flush => e.flush()?,
                    Step::Finish => {}
                }
                out = std::mem::take(e.get_mut());
                if step == Step::Finish {
                    if let Some(State::Brotli(e)) = self.state.take() {
                        out.extend_from_slice(&e.into_inner());
                    }
                }
            }
            Some(State::Zstd(e)) => zstd_step(e, data, &mut out, step)?,
        }
        self.bytes_out += out.len() as u64;
        Ok(Bytes::from(out))
    }

    /// Gives a gzip or zstd state back to this thread's pool, reset.
    fn release(&mut self) {
        let Some(mut state) = self.state.take() else {
            return;
        };
        let reset = match &mut state {
            State::Gzip {
                deflate,
                crc,
                header_sent,
            } => {
                deflate.reset();
                *crc = flate2::Crc::new();
                *header_sent = false;
                true
            }
            State::Zstd(e) => {
                use zstd::stream::raw::Operation;
                e.reinit().is_ok()
            }
            State::Brotli(_) => false,
        };
        if reset {
            let (coding, level) = (self.coding, self.level);
            POOL.with(|p| {
                let mut p = p.borrow_mut();
                if p.len() < POOLED {
                    p.push((coding, level, state));
                }
            });
        }
    }
}

impl Drop for Encoder {
    /// A response cut short leaves its state reusable too.
    fn drop(&mut self) {
        self.release();
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Write,
    Flush,
    Finish,
}

/// Room made in `out` before each call of an encoder.
fn reserve(out: &mut Vec<u8>, hint: usize) {
    if out.capacity() - out.len() < 64 {
        out.reserve(hint.clamp(4 * 1024, 64 * 1024));
    }
}

/// Deflates `data` into `out`; a flush or the finish runs until the
/// encoder has written everything it holds.
fn deflate_step(
    d: &mut flate2::Compress,
    mut data: &[u8],
    out: &mut Vec<u8>,
    step: Step,
) -> std::io::Result<()> {
    let mode = match step {
        Step::Write => flate2::FlushCompress::None,
        Step::Flush => flate2::FlushCompress::Sync,
        Step::Finish => flate2::FlushCompress::Finish,
    };
    loop {
        reserve(out, data.len() / 2);
        let before = d.total_in();
        let status = d
            .compress_vec(data, out, mode)
            .map_err(std::io::Error::other)?;
        data = &data[(d.total_in() - before) as usize..];
        let room_left = out.len() < out.capacity();
        match status {
            flate2::Status::StreamEnd => return Ok(()),
            flate2::Status::BufError if data.is_empty() && room_left => return Ok(()),
            _ if step != Step::Finish && data.is_empty() && room_left => return Ok(()),
            _ => {}
        }
    }
}

/// [`deflate_step`] for zstd.
fn zstd_step(
    e: &mut zstd::stream::raw::Encoder<'static>,
    data: &[u8],
    out: &mut Vec<u8>,
    step: Step,
) -> std::io::Result<()> {
    use zstd::stream::raw::{InBuffer, Operation, OutBuffer};
    let mut input = InBuffer::around(data);
    while input.pos() < data.len() {
        reserve(out, data.len() / 2);
        let pos = out.len();
        let mut o = OutBuffer::around_pos(out, pos);
        e.run(&mut input, &mut o)?;
    }
    if step == Step::Write {
        return Ok(());
    }
    loop {
        reserve(out, 0);
        let pos = out.len();
        let mut o = OutBuffer::around_pos(out, pos);
        let left = match step {
            Step::Finish => e.finish(&mut o, true)?,
            _ => e.flush(&mut o)?,
        };
        if left == 0 {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests;
