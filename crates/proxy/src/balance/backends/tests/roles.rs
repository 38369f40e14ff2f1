//! Routing follows role words: a node with a sidecar window serves the site
//! its role word names, only once the role is applied and the node passed
//! `rise` checks of that site; its old site stops getting it at once.

use super::*;
use crate::balance::DownReason;

fn config() -> Config {
    let text = r#"
[health]
rise = 2
fall = 1

[[listener]]
listen = "127.0.0.1:8080"

[[site]]
name = "shop"
hosts = ["shop.example.com"]

[[site]]
name = "blog"
hosts = ["blog.example.com"]

[[node]]
name = "static"
address = "127.0.0.1:9001"
site = "shop"

[[node]]
name = "movable"
address = "127.0.0.1:9002"
site = "shop"
transport = "shm"
sidecar = "/dev/shm/rdmalb-role-test"
"#;
    crate::fixtures::config(text)
}

fn picks(b: &Backends, site: usize) -> Vec<String> {
    let mut seen: Vec<String> = (0..8)
        .filter_map(|_| b.pick(site, &[]).ok().map(|p| p.node.name.clone()))
        .collect();
    seen.sort();
    seen.dedup();
    seen
}

#[test]
fn a_moved_node_serves_its_new_site_only_after_apply_and_checks() {
    let b = Backends::build(&config(), None);
    let movable = Arc::clone(&b.nodes()[1]);
    assert_eq!(picks(&b, 0), ["movable", "static"]);
    assert!(b.pick(1, &[]).is_err(), "blog has no node yet");

    // The same site as configured, applied: nothing changes.
    assert!(!movable.follow_role(Some(0), true));
    assert!(movable.is_up());

    // Claimed for blog (SWITCHING): shop loses it at once, blog not yet.
    assert!(movable.follow_role(Some(1), false));
    assert_eq!(picks(&b, 0), ["static"]);
    assert!(b.pick(1, &[]).is_err());
    assert_eq!(movable.health().down_reason, Some(DownReason::Role));
    assert_eq!(movable.assigned_site(), Some(1));
    assert_eq!(b.site_of(&movable).map(|s| s.name.as_str()), Some("blog"));

    // Applied, but not yet checked for blog.
    assert!(movable.follow_role(Some(1), true));
    assert!(b.pick(1, &[]).is_err());
    movable.record_check(Ok(()));
    assert!(b.pick(1, &[]).is_err(), "rise = 2");
    movable.record_check(Ok(()));
    assert_eq!(picks(&b, 1), ["movable"]);
    assert_eq!(picks(&b, 0), ["static"]);

    // Back to the idle pool: serves nothing.
    assert!(movable.follow_role(None, true));
    assert!(b.pick(1, &[]).is_err());
    assert_eq!(picks(&b, 0), ["static"]);
}

#[test]
fn nodes_without_a_window_keep_their_configured_site() {
    let b = Backends::build(&config(), None);
    let s = &b.nodes()[0];
    assert_eq!(s.assigned_site(), Some(0));
    assert!(s.serves(0) && !s.serves(1));
    assert_eq!(
        b.nodes_of(1).len(),
        1,
        "blog's only candidate is the movable node"
    );
}
