//! The HTTP front end through the real `rdmalb proxy` binary.

mod acme;
mod compression;
mod conf;
mod differential;
mod errors;
mod halog;
mod hostile;
mod monitor;
mod nginx;
mod ops;
mod protocols;
mod proxy_protocol;
pub(crate) mod restart;
mod retries;
mod routing;
mod rules;
mod runtime;
mod stats_page;
mod stats_socket;
mod stick_share;
mod stick_tables;
mod streaming;
mod systemd;
