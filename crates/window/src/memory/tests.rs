use super::*;

fn shm_dir() -> tempfile::TempDir {
    let base = Path::new("/dev/shm");
    if base.is_dir() {
        tempfile::tempdir_in(base).unwrap()
    } else {
        tempfile::tempdir().unwrap()
    }
}

#[test]
fn anonymous_memory_is_page_aligned_and_initialised() {
    let m = WindowMemory::anonymous(7, 99).unwrap();
    assert_eq!(m.len(), 4096);
    assert_eq!(m.as_ptr() as usize % 4096, 0);
    assert_eq!(m.load(word::MAGIC), Some(layout::MAGIC));
    assert_eq!(m.load(word::VERSION), Some(1));
    assert_eq!(m.node_id(), 7);
    assert_eq!(m.site_hash(), 99);
    assert_eq!(m.load(word::SIZE), Some(4096));
    assert_eq!(m.load(512), None);
    assert!(m.path().is_none());
}

#[test]
fn atomics_return_old_value() {
    let m = WindowMemory::anonymous(1, 1).unwrap();
    assert_eq!(m.compare_swap(32, 0, 5), Some(0));
    assert_eq!(m.compare_swap(32, 0, 6), Some(5));
    assert_eq!(m.load(32), Some(5));
    assert_eq!(m.fetch_add(128, 3), Some(0));
    assert_eq!(m.fetch_add(128, u64::MAX), Some(3));
    assert_eq!(m.load(128), Some(2));
    assert_eq!(m.fetch_add(4096, 1), None);
}

#[test]
fn shm_file_is_shared_and_has_the_requested_mode() {
    let dir = shm_dir();
    let path = dir.path().join("w");
    let owner = WindowMemory::create_shm(&path, DEFAULT_MODE, 3, 4).unwrap();
    let meta = std::fs::metadata(&path).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert_eq!(meta.len(), 4096);
    let peer = WindowMemory::open_shm(&path).unwrap();
    assert_eq!(peer.node_id(), 3);
    owner.words()[40].store(11, Ordering::Release);
    assert_eq!(peer.load(40), Some(11));
    peer.fetch_add(40, 1);
    assert_eq!(owner.load(40), Some(12));
    drop(peer);
    drop(owner);
    assert!(!path.exists(), "owner removes its file on drop");
}

#[test]
fn live_owner_is_not_replaced_but_stale_file_is() {
    let dir = shm_dir();
    let path = dir.path().join("w");
    let owner = WindowMemory::create_shm(&path, 0o640, 1, 1).unwrap();
    let err = WindowMemory::create_shm(&path, 0o600, 2, 1).unwrap_err();
    assert!(matches!(err, WindowError::InUse { .. }), "{err}");
    drop(owner);
    // A crashed owner leaves its file behind with nobody holding the lock
    // (the kernel drops flocks at process exit); recreate that state.
    std::fs::write(&path, vec![0u8; 4096]).unwrap();
    let path2 = path.clone();
    let again = WindowMemory::create_shm(&path2, 0o600, 2, 1).unwrap();
    assert_eq!(again.node_id(), 2);
    assert_eq!(std::fs::metadata(&path2).unwrap().len(), 4096);
}

#[test]
fn open_rejects_wrong_size_and_symlinks() {
    let dir = shm_dir();
    let short = dir.path().join("short");
    std::fs::write(&short, [0u8; 100]).unwrap();
    assert!(matches!(
        WindowMemory::open_shm(&short),
        Err(WindowError::BadSize { found: 100, .. })
    ));
    let target = dir.path().join("target");
    let _owner = WindowMemory::create_shm(&target, 0o600, 1, 1).unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    assert!(WindowMemory::open_shm(&link).is_err());
    assert!(WindowMemory::create_shm(&link, 0o600, 1, 1).is_err());
    assert!(target.exists());
}
