//! The sidecar: its binary, collectors, config, served window and role application.

mod bin;
mod collect;
mod config;
mod role_config;
mod role_nginx;
mod role_nginx_warm;
mod role_testsrv;
mod serve;
