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

mod qos;
pub mod raw;
mod reconfig;
pub mod types;
pub mod validate;

use std::fmt;
use std::path::{Path, PathBuf};

pub use types::*;

/// One problem found in a config file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Key path inside the file, e.g. `site[1].hosts[0]` or `timeouts.connect`.
    pub key: String,
    /// What is wrong and what would be accepted.
    pub message: String,
}

/// Every problem found in one config file. Displayed one per line as
/// `FILE: KEY: MESSAGE`.
#[derive(Debug, Clone, thiserror::Error)]
pub struct ConfigErrors {
    pub file: PathBuf,
    pub problems: Vec<Problem>,
}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.problems.len();
        writeln!(
            f,
            "{}: {n} problem{} in config",
            self.file.display(),
            if n == 1 { "" } else { "s" }
        )?;
        for (i, p) in self.problems.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            if p.key.is_empty() {
                write!(f, "{}: {}", self.file.display(), p.message)?;
            } else {
                write!(f, "{}: {}: {}", self.file.display(), p.key, p.message)?;
            }
        }
        Ok(())
    }
}

impl ConfigErrors {
    pub(crate) fn single(file: &Path, key: &str, message: impl Into<String>) -> Self {
        ConfigErrors {
            file: file.to_path_buf(),
            problems: vec![Problem {
                key: key.to_string(),
                message: message.into(),
            }],
        }
    }
}

/// Reads and validates a proxy config file.
pub fn load(path: &Path) -> Result<Config, ConfigErrors> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigErrors::single(path, "", format!("cannot read file: {e}")))?;
    parse(&text, path)
}

/// Validates config text; `path` names the file in messages and anchors
/// relative paths (certificates, keys) at its directory.
pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigErrors> {
    validate::validate(text, path)
}
