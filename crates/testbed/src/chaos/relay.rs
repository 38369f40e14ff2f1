//! A fault-injecting TCP relay: listens on a loopback port and forwards
//! every connection to one target, and on command delays, drops, cuts or
//! half-opens what passes (the network faults of the campaign).
//!
//! - **delay**: every chunk waits `ms` before it is forwarded;
//! - **drop**: chunks are read and discarded in both directions (the peers
//!   see a silent link; connections stay open);
//! - **cut**: every open connection is closed at once, and new ones are
//!   accepted and closed while the fault lasts;
//! - **half-open**: chunks from the target back to the client are
//!   discarded (requests arrive, replies never come back), connections stay
//!   open;
//! - **heal**: back to plain forwarding.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What the relay does to traffic now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkFault {
    Healthy,
    Delay(Duration),
    Drop,
    Cut,
    HalfOpen,
}

impl LinkFault {
    pub fn name(self) -> &'static str {
        match self {
            LinkFault::Healthy => "healthy",
            LinkFault::Delay(_) => "delay",
            LinkFault::Drop => "drop",
            LinkFault::Cut => "cut",
            LinkFault::HalfOpen => "half-open",
        }
    }
}

/// A running relay; dropping it stops accepting (live connections end
/// with their peers).
pub struct Relay {
    addr: SocketAddr,
    fault: watch::Sender<LinkFault>,
    task: tokio::task::JoinHandle<()>,
}

impl Relay {
    /// Binds a loopback port and forwards to `target`.
    pub async fn start(target: SocketAddr) -> std::io::Result<Relay> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (fault, rx) = watch::channel(LinkFault::Healthy);
        let task = tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    continue;
                };
                let rx = rx.clone();
                tokio::spawn(connection(client, target, rx));
            }
        });
        Ok(Relay { addr, fault, task })
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Applies `f` to every connection, open and new.
    pub fn set(&self, f: LinkFault) {
        let _ = self.fault.send(f);
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn connection(client: TcpStream, target: SocketAddr, rx: watch::Receiver<LinkFault>) {
    if *rx.borrow() == LinkFault::Cut {
        return;
    }
    let Ok(Ok(server)) =
        tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(target)).await
    else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (cr, cw) = client.into_split();
    let (sr, sw) = server.into_split();
    let up = pump(cr, sw, rx.clone(), false);
    let down = pump(sr, cw, rx, true);
    // Either side ending (or a cut) ends the connection.
    tokio::select! {
        _ = up => {}
        _ = down => {}
    }
}

/// Forwards one direction under the current fault; `reply` is the
/// target-to-client direction (the one half-open drops).
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut rx: watch::Receiver<LinkFault>,
    reply: bool,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = tokio::select! {
            r = from.read(&mut buf) => match r {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            },
            changed = rx.changed() => {
                if changed.is_err() || *rx.borrow() == LinkFault::Cut {
                    return;
                }
                continue;
            }
        };
        let fault = *rx.borrow();
        match fault {
            LinkFault::Cut => return,
            LinkFault::Drop => continue,
            LinkFault::HalfOpen if reply => continue,
            LinkFault::Delay(d) => tokio::time::sleep(d).await,
            _ => {}
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests;
