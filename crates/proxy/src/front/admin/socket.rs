//! HAProxy's stats socket (`[[stats_socket]]`): the runtime commands over
//! a UNIX stream socket or a loopback TCP one, in HAProxy 2.6's text
//! protocol, so `socat`, hatop and haproxy_exporter work unchanged.
//!
//! Protocol, as HAProxy's CLI: commands end with a newline or an
//! unescaped `;` (a trailing `\r` is dropped, a NUL ends the command);
//! each answer is followed by an empty line, or by `\n> ` in interactive
//! mode (`prompt`). Without `prompt` the connection closes once the
//! commands received so far are answered; with it, it stays open until
//! `quit`, the client closing, or the idle timeout. Commands run through a
//! [`Session`] at the socket's `level` — the same code as `POST /runtime`.
//!
//! Bounds, as HAProxy's: a command longer than [`MAX_LINE`] bytes closes
//! the connection unanswered (HAProxy's buffer size), as does a client
//! that sends nothing for the socket's `timeout` (HAProxy's `stats
//! timeout`, [`IDLE`] by default; `set timeout cli` changes it for the
//! session, as hatop does) or does not read its answer for as long; at most [`MAX_CONNECTIONS`] are
//! served at once (HAProxy's default `stats maxconn`), the others wait in
//! the listen queue. Between two commands the control runtime runs its
//! other tasks, so thousands of commands on one connection hold nothing.
//!
//! The socket file is made under a temporary name, given its mode and
//! owner, then renamed over `path` (as HAProxy does), so a client never
//! sees it with the wrong permissions and a restarted process takes the
//! path over from the old one; on shutdown the file is removed only if it
//! is still this process's.

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::{watch, Semaphore};

use super::runtime::Session;
use super::AdminState;
use crate::config::{StatsEndpoint, StatsSocket};

/// Longest command line (HAProxy's default `tune.bufsize`).
pub const MAX_LINE: usize = 16 * 1024;
/// How long a connection may stay silent, or leave its answer unread,
/// unless its socket's `timeout` says otherwise.
pub const IDLE: Duration = StatsSocket::DEFAULT_TIMEOUT;
/// Connections served at once.
pub const MAX_CONNECTIONS: usize = 10;

/// A bound stats socket.
pub struct Bound {
    listener: Listener,
    /// What a new connection's session starts as: the socket's level and
    /// timeout.
    session: Session,
    /// The socket file and its inode, removed on shutdown while still ours.
    file: Option<(PathBuf, u64)>,
    /// A TCP socket's address and a handle of it, handed to a restarted
    /// process with the listeners (a UNIX one is renamed over instead).
    pub handover: Option<(std::net::SocketAddr, std::net::TcpListener)>,
}

enum Listener {
    Unix(UnixListener),
    Tcp(TcpListener),
}

/// Binds `socket` (a runtime must be running); a TCP one is taken from
/// the previous process when this one is a restart.
pub fn bind(
    socket: &StatsSocket,
    inherited: &mut super::super::restart::Inherited,
) -> io::Result<Bound> {
    let mut handover = None;
    let (listener, file) = match &socket.endpoint {
        StatsEndpoint::Tcp(addr) => {
            let l = match inherited.take(*addr) {
                Some(l) => l,
                None => super::super::listener::bind_std(*addr)?,
            };
            handover = Some((*addr, l.try_clone()?));
            (Listener::Tcp(TcpListener::from_std(l)?), None)
        }
        StatsEndpoint::Unix(path) => {
            let mut tmp = path.clone().into_os_string();
            tmp.push(format!(".{}.tmp", std::process::id()));
            let tmp = PathBuf::from(tmp);
            let _ = std::fs::remove_file(&tmp);
            let l = UnixListener::bind(&tmp)?;
            let set = || -> io::Result<()> {
                if let Some(mode) = socket.mode {
                    std::fs::set_permissions(
                        &tmp,
                        std::os::unix::fs::PermissionsExt::from_mode(mode),
                    )?;
                }
                if socket.uid.is_some() || socket.gid.is_some() {
                    std::os::unix::fs::chown(&tmp, socket.uid, socket.gid)?;
                }
                std::fs::rename(&tmp, path)
            };
            if let Err(e) = set() {
                let _ = std::fs::remove_file(&tmp);
                return Err(e);
            }
            let ino = std::fs::metadata(path)?.ino();
            (Listener::Unix(l), Some((path.clone(), ino)))
        }
    };
    Ok(Bound {
        listener,
        session: Session {
            timeout: socket.timeout,
            ..Session::new(socket.level)
        },
        file,
        handover,
    })
}

/// Serves `bound` until `shutdown` turns true.
pub async fn serve(bound: Bound, state: AdminState, mut shutdown: watch::Receiver<bool>) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let session = bound.session;
    loop {
        let permit = tokio::select! {
            _ = rdmalb_base::shutdown::requested(&mut shutdown) => break,
            p = Arc::clone(&slots).acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
        };
        let accepted = tokio::select! {
            _ = rdmalb_base::shutdown::requested(&mut shutdown) => break,
            a = accept(&bound.listener) => a,
        };
        let state = state.clone();
        match accepted {
            Ok(Stream::Unix(s)) => spawn(s, state, session, permit),
            Ok(Stream::Tcp(s)) => spawn(s, state, session, permit),
            Err(e) => {
                tracing::warn!(error = %e, "stats socket: accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    if let Some((path, ino)) = &bound.file {
        if std::fs::metadata(path).is_ok_and(|m| m.ino() == *ino) {
            let _ = std::fs::remove_file(path);
        }
    }
}

enum Stream {
    Unix(tokio::net::UnixStream),
    Tcp(tokio::net::TcpStream),
}

async fn accept(l: &Listener) -> io::Result<Stream> {
    match l {
        Listener::Unix(l) => l.accept().await.map(|(s, _)| Stream::Unix(s)),
        Listener::Tcp(l) => l.accept().await.map(|(s, _)| Stream::Tcp(s)),
    }
}

fn spawn<S>(
    stream: S,
    state: AdminState,
    session: Session,
    permit: tokio::sync::OwnedSemaphorePermit,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    tokio::spawn(async move {
        let _permit = permit;
        if let Err(e) = connection(stream, &state, session).await {
            tracing::debug!(error = %e, "stats socket connection ended with an error");
        }
    });
}

/// The end of the first command in `buf`: the index of its newline or
/// unescaped `;`.
fn command_end(buf: &[u8]) -> Option<usize> {
    let mut i = 0;
    while i < buf.len() {
        match buf[i] {
            b'\\' => i += 1,
            b'\n' | b';' => return Some(i),
            _ => {}
        }
        i += 1;
    }
    None
}

/// The command text of one line: up to a NUL (HAProxy reads C strings),
/// without a trailing `\r`.
fn command_text(line: &[u8]) -> String {
    let line = line.split(|&b| b == 0).next().unwrap_or_default();
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    String::from_utf8_lossy(line).into_owned()
}

/// Serves one connection, its session starting as `session` (see the
/// module doc for the protocol).
pub async fn connection<S>(
    mut stream: S,
    state: &AdminState,
    mut session: Session,
) -> io::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut buf: Vec<u8> = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        let Some(end) = command_end(&buf) else {
            if buf.len() >= MAX_LINE {
                tracing::info!(
                    bytes = buf.len(),
                    "stats socket: command line too long, connection closed"
                );
                return Ok(());
            }
            let n = match tokio::time::timeout(session.timeout, stream.read(&mut chunk)).await {
                Ok(r) => r?,
                Err(_) => return Ok(()),
            };
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(&chunk[..n]);
            continue;
        };
        let command = command_text(&buf[..end]);
        buf.drain(..=end);
        tracing::debug!(command = %command, level = session.level.as_str(), "stats socket command");
        let Some(mut answer) = session.answer(state, &command).await else {
            return Ok(());
        };
        answer.push_str(if session.prompt { "\n> " } else { "\n" });
        match tokio::time::timeout(session.timeout, stream.write_all(answer.as_bytes())).await {
            Ok(r) => r?,
            Err(_) => return Ok(()),
        }
        if !session.prompt && buf.is_empty() {
            // Pipelined commands still arriving keep the connection (what
            // HAProxy's buffer would hold); otherwise it is done.
            match tokio::time::timeout(Duration::ZERO, stream.read(&mut chunk)).await {
                Ok(Ok(n)) if n > 0 => buf.extend_from_slice(&chunk[..n]),
                _ => {
                    let _ = stream.shutdown().await;
                    return Ok(());
                }
            }
        }
        tokio::task::yield_now().await;
    }
}

#[cfg(test)]
mod tests;
