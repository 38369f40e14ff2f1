//! rdmalb: an RDMA-aware layer-7 load balancer for hosting operators who run
//! many web sites on one pool of servers.
//!
//! Module dependencies point one way (see `docs/architecture.md`):
//! `config` → `window` (layout + transports) → `balance` (load index,
//! selection) → `proxy` (HTTP data path); `sidecar` uses `window` and never
//! `proxy`. All `unsafe` code lives in the transports that need it
//! (`window::memory`, `window::verbs`), which opt in with `#[allow(unsafe_code)]`.
#![deny(unsafe_code)]

pub mod balance;
pub mod config;
pub mod proxy;
pub mod sidecar;
pub mod testbed;
pub mod util;
pub mod window;
