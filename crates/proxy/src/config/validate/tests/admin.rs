//! `[admin]`: the listen address, the token file, who may reach it.

use super::*;

#[test]
fn bad_admin_listen() {
    rejects(
        &with("[admin]\nlisten = \"localhost\""),
        "admin.listen",
        "host:port",
    );
}

#[test]
fn empty_admin_token_file() {
    rejects(
        &with("[admin]\nlisten = \"127.0.0.1:9100\"\ntoken_file = \"\""),
        "admin.token_file",
        "empty path",
    );
}

#[test]
fn admin_token_file_is_relative_to_the_config() {
    let c = ok(&with(
        "[admin]\nlisten = \"127.0.0.1:9100\"\ntoken_file = \"admin.token\"",
    ));
    let admin = c.admin.unwrap();
    assert_eq!(admin.token_file.as_deref(), Some(Path::new("admin.token")));
}

/// Issue 27, defect 9: an admin listener other hosts can reach, with no
/// token, was accepted silently.
#[test]
fn admin_reachable_from_other_hosts_needs_a_token_or_an_explicit_yes() {
    for listen in ["0.0.0.0:9100", "[::]:9100", "192.0.2.10:9100"] {
        rejects(
            &with(&format!("[admin]\nlisten = \"{listen}\"")),
            "admin.listen",
            "allow_remote_without_token = true",
        );
    }
    let c = ok(&with(
        "[admin]\nlisten = \"0.0.0.0:9100\"\ntoken_file = \"admin.token\"",
    ));
    assert!(c.admin.is_some());
    let c = ok(&with(
        "[admin]\nlisten = \"0.0.0.0:9100\"\nallow_remote_without_token = true",
    ));
    assert!(c.admin.is_some());
    assert!(ok(&with("[admin]\nlisten = \"[::1]:9100\""))
        .admin
        .is_some());
}
