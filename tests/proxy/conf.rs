//! The documented example config is valid as shipped, `rdmalb check`
//! names an unusable admin token file, and the proxy refuses to start with a
//! clear message when it cannot bind.

use crate::support::*;

#[test]
fn example_config_is_valid() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("conf/rdmalb.toml");
    let config = rdmalb_proxy::config::load(&path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(config.sites.len(), 3);
    let out = std::process::Command::new(crate::support::RDMALB)
        .args(["check", "-c"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn bind_failure_is_a_clear_startup_error() {
    // Occupy a port, then ask the proxy to listen on it.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rdmalb.toml");
    std::fs::write(
        &path,
        format!(
            "[[listener]]\nname = \"web\"\nlisten = \"{addr}\"\n\n[[site]]\nname = \"www\"\nhosts = [\"www.example.com\"]\n\n{}",
            node_toml("n1", "127.0.0.1:9".parse().unwrap(), "www")
        ),
    )
    .unwrap();
    let child = std::process::Command::new(crate::support::RDMALB)
        .args(["proxy", "-c"])
        .arg(&path)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut guard = ChildGuard { child };
    let mut status = None;
    for _ in 0..400 {
        if let Ok(Some(s)) = guard.child.try_wait() {
            status = Some(s);
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    let status = status.expect("the proxy kept running on a taken port");
    assert!(!status.success());
    let mut err = String::new();
    use std::io::Read;
    guard
        .child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(
        err.contains(&format!("cannot listen on {addr} (listener `web`)")),
        "{err}"
    );
    drop(taken);
}

#[test]
fn check_names_an_unusable_admin_token_file() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("rdmalb.toml");
    std::fs::write(
        &conf,
        format!(
            "[[listener]]\nname = \"web\"\nlisten = \"127.0.0.1:0\"\n\n\
             [admin]\nlisten = \"127.0.0.1:0\"\ntoken_file = \"admin.token\"\n\n\
             [[site]]\nname = \"www\"\nhosts = [\"www.example.com\"]\n\n{}",
            node_toml("n1", "127.0.0.1:9".parse().unwrap(), "www")
        ),
    )
    .unwrap();
    let token = dir.path().join("admin.token");
    let check = || {
        let out = std::process::Command::new(crate::support::RDMALB)
            .args(["check", "-c"])
            .arg(&conf)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    for (text, mode, says) in [
        (None, 0o600, "cannot read it"),
        (Some("secret"), 0o600, "at least 32"),
        (
            Some("0123456789abcdef0123456789abcdef-long-enough"),
            0o644,
            "chmod 600",
        ),
    ] {
        let _ = std::fs::remove_file(&token);
        if let Some(t) = text {
            std::fs::write(&token, t).unwrap();
            std::fs::set_permissions(&token, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        let (code, err) = check();
        assert_eq!(code, Some(2), "{err}");
        assert!(err.contains("admin.token_file"), "{err}");
        assert!(err.contains(says), "{says}: {err}");
    }
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    let (code, err) = check();
    assert_eq!(code, Some(0), "{err}");
}
