//! Picks with a request's key: a site's own policy, a hash key choosing
//! the same node every time (and another once that one is tried), a
//! cookie's node kept while usable and left when down.

use super::*;
use crate::balance::control::Source;
use crate::balance::sticky::{Move, Pinned};

fn keyed_config() -> Config {
    let text = r#"
[global]
balance = "roundrobin"

[[listener]]
listen = "127.0.0.1:8080"

[[site]]
name = "shop"
hosts = ["shop.example.com"]
balance = "leastconn"

[site.sticky]
cookie = "SRV"

[[site]]
name = "cache"
hosts = ["cache.example.com"]
balance = "uri"

[site.hash]
type = "consistent"
"#;
    let mut text = text.to_string();
    for (name, port, site) in [
        ("a", 9101, "shop"),
        ("b", 9102, "shop"),
        ("c", 9103, "cache"),
        ("d", 9104, "cache"),
        ("e", 9105, "cache"),
    ] {
        text.push_str(&crate::fixtures::node(
            name,
            format!("127.0.0.1:{port}"),
            site,
        ));
        text.push_str(&format!("check = false\ncookie = \"{name}\"\n"));
    }
    crate::fixtures::config(&text)
}

#[tokio::test]
async fn each_site_balances_with_its_own_algorithm() {
    let b = Backends::build(&keyed_config(), None);
    assert_eq!(b.balance(), "roundrobin");
    assert_eq!(b.site_balance(0), "leastconn");
    assert_eq!(b.site_balance(1), "uri");
    // leastconn: with a held on a, every new pick goes to b.
    let held = b.pick_queued(0, &[]).await.unwrap();
    for _ in 0..5 {
        let p = b.pick_queued(0, &[]).await.unwrap();
        assert_ne!(p.node.index, held.node.index);
    }
}

#[tokio::test]
async fn a_hash_key_picks_the_same_node_and_walks_on_when_tried() {
    let b = Backends::build(&keyed_config(), None);
    let key = PickKey {
        hash: Some(0xdead_beef),
        pinned: None,
    };
    let (first, how) = b.pick_for(1, &[], &key).await.unwrap();
    assert_eq!(how, None);
    for _ in 0..10 {
        let (p, _) = b.pick_for(1, &[], &key).await.unwrap();
        assert_eq!(p.node.index, first.node.index);
    }
    let (other, _) = b.pick_for(1, &[first.node.index], &key).await.unwrap();
    assert_ne!(other.node.index, first.node.index);
}

#[tokio::test]
async fn a_cookies_node_keeps_the_request_until_it_is_down() {
    let b = Backends::build(&keyed_config(), None);
    let a = b.cookie_node(0, b"a").unwrap();
    assert_eq!(b.cookie_node(0, b"zz"), None);
    assert_eq!(b.cookie_node(0, b"c"), None, "c is another site's node");
    assert_eq!(b.node_cookie(0, a), Some("a"));
    let key = PickKey {
        hash: None,
        pinned: Some(a),
    };
    for _ in 0..5 {
        let (p, how) = b.pick_for(0, &[], &key).await.unwrap();
        assert_eq!((p.node.index, how), (a, Some(Pinned::Kept)));
    }
    // Tried already (a retry): balanced, and not to it.
    let (p, how) = b.pick_for(0, &[a], &key).await.unwrap();
    assert_ne!(p.node.index, a);
    assert_eq!(how, None);
    // In maintenance: the session leaves it.
    b.nodes()[a].set_admin_state(crate::balance::AdminState::Maint, Source::Runtime);
    let (p, how) = b.pick_for(0, &[], &key).await.unwrap();
    assert_ne!(p.node.index, a);
    assert_eq!(how, Some(Pinned::Left(Move::Down)));
}
