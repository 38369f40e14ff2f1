use super::*;

#[test]
fn wildcard_patterns_render_with_star() {
    assert_eq!(
        pattern_text(&HostPattern::Wildcard(".example.com".into())),
        "*.example.com"
    );
    assert_eq!(
        pattern_text(&HostPattern::Exact("a.example.com".into())),
        "a.example.com"
    );
}

fn state(text: &str) -> AdminState {
    let config = crate::fixtures::config(text);
    let backends = Backends::build(&config, None);
    let metrics = metrics_exporter_prometheus::PrometheusBuilder::new()
        .build_recorder()
        .handle();
    AdminState::new(
        Arc::new(ArcSwap::from_pointee(config)),
        Arc::new(ArcSwap::from_pointee(backends)),
        metrics,
    )
}

fn two_sites() -> String {
    let mut text = String::from("[[listener]]\nname = \"web\"\nlisten = \"127.0.0.1:0\"\n");
    text.push_str(&crate::fixtures::site("shop", &["shop.test"]));
    text.push_str(&crate::fixtures::site("blog", &["blog.test"]));
    text.push_str(&crate::fixtures::node("a", "127.0.0.1:1", "shop"));
    text.push_str(&crate::fixtures::node("b", "127.0.0.1:2", "blog"));
    text
}

#[test]
fn status_says_when_it_was_made_and_where_each_node_is_assigned() {
    let s = state(&two_sites());
    let before = rdmalb_base::time::unix_now_ms();
    let doc = serde_json::to_value(status(&s)).unwrap();
    assert!(doc["generated_at_unix_ms"].as_u64().unwrap() >= before);
    // Without role words a node is assigned to its configured site.
    let a = &doc["nodes"][0];
    assert_eq!(
        (&a["assigned_site"], &a["role_applied"]),
        (&"shop".into(), &true.into())
    );
    let shop = &doc["sites"][0];
    assert_eq!(
        (&shop["nodes_assigned"], &shop["nodes_serving"]),
        (&1.into(), &1.into())
    );
    // A drained node stays assigned but takes no new requests.
    s.backends.load().nodes()[0].set_admin_state(
        crate::balance::AdminState::Drain,
        crate::balance::ControlSource::Runtime,
    );
    let doc = serde_json::to_value(status(&s)).unwrap();
    let shop = &doc["sites"][0];
    assert_eq!(
        (&shop["nodes_assigned"], &shop["nodes_serving"]),
        (&1.into(), &0.into())
    );
}

#[test]
fn status_follows_role_words_for_assigned_and_serving_nodes() {
    let s = state(&two_sites());
    let a = Arc::clone(&s.backends.load().nodes()[0]);
    // The agent read a's role word: moved to blog, not applied yet.
    a.follow_role(Some(1), false);
    let doc = serde_json::to_value(status(&s)).unwrap();
    assert_eq!(doc["nodes"][0]["assigned_site"], "blog");
    assert_eq!(doc["nodes"][0]["role_applied"], false);
    assert_eq!(doc["nodes"][0]["site"], "shop", "the configured site stays");
    let (shop, blog) = (&doc["sites"][0], &doc["sites"][1]);
    assert_eq!(shop["nodes_assigned"], 0);
    assert_eq!(
        (&blog["nodes_assigned"], &blog["nodes_serving"]),
        (&2.into(), &1.into())
    );
    a.follow_role(None, true);
    let doc = serde_json::to_value(status(&s)).unwrap();
    assert_eq!(doc["nodes"][0]["assigned_site"], serde_json::Value::Null);
}

#[test]
fn the_stats_page_is_read_only_like_status() {
    let s = state(&two_sites());
    let req = |method: Method, path: &str| {
        Request::builder()
            .method(method)
            .uri(path)
            .body(())
            .unwrap()
    };
    for m in [Method::GET, Method::HEAD] {
        let r = handle(&s, &req(m, "/stats?refresh=1"));
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(
            r.headers()[header::CONTENT_TYPE],
            "text/html; charset=utf-8"
        );
        assert_eq!(r.headers()[header::CACHE_CONTROL], "no-store");
        assert!(r.headers().contains_key(header::CONTENT_SECURITY_POLICY));
    }
    let r = handle(&s, &req(Method::POST, "/stats"));
    assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(r.headers()[header::ALLOW], "GET, HEAD");
    assert_eq!(
        handle(&s, &req(Method::GET, "/stats/x")).status(),
        StatusCode::NOT_FOUND
    );
}
