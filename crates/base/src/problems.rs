//! Config problems: every config file rdmalb reads (proxy, sidecar,
//! testbed) is validated through one [`ConfigCheck`], which collects every
//! problem (never stopping at the first) with its key path and what would
//! be accepted, and ends as the typed config or a [`ConfigErrors`] listing
//! them, one line each: `FILE: KEY: MESSAGE`.

use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::de::DeserializeOwned;

use crate::duration;

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

/// Reads a config file; a file that cannot be read is its one problem.
pub fn read(path: &Path) -> Result<String, ConfigErrors> {
    std::fs::read_to_string(path)
        .map_err(|e| ConfigErrors::single(path, "", format!("cannot read file: {e}")))
}

impl ConfigErrors {
    /// One problem under `key` (empty: the file as a whole).
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

/// The problem collector one validation of one config file writes into.
/// Section validators take `&mut ConfigCheck` and report under their own
/// keys; the check helpers return the default after reporting, so
/// validation goes on and finds the next problem too.
#[derive(Debug)]
pub struct ConfigCheck {
    file: PathBuf,
    base: PathBuf,
    problems: Vec<Problem>,
}

impl ConfigCheck {
    /// Starts the check of `file`; relative paths in it are resolved
    /// against its folder.
    pub fn new(file: &Path) -> ConfigCheck {
        // A bare file name has an empty parent: relative paths stay
        // relative to the working directory, as the file's own name is.
        let base = file.parent().map(Path::to_path_buf).unwrap_or_default();
        ConfigCheck {
            file: file.to_path_buf(),
            base,
            problems: Vec::new(),
        }
    }

    /// The file being checked.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// Records one problem under `key` (empty: the file as a whole).
    pub fn add(&mut self, key: impl Into<String>, message: impl Into<String>) {
        self.problems.push(Problem {
            key: key.into(),
            message: message.into(),
        });
    }

    /// Problems recorded so far.
    pub fn count(&self) -> usize {
        self.problems.len()
    }

    /// Whether a problem was recorded under `prefix` or a key below it.
    pub fn has_problem_under(&self, prefix: &str) -> bool {
        self.problems.iter().any(|p| p.key.starts_with(prefix))
    }

    /// `value` when nothing was recorded, else every problem.
    pub fn finish<T>(self, value: T) -> Result<T, ConfigErrors> {
        if self.problems.is_empty() {
            Ok(value)
        } else {
            Err(self.into_errors())
        }
    }

    /// Every problem recorded (possibly none).
    pub fn into_errors(self) -> ConfigErrors {
        ConfigErrors {
            file: self.file,
            problems: self.problems,
        }
    }

    /// `p` as written when absolute, else relative to the file's folder.
    pub fn path(&self, p: &str) -> PathBuf {
        let p = Path::new(p);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.base.join(p)
        }
    }

    /// A duration greater than zero (`250ms`, `2s`); `default` when absent.
    pub fn duration(&mut self, key: &str, text: Option<&str>, default: Duration) -> Duration {
        match text {
            None => default,
            Some(text) => match duration::parse(text) {
                Ok(d) if d.is_zero() => {
                    self.add(key, format!("`{text}` must be greater than zero"));
                    default
                }
                Ok(d) => d,
                Err(e) => {
                    self.add(key, e);
                    default
                }
            },
        }
    }

    /// A duration from `min` to `max`; `default` when absent.
    pub fn duration_within(
        &mut self,
        key: &str,
        text: Option<&str>,
        default: Duration,
        min: Duration,
        max: Duration,
    ) -> Duration {
        let Some(text) = text else { return default };
        duration::parse_within(text, min, max).unwrap_or_else(|e| {
            self.add(key, e);
            default
        })
    }

    /// An integer from `min` to `max`; `default` when absent.
    pub fn int(&mut self, key: &str, v: Option<i64>, default: u64, min: u64, max: u64) -> u64 {
        match v {
            None => default,
            Some(n) if n >= 0 && (n as u64) >= min && (n as u64) <= max => n as u64,
            Some(n) => {
                self.add(
                    key,
                    format!("{n} is out of range (expected an integer from {min} to {max})"),
                );
                default
            }
        }
    }

    /// A listen or connect address: `IP:port`, or `host:port` that
    /// resolves. `None` (reported) when absent or not an address.
    pub fn socket_addr(&mut self, key: &str, text: Option<&str>) -> Option<SocketAddr> {
        let Some(text) = text else {
            self.add(
                key,
                "missing (expected an address such as \"127.0.0.1:8080\")",
            );
            return None;
        };
        if let Ok(a) = text.parse::<SocketAddr>() {
            return Some(a);
        }
        match text.to_socket_addrs().map(|mut it| it.next()) {
            Ok(Some(a)) if text.contains(':') => Some(a),
            _ => {
                self.add(
                    key,
                    format!(
                        "`{text}` is not an address (expected host:port such as \"127.0.0.1:8080\" or \"[::1]:8080\")"
                    ),
                );
                None
            }
        }
    }

    /// An `IP:port` address, no name to resolve (what a sidecar binds).
    /// `None` (reported) when absent or not one.
    pub fn ip_socket_addr(&mut self, key: &str, text: Option<&str>) -> Option<SocketAddr> {
        let Some(text) = text else {
            self.add(
                key,
                "missing (expected an address such as \"127.0.0.1:7101\")",
            );
            return None;
        };
        match text.parse::<SocketAddr>() {
            Ok(a) => Some(a),
            Err(_) => {
                self.add(
                    key,
                    format!("`{text}` is not an IP:port address (e.g. \"127.0.0.1:7101\", \"[::1]:7101\")"),
                );
                None
            }
        }
    }

    /// Deserializes `v` (one section or value), reporting a type error
    /// under `key`; the default then.
    pub fn value<T: DeserializeOwned + Default>(&mut self, key: &str, v: &toml::Value) -> T {
        match T::deserialize(v.clone()) {
            Ok(t) => t,
            Err(e) => {
                self.add(key, clean(e.message()));
                T::default()
            }
        }
    }

    /// Deserializes the section `key` of `table` (the default when absent).
    pub fn section<T: DeserializeOwned + Default>(&mut self, table: &toml::Table, key: &str) -> T {
        match table.get(key) {
            None => T::default(),
            Some(v) => self.value(key, v),
        }
    }

    /// Deserializes a field, reporting "expected `expect`, found …" under
    /// `key` when it has another type; `None` when absent or wrong.
    pub fn field<T: DeserializeOwned>(
        &mut self,
        key: &str,
        v: Option<&toml::Value>,
        expect: &str,
    ) -> Option<T> {
        let v = v?;
        match T::deserialize(v.clone()) {
            Ok(t) => Some(t),
            Err(_) => {
                self.add(key, format!("expected {expect}, found {}", v.type_str()));
                None
            }
        }
    }

    /// Deserializes each entry of the array of tables `key` on its own, so
    /// a bad entry does not hide problems in the others (`None` for it).
    pub fn entries<T: DeserializeOwned>(
        &mut self,
        table: &toml::Table,
        key: &str,
    ) -> Vec<Option<T>> {
        match table.get(key) {
            None => Vec::new(),
            Some(toml::Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, v)| match T::deserialize(v.clone()) {
                    Ok(t) => Some(t),
                    Err(e) => {
                        self.add(format!("{key}[{i}]"), clean(e.message()));
                        None
                    }
                })
                .collect(),
            Some(_) => {
                self.add(
                    key,
                    format!("must be an array of tables (write each entry as [[{key}]])"),
                );
                Vec::new()
            }
        }
    }
}

/// A serde message on one line.
fn clean(msg: &str) -> String {
    msg.trim().replace('\n', " ")
}

#[cfg(test)]
mod tests;
