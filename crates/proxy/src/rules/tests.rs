//! The matcher against HAProxy's documented semantics (case, ports in
//! Host, `-m dom` boundaries, `path_dir`), maps, templates, and rule sets
//! compiled from TOML.

use std::net::IpAddr;
use std::path::Path;

use http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use proptest::prelude::*;

use super::pattern::{text_match, MatchKind, Network, Patterns};
use super::*;

fn p(kind: MatchKind, values: &[&str], icase: bool) -> Patterns {
    let v: Vec<String> = values.iter().map(|s| s.to_string()).collect();
    Patterns::compile(kind, &v, icase).unwrap()
}

#[test]
fn exact_match_keeps_the_port_and_minds_case_unless_told() {
    let host = p(MatchKind::Exact, &["example.com"], false);
    assert!(host.text("example.com"));
    assert!(
        !host.text("example.com:80"),
        "hdr(host) compares the whole value, port included"
    );
    assert!(!host.text("Example.com"));
    let icase = p(MatchKind::Exact, &["Example.COM"], true);
    assert!(icase.text("example.com"));
    assert!(icase.text("EXAMPLE.com"));
    let long = "a".repeat(300);
    let many = p(MatchKind::Exact, &[long.as_str()], true);
    assert!(many.text(&long.to_uppercase()));
}

#[test]
fn domain_match_is_bounded_by_dots_slashes_and_colons() {
    let d = p(MatchKind::Domain, &["example.com"], true);
    for yes in [
        "example.com",
        "www.example.com",
        "example.com:8080",
        "a.b.EXAMPLE.com",
        "/example.com/",
    ] {
        assert!(d.text(yes), "{yes}");
    }
    for no in [
        "myexample.com",
        "example.community",
        "example.co",
        "wwwexample.com",
    ] {
        assert!(!d.text(no), "{no}");
    }
    // Delimiters around the pattern are ignored.
    let dotted = p(MatchKind::Domain, &[".example.com"], false);
    assert!(dotted.text("www.example.com"));
    assert!(dotted.text("example.com"));
    // A word in the middle of the name.
    let word = p(MatchKind::Domain, &["www"], false);
    assert!(word.text("www.example.com"));
    assert!(!word.text("wwww.example.com"));
}

#[test]
fn dir_match_is_bounded_by_slashes_and_the_query() {
    let d = p(MatchKind::Dir, &["/images/"], false);
    for yes in [
        "/images",
        "/images/a.png",
        "/static/images/a.png",
        "/a/images?x",
        "images",
    ] {
        assert!(d.text(yes), "{yes}");
    }
    for no in ["/imagesx/a", "/myimages/a", "/image/a"] {
        assert!(!d.text(no), "{no}");
    }
}

#[test]
fn prefix_suffix_substring_and_regex() {
    assert!(text_match(MatchKind::Prefix, false, "/admin/x", "/admin"));
    assert!(!text_match(MatchKind::Prefix, false, "/Admin/x", "/admin"));
    assert!(text_match(MatchKind::Prefix, true, "/Admin/x", "/admin"));
    assert!(text_match(MatchKind::Suffix, true, "/a.PNG", ".png"));
    assert!(text_match(MatchKind::Substring, false, "curl/8.0", "curl"));
    let re = p(MatchKind::Regex, &["^/api/v[0-9]+/"], false);
    assert!(re.text("/api/v2/users"));
    assert!(!re.text("/api/vx/users"));
    let re = p(MatchKind::Regex, &["bot"], true);
    assert!(re.text("GoogleBOT"));
    assert!(Patterns::compile(MatchKind::Regex, &["(".to_string()], false).is_err());
}

#[test]
fn networks_mask_host_bits_as_haproxy_does() {
    let n = Network::parse("10.1.2.3/8").unwrap();
    assert!(n.contains("10.200.0.1".parse().unwrap()));
    assert!(!n.contains("11.0.0.1".parse().unwrap()));
    assert!(n.contains("::ffff:10.0.0.9".parse().unwrap()));
    let m = Network::parse("192.168.0.0/255.255.0.0").unwrap();
    assert!(m.contains("192.168.9.9".parse().unwrap()));
    let v6 = Network::parse("2001:db8::/32").unwrap();
    assert!(v6.contains("2001:db8:1::1".parse().unwrap()));
    assert!(!v6.contains("10.0.0.1".parse().unwrap()));
    assert!(Network::parse("10.0.0.0/33").is_err());
    assert!(Network::parse("host").is_err());
}

#[test]
fn integers_take_ranges_and_operators() {
    let p = p(MatchKind::Int, &["200:299", "gt", "499"], false);
    assert!(p.int(204));
    assert!(p.int(503));
    assert!(!p.int(404));
}

proptest! {
    /// `-m dom` with a name equals "the name, or ends with `.name`, or
    /// starts with `name.`/`name:`" for host names built from labels.
    #[test]
    fn domain_match_on_host_names(labels in proptest::collection::vec("[a-c]{1,3}", 1..4), pat in "[a-c]{1,3}(\\.[a-c]{1,3})?", port in proptest::option::of(1u16..9999)) {
        let host = labels.join(".");
        let sample = match port { Some(p) => format!("{host}:{p}"), None => host.clone() };
        let got = text_match(MatchKind::Domain, false, &sample, &pat);
        let words: Vec<&str> = host.split('.').collect();
        let pw: Vec<&str> = pat.split('.').collect();
        let want = words.windows(pw.len()).any(|w| w == pw.as_slice());
        prop_assert_eq!(got, want, "{} vs {}", sample, pat);
    }

    /// Case-insensitive exact matching agrees with comparing lower-cased.
    #[test]
    fn icase_exact_is_ascii_lowercase_equality(a in "[a-zA-Z.]{0,12}", b in "[a-zA-Z.]{0,12}") {
        let set = Patterns::compile(MatchKind::Exact, std::slice::from_ref(&a), true).unwrap();
        prop_assert_eq!(set.text(&b), a.eq_ignore_ascii_case(&b));
    }
}

fn compile(toml_text: &str, dir: &Path) -> Result<crate::config::Config, String> {
    let base = format!(
        "[[listener]]\nlisten = \"127.0.0.1:0\"\n[[site]]\nname = \"app\"\nhosts = [\"app.example.com\"]\n[[site]]\nname = \"admin\"\nhosts = [\"admin.example.com\"]\n[global]\ndefault_site = \"app\"\n{toml_text}"
    );
    crate::config::parse(&base, &dir.join("rdmalb.toml")).map_err(|e| e.to_string())
}

struct Req {
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    client: IpAddr,
    tls: bool,
}

fn req(method: &str, target: &str, host: &str) -> Req {
    let mut headers = HeaderMap::new();
    headers.insert(http::header::HOST, HeaderValue::from_str(host).unwrap());
    Req {
        method: method.parse().unwrap(),
        uri: target.parse().unwrap(),
        headers,
        client: "192.0.2.10".parse().unwrap(),
        tls: false,
    }
}

impl Req {
    /// Runs request rules `list` on the request as the proxy does (on its
    /// `http::Request`), keeping what they changed.
    fn run_rules(
        &mut self,
        rules: &Rules,
        list: &[crate::rules::Rule],
        conn: &Conn<'_>,
    ) -> Option<Answer> {
        let mut head = http::Request::new(());
        *head.method_mut() = self.method.clone();
        *head.uri_mut() = std::mem::take(&mut self.uri);
        *head.headers_mut() = std::mem::take(&mut self.headers);
        let said = rules.run_request(list, conn, &mut head, &mut None);
        self.uri = std::mem::take(head.uri_mut());
        self.headers = std::mem::take(head.headers_mut());
        said
    }
}

fn run(rules: &Rules, r: &mut Req) -> Option<Answer> {
    let conn = Conn {
        client: r.client,
        listener: "web",
        tls: r.tls,
        sni: None,
        cert: ClientCert::default(),
        now: crate::rules::stick::now_ms(),
        recent: None,
    };
    r.run_rules(rules, &rules.request, &conn)
}

#[test]
fn admin_protection_redirects_and_headers_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let rules = r#"
[[acl]]
name = "admin_path"
fetch = "path"
match = "prefix"
values = ["/admin"]
[[acl]]
name = "office"
fetch = "src"
values = ["192.0.2.0/24"]
[[acl]]
name = "legacy"
fetch = "host"
values = ["old.example.com"]
ignore_case = true
[[request_rule]]
action = "deny"
if = "admin_path !office"
[[request_rule]]
action = "redirect"
prefix = "https://www.example.com"
code = 301
if = "legacy"
[[request_rule]]
action = "set-header"
name = "X-Forwarded-Proto"
value = "{scheme}"
"#;
    // A key no action has is named with its rule.
    let err = compile(
        &format!("{rules}[[request_rule]]\naction = \"redirect\"\nscheme = \"https\"\nunless = {{ fetch = \"tls\" }}\nif_not_used = 1\n"),
        dir.path(),
    )
    .unwrap_err();
    assert!(err.contains("request_rule[3]"), "{err}");
    assert!(err.contains("if_not_used"), "{err}");
    let cfg = compile(rules, dir.path()).unwrap();
    let rules = &cfg.rules;

    let mut r = req("GET", "/admin/x", "app.example.com");
    assert!(run(rules, &mut r).is_none(), "from the office");
    assert_eq!(r.headers["x-forwarded-proto"], "http");
    r.client = "198.51.100.1".parse().unwrap();
    assert_eq!(run(rules, &mut r).unwrap().status, StatusCode::FORBIDDEN);

    let mut r = req("GET", "/a/b?x=1", "OLD.example.com");
    let a = run(rules, &mut r).unwrap();
    assert_eq!(a.status, StatusCode::MOVED_PERMANENTLY);
    assert_eq!(a.headers["location"], "https://www.example.com/a/b?x=1");
    // Port kept in Host: hdr(host) does not match.
    let mut r = req("GET", "/", "old.example.com:8080");
    assert!(run(rules, &mut r).is_none());
}

#[test]
fn redirect_locations_follow_haproxy() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = compile(
        r#"
[[request_rule]]
action = "redirect"
scheme = "https"
code = 308
if = { fetch = "path", match = "prefix", values = ["/s"] }
[[request_rule]]
action = "redirect"
prefix = "/"
drop_query = true
append_slash = true
if = { fetch = "path", match = "prefix", values = ["/dir"] }
[[request_rule]]
action = "redirect"
location = "https://{host|lower}/new{path}"
if = { fetch = "path", values = ["/old"] }
"#,
        dir.path(),
    )
    .unwrap();
    let loc = |target: &str, host: &str| {
        let mut r = req("GET", target, host);
        let a = run(&cfg.rules, &mut r).unwrap();
        (
            a.status.as_u16(),
            a.headers["location"].to_str().unwrap().to_string(),
        )
    };
    assert_eq!(
        loc("/s?q=1", "a.example.com"),
        (308, "https://a.example.com/s?q=1".into())
    );
    // The Host as sent, port included (what HAProxy 2.6 writes).
    assert_eq!(
        loc("/s", "a.example.com:80"),
        (308, "https://a.example.com:80/s".into())
    );
    assert_eq!(loc("/dir?x", "a"), (302, "/dir/".into()));
    assert_eq!(
        loc("/old", "A.Example.com"),
        (302, "https://a.example.com/new/old".into())
    );
}

#[test]
fn maps_choose_sites_and_fill_headers() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("hosts.map"),
        "# host → site\napp.example.com app\nadmin.example.com   admin\n\nwww.example.org app\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("paths.map"),
        "/adm admin\n/administration app\n",
    )
    .unwrap();
    let cfg = compile(
        r#"
[[map]]
name = "hosts"
file = "hosts.map"
[[map]]
name = "paths"
file = "paths.map"
match = "prefix"
[[site_rule]]
site = "{path|map:paths}"
if = { fetch = "path", match = "prefix", values = ["/adm"] }
[[site_rule]]
site = "{host|lower|map:hosts:nosuch}"
[[request_rule]]
action = "set-header"
name = "X-Site"
value = "{host|lower|map:hosts:none}"
"#,
        dir.path(),
    )
    .unwrap();
    let rules = &cfg.rules;
    let conn = Conn {
        client: "127.0.0.1".parse().unwrap(),
        listener: "web",
        tls: false,
        sni: None,
        cert: ClientCert::default(),
        now: crate::rules::stick::now_ms(),
        recent: None,
    };
    let choose = |target: &str, host: &str| {
        let r = req("GET", target, host);
        rules.choose_site(&conn, &r.method, &r.uri, &r.headers, &None)
    };
    assert_eq!(choose("/", "ADMIN.example.com"), Chosen::Site(1));
    assert_eq!(choose("/", "www.example.org"), Chosen::Site(0));
    assert_eq!(
        choose("/", "other.example.org"),
        Chosen::Default,
        "an unknown site name: the default"
    );
    // The longest prefix wins in a prefix map.
    assert_eq!(
        choose("/administration/x", "admin.example.com"),
        Chosen::Site(0)
    );
    assert_eq!(choose("/adm/x", "app.example.com"), Chosen::Site(1));

    let mut r = req("GET", "/", "admin.example.com");
    assert!(run(rules, &mut r).is_none());
    assert_eq!(r.headers["x-site"], "admin");
    let mut r = req("GET", "/", "zzz");
    run(rules, &mut r);
    assert_eq!(r.headers["x-site"], "none");

    let m = rules.map("hosts").unwrap();
    m.change(&MapEdit::Add("new.example.com".into(), "admin".into()))
        .unwrap();
    assert_eq!(choose("/", "new.example.com"), Chosen::Site(1));
    m.change(&MapEdit::Set("new.example.com".into(), "app".into()))
        .unwrap();
    assert_eq!(choose("/", "new.example.com"), Chosen::Site(0));
    m.change(&MapEdit::Del("new.example.com".into())).unwrap();
    assert_eq!(choose("/", "new.example.com"), Chosen::Default);
    assert!(m.change(&MapEdit::Del("new.example.com".into())).is_err());
}

#[test]
fn a_large_host_map_loads_and_looks_up_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let text: String = (0..100_000)
        .map(|i| format!("host{i}.example.com site{}\n", i % 7))
        .collect();
    let file = dir.path().join("big.map");
    std::fs::write(&file, text).unwrap();
    let m = Map::load("big", &file, MatchKind::Exact).unwrap();
    assert_eq!(m.snapshot().entries().len(), 100_000);
    assert_eq!(
        m.with("host99999.example.com", |v| v.map(str::to_string)),
        Some("site4".into())
    );
    assert!(!m.with("host100000.example.com", |v| v.is_some()));
}

#[test]
fn paths_queries_and_header_rewrites() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = compile(
        r#"
[[request_rule]]
action = "replace-path"
regex = "^/api/v1/(.*)"
replacement = "/v1/$1"
[[request_rule]]
action = "set-query"
value = "from={src}"
if = { fetch = "param", param = "debug", values = ["1"] }
[[request_rule]]
action = "del-header"
name = "X-Internal"
[[request_rule]]
action = "replace-header"
name = "User-Agent"
regex = "curl/.*"
replacement = "curl"
[[request_rule]]
action = "add-header"
name = "X-Cookie"
value = "{cookie.session}"
if = { fetch = "cookie", cookie = "session", match = "found" }
"#,
        dir.path(),
    )
    .unwrap();
    let mut r = req("GET", "/api/v1/users?debug=1", "a");
    r.headers
        .insert("x-internal", HeaderValue::from_static("1"));
    r.headers
        .insert("user-agent", HeaderValue::from_static("curl/8.5"));
    r.headers
        .insert("cookie", HeaderValue::from_static("a=b; session=xyz"));
    assert!(run(&cfg.rules, &mut r).is_none());
    assert_eq!(r.uri, "/v1/users?from=192.0.2.10");
    assert!(!r.headers.contains_key("x-internal"));
    assert_eq!(r.headers["user-agent"], "curl");
    assert_eq!(r.headers["x-cookie"], "xyz");
}

#[test]
fn basic_auth_checks_bcrypt_and_sha_crypt_users() {
    let dir = tempfile::tempdir().unwrap();
    let bcrypt_hash = bcrypt::hash("s3cret", 4).unwrap();
    // `openssl passwd -6 -salt saltsalt pass` and `-5`: SHA-512-crypt and
    // SHA-256-crypt as crypt(3) writes them.
    let sha = "$6$saltsalt$KN.twvCyfwE67paW76hS2/bacYkY9PxIhxqYG9vL5bZmIwWBGDJ6mu4HlCosKUBfQwVXKXxXVXPcqdwd1Ip0X/";
    let sha256 = "$5$saltsalt$9k0iflfLhuazVMAUTm0egnVlpP5ays5xBLqSJuoPfB9";
    // A published bcrypt test vector (`U*U`, cost 5, `$2a$`).
    let vector = "$2a$05$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW";
    let cfg = compile(
        &format!(
            r#"
[[userlist]]
name = "admins"
users = [{{ name = "alice", password = "{bcrypt_hash}" }}, {{ name = "bob", password = "{sha}" }}, {{ name = "carol", insecure_password = "plain" }}, {{ name = "dan", password = "{sha256}" }}, {{ name = "erin", password = "{vector}" }}]
[[request_rule]]
action = "auth"
realm = "Admin"
userlist = "admins"
"#
        ),
        dir.path(),
    )
    .unwrap();
    let try_auth = |cred: Option<&str>| {
        let mut r = req("GET", "/", "a");
        if let Some(c) = cred {
            use base64::Engine;
            let v = format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(c)
            );
            r.headers
                .insert("authorization", HeaderValue::from_str(&v).unwrap());
        }
        run(&cfg.rules, &mut r).map(|a| {
            (
                a.status.as_u16(),
                a.headers.get("www-authenticate").cloned(),
            )
        })
    };
    assert_eq!(
        try_auth(None),
        Some((401, Some(HeaderValue::from_static("Basic realm=\"Admin\""))))
    );
    assert_eq!(try_auth(Some("alice:s3cret")), None);
    assert!(try_auth(Some("alice:wrong")).is_some());
    assert_eq!(try_auth(Some("bob:pass")), None);
    assert!(try_auth(Some("bob:Pass")).is_some());
    assert_eq!(try_auth(Some("carol:plain")), None);
    assert!(try_auth(Some("dave:plain")).is_some());
    assert_eq!(try_auth(Some("dan:pass")), None);
    assert_eq!(try_auth(Some("erin:U*U")), None);
    assert!(try_auth(Some("erin:U*V")).is_some());
    assert!(try_auth(Some("dan:pas")).is_some());
}

#[test]
fn response_rules_set_security_headers_by_status() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = compile(
        r#"
[[response_rule]]
action = "set-header"
name = "Strict-Transport-Security"
value = "max-age=31536000"
[[response_rule]]
action = "del-header"
name = "Server"
[[response_rule]]
action = "deny"
status = 502
if = { fetch = "status", values = ["500:599"] }
site = "admin"
"#,
        dir.path(),
    )
    .unwrap();
    let rules = &cfg.rules;
    let conn = Conn {
        client: "127.0.0.1".parse().unwrap(),
        listener: "web",
        tls: true,
        sni: None,
        cert: ClientCert::default(),
        now: crate::rules::stick::now_ms(),
        recent: None,
    };
    let mut h = HeaderMap::new();
    h.insert("server", HeaderValue::from_static("nginx"));
    let uri: Uri = "/".parse().unwrap();
    assert!(rules
        .run_response(
            &rules.response,
            &conn,
            &Method::GET,
            &uri,
            StatusCode::OK,
            &mut h,
            &None
        )
        .is_none());
    assert_eq!(h["strict-transport-security"], "max-age=31536000");
    assert!(!h.contains_key("server"));
    let a = rules.run_response(
        rules.response_of_site(1),
        &conn,
        &Method::GET,
        &uri,
        StatusCode::INTERNAL_SERVER_ERROR,
        &mut h,
        &None,
    );
    assert_eq!(a.unwrap().status, StatusCode::BAD_GATEWAY);
    assert!(rules.response_of_site(0).is_empty());
}

#[test]
fn every_bad_value_is_reported_with_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let err = compile(
        r#"
[[acl]]
name = "a"
fetch = "pathx"
values = ["/"]
[[acl]]
name = "b"
fetch = "path"
match = "regex"
values = ["("]
[[acl]]
name = "c"
fetch = "header"
values = ["x"]
[[map]]
name = "m"
file = "missing.map"
[[request_rule]]
action = "deny"
status = 99
[[request_rule]]
action = "redirect"
code = 304
scheme = "https"
[[request_rule]]
action = "jump"
[[request_rule]]
action = "deny"
if = "nosuch"
[[site_rule]]
site = "nosuchsite"
[[response_rule]]
action = "redirect"
scheme = "https"
"#,
        dir.path(),
    )
    .unwrap_err();
    for want in [
        "acl[0].fetch: `pathx` is not a fetch",
        "acl[1].values: `(` is not a regular expression",
        "acl[2].header: missing",
        "map[0].file: cannot read map file",
        "request_rule[0].status: 99 is not an HTTP status",
        "request_rule[1].code: 304 is not a redirect code",
        "request_rule[2].action: `jump` is not a request action",
        "request_rule[3].if: no [[acl]] named `nosuch`",
        "site_rule[0].site: no site named `nosuchsite`",
        "response_rule[0].action: `redirect` is not a response action",
    ] {
        assert!(err.contains(want), "missing `{want}` in:\n{err}");
    }
}

/// Rules whose conditions do not hold allocate nothing: every kind of
/// test, evaluated on a request none of them matches (after one warm-up
/// evaluation: the regex engine keeps a per-thread cache).
#[test]
fn rules_that_do_not_fire_allocate_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let hosts: String = (0..10_000)
        .map(|i| format!("host{i}.example.com app\n"))
        .collect();
    std::fs::write(dir.path().join("hosts.map"), hosts).unwrap();
    let cfg = compile(
        r#"
[[map]]
name = "hosts"
file = "hosts.map"
[[acl]]
name = "hosts"
fetch = "host"
values = ["a.example.com", "b.example.com", "c.example.com", "d.example.com", "e.example.com", "f.example.com", "g.example.com", "h.example.com", "i.example.com"]
ignore_case = true
[[acl]]
name = "dom"
fetch = "host"
match = "domain"
values = ["example.org"]
[[acl]]
name = "admin"
fetch = "path"
match = "prefix"
values = ["/admin", "/wp-admin"]
[[acl]]
name = "images"
fetch = "path"
match = "dir"
values = ["images"]
[[acl]]
name = "api"
fetch = "path"
match = "regex"
values = ["^/api/v[0-9]+/"]
ignore_case = true
[[acl]]
name = "office"
fetch = "src"
values = ["10.0.0.0/8", "2001:db8::/32"]
[[acl]]
name = "bot"
fetch = "header"
header = "User-Agent"
match = "substring"
values = ["bot"]
ignore_case = true
[[acl]]
name = "beta"
fetch = "cookie"
cookie = "beta"
values = ["1"]
[[acl]]
name = "lang"
fetch = "param"
param = "lang"
values = ["de"]
[[request_rule]]
action = "deny"
if = "admin !office || bot"
[[request_rule]]
action = "redirect"
prefix = "https://www.example.org"
if = "dom"
[[request_rule]]
action = "set-header"
name = "X-Site"
value = "{host|lower|map:hosts:none}"
if = "beta || lang"
[[request_rule]]
action = "return"
status = 200
if = "images || api"
[[site_rule]]
site = "{host|lower|map:hosts}"
if = "hosts"
[[response_rule]]
action = "set-header"
name = "X-Frame-Options"
value = "DENY"
if = { fetch = "status", values = ["500:599"] }
"#,
        dir.path(),
    )
    .unwrap();
    let rules = &cfg.rules;
    let mut r = req("GET", "/shop/cart?id=3", "Shop.Example.COM");
    r.headers
        .insert("user-agent", HeaderValue::from_static("Mozilla/5.0"));
    r.headers
        .insert("cookie", HeaderValue::from_static("session=1; beta=0"));
    let conn = Conn {
        client: "192.0.2.10".parse().unwrap(),
        listener: "web",
        tls: false,
        sni: None,
        cert: ClientCert::default(),
        now: crate::rules::stick::now_ms(),
        recent: None,
    };
    let mut response = HeaderMap::new();
    let mut evaluate = |r: &mut Req| {
        assert!(r.run_rules(rules, &rules.request, &conn).is_none());
        assert_eq!(
            rules.choose_site(&conn, &r.method, &r.uri, &r.headers, &None),
            Chosen::NoRule
        );
        assert!(rules
            .run_response(
                &rules.response,
                &conn,
                &r.method,
                &r.uri,
                StatusCode::OK,
                &mut response,
                &None
            )
            .is_none());
    };
    evaluate(&mut r);
    let info = allocation_counter::measure(|| evaluate(&mut r));
    assert_eq!(info.count_total, 0, "{info:?}");
    assert!(response.is_empty() && !r.headers.contains_key("x-site"));
    // The counter sees a rule that fires: its value is computed.
    let mut fires = req("GET", "/?lang=de", "shop.example.com");
    let info = allocation_counter::measure(|| {
        fires.run_rules(rules, &rules.request, &conn);
    });
    assert!(info.count_total > 0);
    assert_eq!(fires.headers["x-site"], "none");
}
