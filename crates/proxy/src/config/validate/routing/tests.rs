//! One test per rejected routing value (`[routing]`, load-index weights,
//! `node_id`): each checks the key path and that the message says what
//! would be accepted.

use crate::fixtures::{config as ok, rejects};
use std::time::Duration;

use crate::config::{Balance, Candidates, FullQueue, ReadMode, Routing, Unseen, WindowEndpoint};

const BASE: &str = r#"
[global]
balance = "weighted-least-load"

[[listener]]
listen = "127.0.0.1:8080"

[[site]]
name = "shop"
hosts = ["shop.example.com"]

[[node]]
name = "n1"
address = "127.0.0.1:9001"
site = "shop"
transport = "shm"
sidecar = "/dev/shm/rdmalb-n1"
"#;

fn routing(body: &str) -> String {
    format!("{BASE}\n[routing]\n{body}\n")
}

fn node(extra: &str) -> String {
    format!(
        "{BASE}\n[[node]]\nname = \"n2\"\naddress = \"127.0.0.1:9002\"\nsite = \"shop\"\n{extra}\n"
    )
}

#[test]
fn defaults() {
    let c = ok(BASE);
    assert_eq!(c.global.balance, Balance::WeightedLeastLoad);
    assert_eq!(c.routing, Routing::default());
    assert_eq!(c.routing.candidates, Candidates::Count(16));
    assert_eq!(c.routing.load_read, None);
    assert_eq!(c.routing.read_deadline, Duration::from_millis(5));
    assert_eq!(c.routing.staleness, Duration::from_millis(250));
    assert_eq!(c.sites[0].weights.inflight, 0.2);
    assert_eq!(c.nodes[0].node_id, None);
}

#[test]
fn default_read_mode_follows_the_transport() {
    let r = Routing::default();
    let shm = WindowEndpoint::Shm {
        path: "/dev/shm/x".into(),
    };
    let tcp = WindowEndpoint::Tcp {
        addr: "127.0.0.1:1".parse().unwrap(),
    };
    let verbs = WindowEndpoint::Verbs {
        control: "127.0.0.1:1".parse().unwrap(),
        device: None,
    };
    assert_eq!(r.mode_for(&shm), ReadMode::PerRequest);
    assert_eq!(r.mode_for(&verbs), ReadMode::PerRequest);
    assert_eq!(
        r.mode_for(&tcp),
        ReadMode::Interval(Routing::DEFAULT_TCP_INTERVAL)
    );
    // An explicit mode applies to every transport.
    let c = ok(&routing("load_read = \"interval:1s\""));
    assert_eq!(
        c.routing.mode_for(&shm),
        ReadMode::Interval(Duration::from_secs(1))
    );
    let c = ok(&routing("load_read = \"per-request\""));
    assert_eq!(c.routing.mode_for(&tcp), ReadMode::PerRequest);
}

#[test]
fn accepted_values() {
    let c = ok(&routing(
        "candidates = \"all\"\nload_read = \"interval:64ms\"\nread_deadline = \"2ms\"\nstaleness = \"1s\"",
    ));
    assert_eq!(c.routing.candidates, Candidates::All);
    assert_eq!(
        c.routing.load_read,
        Some(ReadMode::Interval(Duration::from_millis(64)))
    );
    assert_eq!(c.routing.read_deadline, Duration::from_millis(2));
    assert_eq!(c.routing.staleness, Duration::from_secs(1));
    assert_eq!(
        ok(&routing("candidates = 64")).routing.candidates,
        Candidates::Count(64)
    );
    assert_eq!(
        ReadMode::Interval(Duration::from_millis(64)).to_string(),
        "interval:64ms"
    );
    assert_eq!(ReadMode::PerRequest.to_string(), "per-request");
}

#[test]
fn candidates_one() {
    rejects(
        &routing("candidates = 1"),
        "routing.candidates",
        "from 2 to 64, or \"all\"",
    );
}

#[test]
fn candidates_zero() {
    rejects(
        &routing("candidates = 0"),
        "routing.candidates",
        "from 2 to 64",
    );
}

#[test]
fn candidates_too_many() {
    rejects(
        &routing("candidates = 65"),
        "routing.candidates",
        "from 2 to 64",
    );
}

#[test]
fn candidates_negative() {
    rejects(
        &routing("candidates = -2"),
        "routing.candidates",
        "from 2 to 64",
    );
}

#[test]
fn candidates_other_word() {
    rejects(
        &routing("candidates = \"some\""),
        "routing.candidates",
        "or \"all\"",
    );
}

#[test]
fn candidates_float() {
    rejects(
        &routing("candidates = 2.5"),
        "routing.candidates",
        "an integer",
    );
}

#[test]
fn load_read_unknown_mode() {
    rejects(
        &routing("load_read = \"sometimes\""),
        "routing.load_read",
        "expected \"per-request\" or \"interval:<duration>\"",
    );
}

#[test]
fn load_read_interval_without_duration() {
    rejects(
        &routing("load_read = \"interval:\""),
        "routing.load_read",
        "not a duration",
    );
}

#[test]
fn load_read_interval_without_unit() {
    rejects(
        &routing("load_read = \"interval:250\""),
        "routing.load_read",
        "no unit",
    );
}

#[test]
fn load_read_interval_zero() {
    rejects(
        &routing("load_read = \"interval:0ms\""),
        "routing.load_read",
        "from 1ms to 60s",
    );
}

#[test]
fn load_read_interval_too_short() {
    rejects(
        &routing("load_read = \"interval:100us\""),
        "routing.load_read",
        "from 1ms to 60s",
    );
}

#[test]
fn load_read_interval_too_long() {
    rejects(
        &routing("load_read = \"interval:2m\""),
        "routing.load_read",
        "from 1ms to 60s",
    );
}

#[test]
fn load_read_not_a_string() {
    rejects(&routing("load_read = 5"), "routing", "string");
}

#[test]
fn read_deadline_zero() {
    rejects(
        &routing("read_deadline = \"0ms\""),
        "routing.read_deadline",
        "greater than zero",
    );
}

#[test]
fn read_deadline_too_long() {
    rejects(
        &routing("read_deadline = \"2s\""),
        "routing.read_deadline",
        "at most 1s",
    );
}

#[test]
fn read_deadline_bad_text() {
    rejects(
        &routing("read_deadline = \"soon\""),
        "routing.read_deadline",
        "not a duration",
    );
}

#[test]
fn staleness_zero() {
    rejects(
        &routing("staleness = \"0s\""),
        "routing.staleness",
        "greater than zero",
    );
}

#[test]
fn staleness_too_long() {
    rejects(
        &routing("staleness = \"2h\""),
        "routing.staleness",
        "at most 3600s",
    );
}

#[test]
fn unknown_routing_key() {
    rejects(&routing("candidate = 2"), "routing", "unknown field");
}

#[test]
fn inflight_weight_accepted_and_overridden_per_site() {
    let text = BASE.replace(
        "[[site]]\nname = \"shop\"",
        "[weights]\ninflight = 1.5\n\n[[site]]\nname = \"shop\"\nweights = { cpu = 0.0 }",
    );
    let c = ok(&text);
    assert_eq!(c.sites[0].weights.inflight, 1.5);
    assert_eq!(c.sites[0].weights.window.cpu, 0.0);
}

#[test]
fn negative_inflight_weight() {
    rejects(
        &format!("{BASE}\n[weights]\ninflight = -0.5\n"),
        "weights.inflight",
        ">= 0",
    );
}

#[test]
fn infinite_weight() {
    rejects(
        &format!("{BASE}\n[weights]\nnetwork = inf\n"),
        "weights.network",
        ">= 0",
    );
}

#[test]
fn nan_weight() {
    rejects(
        &format!("{BASE}\n[weights]\nirq = nan\n"),
        "weights.irq",
        ">= 0",
    );
}

#[test]
fn all_global_weights_zero() {
    rejects(
        &format!("{BASE}\n[weights]\ncpu = 0.0\nrun_queue = 0.0\nmemory = 0.0\nnetwork = 0.0\nconnections = 0.0\nirq = 0.0\napp = 0.0\ninflight = 0.0\n"),
        "weights",
        "at least one weight > 0",
    );
}

#[test]
fn all_site_weights_zero() {
    let text = BASE.replace(
        "hosts = [\"shop.example.com\"]",
        "hosts = [\"shop.example.com\"]\nweights = { cpu = 0.0, run_queue = 0.0, memory = 0.0, network = 0.0, connections = 0.0, irq = 0.0, app = 0.0, inflight = 0.0 }",
    );
    rejects(&text, "site[0] (shop).weights", "at least one weight > 0");
}

#[test]
fn node_id_accepted() {
    let c = ok(&node(
        "transport = \"shm\"\nsidecar = \"/dev/shm/n2\"\nnode_id = 65535",
    ));
    assert_eq!(c.nodes[1].node_id, Some(65535));
}

#[test]
fn node_id_zero() {
    rejects(
        &node("transport = \"shm\"\nsidecar = \"/dev/shm/n2\"\nnode_id = 0"),
        "node[1] (n2).node_id",
        "from 1 to 65535",
    );
}

#[test]
fn node_id_too_large() {
    rejects(
        &node("transport = \"shm\"\nsidecar = \"/dev/shm/n2\"\nnode_id = 65536"),
        "node[1] (n2).node_id",
        "from 1 to 65535",
    );
}

#[test]
fn node_id_negative() {
    rejects(
        &node("transport = \"shm\"\nsidecar = \"/dev/shm/n2\"\nnode_id = -1"),
        "node[1] (n2).node_id",
        "from 1 to 65535",
    );
}

#[test]
fn node_id_without_window() {
    rejects(
        &node("node_id = 4"),
        "node[1] (n2).node_id",
        "the node has no window",
    );
}

#[test]
fn node_id_twice() {
    let text = BASE.replace(
        "sidecar = \"/dev/shm/rdmalb-n1\"",
        "sidecar = \"/dev/shm/rdmalb-n1\"\nnode_id = 4",
    );
    let text = format!("{text}\n[[node]]\nname = \"n2\"\naddress = \"127.0.0.1:9002\"\nsite = \"shop\"\ntransport = \"shm\"\nsidecar = \"/dev/shm/n2\"\nnode_id = 4\n");
    rejects(
        &text,
        "node[1] (n2).node_id",
        "also the node_id of node `n1`",
    );
}

#[test]
fn bad_balance_lists_the_new_policy() {
    rejects(
        &BASE.replace("weighted-least-load", "least-load"),
        "global.balance",
        "\"weighted-least-load\"",
    );
}

#[test]
fn shortest_wait_and_its_drain_window() {
    let c = ok(&BASE.replace("weighted-least-load", "shortest-wait"));
    assert_eq!(c.global.balance, Balance::ShortestWait);
    assert_eq!(c.routing.drain_window, Duration::from_millis(50));
    let c = ok(&routing("drain_window = \"200ms\""));
    assert_eq!(c.routing.drain_window, Duration::from_millis(200));
}

#[test]
fn drain_window_out_of_range() {
    for (v, why) in [
        ("500us", "accepted: 1ms to 10s"),
        ("1m", "accepted: 1ms to 10s"),
        ("0s", "accepted: 1ms to 10s"),
        ("soon", "soon"),
    ] {
        rejects(
            &routing(&format!("drain_window = \"{v}\"")),
            "routing.drain_window",
            why,
        );
    }
}

#[test]
fn unseen_counts_by_default_and_may_be_ignored() {
    assert_eq!(ok(BASE).routing.unseen, Unseen::Count);
    assert_eq!(
        ok(&routing("unseen = \"count\"")).routing.unseen,
        Unseen::Count
    );
    assert_eq!(
        ok(&routing("unseen = \"ignore\"")).routing.unseen,
        Unseen::Ignore
    );
}

#[test]
fn full_queue_avoids_by_default_and_may_be_ignored() {
    assert_eq!(ok(BASE).routing.full_queue, FullQueue::Avoid);
    assert_eq!(
        ok(&routing("full_queue = \"avoid\"")).routing.full_queue,
        FullQueue::Avoid
    );
    assert_eq!(
        ok(&routing("full_queue = \"ignore\"")).routing.full_queue,
        FullQueue::Ignore
    );
}

#[test]
fn full_queue_rejects_other_values() {
    for v in ["never", "Avoid", ""] {
        rejects(
            &routing(&format!("full_queue = \"{v}\"")),
            "routing.full_queue",
            "expected \"avoid\" or \"ignore\"",
        );
    }
}

#[test]
fn unseen_rejects_other_values() {
    for v in ["sometimes", "Count", ""] {
        rejects(
            &routing(&format!("unseen = \"{v}\"")),
            "routing.unseen",
            "expected \"count\" or \"ignore\"",
        );
    }
}
