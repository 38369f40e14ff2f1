//! The tcp transport: a two-sided responder for places with neither shared
//! memory nor RDMA, and the baseline the seeds compare one-sided reads with
//! (seed 002 section 3: Socket-Sync monitoring).
//!
//! * [`server`]: dedicated OS threads in the window's owner (not its async
//!   runtime, so the responder competes for CPU with the node's work exactly
//!   like the seeds' two-sided monitor) serving READ / READ_WORD / CAS / FAA
//!   frames, pipelined, refusing atomics outside words 32..192.
//! * [`client`]: [`TcpWindow`], an async [`crate::RemoteWindow`] with
//!   many requests in flight per connection (request ids; a reader task
//!   matches replies).
//! * [`auth`]: the mandatory pre-shared-key handshake (mutual HMAC-SHA256
//!   challenge-response with nonces from both sides) and the per-frame
//!   authentication tags it keys; nothing is served before it succeeds.
//! * [`frame`]: the frame codec; the decoder never panics on any input and
//!   has a fuzz target (`fuzz/fuzz_targets/tcp_frame.rs`).
//!
//! Wire format: `docs/window.md`, section "tcp transport".

pub mod auth;
pub mod client;
pub mod frame;
pub mod server;

use std::time::Duration;

pub use auth::Psk;
pub use client::TcpWindow;
pub use server::{serve, serve_with, Refusals, ServeOptions, TcpServerHandle};

/// How long a responder gives a client for the whole handshake (by default),
/// and how long a client waits to establish the connection.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// Authenticated sessions a responder serves at once (by default); a client
/// authenticating beyond this is closed.
pub const MAX_CONNECTIONS: usize = 256;
/// Connections a responder lets sit in the handshake at once (by default);
/// a new connection closes the oldest of them when all are taken.
pub const MAX_HANDSHAKES: usize = 16;
