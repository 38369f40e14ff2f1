//! The ACME storage folder, shared by every proxy that serves the same
//! names (docs/tls.md, "Several proxies"):
//!
//! - `account.json`: the account's credentials (key included);
//! - `certs/<id>.pem`: a certificate chain followed by its private key,
//!   as HAProxy loads a `crt` file;
//! - `locks/<id>.lock`: held by the proxy ordering `<id>` (created with
//!   `O_EXCL`; its pid, host and time inside; one older than the lease is
//!   taken over);
//! - `challenges/`: the answers of the challenges in progress, so any
//!   proxy answers the one another proxy's order asked for.
//!
//! Every file is written 0600 to a temporary name in its folder (created
//! with `O_EXCL`) and renamed over the old one, so a reader sees the old
//! file or the new one, never half of one.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The storage folder.
#[derive(Debug, Clone)]
pub struct Store {
    root: PathBuf,
}

/// A lock file held while one proxy orders a certificate; removed on drop.
#[derive(Debug)]
pub struct Lock {
    path: PathBuf,
}

impl Drop for Lock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Store {
    /// Creates the folders (0700) when missing.
    pub fn open(root: &Path) -> std::io::Result<Store> {
        for sub in ["certs", "locks", "challenges"] {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(root.join(sub))?;
        }
        Ok(Store {
            root: root.to_path_buf(),
        })
    }

    pub fn account(&self) -> PathBuf {
        self.root.join("account.json")
    }

    pub fn cert(&self, id: &str) -> PathBuf {
        self.root.join("certs").join(format!("{id}.pem"))
    }

    /// The http-01 answer for `token`.
    pub fn http_token(&self, token: &str) -> PathBuf {
        self.root.join("challenges").join(format!("http-{token}"))
    }

    /// The tls-alpn-01 certificate (and key) for `name`.
    pub fn alpn_cert(&self, name: &str) -> PathBuf {
        self.root
            .join("challenges")
            .join(format!("alpn-{name}.pem"))
    }

    /// Takes the lock for `id`, or `None` while another proxy holds it
    /// (a lock older than `lease` is stale: its holder is gone).
    pub fn lock(&self, id: &str, lease: Duration) -> std::io::Result<Option<Lock>> {
        let path = self.root.join("locks").join(format!("{id}.lock"));
        for _ in 0..2 {
            let created = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path);
            match created {
                Ok(mut f) => {
                    let host =
                        std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
                    writeln!(
                        f,
                        "pid {} host {} since {}",
                        std::process::id(),
                        host.trim(),
                        rdmalb_base::time::unix_secs(SystemTime::now())
                    )?;
                    return Ok(Some(Lock { path }));
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let age = std::fs::metadata(&path)
                        .and_then(|m| m.modified())
                        .ok()
                        .and_then(|t| SystemTime::now().duration_since(t).ok());
                    match age {
                        Some(age) if age > lease => {
                            tracing::warn!(lock = %path.display(), age_s = age.as_secs(), "ACME lock past its lease: taking it over");
                            let _ = std::fs::remove_file(&path);
                        }
                        _ => return Ok(None),
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Ok(None)
    }
}

/// Writes `bytes` to `path` atomically with mode 0600: a temporary file
/// created with `O_EXCL` in the same folder, synced, then renamed.
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = dir.join(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        rand::random::<u32>()
    ));
    let result = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn files_are_private_and_replaced_whole() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let path = store.cert("www.example.com");
        write_private(&path, b"one").unwrap();
        write_private(&path, b"two").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        // No temporary file left behind.
        assert_eq!(
            std::fs::read_dir(path.parent().unwrap()).unwrap().count(),
            1
        );
    }

    #[test]
    fn one_holder_at_a_time_and_stale_locks_are_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let lease = Duration::from_secs(600);
        let first = store.lock("a", lease).unwrap().expect("free");
        assert!(store.lock("a", lease).unwrap().is_none());
        assert!(store.lock("b", lease).unwrap().is_some());
        drop(first);
        let again = store.lock("a", lease).unwrap().expect("released");
        // Its holder died: older than the lease, it is taken over.
        std::mem::forget(again);
        std::thread::sleep(Duration::from_millis(20));
        assert!(store.lock("a", Duration::from_nanos(1)).unwrap().is_some());
    }
}
