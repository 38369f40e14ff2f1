use super::*;

fn trace() -> Trace {
    let mut t = Trace::default();
    t.push("shop", "/static/1k".into());
    t.push("blog", "/dynamic/cgi?cost=10ms".into());
    t.push("shop", "/static/4k".into());
    t
}

#[test]
fn wlog_is_nul_separated_and_filters_by_site() {
    assert_eq!(
        httperf_wlog(&trace(), None),
        b"/static/1k\0/dynamic/cgi?cost=10ms\0/static/4k\0"
    );
    assert_eq!(
        httperf_wlog(&trace(), Some("shop")),
        b"/static/1k\0/static/4k\0"
    );
    assert!(httperf_wlog(&trace(), Some("nope")).is_empty());
}

#[test]
fn wrk_script_maps_sites_to_hosts() {
    let hosts = HostMap::parse("blog=blog.example.org").unwrap();
    let lua = wrk_lua(&trace(), &hosts);
    assert!(
        lua.contains(r#"local hosts = {"shop.localhost", "blog.example.org", }"#),
        "{lua}"
    );
    assert!(lua.contains(r#"{2, "/dynamic/cgi?cost=10ms"},"#), "{lua}");
    assert!(lua.contains("Host = hosts[r[1]]"));
    assert_eq!(lua_str("a\"b\\c\n"), r#""a\"b\\c\10""#);
}
