//! The owner's window memory: 4 KiB, page aligned, viewed as 512 atomic
//! words. Either a file under `/dev/shm` that same-host peers map (the shm
//! transport), or an anonymous mapping served over tcp or verbs.
//!
//! This is the only module besides `verbs` with `unsafe` code: turning
//! the mapping into `&[AtomicU64; 512]`.
//!
//! File life cycle: the owner creates the file with `O_CREAT | O_EXCL`
//! (mode 0600 unless configured) and holds an exclusive `flock` on it while
//! alive. A file left behind by a crashed owner has no lock holder, so a new
//! owner unlinks it and creates a fresh one; a file whose lock is held belongs
//! to a live owner and is refused ([`WindowError::InUse`]). The owner never
//! truncates a mapped file (that would fault peers' mappings); it only
//! unlinks, so peers that still map the old inode keep valid memory and see
//! its load block go stale.
#![allow(unsafe_code)]

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use memmap2::{MmapOptions, MmapRaw};

use super::layout::{self, word, WINDOW_BYTES, WINDOW_WORDS};
use super::WindowError;

/// Default mode of a window file: owner read/write only.
pub const DEFAULT_MODE: u32 = 0o600;

/// A window's memory: a page-aligned 4 KiB mapping viewed as atomic words.
pub struct WindowMemory {
    map: MmapRaw,
    file: Option<OwnedFile>,
}

/// The backing file, when the memory is a file mapping.
struct OwnedFile {
    path: PathBuf,
    /// Kept open: holds the `flock` (for the owner) and pins the inode.
    file: File,
    /// Whether we created the file and should unlink it on drop.
    owner: bool,
}

impl std::fmt::Debug for WindowMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WindowMemory")
            .field("path", &self.path())
            .field("node_id", &self.node_id())
            .finish()
    }
}

impl WindowMemory {
    /// Anonymous window memory (served over tcp or verbs), header initialised.
    pub fn anonymous(node_id: u64, site_hash: u64) -> Result<WindowMemory, WindowError> {
        let map = MmapOptions::new()
            .len(WINDOW_BYTES)
            .map_anon()
            .map_err(|e| WindowError::io("mapping anonymous window memory", e))?;
        let mem = WindowMemory {
            map: MmapRaw::from(map),
            file: None,
        };
        mem.init_header(node_id, site_hash);
        Ok(mem)
    }

    /// Create the owner's window file at `path` (normally under `/dev/shm`)
    /// with permission bits `mode`, map it and initialise the header.
    ///
    /// A stale file from a crashed owner is replaced; a file held by a live
    /// owner is refused with [`WindowError::InUse`].
    pub fn create_shm(
        path: impl AsRef<Path>,
        mode: u32,
        node_id: u64,
        site_hash: u64,
    ) -> Result<WindowMemory, WindowError> {
        let path = path.as_ref();
        let shown = path.display().to_string();
        // Two passes: the second one runs after removing a stale file. A
        // third would mean another owner is racing us for the same path.
        for _ in 0..2 {
            match OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .mode(mode)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(path)
            {
                Ok(file) => {
                    if !try_lock_exclusive(&file)
                        .map_err(|e| WindowError::io(format!("locking {shown}"), e))?
                    {
                        return Err(WindowError::InUse { path: shown });
                    }
                    // The umask may have removed bits; set exactly what was asked.
                    file.set_permissions(std::fs::Permissions::from_mode(mode))
                        .map_err(|e| WindowError::io(format!("setting mode of {shown}"), e))?;
                    file.set_len(WINDOW_BYTES as u64)
                        .map_err(|e| WindowError::io(format!("sizing {shown}"), e))?;
                    let map = MmapOptions::new()
                        .len(WINDOW_BYTES)
                        .map_raw(&file)
                        .map_err(|e| WindowError::io(format!("mapping {shown}"), e))?;
                    let mem = WindowMemory {
                        map,
                        file: Some(OwnedFile {
                            path: path.to_path_buf(),
                            file,
                            owner: true,
                        }),
                    };
                    mem.init_header(node_id, site_hash);
                    tracing::info!(path = %shown, node_id, mode = format!("{mode:o}"), "created window file");
                    return Ok(mem);
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    remove_if_stale(path)?;
                }
                Err(e) => return Err(WindowError::io(format!("creating window file {shown}"), e)),
            }
        }
        Err(WindowError::InUse { path: shown })
    }

    /// Map an existing window file read-write as a peer (the shm transport).
    /// The header is not checked here; see [`crate::ShmWindow::open`].
    pub fn open_shm(path: impl AsRef<Path>) -> Result<WindowMemory, WindowError> {
        let path = path.as_ref();
        let shown = path.display().to_string();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)
            .map_err(|e| WindowError::io(format!("opening window file {shown}"), e))?;
        let meta = file
            .metadata()
            .map_err(|e| WindowError::io(format!("inspecting window file {shown}"), e))?;
        if !meta.file_type().is_file() || meta.len() != WINDOW_BYTES as u64 {
            return Err(WindowError::BadSize {
                peer: shown,
                found: meta.len(),
            });
        }
        let map = MmapOptions::new()
            .len(WINDOW_BYTES)
            .map_raw(&file)
            .map_err(|e| WindowError::io(format!("mapping {shown}"), e))?;
        Ok(WindowMemory {
            map,
            file: Some(OwnedFile {
                path: path.to_path_buf(),
                file,
                owner: false,
            }),
        })
    }

    /// The window as 512 atomic words.
    pub fn words(&self) -> &[AtomicU64; WINDOW_WORDS] {
        debug_assert_eq!(self.map.len(), WINDOW_BYTES);
        // SAFETY: the mapping is exactly WINDOW_BYTES long (checked at
        // creation / open) and page aligned, so it is valid and suitably
        // aligned for 512 AtomicU64. It lives as long as `self.map`, which
        // the returned borrow cannot outlive. All access goes through atomics
        // (interior mutability), so concurrent access from other threads,
        // processes or the NIC is not a data race; no `&mut` to the bytes is
        // ever created. The file is never truncated by its owner; a third
        // party able to truncate it could only do so if permissions allowed
        // (mode 0600 by default).
        unsafe { &*(self.map.as_ptr() as *const [AtomicU64; WINDOW_WORDS]) }
    }

    /// Write the header: size, version, node id, site hash, then the magic
    /// last (Release), so a peer that sees the magic sees the rest.
    pub fn init_header(&self, node_id: u64, site_hash: u64) {
        let w = self.words();
        w[word::MAGIC].store(0, Ordering::Release);
        w[word::VERSION].store(layout::LAYOUT_VERSION, Ordering::Relaxed);
        w[word::NODE_ID].store(node_id, Ordering::Relaxed);
        w[word::SITE_HASH].store(site_hash, Ordering::Relaxed);
        w[word::SIZE].store(WINDOW_BYTES as u64, Ordering::Relaxed);
        w[word::GENERATION].store(rand::random::<u64>() | 1, Ordering::Relaxed);
        w[word::MAGIC].store(layout::MAGIC, Ordering::Release);
    }

    /// The generation drawn when the window was created (header word 5).
    pub fn generation(&self) -> u64 {
        self.words()[word::GENERATION].load(Ordering::Acquire)
    }

    /// Node id from the header.
    pub fn node_id(&self) -> u64 {
        self.words()[word::NODE_ID].load(Ordering::Acquire)
    }

    /// Site-table hash from the header.
    pub fn site_hash(&self) -> u64 {
        self.words()[word::SITE_HASH].load(Ordering::Acquire)
    }

    /// Atomically read one word (any index below 512).
    pub fn load(&self, word: usize) -> Option<u64> {
        self.words().get(word).map(|w| w.load(Ordering::Acquire))
    }

    /// Compare-and-swap one word; returns the previous value whether or not
    /// the swap happened (the semantics of RDMA ATOMIC_CMP_AND_SWP).
    /// `None` for an index past the window.
    pub fn compare_swap(&self, word: usize, expected: u64, new: u64) -> Option<u64> {
        self.words().get(word).map(|w| {
            match w.compare_exchange(expected, new, Ordering::AcqRel, Ordering::Acquire) {
                Ok(old) | Err(old) => old,
            }
        })
    }

    /// Wrapping fetch-and-add on one word; returns the previous value.
    pub fn fetch_add(&self, word: usize, delta: u64) -> Option<u64> {
        self.words()
            .get(word)
            .map(|w| w.fetch_add(delta, Ordering::AcqRel))
    }

    /// Start of the mapping, for verbs memory registration. Remote access
    /// through this pointer must stay within the regions in
    /// [`layout::READ_ONLY_BYTES`] (read) and [`layout::ATOMIC_BYTES`]
    /// (read + atomics) and must only use 8-byte aligned atomic accesses.
    pub fn as_ptr(&self) -> *mut u8 {
        self.map.as_mut_ptr()
    }

    /// Length of the mapping in bytes (always 4096).
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Always false; present because `len` is.
    pub fn is_empty(&self) -> bool {
        self.map.len() == 0
    }

    /// The backing file, if this is a file mapping.
    pub fn path(&self) -> Option<&Path> {
        self.file.as_ref().map(|f| f.path.as_path())
    }
}

impl Drop for WindowMemory {
    fn drop(&mut self) {
        let Some(f) = &self.file else { return };
        if !f.owner {
            return;
        }
        // Unlink only if the path still names our inode: someone may have
        // replaced the file since, and that one is not ours to remove.
        let ours = f.file.metadata().ok().map(|m| (m.dev(), m.ino()));
        let there = std::fs::symlink_metadata(&f.path)
            .ok()
            .map(|m| (m.dev(), m.ino()));
        if ours.is_some() && ours == there {
            if let Err(e) = std::fs::remove_file(&f.path) {
                tracing::warn!(path = %f.path.display(), error = %e, "could not remove window file");
            }
        }
    }
}

/// Take an exclusive non-blocking `flock`; `Ok(false)` when another open file
/// description holds it.
fn try_lock_exclusive(file: &File) -> io::Result<bool> {
    // SAFETY: flock on a valid, open descriptor owned by `file`; no memory is
    // passed to the kernel.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc == 0 {
        return Ok(true);
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(err)
    }
}

/// Remove a window file left behind by a dead owner. Refuses when a live
/// owner holds the file lock, and never follows symlinks.
fn remove_if_stale(path: &Path) -> Result<(), WindowError> {
    let shown = path.display().to_string();
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        // Gone in between: the next create attempt will tell.
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => {
            return Err(WindowError::io(
                format!("opening existing window file {shown} to check whether it is stale"),
                e,
            ))
        }
    };
    let meta = file
        .metadata()
        .map_err(|e| WindowError::io(format!("inspecting {shown}"), e))?;
    if !meta.file_type().is_file() {
        return Err(WindowError::io(
            format!("window path {shown}"),
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "exists and is not a regular file",
            ),
        ));
    }
    if !try_lock_exclusive(&file).map_err(|e| WindowError::io(format!("locking {shown}"), e))? {
        return Err(WindowError::InUse { path: shown });
    }
    tracing::warn!(path = %shown, "removing stale window file left by a previous owner");
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(WindowError::io(format!("removing stale {shown}"), e)),
    }
    // `file` (and its lock) is dropped here, after the unlink.
}

#[cfg(test)]
mod tests;
