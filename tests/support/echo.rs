//! A raw HTTP/1.1 echo node for differential tests, and the message reader
//! it shares with the tests' raw clients.
//!
//! Unlike [`super::Backend`] (hyper, which normalises what it parses), the
//! node reads requests off the socket itself and records exactly what
//! arrived: the request line, every header line in order with its original
//! case, the framing (`Content-Length`, chunked, none), the decoded body and
//! the trailer lines. It serves keep-alive and pipelined requests, answers
//! each with a small response whose body is a digest of what it received,
//! and records anything it cannot parse as an anomaly instead of guessing.
//!
//! Two request headers steer the response, so the client side can be
//! compared too: `x-diff-status` (the status, default 200) and
//! `x-diff-reply: chunked` (a chunked response instead of `Content-Length`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;

/// How a message body was delimited on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// Neither `Content-Length` nor `Transfer-Encoding`: no body.
    None,
    /// `Content-Length: n`.
    Length(u64),
    /// `Transfer-Encoding: chunked` (chunk sizes are not kept: each hop
    /// may cut the body differently).
    Chunked,
}

/// A message head as it arrived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// The three parts of the start line (request: method, target,
    /// version; response: version, status, reason).
    pub line: [String; 3],
    /// Header lines in arrival order, names in their original case, values
    /// without the surrounding whitespace (RFC 9112 section 5).
    pub headers: Vec<(String, String)>,
}

impl Head {
    /// Every value of header `name` (case-insensitive), in order.
    pub fn values<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.headers
            .iter()
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// How the body that follows this head is delimited: chunked when the
    /// last transfer coding is chunked, else by `Content-Length`.
    pub fn framing(&self) -> Result<Framing, String> {
        let codings: Vec<String> = self
            .values("transfer-encoding")
            .flat_map(|v| v.split(','))
            .map(|c| c.trim().to_ascii_lowercase())
            .collect();
        if !codings.is_empty() {
            return if codings.last().map(String::as_str) == Some("chunked") {
                Ok(Framing::Chunked)
            } else {
                Err(format!("transfer codings {codings:?}"))
            };
        }
        let mut len = None;
        for v in self.values("content-length") {
            let n: u64 = v
                .parse()
                .map_err(|_| format!("content-length {v:?}"))
                .and_then(|n| {
                    (v.bytes().all(|b| b.is_ascii_digit()))
                        .then_some(n)
                        .ok_or(format!("content-length {v:?}"))
                })?;
            if len.is_some_and(|l| l != n) {
                return Err("two different content-lengths".into());
            }
            len = Some(n);
        }
        Ok(len.map_or(Framing::None, Framing::Length))
    }
}

/// A decoded body and the trailer lines that followed it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Body {
    pub data: Vec<u8>,
    pub trailers: Vec<(String, String)>,
}

/// One request as the echo node received it.
#[derive(Debug, Clone)]
pub struct Received {
    pub head: Head,
    pub framing: Framing,
    pub body: Body,
}

impl Received {
    pub fn method(&self) -> &str {
        &self.head.line[0]
    }
    pub fn target(&self) -> &str {
        &self.head.line[1]
    }
    pub fn version(&self) -> &str {
        &self.head.line[2]
    }
}

/// A message the echo node could not parse.
#[derive(Debug, Clone)]
pub struct Anomaly {
    pub error: String,
    pub bytes: Vec<u8>,
}

/// What the echo node saw, in arrival order.
#[derive(Debug, Default)]
pub struct EchoLog {
    pub requests: Vec<Received>,
    /// Bytes the node could not parse: what went wrong and the message's
    /// bytes up to there. A correct proxy never causes one.
    pub anomalies: Vec<Anomaly>,
    /// Request heads whose body never arrived whole (the client's body was
    /// cut or invalid after the head was forwarded).
    pub incomplete: Vec<Head>,
}

/// The echo node: a loopback listener and its log; stops on drop.
pub struct EchoNode {
    pub addr: std::net::SocketAddr,
    pub log: Arc<Mutex<EchoLog>>,
    task: tokio::task::JoinHandle<()>,
}

impl EchoNode {
    pub async fn start() -> EchoNode {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind echo");
        let addr = listener.local_addr().unwrap();
        let log = Arc::new(Mutex::new(EchoLog::default()));
        let l = Arc::clone(&log);
        let task = tokio::spawn(async move {
            let mut conns = tokio::task::JoinSet::new();
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                conns.spawn(serve(stream, Arc::clone(&l)));
            }
        });
        EchoNode { addr, log, task }
    }

    /// A copy of the log so far.
    pub fn snapshot(&self) -> (Vec<Received>, Vec<Anomaly>, Vec<Head>) {
        let l = self.log.lock().unwrap();
        (
            l.requests.clone(),
            l.anomalies.clone(),
            l.incomplete.clone(),
        )
    }
}

impl Drop for EchoNode {
    fn drop(&mut self) {
        // Aborting the accept loop drops its JoinSet, which aborts every
        // connection task.
        self.task.abort();
    }
}

async fn serve(stream: tokio::net::TcpStream, log: Arc<Mutex<EchoLog>>) {
    let mut wire = Wire::new(stream);
    loop {
        let head = match wire.head().await {
            Ok(Some(h)) => h,
            Ok(None) => return,
            Err(error) => {
                let bytes = wire.seen().to_vec();
                log.lock().unwrap().anomalies.push(Anomaly { error, bytes });
                return;
            }
        };
        let framing = match head.framing() {
            Ok(f) => f,
            Err(error) => {
                let bytes = wire.seen().to_vec();
                log.lock().unwrap().anomalies.push(Anomaly { error, bytes });
                return;
            }
        };
        let body = match wire.body(framing).await {
            Ok(b) => b,
            Err(_) => {
                log.lock().unwrap().incomplete.push(head);
                return;
            }
        };
        let reply = reply(&head, &body);
        log.lock().unwrap().requests.push(Received {
            head,
            framing,
            body,
        });
        if wire.stream.write_all(&reply).await.is_err() {
            return;
        }
    }
}

/// FNV-1a, a digest of a body for the response.
pub fn fnv1a(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The echo node's response to `head` and `body`.
fn reply(head: &Head, body: &Body) -> Vec<u8> {
    let status: u16 = head
        .values("x-diff-status")
        .next()
        .and_then(|s| s.parse().ok())
        // Only a status a response may carry (three digits, RFC 9112
        // section 4): a generated field's "4" made the node answer
        // `HTTP/1.1 4`, which rdmalb refuses (502) and HAProxy relayed.
        .filter(|s| (100..=599).contains(s))
        .unwrap_or(200);
    let id = head.values("x-diff-id").next().unwrap_or("-");
    let text = format!(
        "{id} {} {} {:016x}\n",
        head.line[0],
        body.data.len(),
        fnv1a(&body.data)
    );
    let mut out = format!("HTTP/1.1 {status} Echo\r\nX-Echo-Id: {id}\r\n").into_bytes();
    let no_body = status == 204 || status == 304 || (100..200).contains(&status);
    if no_body {
        out.extend_from_slice(b"\r\n");
    } else if head.values("x-diff-reply").any(|v| v == "chunked") {
        out.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
        if head.line[0] != "HEAD" {
            for part in text.as_bytes().chunks(7) {
                out.extend_from_slice(format!("{:x}\r\n", part.len()).as_bytes());
                out.extend_from_slice(part);
                out.extend_from_slice(b"\r\n");
            }
            out.extend_from_slice(b"0\r\nX-Echo-Trailer: done\r\n\r\n");
        }
    } else {
        out.extend_from_slice(format!("Content-Length: {}\r\n\r\n", text.len()).as_bytes());
        if head.line[0] != "HEAD" {
            out.extend_from_slice(text.as_bytes());
        }
    }
    out
}

/// How long one read may wait: a bound on how long a broken test hangs,
/// never a timing claim.
const READ_BOUND: Duration = Duration::from_secs(20);
/// Larger heads are refused (both proxies' limits are far below).
const MAX_HEAD: usize = 1 << 20;

/// A buffered reader of HTTP/1.1 messages on a stream, strict about the
/// syntax (CRLF line ends, token header names): what a proxy forwards
/// must be well-formed, and what it answers must be too.
pub struct Wire<S> {
    pub stream: S,
    buf: Vec<u8>,
    /// The current message's bytes read so far, for the anomaly report.
    seen: Vec<u8>,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Wire<S> {
    pub fn new(stream: S) -> Self {
        Wire {
            stream,
            buf: Vec::new(),
            seen: Vec::new(),
        }
    }

    /// Reads more bytes; `Ok(false)` at the end of the stream.
    async fn fill(&mut self) -> Result<bool, String> {
        let mut chunk = [0u8; 16 * 1024];
        match tokio::time::timeout(READ_BOUND, self.stream.read(&mut chunk)).await {
            Err(_) => Err("no byte within the read bound".into()),
            Ok(Err(e)) => Err(format!("read: {e}")),
            Ok(Ok(0)) => Ok(false),
            Ok(Ok(n)) => {
                self.buf.extend_from_slice(&chunk[..n]);
                Ok(true)
            }
        }
    }

    /// One CRLF-terminated line, without the CRLF.
    async fn line(&mut self) -> Result<Vec<u8>, String> {
        loop {
            if let Some(i) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line: Vec<u8> = self.buf.drain(..i + 2).collect();
                self.seen.extend_from_slice(&line);
                return Ok(line[..i].to_vec());
            }
            if self.buf.len() > MAX_HEAD {
                return Err("line too long".into());
            }
            if !self.fill().await? {
                return Err(format!(
                    "stream ended inside a line: {:?}",
                    String::from_utf8_lossy(&self.buf)
                ));
            }
        }
    }

    /// The bytes of the current message read so far (its head, when
    /// parsing it failed).
    pub fn seen(&self) -> &[u8] {
        &self.seen
    }

    /// The next message head, or `None` when the stream ends cleanly
    /// before one starts.
    pub async fn head(&mut self) -> Result<Option<Head>, String> {
        // Between messages, a reset or a long silence ends the stream as a
        // close does (HAProxy resets idle server connections).
        while self.buf.is_empty() {
            if !self.fill().await.unwrap_or(false) {
                return Ok(None);
            }
        }
        self.seen.clear();
        let start = self.line().await?;
        let start = text(&start)?;
        let mut parts = start.splitn(3, ' ');
        let line = [(); 3].map(|_| parts.next().unwrap_or("").to_string());
        if line.iter().take(2).any(String::is_empty) {
            return Err(format!("bad start line {start:?}"));
        }
        let headers = self.fields().await?;
        Ok(Some(Head { line, headers }))
    }

    /// Header (or trailer) lines up to the empty line.
    async fn fields(&mut self) -> Result<Vec<(String, String)>, String> {
        let mut fields = Vec::new();
        loop {
            let l = self.line().await?;
            if l.is_empty() {
                return Ok(fields);
            }
            let l = text(&l)?;
            let (name, value) = l
                .split_once(':')
                .ok_or_else(|| format!("header line without a colon: {l:?}"))?;
            if name.is_empty() || !name.bytes().all(is_tchar) {
                return Err(format!("bad header name {name:?}"));
            }
            fields.push((
                name.to_string(),
                value.trim_matches([' ', '\t']).to_string(),
            ));
        }
    }

    /// The body that follows a head with `framing`.
    pub async fn body(&mut self, framing: Framing) -> Result<Body, String> {
        match framing {
            Framing::None => Ok(Body::default()),
            Framing::Length(n) => Ok(Body {
                data: self
                    .exactly(usize::try_from(n).map_err(|e| e.to_string())?)
                    .await?,
                trailers: Vec::new(),
            }),
            Framing::Chunked => {
                let mut data = Vec::new();
                loop {
                    let l = self.line().await?;
                    let l = text(&l)?;
                    let size = l.split(';').next().unwrap_or("").trim();
                    let n = usize::from_str_radix(size, 16)
                        .map_err(|_| format!("bad chunk size {l:?}"))?;
                    if n == 0 {
                        let trailers = self.fields().await?;
                        return Ok(Body { data, trailers });
                    }
                    data.extend(self.exactly(n).await?);
                    if self.exactly(2).await? != b"\r\n" {
                        return Err("chunk not followed by CRLF".into());
                    }
                }
            }
        }
    }

    /// Reads a response body until the peer closes (a response without
    /// framing).
    pub async fn until_close(&mut self) -> Result<Vec<u8>, String> {
        while self.fill().await? {}
        Ok(std::mem::take(&mut self.buf))
    }

    async fn exactly(&mut self, n: usize) -> Result<Vec<u8>, String> {
        while self.buf.len() < n {
            if !self.fill().await? {
                return Err(format!("stream ended {} bytes short", n - self.buf.len()));
            }
        }
        let bytes: Vec<u8> = self.buf.drain(..n).collect();
        self.seen.extend_from_slice(&bytes);
        Ok(bytes)
    }
}

/// A line as text: bytes are kept one to one (obs-text as Latin-1), a
/// bare CR or LF or a NUL inside it is an error.
fn text(line: &[u8]) -> Result<String, String> {
    if line.iter().any(|&b| b == b'\r' || b == b'\n' || b == 0) {
        return Err(format!(
            "CR, LF or NUL inside a line: {:?}",
            String::from_utf8_lossy(line)
        ));
    }
    Ok(line.iter().map(|&b| char::from(b)).collect())
}

/// RFC 9110 section 5.6.2 token characters.
pub fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}
