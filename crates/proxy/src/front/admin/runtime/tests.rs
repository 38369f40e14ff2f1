//! Runtime commands on a real snapshot: parsing, HAProxy's spellings, the
//! refusals, and `show stat`'s layout.

use std::sync::Arc;

use arc_swap::ArcSwap;
use metrics_exporter_prometheus::PrometheusBuilder;

use super::*;
use crate::balance::Backends;

/// An admin state over sites `shop` (nodes a, weight 4, and b, backup)
/// and `blog` (node c, balanced by source address).
pub(crate) fn admin() -> Admin {
    let mut text = String::from("[[listener]]\nlisten = \"127.0.0.1:8080\"\n");
    text.push_str(&crate::fixtures::site("shop", &["shop.example.com"]));
    text.push_str(&crate::fixtures::site("blog", &["blog.example.com"]));
    text.push_str("balance = \"source\"\n");
    text.push_str(&crate::fixtures::node("a", "127.0.0.1:9001", "shop"));
    text.push_str("weight = 4\n");
    text.push_str(&crate::fixtures::node("b", "127.0.0.1:9002", "shop"));
    text.push_str("backup = true\n");
    text.push_str(&crate::fixtures::node("c", "127.0.0.1:9003", "blog"));
    let config = crate::fixtures::config(&text);
    let backends = Backends::build(&config, None);
    Admin::new(
        Arc::new(ArcSwap::from_pointee(config)),
        Arc::new(ArcSwap::from_pointee(backends)),
        PrometheusBuilder::new().build_recorder().handle(),
    )
}

fn node(a: &Admin, name: &str) -> Arc<NodeState> {
    find(a, name).unwrap()
}

#[tokio::test]
async fn states_by_our_words_and_haproxys() {
    let a = admin();
    assert_eq!(run(&a, "set node a state drain").await.unwrap(), "");
    assert_eq!(node(&a, "a").admin_state(), AdminState::Drain);
    run(&a, "set server shop/a state maint").await.unwrap();
    assert_eq!(node(&a, "a").admin_state(), AdminState::Maint);
    run(&a, "enable server shop/a").await.unwrap();
    assert_eq!(node(&a, "a").admin_state(), AdminState::Ready);
    run(&a, "disable server shop/a").await.unwrap();
    assert_eq!(node(&a, "a").admin_state(), AdminState::Maint);
}

#[tokio::test]
async fn weights_absolute_and_relative() {
    let a = admin();
    run(&a, "set weight shop/a 50%").await.unwrap();
    assert_eq!(run(&a, "get weight a").await.unwrap(), "2 (initial 4)\n");
    run(&a, "set node a weight 256").await.unwrap();
    assert_eq!(node(&a, "a").weight(), 256);
    run(&a, "set server shop/a weight 0").await.unwrap();
    assert_eq!(node(&a, "a").weight(), 0);
    let (status, message) = run(&a, "set node a weight 257").await.unwrap_err();
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        message,
        "Absolute weight can only be between 0 and 256 inclusive."
    );
    assert!(run(&a, "set node a weight -1").await.is_err());
    assert!(run(&a, "set node a weight x%").await.is_err());
}

#[tokio::test]
async fn unknown_names_and_wrong_sites_are_named() {
    let a = admin();
    let (status, message) = run(&a, "set node zz state drain").await.unwrap_err();
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(message, "no node named `zz`");
    // HAProxy's answers for `<bk>/<srv>`: no such backend, no such
    // server in it (a node of another site included).
    let (status, message) = run(&a, "set server blog/a state drain").await.unwrap_err();
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(message, "No such server.");
    let (_, message) = run(&a, "get weight nope/a").await.unwrap_err();
    assert_eq!(message, "No such backend.");
    let (status, message) = run(&a, "set node a state asleep").await.unwrap_err();
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        message,
        "'set server <srv> state' expects 'ready', 'drain' and 'maint'."
    );
    let (status, message) = run(&a, "show stat nope -1 -1").await.unwrap_err();
    assert_eq!(
        (status, message.as_str()),
        (StatusCode::NOT_FOUND, "No such proxy.")
    );
    let (status, _) = run(&a, "move node a site blog").await.unwrap_err();
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    let (_, message) = run(&a, "set node").await.unwrap_err();
    assert!(
        message.starts_with(
            "Unknown command, but maybe one of the following ones is a better match:\n"
        ),
        "{message}"
    );
}

#[tokio::test]
async fn show_stat_has_haproxys_layout() {
    let a = admin();
    node(&a, "a").set_admin_state(AdminState::Drain, ControlSource::Runtime);
    let csv = run(&a, "show stat").await.unwrap();
    let mut lines = csv.lines();
    let header = lines.next().unwrap();
    assert!(header.starts_with("# pxname,svname,qcur,qmax,scur,smax,slim,stot,"));
    let rows: Vec<&str> = lines.filter(|l| !l.is_empty()).collect();
    let names: Vec<String> = rows
        .iter()
        .map(|r| r.split(',').take(2).collect::<Vec<_>>().join("/"))
        .collect();
    assert_eq!(
        names,
        ["shop/a", "shop/b", "shop/BACKEND", "blog/c", "blog/BACKEND"]
    );
    for r in &rows {
        // One field per column, each line ending with a comma as HAProxy's.
        assert_eq!(r.matches(',').count(), stat::COLUMNS.len(), "{r}");
    }
    let col = |row: &str, name: &str| -> String {
        let i = stat::COLUMNS.iter().position(|c| *c == name).unwrap();
        row.split(',').nth(i).unwrap().to_string()
    };
    assert_eq!(col(rows[0], "status"), "DRAIN");
    assert_eq!(col(rows[0], "weight"), "4");
    assert_eq!(
        (col(rows[1], "act"), col(rows[1], "bck")),
        ("0".into(), "1".into())
    );
    // Only the backup admits: the backend is up on it alone.
    assert_eq!(col(rows[2], "status"), "UP");
    assert_eq!(
        (col(rows[2], "act"), col(rows[2], "bck")),
        ("0".into(), "1".into())
    );
    assert_eq!(col(rows[2], "algo"), "roundrobin");
    // A site's own balance: its hash key.
    assert_eq!(col(rows[4], "algo"), "source");
    assert_eq!(col(rows[0], "addr"), "127.0.0.1:9001");
    // The answer ends with its last row; the door adds the empty line.
    assert!(csv.ends_with(",\n"));
}

#[tokio::test]
async fn show_info_names_the_process() {
    let a = admin();
    let info = run(&a, "show info").await.unwrap();
    assert!(info.starts_with("Name: rdmalb\nVersion: "), "{info}");
    assert!(info.contains(&format!("Pid: {}\n", std::process::id())));
    let json: serde_json::Value =
        serde_json::from_str(&run(&a, "show info json").await.unwrap()).unwrap();
    let nodes = json
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["field"]["name"] == "Nodes")
        .unwrap();
    assert_eq!(
        nodes["value"],
        serde_json::json!({ "type": "u32", "value": 3 })
    );
}

/// The body of an answer.
async fn body_text(r: Response<Full<Bytes>>) -> String {
    let bytes = r.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Issue 27, defect 7: one body of thousands of `show stat;` ran them all
/// without a yield, building hundreds of MB.
#[tokio::test]
async fn one_request_takes_a_bounded_number_of_commands() {
    let body = "show stat;".repeat(MAX_COMMANDS + 1);
    let (status, message) = split(&body).unwrap_err();
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(message.contains("at most 100"), "{message}");
    assert!(message.contains("none ran"), "{message}");
    assert_eq!(
        split(&"help\n".repeat(MAX_COMMANDS)).unwrap().len(),
        MAX_COMMANDS
    );
    assert_eq!(split(" ;\n ").unwrap_err().0, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn an_answer_past_its_bound_is_cut_and_says_what_ran() {
    let a = admin();
    let one = run(&a, "show stat").await.unwrap().len();
    let commands = vec!["show stat"; 10];
    let r = run_all(&a, &commands, one * 2 + one / 2).await;
    assert_eq!(r.status(), StatusCode::INSUFFICIENT_STORAGE);
    let text = body_text(r).await;
    assert!(text.contains("answer cut"), "{text}");
    assert!(
        text.ends_with(
            "# 3 of 10 commands ran; stopped at command 3 (`show stat`); the rest were not run\n"
        ),
        "{text}"
    );
    assert!(text.len() < one * 3, "{}", text.len());
}

#[tokio::test]
async fn a_failed_command_stops_the_rest_and_says_so() {
    let a = admin();
    let r = run_all(
        &a,
        &[
            "set node a state drain",
            "set node zz state drain",
            "set node c state drain",
        ],
        MAX_ANSWER,
    )
    .await;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let text = body_text(r).await;
    assert!(text.contains("no node named `zz`"), "{text}");
    assert!(
        text.contains("# 1 of 3 commands ran; stopped at command 2"),
        "{text}"
    );
    assert_eq!(node(&a, "a").admin_state(), AdminState::Drain);
    assert_eq!(node(&a, "c").admin_state(), AdminState::Ready);
    // A single command's refusal stays HAProxy's one line.
    let r = run_all(&a, &["set node zz state drain"], MAX_ANSWER).await;
    assert_eq!(body_text(r).await, "no node named `zz`\n");
}

/// A site that compresses leaves its BACKEND row's compression columns
/// empty (not counted yet); one that does not says 0, HAProxy's value
/// without compression.
#[tokio::test]
async fn compression_columns_are_zero_only_where_nothing_compresses() {
    let mut text = String::from("[[listener]]\nlisten = \"127.0.0.1:8080\"\n");
    text.push_str(&crate::fixtures::site("shop", &["shop.example.com"]));
    text.push_str("[site.compression]\ncodings = [\"gzip\"]\n");
    text.push_str(&crate::fixtures::site("blog", &["blog.example.com"]));
    text.push_str("balance = \"source\"\n");
    text.push_str(&crate::fixtures::node("a", "127.0.0.1:9001", "shop"));
    text.push_str(&crate::fixtures::node("c", "127.0.0.1:9003", "blog"));
    let config = crate::fixtures::config(&text);
    let backends = Backends::build(&config, None);
    let a = Admin::new(
        Arc::new(ArcSwap::from_pointee(config)),
        Arc::new(ArcSwap::from_pointee(backends)),
        PrometheusBuilder::new().build_recorder().handle(),
    );
    let rows = stat::rows(&a);
    let backend = |site: &str| {
        rows.iter()
            .find(|r| {
                r.kind == stat::Kind::Backend
                    && r.get("pxname") == Some(&stat::Value::Text(site.into()))
            })
            .unwrap()
    };
    assert_eq!(backend("shop").get("comp_in"), None);
    assert_eq!(backend("blog").get("comp_in"), Some(&stat::Value::Num(0)));
}

/// `show sess`: the connections open per listener and the requests in
/// flight per node against its cap, as they are now.
#[tokio::test]
async fn show_sess_counts_what_is_in_flight() {
    let mut a = admin();
    let open = Arc::new(std::sync::atomic::AtomicUsize::new(3));
    a.frontends.push(crate::front::listener::FrontendStats {
        name: "web".into(),
        open,
        counters: Default::default(),
    });
    let backends = a.backends.load_full();
    let _held = [
        backends.pick(0, &[]).unwrap(),
        backends.pick(0, &[]).unwrap(),
    ];
    assert_eq!(
        run(&a, "show sess").await.unwrap(),
        "# listener connections\nweb 3\n\
         # site node inflight max_inflight\nshop a 2 0\nshop b 0 0\nblog c 0 0\n"
    );
}
