//! Restart without dropping connections (SIGUSR2), like HAProxy's seamless
//! reload (`-x`): the running process checks the config file, then starts
//! the same binary (its path on disk, so a new build is picked up) with
//! the same arguments and hands it its listening sockets. The sockets are
//! inherited file descriptors named by `RDMALB_INHERITED_LISTENERS`
//! (`fd=address,…`), as systemd's socket activation passes them; a
//! Unix socket named by `RDMALB_RESTART_READY_FD` carries the new
//! process's "serving" back. The new process loads its (possibly changed)
//! config, reuses an inherited socket whose address matches a listener
//! (or `[admin]`), binds the others, closes the ones it does not need, and
//! once its workers accept says so; the old process then stops accepting
//! and drains ([`super::run`]). Both processes accept from the same
//! kernel queue meanwhile, so no connection attempt is refused.
//!
//! Under systemd (`Type=notify`, `NotifyAccess=all`) the new process
//! tells systemd its pid is the service's main pid ([`sd_notify`]).

use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

use tokio::io::AsyncReadExt;

/// Names the inherited listening sockets: `fd=address,…`.
pub const LISTENERS_ENV: &str = "RDMALB_INHERITED_LISTENERS";
/// Names the inherited Unix socket the new process writes "ready" on.
pub const READY_ENV: &str = "RDMALB_RESTART_READY_FD";
/// How long a new process may take to serve before the restart is given
/// up (it is killed; the old one keeps serving).
pub const READY_WITHIN: Duration = Duration::from_secs(120);

/// What the previous process handed over (nothing on a normal start).
#[derive(Debug, Default)]
pub struct Inherited {
    sockets: Vec<(SocketAddr, std::net::TcpListener)>,
    ready: Option<UnixStream>,
}

/// `fd=address,…` → pairs; `None` when any entry is malformed.
pub fn parse_listeners(text: &str) -> Option<Vec<(RawFd, SocketAddr)>> {
    text.split(',')
        .filter(|e| !e.is_empty())
        .map(|e| {
            let (fd, addr) = e.split_once('=')?;
            Some((fd.parse().ok().filter(|fd| *fd > 2)?, addr.parse().ok()?))
        })
        .collect()
}

/// Takes ownership of an inherited descriptor, after checking that it is
/// open and is a socket (so a stray environment variable cannot make this
/// process close a descriptor it uses for something else).
#[allow(unsafe_code)]
fn take_socket(fd: RawFd) -> Option<OwnedFd> {
    let target = std::fs::read_link(format!("/proc/self/fd/{fd}")).ok()?;
    if !target.to_string_lossy().starts_with("socket:") {
        return None;
    }
    // SAFETY: the descriptor is open (it is listed in /proc/self/fd), is a
    // socket, and was inherited for this process to own: the previous
    // process passed it without close-on-exec and nothing else in this
    // process refers to it. It is taken once (the variable is read once,
    // at start-up).
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    // Close-on-exec again at once: a later restart passes duplicates it
    // makes for the purpose; this descriptor itself must not leak into
    // that process too (one more copy of every socket per generation, and
    // a listener removed from the config kept listening by a copy no one
    // accepts on).
    if let Err(e) = socket2::SockRef::from(&owned).set_cloexec(true) {
        tracing::warn!(fd, error = %e, "cannot set close-on-exec on an inherited socket: ignored");
        return None;
    }
    Some(owned)
}

impl Inherited {
    /// Reads the environment the previous process set; logs and skips any
    /// entry that is not an open listening socket at the address named.
    pub fn from_env() -> Inherited {
        let mut inherited = Inherited::default();
        if let Ok(text) = std::env::var(LISTENERS_ENV) {
            let Some(entries) = parse_listeners(&text) else {
                tracing::warn!(variable = LISTENERS_ENV, value = %text, "malformed (expected fd=address,…): no socket inherited");
                return inherited;
            };
            for (fd, addr) in entries {
                let Some(owned) = take_socket(fd) else {
                    tracing::warn!(fd, %addr, "inherited descriptor is not an open socket: ignored");
                    continue;
                };
                let tcp = std::net::TcpListener::from(owned);
                match tcp.local_addr() {
                    Ok(a) if a == addr => {
                        if let Err(e) = tcp.set_nonblocking(true) {
                            tracing::warn!(fd, %addr, error = %e, "inherited socket unusable: ignored");
                            continue;
                        }
                        inherited.sockets.push((addr, tcp));
                    }
                    other => {
                        tracing::warn!(fd, %addr, found = ?other, "inherited socket is not listening on its address: ignored")
                    }
                }
            }
        }
        if let Some(fd) = std::env::var(READY_ENV)
            .ok()
            .and_then(|v| v.parse::<RawFd>().ok())
        {
            inherited.ready = take_socket(fd).map(UnixStream::from);
        }
        inherited
    }

    /// Whether this process was started by a restart.
    pub fn is_restart(&self) -> bool {
        self.ready.is_some()
    }

    /// The inherited socket listening on `addr`, if any (each is taken once).
    pub fn take(&mut self, addr: SocketAddr) -> Option<std::net::TcpListener> {
        let i = self.sockets.iter().position(|(a, _)| *a == addr)?;
        Some(self.sockets.swap_remove(i).1)
    }

    /// This process serves: closes the inherited sockets no listener took
    /// and tells the previous process (which then drains and exits).
    pub fn serving(&mut self) {
        for (addr, _) in self.sockets.drain(..) {
            tracing::info!(%addr, "inherited socket not in the new configuration: closed");
        }
        if let Some(mut s) = self.ready.take() {
            use std::io::Write as _;
            if let Err(e) = s.write_all(b"ready\n") {
                tracing::warn!(error = %e, "cannot tell the previous process that this one serves");
            }
        }
    }
}

/// A new process started by [`spawn`], not serving yet.
pub struct Successor {
    child: tokio::process::Child,
    ready: tokio::net::UnixStream,
}

/// Why a restart did not happen; the old process keeps serving.
#[derive(Debug, thiserror::Error)]
pub enum RestartError {
    #[error("cannot start `{exe}`: {source}")]
    Spawn {
        exe: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot pass the listening sockets: {0}")]
    Pass(std::io::Error),
    #[error(
        "the new process (pid {pid}) exited before serving ({status}); its errors are in its log"
    )]
    Exited { pid: u32, status: String },
    #[error("the new process (pid {pid}) did not serve within {within:?}; it was killed")]
    Timeout { pid: u32, within: Duration },
    #[error("this process is stopping: the new process (pid {pid}), not serving yet, was killed")]
    Stopped { pid: u32 },
}

/// Starts `exe` with `args`, passing `sockets` (each named by the address
/// it listens on) and a readiness channel.
pub fn spawn(
    exe: &std::path::Path,
    args: &[std::ffi::OsString],
    sockets: &[(SocketAddr, &std::net::TcpListener)],
) -> Result<Successor, RestartError> {
    // Duplicates without close-on-exec for the child; this process's own
    // descriptors keep theirs, and the duplicates close when this returns.
    let mut passed = Vec::with_capacity(sockets.len());
    let mut names = Vec::with_capacity(sockets.len());
    for (addr, tcp) in sockets {
        let dup = socket2::Socket::from(tcp.try_clone().map_err(RestartError::Pass)?);
        dup.set_cloexec(false).map_err(RestartError::Pass)?;
        names.push(format!("{}={addr}", dup.as_raw_fd()));
        passed.push(dup);
    }
    let (ours, theirs) = UnixStream::pair().map_err(RestartError::Pass)?;
    socket2::SockRef::from(&theirs)
        .set_cloexec(false)
        .map_err(RestartError::Pass)?;
    ours.set_nonblocking(true).map_err(RestartError::Pass)?;
    let child = tokio::process::Command::new(exe)
        .args(args)
        .env(LISTENERS_ENV, names.join(","))
        .env(READY_ENV, theirs.as_raw_fd().to_string())
        .stdin(std::process::Stdio::null())
        .spawn()
        .map_err(|source| RestartError::Spawn {
            exe: exe.to_path_buf(),
            source,
        })?;
    drop(passed);
    drop(theirs);
    let ready = tokio::net::UnixStream::from_std(ours).map_err(RestartError::Pass)?;
    Ok(Successor { child, ready })
}

impl Successor {
    pub fn pid(&self) -> u32 {
        self.child.id().unwrap_or(0)
    }

    /// Waits until the new process serves (its pid), or fails: it exited
    /// first, took longer than `within`, or `stop` resolved first (this
    /// process is stopping); in the last two cases it is killed.
    pub async fn serving(
        mut self,
        within: Duration,
        stop: impl std::future::Future<Output = ()>,
    ) -> Result<u32, RestartError> {
        let pid = self.pid();
        let mut said = Vec::new();
        let ready = tokio::time::timeout(within, async {
            let mut buf = [0u8; 64];
            loop {
                match self.ready.read(&mut buf).await {
                    Ok(0) | Err(_) => return false,
                    Ok(n) => said.extend_from_slice(&buf[..n]),
                }
                if said.starts_with(b"ready\n") {
                    return true;
                }
            }
        });
        let read = tokio::select! {
            r = ready => r,
            _ = stop => {
                let _ = self.child.kill().await;
                return Err(RestartError::Stopped { pid });
            }
        };
        match read {
            Ok(true) => {
                // Reaped by a task of its own so that it never lingers as
                // a zombie while this process drains.
                let mut child = self.child;
                tokio::spawn(async move {
                    let _ = child.wait().await;
                });
                Ok(pid)
            }
            Ok(false) => {
                let status = match self.child.wait().await {
                    Ok(s) => s.to_string(),
                    Err(e) => e.to_string(),
                };
                Err(RestartError::Exited { pid, status })
            }
            Err(_) => {
                let _ = self.child.kill().await;
                Err(RestartError::Timeout { pid, within })
            }
        }
    }
}

/// Sends `state` to systemd's notification socket (`$NOTIFY_SOCKET`, a
/// path or an abstract name starting with `@`); nothing without it.
pub fn sd_notify(state: &str) {
    let Some(socket) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    if let Err(e) = notify(&socket, state) {
        tracing::warn!(error = %e, state, "cannot notify systemd");
    }
}

/// Sends one notification datagram to `socket` (sd_notify(3)).
fn notify(socket: &std::ffi::OsStr, state: &str) -> std::io::Result<()> {
    use std::os::linux::net::SocketAddrExt;
    let addr = match socket.as_encoded_bytes().strip_prefix(b"@") {
        Some(name) => std::os::unix::net::SocketAddr::from_abstract_name(name)?,
        None => std::os::unix::net::SocketAddr::from_pathname(socket)?,
    };
    let sock = std::os::unix::net::UnixDatagram::unbound()?;
    sock.send_to_addr(state.as_bytes(), &addr)?;
    Ok(())
}

#[cfg(test)]
mod tests;
