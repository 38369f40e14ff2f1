//! Shared helpers of the integration tests: a child-process guard that
//! kills on drop, free loopback ports, bounded polling for an eventual
//! state, the `rdmalb proxy` binary started on a config in a temp dir,
//! in-process hyper backends with request/connection counters, and rcgen
//! certificates.

use std::convert::Infallible;
use std::future::Future;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream as StdTcpStream};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Kills (SIGKILL) and reaps the child on drop, even when a test panics.
pub struct ChildGuard {
    pub child: Child,
}

impl ChildGuard {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The appliance binary (`rdmalb`: proxy, sidecar, check).
pub const RDMALB: &str = env!("CARGO_BIN_EXE_rdmalb");

/// The testbed binary (`rdmalb-testbed`: testsrv, trace, load, cluster).
/// Cargo puts it beside `rdmalb` when it builds the workspace's tests (the
/// testbed crate has tests of its own, so `cargo test` builds its binary).
pub fn testbed_bin() -> PathBuf {
    let p = Path::new(RDMALB).with_file_name("rdmalb-testbed");
    assert!(
        p.is_file(),
        "{} is missing: run the tests from the workspace root (`cargo test`), or `cargo build -p rdmalb-testbed` first",
        p.display()
    );
    p
}

/// A loopback port that was free a moment ago, and that no other call in
/// this test process has handed out, taken below the kernel's ephemeral
/// range: a port from that range (what binding port 0 gives) can be drawn
/// as the source port of any outgoing connection before the process the
/// test starts binds it (`rdmalb_testbed::ports`).
pub fn free_port() -> u16 {
    rdmalb_testbed::ports::free_loopback_addr()
        .expect("a free loopback port")
        .port()
}

/// A loopback address with a port that was free a moment ago.
pub fn free_addr() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], free_port()))
}

/// Polls `probe` until it returns `Ok`, for at most `bound` (a bound on how
/// long a broken test may hang, never a timing claim), then fails with
/// `what` and the description of the last state seen.
pub async fn eventually<T, F, Fut>(what: &str, bound: Duration, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let deadline = std::time::Instant::now() + bound;
    loop {
        match probe().await {
            Ok(v) => return v,
            Err(last) => {
                assert!(
                    std::time::Instant::now() < deadline,
                    "timed out waiting for {what}: {last}"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}

/// Sends `sig` to `pid`.
pub fn signal(pid: u32, sig: i32) {
    let status = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -{sig} {pid} failed");
}

pub const SIGHUP: i32 = 1;
pub const SIGTERM: i32 = 15;

/// A running `rdmalb proxy`.
pub struct Proxy {
    pub guard: ChildGuard,
    pub dir: tempfile::TempDir,
    pub config: PathBuf,
    pub stderr: PathBuf,
}

impl Proxy {
    /// Writes `config` to `rdmalb.toml` in a temp dir (the text may refer to
    /// `{dir}`, replaced by that dir), starts the binary and waits until
    /// every address in `wait_for` accepts connections.
    pub fn start(config: &str, wait_for: &[SocketAddr]) -> Proxy {
        let dir = tempfile::tempdir().expect("tempdir");
        Self::start_in(dir, config, wait_for)
    }

    pub fn start_in(dir: tempfile::TempDir, config: &str, wait_for: &[SocketAddr]) -> Proxy {
        Self::start_with_env(dir, config, wait_for, &[])
    }

    /// [`start_in`](Self::start_in) with extra environment variables.
    pub fn start_with_env(
        dir: tempfile::TempDir,
        config: &str,
        wait_for: &[SocketAddr],
        env: &[(&str, &std::ffi::OsStr)],
    ) -> Proxy {
        let text = config.replace("{dir}", &dir.path().display().to_string());
        let path = dir.path().join("rdmalb.toml");
        std::fs::write(&path, text).expect("write config");
        let stdout = dir.path().join("stdout.log");
        let stderr = dir.path().join("stderr.log");
        let child = Command::new(crate::support::RDMALB)
            .arg("proxy")
            .arg("-c")
            .arg(&path)
            .env("RDMALB_LOG", "info,rdmalb=debug")
            .env("NO_COLOR", "1")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&stdout).expect("stdout file"))
            .stderr(std::fs::File::create(&stderr).expect("stderr file"))
            .spawn()
            .expect("spawn rdmalb");
        let mut proxy = Proxy {
            guard: ChildGuard { child },
            dir,
            config: path,
            stderr,
        };
        for addr in wait_for {
            proxy.wait_listening(*addr);
        }
        proxy
    }

    fn wait_listening(&mut self, addr: SocketAddr) {
        for _ in 0..400 {
            if let Ok(Some(status)) = self.guard.child.try_wait() {
                panic!("rdmalb exited early ({status}):\n{}", self.stderr_text());
            }
            if StdTcpStream::connect(addr).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        panic!("rdmalb does not listen on {addr}:\n{}", self.stderr_text());
    }

    pub fn pid(&self) -> u32 {
        self.guard.pid()
    }

    pub fn stderr_text(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Waits (bounded) until `file` contains `needle`.
    pub fn wait_for_text(&self, file: &Path, needle: &str) -> bool {
        for _ in 0..400 {
            if std::fs::read_to_string(file)
                .unwrap_or_default()
                .contains(needle)
            {
                return true;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        false
    }

    /// Waits (bounded) for the process to exit; returns its exit status.
    pub fn wait_exit(&mut self) -> Option<std::process::ExitStatus> {
        for _ in 0..800 {
            if let Ok(Some(s)) = self.guard.child.try_wait() {
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        None
    }

    /// Resident set size and its peak, in KiB, from /proc.
    pub fn memory_kib(&self) -> (u64, u64) {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        (field("VmRSS:"), field("VmHWM:"))
    }
}

/// An HTTP client that never uses an environment proxy.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(60))
        .build()
        .expect("client")
}

/// `GET http://{proxy}{path}` with `Host: host`.
pub async fn get_host(
    c: &reqwest::Client,
    proxy: SocketAddr,
    host: &str,
    path: &str,
) -> reqwest::Response {
    c.get(format!("http://{proxy}{path}"))
        .header("host", host)
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET {path} (Host: {host}) through {proxy}: {e}"))
}

/// The body of `GET http://{admin}{path}` (an admin listener's `/metrics`,
/// `/status`, …), whatever its status.
pub async fn admin_text(admin: SocketAddr, path: &str) -> String {
    let resp = client()
        .get(format!("http://{admin}{path}"))
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET http://{admin}{path}: {e}"));
    resp.text()
        .await
        .unwrap_or_else(|e| panic!("body of http://{admin}{path}: {e}"))
}

/// An admin listener's `/status`, parsed.
pub async fn admin_status(admin: SocketAddr) -> serde_json::Value {
    let text = admin_text(admin, "/status").await;
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("/status is not JSON ({e}): {text}"))
}

/// Polls an admin listener's `/status` until `cond` holds, for at most 30 s
/// (a bound, not a timing claim), and returns the status that met it.
pub async fn status_until(
    admin: SocketAddr,
    what: &str,
    cond: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let cond = &cond;
    eventually(what, Duration::from_secs(30), || async move {
        let s = admin_status(admin).await;
        if cond(&s) {
            Ok(s)
        } else {
            Err(format!("{s:#}"))
        }
    })
    .await
}

/// Raw HTTP/1 exchange over a fresh TCP connection: sends `request`, then
/// reads until the peer closes (bounded by a 20 s socket timeout).
pub fn raw_exchange(addr: SocketAddr, request: &[u8]) -> String {
    let mut s = StdTcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(request).expect("write");
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// First line of a raw response, e.g. `HTTP/1.1 400 Bad Request`.
pub fn status_line(resp: &str) -> &str {
    resp.lines().next().unwrap_or("")
}

// ---------------------------------------------------------------------------
// In-process backends.

/// Counters of an in-process backend. Health checks from the proxy are
/// counted apart, so tests can count their own traffic exactly.
#[derive(Debug, Default)]
pub struct Counters {
    /// Connections that carried at least one request other than a health check.
    pub accepted: AtomicUsize,
    /// Requests other than health checks.
    pub requests: AtomicUsize,
    pub health_checks: AtomicUsize,
}

/// An in-process HTTP/1.1 backend (keep-alive, upgrades) on 127.0.0.1.
///
/// Paths: `/slow/<ms>` waits then echoes; `/upload` counts the request
/// body and answers `received <n>`; `/download/<n>` streams n bytes;
/// `/die` promises 1 MB and aborts after 1000 bytes; `/ws` upgrades and
/// echoes raw bytes; `/status/<code>` answers that status; anything else
/// echoes the request line and headers (`name: value` lines). Every
/// response carries `x-backend: <name>`.
pub struct Backend {
    pub addr: SocketAddr,
    pub counters: Arc<Counters>,
    task: tokio::task::JoinHandle<()>,
}

impl Backend {
    pub async fn start(name: &str) -> Backend {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind backend");
        Self::start_on(name, listener)
    }

    pub fn start_on(name: &str, listener: TcpListener) -> Backend {
        let addr = listener.local_addr().unwrap();
        let counters = Arc::new(Counters::default());
        let c = Arc::clone(&counters);
        let n: Arc<str> = Arc::from(name);
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let c = Arc::clone(&c);
                let n = Arc::clone(&n);
                let counted = Arc::new(std::sync::atomic::AtomicBool::new(false));
                tokio::spawn(async move {
                    let svc = service_fn(move |req: Request<Incoming>| {
                        if is_health_check(&req) {
                            c.health_checks.fetch_add(1, Ordering::SeqCst);
                        } else {
                            c.requests.fetch_add(1, Ordering::SeqCst);
                            if !counted.swap(true, Ordering::SeqCst) {
                                c.accepted.fetch_add(1, Ordering::SeqCst);
                            }
                        }
                        handle(Arc::clone(&n), req)
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), svc)
                        .with_upgrades()
                        .await;
                });
            }
        });
        Backend {
            addr,
            counters,
            task,
        }
    }

    pub fn accepted(&self) -> usize {
        self.counters.accepted.load(Ordering::SeqCst)
    }

    pub fn requests(&self) -> usize {
        self.counters.requests.load(Ordering::SeqCst)
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Generated body: `remaining` bytes of a repeating pattern, optionally
/// failing after `fail_after` bytes.
pub struct Generated {
    pub remaining: u64,
    pub fail_after: Option<u64>,
    pub sent: u64,
    pub chunk: Bytes,
    /// Wait before failing, so the head and first bytes are flushed first.
    pub fail_delay: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Generated {
    pub fn new(len: u64) -> Self {
        Generated {
            remaining: len,
            fail_after: None,
            sent: 0,
            chunk: Bytes::from(vec![b'x'; 64 * 1024]),
            fail_delay: None,
        }
    }
}

impl Body for Generated {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if let Some(limit) = this.fail_after {
            if this.sent >= limit {
                if let Some(delay) = this.fail_delay.as_mut() {
                    if delay.as_mut().poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                }
                return Poll::Ready(Some(Err("backend dies mid-body".into())));
            }
        }
        if this.remaining == 0 {
            return Poll::Ready(None);
        }
        let mut n = this.remaining.min(this.chunk.len() as u64);
        if let Some(limit) = this.fail_after {
            n = n.min(limit - this.sent);
        }
        this.remaining -= n;
        this.sent += n;
        Poll::Ready(Some(Ok(Frame::data(this.chunk.slice(..n as usize)))))
    }

    fn is_end_stream(&self) -> bool {
        self.remaining == 0 && self.fail_after.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        if self.fail_after.is_some() {
            SizeHint::default()
        } else {
            SizeHint::with_exact(self.remaining)
        }
    }
}

type BackendBody = http_body_util::combinators::BoxBody<Bytes, BoxError>;

fn full(text: impl Into<Bytes>) -> BackendBody {
    use http_body_util::BodyExt;
    http_body_util::Full::new(text.into())
        .map_err(|never: Infallible| match never {})
        .boxed()
}

/// The proxy's active health checks identify themselves.
fn is_health_check<B>(req: &Request<B>) -> bool {
    req.headers()
        .get(http::header::USER_AGENT)
        .is_some_and(|v| v.as_bytes().starts_with(b"rdmalb-health"))
}

async fn handle(
    name: Arc<str>,
    mut req: Request<Incoming>,
) -> Result<Response<BackendBody>, Infallible> {
    use http_body_util::BodyExt;
    let path = req.uri().path().to_string();
    let mut resp = if let Some(ms) = path.strip_prefix("/slow/") {
        let ms: u64 = ms.parse().unwrap_or(100);
        tokio::time::sleep(Duration::from_millis(ms)).await;
        Response::new(full(echo_text(&req)))
    } else if path == "/upload" {
        let mut body = req.into_body();
        let mut n: u64 = 0;
        while let Some(frame) = body.frame().await {
            match frame {
                Ok(f) => n += f.data_ref().map_or(0, |d| d.len() as u64),
                Err(_) => break,
            }
        }
        Response::new(full(format!("received {n}")))
    } else if let Some(n) = path.strip_prefix("/download/") {
        Response::new(Generated::new(n.parse().unwrap_or(0)).boxed())
    } else if path == "/die" {
        let mut g = Generated::new(1_000_000);
        g.fail_after = Some(1000);
        g.fail_delay = Some(Box::pin(tokio::time::sleep(Duration::from_millis(200))));
        let mut r = Response::new(g.boxed());
        r.headers_mut().insert(
            http::header::CONTENT_LENGTH,
            http::HeaderValue::from(1_000_000u64),
        );
        r
    } else if path == "/ws" {
        let on = hyper::upgrade::on(&mut req);
        tokio::spawn(async move {
            if let Ok(up) = on.await {
                let mut io = TokioIo::new(up);
                let mut buf = [0u8; 1024];
                loop {
                    match io.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            if io.write_all(&buf[..n]).await.is_err() {
                                break;
                            }
                        }
                    }
                }
            }
        });
        let mut r = Response::new(full(Bytes::new()));
        *r.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
        r.headers_mut()
            .insert("connection", http::HeaderValue::from_static("upgrade"));
        r.headers_mut()
            .insert("upgrade", http::HeaderValue::from_static("websocket"));
        r
    } else if let Some(cookie) = path.strip_prefix("/set-cookie/") {
        // The node sets a cookie of its own (`NAME=VALUE`): what a proxy's
        // `cookie ... rewrite|prefix` works on.
        let mut r = Response::new(full(echo_text(&req)));
        if let Ok(v) = http::HeaderValue::from_str(&format!("{cookie}; Path=/")) {
            r.headers_mut().insert(http::header::SET_COOKIE, v);
        }
        r
    } else if let Some(code) = path.strip_prefix("/status/") {
        let mut r = Response::new(full(format!("status {code}\n")));
        *r.status_mut() = code
            .parse::<u16>()
            .ok()
            .and_then(|c| StatusCode::from_u16(c).ok())
            .unwrap_or(StatusCode::OK);
        r
    } else {
        let text = echo_text(&req);
        // Drain any request body so the connection stays reusable.
        let mut body = req.into_body();
        while let Some(Ok(_)) = body.frame().await {}
        let mut r = Response::new(full(text));
        // Hop-by-hop headers the proxy must strip on the way back.
        r.headers_mut()
            .insert("keep-alive", http::HeaderValue::from_static("timeout=30"));
        r.headers_mut().insert(
            "connection",
            http::HeaderValue::from_static("x-backend-secret"),
        );
        r.headers_mut()
            .insert("x-backend-secret", http::HeaderValue::from_static("1"));
        r
    };
    resp.headers_mut()
        .insert("x-backend", http::HeaderValue::from_str(&name).unwrap());
    Ok(resp)
}

fn echo_text<B>(req: &Request<B>) -> String {
    let mut s = format!("{} {} {:?}\n", req.method(), req.uri(), req.version());
    for (k, v) in req.headers() {
        s.push_str(&format!("{}: {}\n", k, v.to_str().unwrap_or("<binary>")));
    }
    s
}

/// Header lines of an echo response body, as (name, value).
pub fn echoed_headers(body: &str) -> Vec<(String, String)> {
    body.lines()
        .skip(1)
        .filter_map(|l| l.split_once(": "))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

pub fn echoed<'a>(headers: &'a [(String, String)], name: &str) -> Vec<&'a str> {
    headers
        .iter()
        .filter(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
        .collect()
}

/// A self-signed certificate for `names`, written as `<stem>.pem` and
/// `<stem>.key` in `dir`; returns (cert path, key path, cert DER).
pub fn certificate(dir: &Path, stem: &str, names: &[&str]) -> (PathBuf, PathBuf, Vec<u8>) {
    let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    let ck = rcgen::generate_simple_self_signed(names).expect("rcgen");
    let cert_pem = ck.cert.pem();
    let key_pem = ck.signing_key.serialize_pem();
    let cert = dir.join(format!("{stem}.pem"));
    let key = dir.join(format!("{stem}.key"));
    std::fs::write(&cert, &cert_pem).unwrap();
    std::fs::write(&key, key_pem).unwrap();
    (cert, key, ck.cert.der().to_vec())
}

/// A plain listener section plus an admin section on fresh ports; returns
/// (toml, listener address, admin address).
pub fn listener_toml() -> (String, SocketAddr, SocketAddr) {
    let port = free_port();
    let admin = free_port();
    let toml = format!(
        "[[listener]]\nname = \"web\"\nlisten = \"127.0.0.1:{port}\"\n\n[admin]\nlisten = \"127.0.0.1:{admin}\"\n\n"
    );
    (
        toml,
        format!("127.0.0.1:{port}").parse().unwrap(),
        format!("127.0.0.1:{admin}").parse().unwrap(),
    )
}

/// The value on the first line of Prometheus text `text` that starts with
/// `prefix` (metric name and labels, then a space), or 0 when there is none.
pub fn metric(text: &str, prefix: &str) -> f64 {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

/// A config: `listen` (from [`listener_toml`]), `[global]` with the access
/// log off and the lines `global` (which may go on with further sections),
/// and one site `www` (`www.example.com`) served by node `n1` at `backend`.
pub fn www_config(listen: &str, global: &str, backend: SocketAddr) -> String {
    format!(
        "{listen}[global]\naccess_log = \"off\"\n{global}\n[[site]]\nname = \"www\"\nhosts = [\"www.example.com\"]\n\n{}",
        node_toml("n1", backend, "www")
    )
}

/// An HTTP/2 client connection over `io` (a TCP or TLS stream), its
/// connection task spawned.
pub async fn h2_client<T>(
    io: T,
) -> (
    hyper::client::conn::http2::SendRequest<http_body_util::Empty<Bytes>>,
    tokio::task::JoinHandle<hyper::Result<()>>,
)
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (send, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        TokioIo::new(io),
    )
    .await
    .expect("HTTP/2 handshake");
    (send, tokio::spawn(conn))
}

/// A `[[node]]` section.
pub fn node_toml(name: &str, addr: SocketAddr, site: &str) -> String {
    format!("[[node]]\nname = \"{name}\"\naddress = \"{addr}\"\nsite = \"{site}\"\n\n")
}

/// Reads a little of a stream (for raw socket tests that must not block).
pub async fn read_some(s: &mut tokio::net::TcpStream, want: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while out.len() < want {
        match tokio::time::timeout(Duration::from_secs(20), s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => break,
            Ok(Ok(n)) => out.extend_from_slice(&buf[..n]),
        }
    }
    out
}

pub mod echo;
mod group;
pub mod haproxy;
pub mod pebble;
pub mod reconfig;
pub mod role;
#[allow(unused_imports)]
pub use group::{nginx_available, skip, GroupChild, GroupNginx, NGINX};
