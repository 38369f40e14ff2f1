//! `rdmalb psk` makes keys the transports accept: printed, or written to a
//! new file readable by its owner only; `rdmalb check` names a weak key.

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use rdmalb_window::Psk;

use crate::support::RDMALB;

#[test]
fn psk_prints_a_fresh_key_the_transports_accept() {
    let run = || {
        let out = Command::new(RDMALB).arg("psk").output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let (a, b) = (run(), run());
    assert_ne!(a, b, "two runs printed the same key");
    assert!(a.starts_with("rdmalb-psk-v1:"), "{a}");
    Psk::new(&a).unwrap();
}

#[test]
fn psk_out_writes_a_new_owner_only_file() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("cluster.psk");
    let out = Command::new(RDMALB)
        .args(["psk", "--out"])
        .arg(&p)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "mode {mode:o}");
    Psk::from_file(&p).unwrap();
    // An existing key is never overwritten.
    let before = std::fs::read(&p).unwrap();
    let again = Command::new(RDMALB)
        .args(["psk", "--out"])
        .arg(&p)
        .output()
        .unwrap();
    assert!(!again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stderr).contains(&p.display().to_string()),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    assert_eq!(std::fs::read(&p).unwrap(), before);
}

#[test]
fn check_names_a_weak_proxy_key() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("cluster.psk");
    std::fs::write(&key, "our cluster passphrase 2024\n").unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let conf = dir.path().join("rdmalb.toml");
    std::fs::write(
        &conf,
        "[cluster]\npsk_file = \"cluster.psk\"\n\
         [[listener]]\nname = \"web\"\nlisten = \"127.0.0.1:0\"\n\
         [[site]]\nname = \"www\"\nhosts = [\"www.example.com\"]\n\
         [[node]]\nname = \"n1\"\naddress = \"127.0.0.1:9\"\nsite = \"www\"\n\
         transport = \"tcp\"\nsidecar = \"127.0.0.1:7101\"\n",
    )
    .unwrap();
    let out = Command::new(RDMALB)
        .args(["check", "-c"])
        .arg(&conf)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("cluster.psk_file"), "{err}");
    assert!(err.contains(&key.display().to_string()), "{err}");
    assert!(err.contains("rdmalb psk"), "{err}");
}
