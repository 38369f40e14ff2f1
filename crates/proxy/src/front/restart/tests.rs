use std::os::fd::IntoRawFd;

use super::*;

#[test]
fn listener_list_parses_and_rejects_malformed_entries() {
    assert_eq!(
        parse_listeners("5=127.0.0.1:8080,6=[::1]:443"),
        Some(vec![
            (5, "127.0.0.1:8080".parse().unwrap()),
            (6, "[::1]:443".parse().unwrap())
        ])
    );
    assert_eq!(parse_listeners(""), Some(vec![]));
    assert_eq!(parse_listeners("5:127.0.0.1:80"), None);
    assert_eq!(parse_listeners("x=127.0.0.1:80"), None);
    assert_eq!(parse_listeners("5=localhost:80"), None);
    // Standard input, output and error are never listening sockets.
    assert_eq!(parse_listeners("2=127.0.0.1:80"), None);
}

#[test]
fn only_open_sockets_are_taken() {
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = tcp.local_addr().unwrap();
    let fd = tcp.into_raw_fd();
    let back = std::net::TcpListener::from(take_socket(fd).expect("a listening socket"));
    assert_eq!(back.local_addr().unwrap(), addr);

    let file = std::fs::File::open("/proc/self/status").unwrap();
    assert!(
        take_socket(file.as_raw_fd()).is_none(),
        "a file is not taken"
    );
}

#[test]
fn inherited_sockets_are_taken_once_by_address() {
    let a = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = a.local_addr().unwrap();
    let mut inherited = Inherited {
        sockets: vec![(addr, a)],
        ready: None,
    };
    assert!(!inherited.is_restart());
    assert!(inherited.take("127.0.0.1:1".parse().unwrap()).is_none());
    assert!(inherited.take(addr).is_some());
    assert!(inherited.take(addr).is_none());
}

#[test]
fn serving_writes_ready_to_the_previous_process() {
    use std::io::Read;
    let (mut ours, theirs) = UnixStream::pair().unwrap();
    let mut inherited = Inherited {
        sockets: Vec::new(),
        ready: Some(theirs),
    };
    assert!(inherited.is_restart());
    inherited.serving();
    let mut said = String::new();
    ours.read_to_string(&mut said).unwrap();
    assert_eq!(said, "ready\n");
}

#[test]
fn notifications_reach_a_path_or_an_abstract_socket() {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::net::UnixDatagram;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notify");
    let systemd = UnixDatagram::bind(&path).unwrap();
    notify(path.as_os_str(), "READY=1").unwrap();
    let mut buf = [0u8; 64];
    let n = systemd.recv(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"READY=1");

    let name = format!("rdmalb-test-{}", std::process::id());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let systemd = UnixDatagram::bind_addr(&addr).unwrap();
    notify(
        std::ffi::OsStr::new(&format!("@{name}")),
        "MAINPID=42\nREADY=1",
    )
    .unwrap();
    let n = systemd.recv(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"MAINPID=42\nREADY=1");

    assert!(notify(dir.path().join("absent").as_os_str(), "READY=1").is_err());
}

/// A "new process" that never says it serves.
fn silent() -> Successor {
    spawn(std::path::Path::new("/bin/sleep"), &["30".into()], &[]).unwrap()
}

fn gone(pid: u32) -> bool {
    // Reaped by `serving` (kill waits for the exit): no /proc entry left.
    !std::path::Path::new(&format!("/proc/{pid}")).exists()
}

#[tokio::test]
async fn a_new_process_that_exits_first_is_reported_with_its_status() {
    let s = spawn(std::path::Path::new("/bin/false"), &[], &[]).unwrap();
    let e = s
        .serving(Duration::from_secs(60), std::future::pending())
        .await
        .unwrap_err();
    assert!(
        matches!(&e, RestartError::Exited { status, .. } if status.contains("exit status: 1")),
        "{e}"
    );
    assert!(e.to_string().contains("exited before serving"), "{e}");
}

#[tokio::test]
async fn a_new_process_that_never_serves_is_killed() {
    let s = silent();
    let pid = s.pid();
    let e = s
        .serving(Duration::from_millis(200), std::future::pending())
        .await
        .unwrap_err();
    assert!(matches!(e, RestartError::Timeout { .. }), "{e}");
    assert!(gone(pid));

    let s = silent();
    let pid = s.pid();
    let e = s
        .serving(Duration::from_secs(60), std::future::ready(()))
        .await
        .unwrap_err();
    assert!(matches!(e, RestartError::Stopped { .. }), "{e}");
    assert!(gone(pid));
}

#[test]
fn a_missing_binary_is_a_spawn_error_naming_it() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _guard = rt.enter();
    let Err(e) = spawn(std::path::Path::new("/nonexistent/rdmalb"), &[], &[]) else {
        panic!("spawned a missing binary");
    };
    assert!(e.to_string().contains("/nonexistent/rdmalb"), "{e}");
}
