use super::*;
use crate::WindowError;

/// True when this machine has an RDMA device (then the no-device checks
/// below do not apply). Reads sysfs, independently of libibverbs.
fn host_has_rdma() -> bool {
    std::fs::read_dir("/sys/class/infiniband")
        .map(|mut d| d.next().is_some())
        .unwrap_or(false)
}

#[test]
fn no_device_is_a_clear_error_not_a_panic() {
    if host_has_rdma() {
        eprintln!("skipped: this host has an RDMA device");
        return;
    }
    let err = probe(None).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, WindowError::NoDevice { .. }), "{err:?}");
    assert!(
        text.contains("no RDMA device") || text.contains("libibverbs"),
        "{text}"
    );
    assert!(
        text.contains("transport = \"shm\"") && text.contains("\"tcp\""),
        "{text}"
    );

    let named = probe(Some("mlx5_0")).unwrap_err();
    assert!(matches!(named, WindowError::NoDevice { .. }), "{named:?}");
}

#[test]
fn server_start_without_device_fails_cleanly() {
    if host_has_rdma() {
        eprintln!("skipped: this host has an RDMA device");
        return;
    }
    let mem = std::sync::Arc::new(crate::WindowMemory::anonymous(1, 2).unwrap());
    let psk = crate::Psk::generate();
    let (_tx, rx) = tokio::sync::watch::channel(false);
    let err = VerbsServer::start(mem, "127.0.0.1:0".parse().unwrap(), psk, None, rx).unwrap_err();
    assert!(matches!(err, WindowError::NoDevice { .. }), "{err:?}");
    assert!(err.to_string().contains("use transport = \"shm\""), "{err}");
}

#[tokio::test]
async fn client_connect_without_device_fails_cleanly() {
    if host_has_rdma() {
        eprintln!("skipped: this host has an RDMA device");
        return;
    }
    // The device is opened before any connection attempt, so no listener
    // is needed: the error must name the device problem, not the network.
    let psk = crate::Psk::generate();
    let addr = "127.0.0.1:9".parse().unwrap();
    let err = VerbsWindow::connect(addr, &psk, 1, &crate::Expect::ANY, Some("rxe0"))
        .await
        .unwrap_err();
    assert!(matches!(err, WindowError::NoDevice { .. }), "{err:?}");
    assert!(err.to_string().contains("\"tcp\""), "{err}");
}
