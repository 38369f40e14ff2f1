//! Config problems: every config file rdmalb reads (proxy, sidecar,
//! testbed) reports through these types, one line per problem with the
//! file, the key path and what would be accepted.

use std::fmt;
use std::path::{Path, PathBuf};

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
    pub fn single(file: &Path, key: &str, message: impl Into<String>) -> Self {
        ConfigErrors {
            file: file.to_path_buf(),
            problems: vec![Problem {
                key: key.to_string(),
                message: message.into(),
            }],
        }
    }
}
