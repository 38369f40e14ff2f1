//! The testbed: everything needed to reproduce the seeds' cluster
//! experiments on one machine (see `docs/testbed.md`).
//!
//! - [`server`]: `rdmalb-testbed testsrv`, an HTTP/1.1 backend node with a capacity
//!   model (W worker slots, a queue of Q, per-class service times) that
//!   serves one site at a time, re-reads its site file on SIGHUP, and pushes
//!   its modelled load to its sidecar ([`publish`]).
//! - [`trace`]: request-list generators (single-file, Zipf, bursty,
//!   world-cup-like) and exporters for httperf and wrk.
//! - [`load`]: `rdmalb-testbed load`, the replay client reporting per-site time
//!   series ([`report`]).
//! - [`cluster`]: `rdmalb-testbed cluster`, one command that runs K nodes with their
//!   sidecars and one or more proxies, replays a trace and plots per-site
//!   throughput ([`plot`]), with per-site QoS-meeting percentages
//!   ([`qos`]) and the number of node moves.
//! - [`chaos`]: `rdmalb-testbed chaos`, the seeded fault-injection
//!   campaign against a cluster of real proxies, sidecars and nodes.
//! - [`abuse`]: `rdmalb-testbed abuse`, the attack client (slow clients,
//!   floods, HTTP/2 abuse, TLS handshakes) against one listener, and
//!   `abuse-report`, the table of the service-under-attack benchmark.
//! - [`ports`]: loopback ports for the processes a cluster or a test
//!   starts, below the kernel's ephemeral range.
//!
//! The testbed sits on top of the library: it starts `sidecar` and `proxy`
//! as separate processes and uses only the sidecar's push client in-process.
//!
//! Comments cite the research papers as "seed 000" … "seed 004" (with a
//! section or figure); `docs/references.md` lists them by title, authors and
//! venue.
#![deny(unsafe_code)]

pub mod abuse;
pub mod capacity;
pub mod chaos;
pub mod cli;
pub mod cluster;
pub mod config;
pub mod load;
pub mod plot;
pub mod ports;
pub mod publish;
pub mod qos;
pub mod report;
pub mod server;
pub mod trace;
