//! The shm transport: a proxy maps the sidecar's window file under
//! `/dev/shm` and reads it with plain atomic loads; CAS and FAA are CPU
//! atomics on the shared mapping. Truly one-sided: the sidecar does nothing
//! to serve an operation. Access control is the file's permission bits.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::memory::WindowMemory;
use super::seqlock;
use super::transport::{check_atomic_word, Expect, RemoteWindow, WindowFuture};
use super::{TransportKind, WindowError};

/// A peer's window reached through a shared-memory file mapping.
#[derive(Debug)]
pub struct ShmWindow {
    mem: WindowMemory,
    peer: String,
    path: PathBuf,
    /// The mapped file's identity (device, inode): a restarted owner
    /// recreates the file, so another identity at `path` means this mapping
    /// is no longer the owner's window.
    identity: (u64, u64),
}

impl ShmWindow {
    /// Map the window file at `path` and check its header against `expect`.
    pub fn open(path: impl AsRef<Path>, expect: &Expect) -> Result<ShmWindow, WindowError> {
        let path = path.as_ref();
        let peer = path.display().to_string();
        let mem = WindowMemory::open_shm(path)?;
        expect.check(&peer, &seqlock::snapshot(&mem))?;
        // After the open: the identity of the file that was mapped.
        let identity =
            Self::identity(path).map_err(|e| WindowError::io(format!("inspecting {peer}"), e))?;
        tracing::debug!(peer = %peer, node_id = mem.node_id(), "opened shm window");
        Ok(ShmWindow {
            mem,
            peer,
            path: path.to_path_buf(),
            identity,
        })
    }

    fn identity(path: &Path) -> std::io::Result<(u64, u64)> {
        std::fs::metadata(path).map(|m| (m.dev(), m.ino()))
    }

    /// The mapped file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Words 0..32 read now, synchronously: what [`RemoteWindow::read_raw`]
    /// returns, without a future (the routing hot path reads shm windows
    /// inline).
    pub fn snapshot(&self) -> [u64; super::layout::READ_WORDS] {
        seqlock::snapshot(&self.mem)
    }

    /// The load block read and validated now, synchronously, straight from
    /// the mapping ([`seqlock::read_block`]): what decoding
    /// [`ShmWindow::snapshot`] gives, with fewer loads and no copy.
    #[inline]
    pub fn read_block(&self) -> Result<seqlock::LoadBlock, seqlock::Torn> {
        seqlock::read_block(&self.mem)
    }
}

impl RemoteWindow for ShmWindow {
    fn kind(&self) -> TransportKind {
        TransportKind::Shm
    }

    fn peer(&self) -> &str {
        &self.peer
    }

    fn is_alive(&self) -> bool {
        Self::identity(&self.path).is_ok_and(|id| id == self.identity)
    }

    fn read_raw(&self) -> WindowFuture<'_, [u64; 32]> {
        let raw = seqlock::snapshot(&self.mem);
        Box::pin(std::future::ready(Ok(raw)))
    }

    fn read_word(&self, word: usize) -> WindowFuture<'_, u64> {
        let r = check_atomic_word(&self.peer, word).map(|()| self.mem.load(word).unwrap_or(0));
        Box::pin(std::future::ready(r))
    }

    fn compare_swap(&self, word: usize, expected: u64, new: u64) -> WindowFuture<'_, u64> {
        let r = check_atomic_word(&self.peer, word)
            .map(|()| self.mem.compare_swap(word, expected, new).unwrap_or(0));
        Box::pin(std::future::ready(r))
    }

    fn fetch_add(&self, word: usize, delta: u64) -> WindowFuture<'_, u64> {
        let r = check_atomic_word(&self.peer, word)
            .map(|()| self.mem.fetch_add(word, delta).unwrap_or(0));
        Box::pin(std::future::ready(r))
    }
}
