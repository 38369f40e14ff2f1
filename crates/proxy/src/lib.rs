//! The rdmalb proxy, everything `rdmalb proxy` runs: its configuration
//! ([`config`]), the load index and node selection ([`balance`]), the
//! reconfiguration agent ([`reconfig`]), priorities and guarantees
//! ([`qos`]) and the HTTP front end that carries requests ([`front`]).
//! [`proxy_protocol`] is the PROXY protocol codec the front end and the
//! health checks share.
//!
//! Dependencies inside point one way: `config` → `proxy_protocol` →
//! `balance` and `qos` → `reconfig` → `front` (which starts the agent). The node window
//! and its transports are the `rdmalb-window` crate.
//!
//! Comments cite the research papers as "seed 000" … "seed 004" (with a
//! section or figure); `docs/references.md` lists them by title, authors and
//! venue.
#![deny(unsafe_code)]

pub mod acme;
pub mod balance;
pub mod config;
pub mod front;
pub mod import;
pub mod proxy_protocol;
pub mod qos;
pub mod reconfig;
pub mod rules;

#[cfg(test)]
mod fixtures;
