//! `kind = "push"`: the app reports its own numbers.
//!
//! Protocol (TCP on a loopback address, or a unix stream socket): the app
//! sends lines of space-separated `key=value` pairs, values unsigned
//! decimal integers, and gets one reply line per request line:
//!
//! ```text
//! > busy=3 capacity=8 queue=1 requests_total=1234
//! < ok
//! > busy=lots
//! < err busy: `lots` is not an unsigned integer
//! ```
//!
//! Keys: `busy`, `capacity`, `queue`, `requests_total`, `connections`,
//! `latency_us` (the app's recent response time), `queue_limit` (the most
//! requests its queue holds beyond the busy workers). A line
//! may carry any subset; fields it leaves out keep their last pushed value.
//! An empty line is a keep-alive (refreshes `expire`). Lines are at most
//! [`MAX_LINE`] bytes; a longer one is answered `err` and the connection
//! closed. With `expire` set, pushed fields are dropped when no line arrived
//! for that long (the fields then come from other collectors, else zero).
//! Several connections may push; the last line wins. [`Client`] is the Rust
//! client.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tokio::sync::watch;

use super::{Field, Reading, Slot};
use crate::config::{PushCollector, PushListen};

/// Longest accepted request line, newline included.
pub const MAX_LINE: usize = 1024;
/// Push connections served at once; more are answered `err` and closed.
pub const MAX_CONNECTIONS: usize = 64;

/// Keys of the push protocol and the fields they set.
pub const KEYS: [(&str, Field); 7] = [
    ("busy", Field::AppBusy),
    ("capacity", Field::AppCapacity),
    ("queue", Field::AppQueue),
    ("latency_us", Field::AppLatency),
    ("queue_limit", Field::AppQueueLimit),
    ("requests_total", Field::RequestsTotal),
    ("connections", Field::Connections),
];

/// Parses one request line (without the newline) into field updates.
pub fn parse_line(line: &str) -> Result<Reading, String> {
    let mut r = Reading::default();
    for pair in line.split_ascii_whitespace() {
        let Some((k, v)) = pair.split_once('=') else {
            return Err(format!("`{pair}` is not key=value"));
        };
        let Some(&(_, field)) = KEYS.iter().find(|(name, _)| *name == k) else {
            return Err(format!(
                "unknown key `{k}` (accepted: busy, capacity, queue, requests_total, connections, latency_us, queue_limit)"
            ));
        };
        let v: u64 = v
            .parse()
            .map_err(|_| format!("{k}: `{v}` is not an unsigned integer"))?;
        r.set(field, v);
    }
    Ok(r)
}

/// What the app pushed so far, plus when.
#[derive(Debug)]
struct Pushed {
    reading: Reading,
    last: Option<Instant>,
}

/// A bound push listener; [`Server::run`] serves it until shutdown.
#[derive(Debug)]
pub struct Server {
    listener: Listener,
    slot: Arc<Slot>,
    expire: Option<Duration>,
    pushed: Arc<Mutex<Pushed>>,
    /// Bounds the connections served at once (a misbehaving local client
    /// must not exhaust the sidecar's file descriptors).
    conns: Arc<tokio::sync::Semaphore>,
}

#[derive(Debug)]
enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener, PathBuf),
}

/// Why the push listener could not start.
#[derive(Debug, thiserror::Error)]
pub enum PushBindError {
    #[error("push collector: cannot listen on {addr}: {source}")]
    Bind {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("push collector: {path} exists and is not a socket; refusing to replace it")]
    NotASocket { path: String },
}

impl Server {
    /// Binds the configured address. A stale unix socket file left by a
    /// previous run is replaced; any other file at that path is an error.
    pub async fn bind(cfg: &PushCollector, slot: Arc<Slot>) -> Result<Server, PushBindError> {
        let listener = match &cfg.listen {
            PushListen::Tcp(a) => {
                Listener::Tcp(
                    TcpListener::bind(a)
                        .await
                        .map_err(|e| PushBindError::Bind {
                            addr: a.to_string(),
                            source: e,
                        })?,
                )
            }
            PushListen::Unix(p) => {
                remove_stale_socket(p)?;
                let l = UnixListener::bind(p).map_err(|e| PushBindError::Bind {
                    addr: p.display().to_string(),
                    source: e,
                })?;
                Listener::Unix(l, p.clone())
            }
        };
        Ok(Server {
            listener,
            slot,
            expire: cfg.expire,
            conns: Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS)),
            pushed: Arc::new(Mutex::new(Pushed {
                reading: Reading::default(),
                last: None,
            })),
        })
    }

    /// The bound address (TCP port 0 in the config resolves here).
    pub fn local_addr(&self) -> PushListen {
        match &self.listener {
            Listener::Tcp(l) => match l.local_addr() {
                Ok(a) => PushListen::Tcp(a),
                Err(_) => PushListen::Tcp(([127, 0, 0, 1], 0).into()),
            },
            Listener::Unix(_, p) => PushListen::Unix(p.clone()),
        }
    }

    /// Accepts and serves connections until `shutdown`; removes its unix
    /// socket file on the way out.
    pub async fn run(self, mut shutdown: watch::Receiver<bool>) {
        let expire_every = self.expire.map(|d| (d / 4).max(Duration::from_millis(1)));
        let mut expiry = tokio::time::interval(expire_every.unwrap_or(Duration::from_secs(3600)));
        loop {
            tokio::select! {
                _ = rdmalb_base::shutdown::requested(&mut shutdown) => break,
                _ = expiry.tick(), if expire_every.is_some() => self.expire_check(),
                conn = accept(&self.listener) => match conn {
                    Ok(conn) => {
                        let (slot, pushed, sd) = (self.slot.clone(), self.pushed.clone(), shutdown.clone());
                        let permit = self.conns.clone().try_acquire_owned();
                        tokio::spawn(async move {
                            let Ok(_permit) = permit else {
                                refuse_busy(conn).await;
                                return;
                            };
                            match conn {
                                Conn::Tcp(s) => serve_conn(s, slot, pushed, sd).await,
                                Conn::Unix(s) => serve_conn(s, slot, pushed, sd).await,
                            }
                        });
                    }
                    Err(e) => {
                        // EMFILE and friends: back off instead of spinning.
                        tracing::warn!(collector = %self.slot.name, error = %e, "push accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                },
            }
        }
        if let Listener::Unix(_, p) = &self.listener {
            let _ = std::fs::remove_file(p);
        }
    }

    fn expire_check(&self) {
        let (Some(expire), Ok(mut p)) = (self.expire, self.pushed.lock()) else {
            return;
        };
        if let Some(last) = p.last {
            if last.elapsed() > expire && !p.reading.is_empty() {
                tracing::info!(collector = %self.slot.name, "no push for {}; dropping pushed fields",
                    rdmalb_base::duration::format(expire));
                p.reading = Reading::default();
                self.slot.clear();
            }
        }
    }
}

fn remove_stale_socket(p: &Path) -> Result<(), PushBindError> {
    use std::os::unix::fs::FileTypeExt;
    match std::fs::symlink_metadata(p) {
        Ok(m) if m.file_type().is_socket() => {
            let _ = std::fs::remove_file(p);
            Ok(())
        }
        Ok(_) => Err(PushBindError::NotASocket {
            path: p.display().to_string(),
        }),
        Err(_) => Ok(()),
    }
}

enum Conn {
    Tcp(TcpStream),
    Unix(UnixStream),
}

async fn accept(l: &Listener) -> std::io::Result<Conn> {
    match l {
        Listener::Tcp(l) => l.accept().await.map(|(s, _)| {
            let _ = s.set_nodelay(true);
            Conn::Tcp(s)
        }),
        Listener::Unix(l, _) => l.accept().await.map(|(s, _)| Conn::Unix(s)),
    }
}

async fn refuse_busy(conn: Conn) {
    let msg = b"err too many push connections\n";
    match conn {
        Conn::Tcp(mut s) => {
            let _ = s.write_all(msg).await;
        }
        Conn::Unix(mut s) => {
            let _ = s.write_all(msg).await;
        }
    }
}

async fn serve_conn<S: AsyncRead + AsyncWrite + Unpin>(
    stream: S,
    slot: Arc<Slot>,
    pushed: Arc<Mutex<Pushed>>,
    mut shutdown: watch::Receiver<bool>,
) {
    let (rd, mut wr) = tokio::io::split(stream);
    let mut rd = BufReader::new(rd);
    let mut buf = Vec::with_capacity(128);
    loop {
        buf.clear();
        let mut limited = (&mut rd).take(MAX_LINE as u64);
        let read = tokio::select! {
            _ = rdmalb_base::shutdown::requested(&mut shutdown) => return,
            r = limited.read_until(b'\n', &mut buf) => r,
        };
        match read {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if buf.last() != Some(&b'\n') {
            let msg = if buf.len() >= MAX_LINE {
                "line too long"
            } else {
                "connection closed mid-line"
            };
            let _ = wr.write_all(format!("err {msg}\n").as_bytes()).await;
            return;
        }
        let reply = match std::str::from_utf8(&buf) {
            Err(_) => "err line is not UTF-8\n".to_string(),
            Ok(line) => match parse_line(line.trim_end()) {
                Ok(update) => {
                    if let Ok(mut p) = pushed.lock() {
                        p.reading.overlay(&update);
                        p.last = Some(Instant::now());
                        slot.store(p.reading);
                    }
                    "ok\n".to_string()
                }
                Err(e) => format!("err {e}\n"),
            },
        };
        if wr.write_all(reply.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// Numbers an app pushes; `None` fields are left as last pushed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PushSample {
    pub busy: Option<u64>,
    pub capacity: Option<u64>,
    pub queue: Option<u64>,
    pub requests_total: Option<u64>,
    pub connections: Option<u64>,
    /// The app's recent response time, microseconds.
    pub latency_us: Option<u64>,
    /// The most requests the app's queue holds.
    pub queue_limit: Option<u64>,
}

impl PushSample {
    /// The protocol line, newline included.
    pub fn to_line(&self) -> String {
        let mut s = String::new();
        for (k, v) in [
            ("busy", self.busy),
            ("capacity", self.capacity),
            ("queue", self.queue),
            ("requests_total", self.requests_total),
            ("connections", self.connections),
            ("latency_us", self.latency_us),
            ("queue_limit", self.queue_limit),
        ] {
            if let Some(v) = v {
                if !s.is_empty() {
                    s.push(' ');
                }
                s.push_str(&format!("{k}={v}"));
            }
        }
        s.push('\n');
        s
    }
}

/// Why a push failed.
#[derive(Debug, thiserror::Error)]
pub enum PushError {
    #[error("push: i/o error: {0}")]
    Io(#[from] std::io::Error),
    #[error("push: sidecar refused the line: {0}")]
    Refused(String),
    #[error("push: sidecar closed the connection")]
    Closed,
}

/// A push client for apps written in Rust (our test server uses it).
/// One request line, one reply line; keep the client and push repeatedly.
pub struct Client {
    rd: BufReader<Box<dyn AsyncRead + Send + Unpin>>,
    wr: Box<dyn AsyncWrite + Send + Unpin>,
    reply: String,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("push::Client")
    }
}

impl Client {
    /// Connects to a push collector at `listen`.
    pub async fn connect(listen: &PushListen) -> Result<Client, PushError> {
        Ok(match listen {
            PushListen::Tcp(a) => {
                let s = TcpStream::connect(a).await?;
                s.set_nodelay(true)?;
                let (r, w) = s.into_split();
                Client::from_parts(Box::new(r), Box::new(w))
            }
            PushListen::Unix(p) => {
                let (r, w) = UnixStream::connect(p).await?.into_split();
                Client::from_parts(Box::new(r), Box::new(w))
            }
        })
    }

    fn from_parts(
        r: Box<dyn AsyncRead + Send + Unpin>,
        w: Box<dyn AsyncWrite + Send + Unpin>,
    ) -> Client {
        Client {
            rd: BufReader::new(r),
            wr: w,
            reply: String::new(),
        }
    }

    /// Pushes one sample and waits for the sidecar's `ok`.
    pub async fn push(&mut self, s: &PushSample) -> Result<(), PushError> {
        self.send_line(&s.to_line()).await
    }

    /// Sends a raw line (newline appended if missing) and waits for the reply.
    pub async fn send_line(&mut self, line: &str) -> Result<(), PushError> {
        self.wr.write_all(line.as_bytes()).await?;
        if !line.ends_with('\n') {
            self.wr.write_all(b"\n").await?;
        }
        self.wr.flush().await?;
        self.reply.clear();
        if (&mut self.rd)
            .take(MAX_LINE as u64)
            .read_line(&mut self.reply)
            .await?
            == 0
        {
            return Err(PushError::Closed);
        }
        match self.reply.trim_end() {
            "ok" => Ok(()),
            other => Err(PushError::Refused(
                other.strip_prefix("err ").unwrap_or(other).to_string(),
            )),
        }
    }
}

#[cfg(test)]
mod tests;
