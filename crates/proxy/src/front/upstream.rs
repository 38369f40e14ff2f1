//! Pooled keep-alive HTTP/1.1 connections to the nodes.
//!
//! One [`NodePool`] per node address: a LIFO stack of idle connections
//! (the most recently used is the warmest and least likely to have been
//! closed by the node), at most `limits.pool_idle_per_node` of them. A
//! request first checks a connection out, and only then hands its body
//! over, so a connect failure leaves the request intact for a retry on
//! another node. A connection goes back to the pool when its response body
//! has been read to the end; one whose response was cut short is dropped
//! (closed). The HTTP/1.1 exchange itself is [`h1`]: no task per
//! connection, the request's task drives it.
//!
//! A node with `send_proxy` gets a PROXY protocol header first on every
//! connection, naming the client it is made for. Such a connection is
//! never reused for another client connection (HAProxy does not share
//! them either): rdmalb does not pool them at all, so each request to the
//! node opens its own connection.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::config::{Config, SendProxy};

mod h1;
mod node_body;

pub use h1::{NodeConn, NodeError, MAX_HEADERS};
pub use node_body::{Framing, NodeBody, NodeBodyError};

/// The most a node connection reads ahead at once, and the largest
/// response head accepted. A response body is read only when the client
/// side asks for more, one read of at most this much ahead of it; a client
/// that stops reading (a slow reader, a zero window) pins what was read
/// until `timeouts.client` ends the exchange. With hyper's client (its
/// default buffer about 400 KiB) 200 clients that never read
/// a 4 MB response grew a release proxy by 142 MiB at the default, by
/// 51 MiB at 64 KiB (`rdmalb-testbed abuse --attack slow-read`). 64 KiB
/// still reads a large body in a few system calls per 256 KiB.
pub const UPSTREAM_MAX_BUF: usize = 64 * 1024;

/// Why no connection to a node could be had.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("connect to {addr} failed: {source}")]
    Failed {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("connect to {addr} timed out after {after:?}")]
    Timeout { addr: SocketAddr, after: Duration },
}

/// A connection ready to send one request.
pub struct Checkout {
    pub conn: NodeConn,
    /// Taken from the pool (false: connected now).
    pub reused: bool,
}

struct Idle {
    conn: NodeConn,
    since: Instant,
}

/// Idle connections to one node: one stack per worker thread, so a
/// request reuses connections driven by its own thread's runtime.
pub struct NodePool {
    addr: SocketAddr,
    /// `[[node]] send_proxy`: connections are made per request, not pooled.
    send_proxy: Option<SendProxy>,
    idle: Box<[Mutex<VecDeque<Idle>>]>,
    max_idle: usize,
    idle_timeout: Duration,
    connect_timeout: Duration,
}

impl std::fmt::Debug for NodePool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodePool")
            .field("addr", &self.addr)
            .field("max_idle", &self.max_idle)
            .finish()
    }
}

impl NodePool {
    fn new(addr: SocketAddr, send_proxy: Option<SendProxy>, config: &Config) -> NodePool {
        NodePool {
            addr,
            send_proxy,
            // Slot 0 serves threads that are not workers (tests, tools).
            idle: (0..=config.global.workers.max(1))
                .map(|_| Mutex::new(VecDeque::new()))
                .collect(),
            max_idle: config.limits.pool_idle_per_node,
            idle_timeout: config.timeouts.keep_alive,
            connect_timeout: config.timeouts.connect,
        }
    }

    fn same_settings(&self, config: &Config) -> bool {
        self.idle.len() == config.global.workers.max(1) + 1
            && self.max_idle == config.limits.pool_idle_per_node
            && self.idle_timeout == config.timeouts.keep_alive
            && self.connect_timeout == config.timeouts.connect
    }

    /// This thread's idle stack.
    fn stack(&self) -> &Mutex<VecDeque<Idle>> {
        &self.idle[worker_id() % self.idle.len()]
    }

    fn pop(&self) -> Option<Idle> {
        self.stack()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop_back()
    }

    /// A pooled connection if one is alive, else a new one; always a new
    /// one when `fresh` (a retry after a connection broke). `client` (the
    /// client's address) and `local` (the address it connected to) are what
    /// a `send_proxy` node's PROXY header says; `now` (the caller's clock
    /// read) ages the idle ones.
    pub async fn checkout(
        &self,
        client: SocketAddr,
        local: SocketAddr,
        now: Instant,
        fresh: bool,
    ) -> Result<Checkout, ConnectError> {
        if let Some(version) = self.send_proxy {
            return self.connect(Some((version, client, local))).await;
        }
        if fresh {
            return self.connect(None).await;
        }
        while let Some(idle) = self.pop() {
            if now.saturating_duration_since(idle.since) <= self.idle_timeout
                && idle.conn.is_alive()
            {
                return Ok(Checkout {
                    conn: idle.conn,
                    reused: true,
                });
            }
        }
        self.connect(None).await
    }

    async fn connect(
        &self,
        proxy_header: Option<(SendProxy, SocketAddr, SocketAddr)>,
    ) -> Result<Checkout, ConnectError> {
        let addr = self.addr;
        let stream =
            match tokio::time::timeout(self.connect_timeout, TcpStream::connect(addr)).await {
                Err(_) => {
                    return Err(ConnectError::Timeout {
                        addr,
                        after: self.connect_timeout,
                    })
                }
                Ok(Err(source)) => return Err(ConnectError::Failed { addr, source }),
                Ok(Ok(s)) => s,
            };
        let mut stream = stream;
        let _ = stream.set_nodelay(true);
        if let Some((version, client, local)) = proxy_header {
            // A new socket's send buffer is empty: this does not wait.
            let header = crate::proxy_protocol::encode(version, client, local);
            stream
                .write_all(&header)
                .await
                .map_err(|source| ConnectError::Failed { addr, source })?;
        }
        Ok(Checkout {
            conn: NodeConn::new(stream),
            reused: false,
        })
    }

    /// Returns a connection whose response was read to the end at `now`.
    pub fn checkin(&self, mut conn: NodeConn, now: Instant) {
        if self.max_idle == 0 || self.send_proxy.is_some() {
            return;
        }
        // An idle connection holds no read buffer.
        conn.buf = bytes::BytesMut::new();
        let mut idle = self.stack().lock().unwrap_or_else(|e| e.into_inner());
        if idle.len() >= self.max_idle {
            // Drop the coldest.
            idle.pop_front();
        }
        idle.push_back(Idle { conn, since: now });
    }

    /// Idle connections currently held (all workers).
    pub fn idle_count(&self) -> usize {
        self.idle
            .iter()
            .map(|m| m.lock().unwrap_or_else(|e| e.into_inner()).len())
            .sum()
    }
}

/// The pools of one config snapshot, indexed like `config.nodes`.
#[derive(Debug, Default)]
pub struct Pools {
    by_index: Vec<Arc<NodePool>>,
}

impl Pools {
    /// Pools for `config`, keeping the idle connections of `previous` for
    /// addresses that stay (unless pool settings changed).
    pub fn build(config: &Config, previous: Option<&Pools>) -> Pools {
        let old: HashMap<SocketAddr, &Arc<NodePool>> = previous
            .map(|p| p.by_index.iter().map(|pool| (pool.addr, pool)).collect())
            .unwrap_or_default();
        let by_index = config
            .nodes
            .iter()
            .map(|n| match old.get(&n.address) {
                Some(pool) if pool.same_settings(config) && pool.send_proxy == n.send_proxy => {
                    Arc::clone(pool)
                }
                _ => Arc::new(NodePool::new(n.address, n.send_proxy, config)),
            })
            .collect();
        Pools { by_index }
    }

    /// The pool of node `index` (the node's position in the snapshot).
    pub fn get(&self, index: usize) -> Option<&Arc<NodePool>> {
        self.by_index.get(index)
    }
}

thread_local! {
    /// 1-based id of the worker thread running on this thread (0 = none):
    /// picks the worker's own idle-connection stack in the node pools.
    static WORKER: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Marks the current thread as worker `id` (1-based); the listener calls it
/// once when a worker starts.
pub(super) fn set_worker(id: usize) {
    WORKER.with(|w| w.set(id));
}

/// The id of the current worker (0 outside the workers).
pub fn worker_id() -> usize {
    WORKER.with(|w| w.get())
}

#[cfg(test)]
mod differential;
#[cfg(test)]
mod tests;
