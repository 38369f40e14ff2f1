//! The three actions of a switch, each against the real system: replace the
//! app's config file atomically, run the reload command under a timeout, and
//! probe the app over HTTP until it serves the site.

use std::io::Write;
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{header, HeaderName, Request};
use http_body_util::Empty;
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;

use rdmalb_base::duration;

/// Mode of a config file that did not exist before the first switch.
const NEW_FILE_MODE: u32 = 0o644;
/// How much of a failed reload command's output goes into the reason.
const OUTPUT_TAIL: usize = 512;
/// Pause between two verification attempts.
const VERIFY_RETRY: Duration = Duration::from_millis(10);
/// Longest single verification attempt (the whole probe is bounded by
/// `verify_timeout`).
const VERIFY_ATTEMPT: Duration = Duration::from_secs(2);

/// The config file as it was before a switch replaced it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Previous {
    /// There was no file.
    Absent,
    /// Its bytes and permission bits.
    File { contents: Vec<u8>, mode: u32 },
}

/// Reads what `path` holds now (to restore it if the switch fails). A
/// symbolic link is refused: the switch would replace the link, not the
/// file it names, and a link planted where the config file belongs must
/// not steer the sidecar's writes elsewhere.
pub fn snapshot(path: &Path) -> std::io::Result<Previous> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Previous::Absent),
        Err(e) => return Err(e),
    };
    refuse_link(path, &meta)?;
    let contents = std::fs::read(path)?;
    Ok(Previous::File {
        contents,
        mode: meta.permissions().mode() & 0o7777,
    })
}

fn refuse_link(path: &Path, meta: &std::fs::Metadata) -> std::io::Result<()> {
    if meta.file_type().is_symlink() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "`{}` is a symbolic link; the sidecar writes only regular files (point the config at the link's target)",
                path.display()
            ),
        ));
    }
    Ok(())
}

/// Creates a new temporary file beside `path` for this process alone: a
/// name no other process can guess in advance, created with `O_EXCL` and
/// `O_NOFOLLOW` (a file or link already there, planted or left over, is
/// never opened), with `mode` set on the descriptor (not through a path,
/// which a link could redirect). Returns the file and its path.
pub fn create_temp(path: &Path, mode: u32) -> std::io::Result<(std::fs::File, PathBuf)> {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = parent_dir(path);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut last = None;
    for _ in 0..16 {
        let tmp = dir.join(format!(".{name}.rdmalb-{:016x}.tmp", unguessable()));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)
        {
            Ok(f) => {
                // The umask made the creation mode narrower; the final
                // mode is set on the open descriptor.
                if let Err(e) = f.set_permissions(std::fs::Permissions::from_mode(mode)) {
                    let _ = std::fs::remove_file(&tmp);
                    return Err(e);
                }
                return Ok((f, tmp));
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no temporary name was free")))
}

/// 64 bits another local user cannot predict: the kernel's per-process
/// random hash keys, mixed with the time and a counter.
fn unguessable() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.finish()
}

fn parent_dir(path: &Path) -> &Path {
    path.parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// Atomically replaces `path` with `contents`: a temporary file in the same
/// directory ([`create_temp`]), written and fsynced, renamed over `path`,
/// then the directory fsynced. A reader (the app reloading) sees the old
/// file or the new one, never a half-written one; a crash leaves at worst
/// the temporary file. `path` itself must not be a symbolic link.
pub fn replace(path: &Path, contents: &[u8], mode: u32) -> std::io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) => refuse_link(path, &meta)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let (mut f, tmp) = create_temp(path, mode)?;
    let result = (|| {
        f.write_all(contents)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        std::fs::File::open(parent_dir(path))?.sync_all()
    })();
    drop(f);
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Puts back what [`snapshot`] saw.
pub fn restore(path: &Path, previous: &Previous) -> std::io::Result<()> {
    match previous {
        Previous::File { contents, mode } => replace(path, contents, *mode),
        Previous::Absent => match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        },
    }
}

/// The mode a replacement keeps: the old file's, else 0644.
pub fn mode_of(previous: &Previous) -> u32 {
    match previous {
        Previous::File { mode, .. } => *mode,
        Previous::Absent => NEW_FILE_MODE,
    }
}

/// Why the app's reload command failed.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    #[error("no reload command")]
    NoCommand,
    #[error("cannot start `{command}`: {source}")]
    Start {
        command: String,
        #[source]
        source: std::io::Error,
    },
    #[error("waiting for `{command}`: {source}")]
    Wait {
        command: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`{command}` did not finish within {} (killed)", duration::format(*.timeout))]
    Timeout { command: String, timeout: Duration },
    /// A non-zero exit, with the tail of what the command wrote.
    #[error("`{command}` exited with {status}{}{}", if .output.is_empty() { "" } else { ": " }, .output)]
    Exited {
        command: String,
        status: std::process::ExitStatus,
        output: String,
    },
}

/// Why one verification request did not pass.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProbeFailure {
    #[error("bad request: {0}")]
    BadRequest(String),
    /// The request failed (connect, reset, …), with its error chain.
    #[error("{0}")]
    Request(String),
    #[error("status {0}")]
    Status(http::StatusCode),
    #[error("header {name}: {value} (expected {expected})")]
    WrongHeader {
        name: String,
        value: String,
        expected: String,
    },
    #[error("no {name} header (expected {expected})")]
    MissingHeader { name: String, expected: String },
    #[error("no answer")]
    NoAnswer,
}

/// The app did not pass verification in time.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("GET http://{addr}{path} (Host: {host}) did not pass within {} ({attempts} attempts); last: {last}", duration::format(*.timeout))]
pub struct VerifyError {
    pub addr: std::net::SocketAddr,
    pub path: String,
    pub host: String,
    pub timeout: Duration,
    pub attempts: u32,
    pub last: ProbeFailure,
}

/// Runs the reload command (no shell) and waits for it to exit, at most
/// `timeout` (then it is killed). `Err` carries the reason: not startable,
/// non-zero exit with the tail of its output, or the timeout.
///
/// Only the process's exit is awaited, not the end of its output: a command
/// that leaves a daemon holding its stdout (`sh -c "app &"`) still counts as
/// done when it exits. Output is kept to its last [`OUTPUT_KEEP`] bytes.
pub async fn reload(argv: &[String], timeout: Duration) -> Result<(), ReloadError> {
    let shown = argv.join(" ");
    let Some((program, args)) = argv.split_first() else {
        return Err(ReloadError::NoCommand);
    };
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|source| ReloadError::Start {
            command: shown.clone(),
            source,
        })?;
    let (err_buf, mut err_task) = capture(child.stderr.take());
    let (out_buf, mut out_task) = capture(child.stdout.take());
    let status = tokio::time::timeout(timeout, child.wait()).await;
    // Whatever the command wrote before exiting is in the pipes; give the
    // readers a moment to drain them, not forever.
    let _ = tokio::time::timeout(OUTPUT_DRAIN, async {
        let _ = (&mut err_task).await;
        let _ = (&mut out_task).await;
    })
    .await;
    err_task.abort();
    out_task.abort();
    let status = match status {
        Err(_) => {
            return Err(ReloadError::Timeout {
                command: shown,
                timeout,
            })
        }
        Ok(Err(source)) => {
            return Err(ReloadError::Wait {
                command: shown,
                source,
            })
        }
        Ok(Ok(status)) if status.success() => return Ok(()),
        Ok(Ok(status)) => status,
    };
    let mut text = String::from_utf8_lossy(&err_buf.lock().map(|b| b.clone()).unwrap_or_default())
        .into_owned();
    text.push_str(&String::from_utf8_lossy(
        &out_buf.lock().map(|b| b.clone()).unwrap_or_default(),
    ));
    let text = text.trim();
    let tail = match text.char_indices().rev().nth(OUTPUT_TAIL) {
        Some((i, _)) => &text[i..],
        None => text,
    };
    Err(ReloadError::Exited {
        command: shown,
        status,
        output: tail.replace('\n', " | "),
    })
}

/// How much of each output stream of the reload command is kept.
pub const OUTPUT_KEEP: usize = 64 * 1024;
/// How long the output readers may take after the command exited.
const OUTPUT_DRAIN: Duration = Duration::from_millis(200);

type Captured = (
    std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    tokio::task::JoinHandle<()>,
);

/// Reads a pipe to its end in the background, keeping the last
/// [`OUTPUT_KEEP`] bytes.
fn capture<R: tokio::io::AsyncRead + Unpin + Send + 'static>(pipe: Option<R>) -> Captured {
    use tokio::io::AsyncReadExt;
    let buf = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let b = buf.clone();
    let task = tokio::spawn(async move {
        let Some(mut pipe) = pipe else { return };
        let mut chunk = [0u8; 4096];
        while let Ok(n @ 1..) = pipe.read(&mut chunk).await {
            if let Ok(mut g) = b.lock() {
                g.extend_from_slice(&chunk[..n]);
                if g.len() > OUTPUT_KEEP {
                    let cut = g.len() - OUTPUT_KEEP;
                    g.drain(..cut);
                }
            }
        }
    });
    (buf, task)
}

/// What the verification probe asks for.
#[derive(Debug, Clone)]
pub struct Probe<'a> {
    /// The app's local address.
    pub addr: SocketAddr,
    /// Host header (the site's first host).
    pub host: &'a str,
    /// Request path (the site's health path).
    pub path: &'a str,
    /// A response header that must equal `site` (proves the new config is
    /// live rather than the old one still answering).
    pub header: Option<&'a HeaderName>,
    pub site: &'a str,
}

/// The HTTP client of the probe: no connection reuse, so every attempt sees
/// whatever config the app has loaded by then.
pub fn probe_client() -> Client<HttpConnector, Empty<Bytes>> {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    connector.set_connect_timeout(Some(VERIFY_ATTEMPT));
    Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(0)
        .build(connector)
}

/// Requests the probe's path until the app answers 2xx/3xx (with the site
/// header when configured), for at most `timeout`. `Err` carries the last
/// failure seen.
pub async fn verify(
    client: &Client<HttpConnector, Empty<Bytes>>,
    probe: &Probe<'_>,
    timeout: Duration,
) -> Result<u32, VerifyError> {
    let deadline = Instant::now() + timeout;
    let mut attempts = 0u32;
    let mut last: Option<ProbeFailure> = None;
    loop {
        attempts += 1;
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left.min(VERIFY_ATTEMPT), attempt(client, probe)).await {
            Ok(Ok(())) => return Ok(attempts),
            Ok(Err(e)) => last = Some(e),
            // An attempt cut short by the deadline says less than the
            // answer before it: keep that one.
            Err(_) if last.is_some() => {}
            Err(_) => last = Some(ProbeFailure::NoAnswer),
        }
        if Instant::now() + VERIFY_RETRY >= deadline {
            return Err(VerifyError {
                addr: probe.addr,
                path: probe.path.to_string(),
                host: probe.host.to_string(),
                timeout,
                attempts,
                last: last.unwrap_or(ProbeFailure::NoAnswer),
            });
        }
        tokio::time::sleep(VERIFY_RETRY).await;
    }
}

async fn attempt(
    client: &Client<HttpConnector, Empty<Bytes>>,
    probe: &Probe<'_>,
) -> Result<(), ProbeFailure> {
    let uri = format!("http://{}{}", probe.addr, probe.path);
    let req = Request::get(uri)
        .header(header::HOST, probe.host)
        .header(header::USER_AGENT, "rdmalb-sidecar-verify")
        .body(Empty::<Bytes>::new())
        .map_err(|e| ProbeFailure::BadRequest(e.to_string()))?;
    let res = client
        .request(req)
        .await
        .map_err(|e| ProbeFailure::Request(rdmalb_base::error::chain(&e)))?;
    let status = res.status();
    if !(status.is_success() || status.is_redirection()) {
        return Err(ProbeFailure::Status(status));
    }
    if let Some(name) = probe.header {
        match res
            .headers()
            .get(name)
            .map(|v| v.to_str().unwrap_or("<binary>"))
        {
            Some(v) if v == probe.site => {}
            Some(v) => {
                return Err(ProbeFailure::WrongHeader {
                    name: name.to_string(),
                    value: v.to_string(),
                    expected: probe.site.to_string(),
                })
            }
            None => {
                return Err(ProbeFailure::MissingHeader {
                    name: name.to_string(),
                    expected: probe.site.to_string(),
                })
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
