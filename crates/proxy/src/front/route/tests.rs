use super::*;

fn config(extra: &str) -> Config {
    let text = format!(
        r#"
[[listener]]
listen = "127.0.0.1:8080"

[[site]]
name = "www"
hosts = ["www.example.com", "example.com"]

[[site]]
name = "api"
hosts = ["www.example.com"]
path_prefixes = ["/api/", "/api/v2/"]

[[site]]
name = "wild"
hosts = ["*.example.com"]

[[site]]
name = "deep"
hosts = ["*.eu.example.com"]
path_prefixes = ["/static/"]
{extra}
"#
    );
    crate::fixtures::config(&text)
}

#[test]
fn exact_wildcard_prefix_and_default() {
    let c = config("");
    let t = RouteTable::build(&c);
    assert_eq!(t.route(Some("www.example.com"), "/"), Some(0));
    assert_eq!(t.route(Some("WWW.Example.com:8080"), "/x"), Some(0));
    assert_eq!(t.route(Some("www.example.com"), "/api/x"), Some(1));
    assert_eq!(t.route(Some("www.example.com"), "/api/v2/x"), Some(1));
    assert_eq!(t.route(Some("example.com."), "/"), Some(0));
    assert_eq!(t.route(Some("shop.example.com"), "/"), Some(2));
    // Longest wildcard suffix wins when its prefix matches ...
    assert_eq!(t.route(Some("a.eu.example.com"), "/static/x"), Some(3));
    // ... and falls through to the shorter wildcard when it does not.
    assert_eq!(t.route(Some("a.eu.example.com"), "/other"), Some(2));
    // A wildcard does not match the bare domain.
    assert_eq!(t.route(Some("eu.example.com"), "/static/"), Some(2));
    assert_eq!(t.route(Some("other.org"), "/"), None);
    assert_eq!(t.route(None, "/"), None);
    assert_eq!(t.route(Some(""), "/"), None);

    let c = config("[global]\ndefault_site = \"api\"\n");
    let t = RouteTable::build(&c);
    assert_eq!(t.route(Some("other.org"), "/"), Some(1));
    assert_eq!(t.route(None, "/"), Some(1));
}

#[test]
fn any_host_comes_after_exact_and_wildcard_names() {
    let c = config("[[site]]\nname = \"any\"\nhosts = [\"*\"]\npath_prefixes = [\"/static/\"]\n");
    let t = RouteTable::build(&c);
    assert_eq!(t.route(Some("other.org"), "/static/a"), Some(4));
    assert_eq!(t.route(None, "/static/a"), Some(4));
    assert_eq!(t.route(Some("other.org"), "/"), None);
    // A name with a matching entry wins over `*` ...
    assert_eq!(t.route(Some("www.example.com"), "/static/a"), Some(0));
    assert_eq!(t.route(Some("a.eu.example.com"), "/static/a"), Some(3));
    // ... and one whose entries match no path falls through to it.
    let c = config("[[site]]\nname = \"any\"\nhosts = [\"*\"]\n");
    let t = RouteTable::build(&c);
    assert_eq!(t.route(Some("other.org"), "/x"), Some(4));
}

#[test]
fn normalizes_hosts() {
    assert_eq!(
        normalize_host("Example.COM:80").as_deref(),
        Some("example.com")
    );
    assert_eq!(normalize_host("[::1]:8080").as_deref(), Some("[::1]"));
    assert_eq!(normalize_host("[::1").as_deref(), None);
    assert_eq!(normalize_host(":80").as_deref(), None);
    assert!(matches!(
        normalize_host("plain.example"),
        Some(std::borrow::Cow::Borrowed(_))
    ));
}

#[test]
fn same_authority_normalizes_case_dot_and_default_port() {
    assert!(same_authority("www.example.com", "WWW.Example.COM.", 80));
    assert!(same_authority("www.example.com:80", "www.example.com", 80));
    assert!(same_authority("www.example.com:", "www.example.com", 80));
    assert!(same_authority("a.test:443", "a.test", 443));
    assert!(same_authority("user@a.test:8080", "a.test:8080", 80));
    assert!(same_authority("[::1]:80", "[::1]", 80));
    assert!(!same_authority("a.test:443", "a.test", 80));
    assert!(!same_authority("a.test:8080", "a.test", 80));
    assert!(!same_authority("a.test", "b.test", 80));
    assert!(!same_authority("[::1]:80", "[::2]", 80));
    assert!(!same_authority("a.test:http", "a.test", 80));
    assert!(!same_authority("", "", 80));
}
