//! The gate of warm roles: which of the sites configured in the app is open.
//!
//! In warm mode (`[role] mode = "warm"`) the app's config holds every site's
//! block at once, and each block refuses requests (nginx: `if (!-f {{gate}})
//! { return 421; }`) unless its marker file exists in the gate directory.
//! The directory holds exactly one marker: `active-<site>` for the site the
//! node serves, or `idle`. A switch **renames** that one file, so at every
//! instant exactly one site is open (or none): there is no moment where two
//! sites answer, and no reload. rename(2) within one directory is atomic,
//! and the app sees the new name on its next `stat` (nginx's `-f` is a
//! `stat` per request unless `open_file_cache` caches it, which the warm
//! template turns off for that reason).
//!
//! The marker is not fsynced: the gate directory normally lives on tmpfs
//! (`/run`), and a sidecar that starts sets the gate again before it
//! publishes anything (the start-up apply), so nothing depends on the
//! marker surviving a crash.

use std::io;
use std::path::{Path, PathBuf};

/// File name prefix of a site's marker.
const SITE_PREFIX: &str = "active-";
/// The marker's name while the node is idle (no site open). It cannot
/// collide with a site's marker, which always starts with [`SITE_PREFIX`].
const IDLE: &str = "idle";

/// The marker's file name for `site` (`None`: idle).
pub fn marker_name(site: Option<&str>) -> String {
    match site {
        Some(s) => format!("{SITE_PREFIX}{s}"),
        None => IDLE.to_string(),
    }
}

/// The gate directory of one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gate {
    dir: PathBuf,
}

impl Gate {
    pub fn new(dir: impl Into<PathBuf>) -> Gate {
        Gate { dir: dir.into() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The path of `site`'s marker (`None`: idle): the `{{gate}}` template
    /// variable of a warm site.
    pub fn marker(&self, site: Option<&str>) -> PathBuf {
        self.dir.join(marker_name(site))
    }

    /// The markers present now (file names), sorted.
    pub fn markers(&self) -> io::Result<Vec<String>> {
        let mut found = Vec::new();
        for entry in std::fs::read_dir(&self.dir)? {
            let name = entry?.file_name().to_string_lossy().into_owned();
            if name == IDLE || name.starts_with(SITE_PREFIX) {
                found.push(name);
            }
        }
        found.sort();
        Ok(found)
    }

    /// Opens `site`'s gate (`None`: closes every gate). Returns the marker
    /// that was there before (`None` when there was none), for a rollback
    /// with [`Gate::restore`].
    ///
    /// The existing marker is renamed, so the old site closes in the same
    /// instant the new one opens. Stray markers (a crash between creating
    /// and removing one, someone's hand) are removed first, never left
    /// open; with no marker at all a new one is created as a temporary file
    /// and renamed into place. The directory is created when missing.
    pub fn open(&self, site: Option<&str>) -> io::Result<Option<String>> {
        let target = marker_name(site);
        let markers = match self.markers() {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                std::fs::create_dir_all(&self.dir)?;
                Vec::new()
            }
            Err(e) => return Err(e),
        };
        self.set(&target, markers)
    }

    /// Puts back the marker [`Gate::open`] returned (`None`: no marker, every
    /// gate closed as far as the app can tell).
    pub fn restore(&self, previous: Option<&str>) -> io::Result<()> {
        let markers = self.markers()?;
        match previous {
            Some(name) => self.set(name, markers).map(drop),
            None => {
                for m in markers {
                    remove(&self.dir.join(m))?;
                }
                Ok(())
            }
        }
    }

    /// Makes `target` the only marker, given the markers present.
    fn set(&self, target: &str, markers: Vec<String>) -> io::Result<Option<String>> {
        let had_target = markers.iter().any(|m| m == target);
        let mut others = markers.into_iter().filter(|m| m != target);
        let renamed = if had_target { None } else { others.next() };
        for stray in others {
            remove(&self.dir.join(stray))?;
        }
        let to = self.dir.join(target);
        match (had_target, &renamed) {
            (true, _) => return Ok(Some(target.to_string())),
            (false, Some(from)) => std::fs::rename(self.dir.join(from), &to)?,
            (false, None) => {
                // Created exclusively under an unguessable name, as the
                // app's config file is ([`super::apply::create_temp`]).
                let (mut f, tmp) = super::apply::create_temp(&to, 0o644)?;
                let written = io::Write::write_all(
                    &mut f,
                    b"rdmalb gate marker: the site of this file name is open\n",
                );
                drop(f);
                if let Err(e) = written.and_then(|()| std::fs::rename(&tmp, &to)) {
                    let _ = std::fs::remove_file(&tmp);
                    return Err(e);
                }
            }
        }
        Ok(renamed)
    }
}

fn remove(path: &Path) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests;
