//! The shm transport across real processes: a child process owns the window
//! file and publishes into it; this process maps it. Covers what one process
//! cannot: the mapping is shared between processes, a live owner's file is
//! not taken over, and the file of an owner killed with SIGKILL is replaced
//! by the next owner while old mappings stay valid.
//!
//! The child is this test binary re-run with `--ignored --exact
//! window_owner_child` and `RDMALB_WINDOW_CHILD` set.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rdmalb_window::{
    publish, read_load, Expect, LoadRead, LoadSample, ReadPolicy, RemoteWindow, ShmWindow,
    WindowError, WindowMemory,
};

const CHILD_ENV: &str = "RDMALB_WINDOW_CHILD";
const CHILD_NODE: u64 = 77;

/// Kills the child by PID when dropped, even if the test panics.
struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The owner process. Ignored in normal runs; the test below starts it.
#[test]
#[ignore = "helper process started by shm_window_shared_with_a_child_owner"]
fn window_owner_child() {
    let path = std::env::var(CHILD_ENV).expect("run by the parent test only");
    let mem = WindowMemory::create_shm(&path, 0o600, CHILD_NODE, 5).expect("create window");
    let mut k = 0u64;
    publish(
        &mem,
        &LoadSample {
            cpu_util_ppm: 1234,
            requests_total: k,
            ..Default::default()
        },
    );
    println!("READY");
    // Publish every millisecond, bounded to one minute; the parent kills us.
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(60) {
        k += 1;
        publish(
            &mem,
            &LoadSample {
                cpu_util_ppm: 1234,
                requests_total: k,
                ..Default::default()
            },
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn start_owner(path: &std::path::Path) -> ChildGuard {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "window::shm_process::window_owner_child",
            "--nocapture",
        ])
        .env(CHILD_ENV, path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let guard = ChildGuard(child);
    let mut lines = BufReader::new(stdout).lines();
    loop {
        match lines.next() {
            Some(Ok(l)) if l.contains("READY") => return guard,
            Some(Ok(_)) => continue,
            other => panic!("owner process did not start: {other:?}"),
        }
    }
}

fn policy() -> ReadPolicy {
    ReadPolicy {
        retries: 8,
        staleness: Duration::from_secs(5),
        deadline: Duration::from_secs(5),
    }
}

#[tokio::test]
async fn shm_window_shared_with_a_child_owner() {
    let dir = if std::path::Path::new("/dev/shm").is_dir() {
        tempfile::tempdir_in("/dev/shm").unwrap()
    } else {
        tempfile::tempdir().unwrap()
    };
    let path = dir.path().join("child.window");
    let mut owner = start_owner(&path);

    let expect = Expect {
        node_id: Some(CHILD_NODE),
        site_hash: Some(5),
    };
    let w = ShmWindow::open(&path, &expect).unwrap();
    let first = match read_load(&w, &policy()).await {
        LoadRead::Fresh(b) => b,
        other => panic!("{other:?}"),
    };
    assert_eq!(first.node_id, CHILD_NODE);
    assert_eq!(first.sample.cpu_util_ppm, 1234);
    // The owner keeps publishing: a later read shows a newer sequence
    // (bounded wait; no timing threshold is asserted).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let b = read_load(&w, &policy()).await.fresh().copied().unwrap();
        if b.seq > first.seq {
            assert!(b.sample.requests_total > first.sample.requests_total);
            break;
        }
        assert!(Instant::now() < deadline, "owner stopped publishing");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    // Atomics from this process land in the owner's memory: a second mapping
    // (as another proxy would have) sees them.
    assert_eq!(w.fetch_add(130, 3).await.unwrap(), 0);
    let other = ShmWindow::open(&path, &expect).unwrap();
    assert_eq!(other.read_word(130).await.unwrap(), 3);

    // A live owner's file is not taken over.
    match WindowMemory::create_shm(&path, 0o600, 1, 5) {
        Err(WindowError::InUse { .. }) => {}
        other => panic!("live owner's file taken over: {other:?}"),
    }

    // SIGKILL the owner: its file stays behind with no lock holder.
    owner.0.kill().unwrap();
    owner.0.wait().unwrap();
    assert!(path.exists());
    let new_owner = WindowMemory::create_shm(&path, 0o600, 2, 5).unwrap();
    assert_eq!(new_owner.node_id(), 2);
    // The old mapping still reads the dead owner's inode, never garbage.
    let raw = w.read_raw().await.unwrap();
    assert_eq!(raw[2], CHILD_NODE);
    assert_eq!(w.read_word(130).await.unwrap(), 3);
    // New opens see the new owner (which has not published yet).
    assert!(matches!(
        ShmWindow::open(&path, &expect),
        Err(WindowError::NodeIdMismatch { found: 2, .. })
    ));
    let fresh = ShmWindow::open(&path, &Expect::ANY).unwrap();
    assert!(matches!(
        read_load(&fresh, &policy()).await,
        LoadRead::Unknown(_)
    ));
}
