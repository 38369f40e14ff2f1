//! Proxy configuration: TOML file → raw serde structs → validated, immutable
//! [`Config`].
//!
//! Three stages, as in sozu and pingora: [`raw`] mirrors the file with
//! `deny_unknown_fields` everywhere; [`validate`] turns it into the typed
//! structs of [`types`], collecting *every* problem (file, key path, what
//! would be accepted) rather than stopping at the first; the proxy runtime
//! holds the result behind an `ArcSwap` and swaps a new snapshot on SIGHUP.
//!
//! Which setting wins: a site's own value (`site.weights`, `site.health_path`)
//! over the global section (`[weights]`, `[health]`) over the built-in
//! default documented on each field in `conf/rdmalb.toml`.

pub mod acme;
pub mod balancing;
mod compression;
pub mod files;
mod qos;
pub mod raw;
mod reconfig;
pub mod reference;
pub mod stats_socket;
pub mod types;
pub mod validate;

use std::path::Path;

pub use balancing::{
    BoundLoad, CookieMode, HashBalance, HashFunction, HashKey, SiteBalance, Sticky,
};
pub use compression::{Coding, Compression, RawCompression};
pub use rdmalb_base::problems::{ConfigErrors, Problem};
pub use types::*;

/// Reads and validates a proxy config file, and the secrets it names
/// ([`files`]): the pre-shared key (the same check the windows make when
/// they start, so `rdmalb check` and a real start agree on what is a usable
/// key) and the admin token.
pub fn load(path: &Path) -> Result<Config, ConfigErrors> {
    let config = parse(&rdmalb_base::problems::read(path)?, path)?;
    let mut problems = Vec::new();
    if let Some(key) = &config.cluster.psk_file {
        if let Err(e) = rdmalb_window::Psk::from_file(key) {
            problems.push(Problem {
                key: "cluster.psk_file".into(),
                message: e.to_string(),
            });
        }
    }
    if let Some(token) = config.admin.as_ref().and_then(|a| a.token_file.as_deref()) {
        if let Err(message) = files::admin_token(token) {
            problems.push(Problem {
                key: "admin.token_file".into(),
                message,
            });
        }
    }
    if problems.is_empty() {
        Ok(config)
    } else {
        Err(ConfigErrors {
            file: path.to_path_buf(),
            problems,
        })
    }
}

/// Validates config text; `path` names the file in messages and anchors
/// relative paths (certificates, keys) at its directory.
pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigErrors> {
    validate::validate(text, path)
}
