use super::*;

#[test]
fn replace_and_restore_keep_contents_and_mode() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("site.conf");
    assert_eq!(snapshot(&p).unwrap(), Previous::Absent);
    replace(&p, b"one", mode_of(&Previous::Absent)).unwrap();
    let before = snapshot(&p).unwrap();
    assert_eq!(
        before,
        Previous::File {
            contents: b"one".to_vec(),
            mode: 0o644
        }
    );
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
    let before = snapshot(&p).unwrap();
    replace(&p, b"two", mode_of(&before)).unwrap();
    assert_eq!(std::fs::read(&p).unwrap(), b"two");
    assert_eq!(mode_of(&snapshot(&p).unwrap()), 0o640);
    restore(&p, &before).unwrap();
    assert_eq!(std::fs::read(&p).unwrap(), b"one");
    restore(&p, &Previous::Absent).unwrap();
    assert!(!p.exists());
    // No temporary files are left behind.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// Issue 27, defect 8: the temporary file had a name anyone could predict
/// (the pid) and was opened without `O_EXCL`/`O_NOFOLLOW`, so a link
/// planted under that name made the sidecar write (and chmod) whatever
/// file the link named.
#[test]
fn a_link_planted_under_the_old_temporary_name_is_never_followed() {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, b"keep me").unwrap();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o600)).unwrap();
    let p = dir.path().join("site.conf");
    let planted = dir
        .path()
        .join(format!(".site.conf.rdmalb-{}.tmp", std::process::id()));
    std::os::unix::fs::symlink(&victim, &planted).unwrap();
    replace(&p, b"new config", 0o644).unwrap();
    assert_eq!(std::fs::read(&p).unwrap(), b"new config");
    assert_eq!(std::fs::read(&victim).unwrap(), b"keep me");
    assert_eq!(
        std::fs::metadata(&victim).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert!(std::fs::symlink_metadata(&planted)
        .unwrap()
        .file_type()
        .is_symlink());
}

#[test]
fn temporary_names_are_created_exclusively_and_differ() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("site.conf");
    let (_a, ta) = create_temp(&p, 0o640).unwrap();
    let (_b, tb) = create_temp(&p, 0o640).unwrap();
    assert_ne!(ta, tb);
    assert_eq!(
        std::fs::metadata(&ta).unwrap().permissions().mode() & 0o777,
        0o640
    );
}

#[test]
fn a_config_file_that_is_a_symbolic_link_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("real.conf");
    std::fs::write(&target, b"old").unwrap();
    let p = dir.path().join("site.conf");
    std::os::unix::fs::symlink(&target, &p).unwrap();
    let e = snapshot(&p).unwrap_err();
    assert!(e.to_string().contains("symbolic link"), "{e}");
    let e = replace(&p, b"new", 0o644).unwrap_err();
    assert!(e.to_string().contains("site.conf"), "{e}");
    assert_eq!(std::fs::read(&target).unwrap(), b"old");
    assert!(std::fs::symlink_metadata(&p)
        .unwrap()
        .file_type()
        .is_symlink());
}

#[test]
fn replace_into_a_missing_directory_fails_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("nope").join("site.conf");
    assert!(replace(&p, b"x", 0o644).is_err());
}

#[tokio::test]
async fn reload_reports_exit_status_output_and_timeout() {
    let argv = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    reload(&argv(&["true"]), Duration::from_secs(10))
        .await
        .unwrap();
    let e = reload(
        &argv(&["sh", "-c", "echo bad config >&2; exit 3"]),
        Duration::from_secs(10),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("exit status: 3") && e.contains("bad config"),
        "{e}"
    );
    let e = reload(&argv(&["/nonexistent/reload"]), Duration::from_secs(10))
        .await
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("cannot start `/nonexistent/reload`"), "{e}");
    // Done when it exits, even though a daemon it started keeps stdout.
    reload(
        &argv(&["sh", "-c", "sleep 1 & exit 0"]),
        Duration::from_secs(2),
    )
    .await
    .unwrap();
    // Long output is cut to its tail.
    let e = reload(
        &argv(&[
            "sh",
            "-c",
            "head -c 300000 /dev/zero | tr '\\0' a; echo LAST >&2; exit 1",
        ]),
        Duration::from_secs(10),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(
        e.len() < 2 * OUTPUT_TAIL + 200 && e.contains("exit status: 1"),
        "{}",
        e.len()
    );
    let e = reload(&argv(&["sleep", "30"]), Duration::from_millis(50))
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("did not finish within 50ms (killed)"), "{e}");
}
