//! `send_proxy` on nodes, `accept_proxy` and `accept_proxy_from` on listeners.

use super::*;

#[test]
fn check_send_proxy_and_accept_proxy_default_off_and_parse() {
    let c = ok(BASE);
    assert!(c.nodes[0].check);
    assert_eq!(c.nodes[0].send_proxy, None);
    assert!(!c.listeners[0].accept_proxy);
    let c = ok(&BASE
        .replace(
            "site = \"shop\"\n",
            "site = \"shop\"\ncheck = false\nsend_proxy = \"v2\"\n",
        )
        .replace(
            "listen = \"127.0.0.1:8080\"",
            "listen = \"127.0.0.1:8080\"\naccept_proxy = true\naccept_proxy_from = [\"10.0.0.0/8\", \"::1\"]",
        ));
    assert!(!c.nodes[0].check);
    assert_eq!(c.nodes[0].send_proxy, Some(SendProxy::V2));
    assert!(c.listeners[0].accept_proxy);
    let from = &c.listeners[0].accept_proxy_from;
    assert!(from[0].contains("10.1.2.3".parse().unwrap()));
    assert!(from[1].contains("::1".parse().unwrap()));
    assert!(!from
        .iter()
        .any(|n| n.contains("192.0.2.1".parse().unwrap())));
}

/// Issue 27, defect 4: any peer could send a PROXY header and so claim any
/// client address; the peers allowed are now said per listener.
#[test]
fn accept_proxy_needs_the_peers_allowed_to_send_the_header() {
    let listen = "listen = \"127.0.0.1:8080\"";
    rejects(
        &BASE.replace(listen, &format!("{listen}\naccept_proxy = true")),
        "listener[0].accept_proxy_from",
        "trusts any peer",
    );
    rejects(
        &BASE.replace(
            listen,
            &format!("{listen}\naccept_proxy_from = [\"10.0.0.0/8\"]"),
        ),
        "listener[0].accept_proxy_from",
        "without accept_proxy = true",
    );
    rejects(
        &BASE.replace(
            listen,
            &format!("{listen}\naccept_proxy = true\naccept_proxy_from = [\"10.0.0.0/33\"]"),
        ),
        "listener[0].accept_proxy_from[0]",
        "IPv4 or IPv6 network",
    );
}
