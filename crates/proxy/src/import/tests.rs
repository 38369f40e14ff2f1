use std::path::Path;
use std::time::Duration;

use super::lexer::lex;
use super::sections::time;
use super::*;

fn words(text: &str) -> Vec<Vec<String>> {
    lex(text).0.into_iter().map(|l| l.words).collect()
}

fn imported(text: &str) -> Imported {
    import(text, Path::new("/nonexistent"))
}

/// The notes as `LINE: directive: text`.
fn notes(i: &Imported) -> Vec<String> {
    i.notes
        .iter()
        .map(|n| format!("{}: {}: {n}", n.line, n.directive))
        .collect()
}

fn has_note(i: &Imported, line: usize, needle: &str) -> bool {
    i.notes
        .iter()
        .any(|n| n.line == line && n.to_string().contains(needle))
}

fn parsed(i: &Imported) -> crate::config::Config {
    crate::config::parse(&i.toml, Path::new("imported.toml"))
        .unwrap_or_else(|e| panic!("{e}\n{}", i.toml))
}

const HEAD: &str = "defaults\n    mode http\n    timeout connect 5s\n";

/// The site a GET for `host` and `path` from 192.0.2.1 on `listener`
/// reaches: the site rules, then the sites' hosts (what the proxy does).
fn reached(c: &crate::config::Config, listener: &str, host: &str, path: &str) -> Option<String> {
    use crate::rules::{Chosen, ClientCert, Conn};
    let conn = Conn {
        client: "192.0.2.1".parse().unwrap(),
        listener,
        tls: false,
        sni: None,
        cert: ClientCert::default(),
        now: crate::rules::stick::now_ms(),
        recent: None,
    };
    let mut headers = http::HeaderMap::new();
    headers.insert(http::header::HOST, host.parse().unwrap());
    let uri: http::Uri = path.parse().unwrap();
    let site = match c
        .rules
        .choose_site(&conn, &http::Method::GET, &uri, &headers, &None)
    {
        Chosen::Site(s) => Some(s),
        Chosen::Default => c.global.default_site,
        Chosen::NoRule => crate::front::route::RouteTable::build(c).route(Some(host), path),
        Chosen::Answer(_) => None,
    };
    site.map(|s| c.sites[s].name.clone())
}

#[test]
fn lexer_comments_quotes_and_escapes() {
    assert_eq!(
        words("  bind :80   # the web\n\n# only a comment\n"),
        [["bind", ":80"]]
    );
    assert_eq!(
        words(r#"acl a hdr(host) "x y" 'z #w' a\ b c\#d"#),
        [["acl", "a", "hdr(host)", "x y", "z #w", "a b", "c#d"]]
    );
    // Quoted and unquoted parts of a word join; single quotes keep backslashes.
    assert_eq!(
        words(r#"x "a"'b'c '\n' "\t" \\ \x41"#),
        [["x", "abc", "\\n", "\t", "\\", "A"]]
    );
    // A backslash before an ordinary character stays.
    assert_eq!(words(r"x a\qb"), [["x", "a\\qb"]]);
}

#[test]
fn lexer_trailing_backslash_is_no_continuation_and_bad_quotes_drop_the_line() {
    let (lines, notes) = lex("server a 1.2.3.4:80 check \\\n  inter 5s\nacl x \"open\n");
    let w: Vec<_> = lines.iter().map(|l| (l.number, l.words.clone())).collect();
    assert_eq!(
        w,
        [
            (
                1,
                vec![
                    "server".to_string(),
                    "a".into(),
                    "1.2.3.4:80".into(),
                    "check".into()
                ]
            ),
            (2, vec!["inter".into(), "5s".into()])
        ]
    );
    assert_eq!(notes.len(), 2, "{notes:?}");
    assert!(
        notes[0].why.contains("not read as a line continuation"),
        "{notes:?}"
    );
    assert_eq!((notes[1].line, notes[1].kind), (3, Kind::Routing));
    assert!(notes[1].why.contains("unterminated quote"));
}

#[test]
fn lexer_notes_environment_variables() {
    let (lines, notes) = lex("bind \"${ADDR}:80\"\n");
    assert_eq!(lines[0].words, ["bind", "${ADDR}:80"]);
    assert!(notes[0].why.contains("`$ADDR`"), "{notes:?}");
}

#[test]
fn time_units_and_bare_milliseconds() {
    assert_eq!(time("1500"), Some(Duration::from_millis(1500)));
    assert_eq!(time("250us"), Some(Duration::from_micros(250)));
    assert_eq!(time("5s"), Some(Duration::from_secs(5)));
    assert_eq!(time("2m"), Some(Duration::from_secs(120)));
    assert_eq!(time("1h"), Some(Duration::from_secs(3600)));
    assert_eq!(time("1d"), Some(Duration::from_secs(86_400)));
    assert_eq!(time("5x"), None);
    assert_eq!(time("s"), None);
}

/// `balance first` with `maxconn` is rdmalb's `first` with `max_inflight`,
/// exactly; `stats timeout` becomes every stats socket's `timeout`.
#[test]
fn balance_first_and_stats_timeout_are_carried_exactly() {
    let i = imported(&format!(
        "global\n    stats socket /run/haproxy/admin.sock level admin\n    stats timeout 2m\n\
         \x20   stats socket ipv4@127.0.0.1:9999\n{HEAD}\
         frontend web\n    bind 127.0.0.1:8080\n    default_backend app\n\
         backend app\n    balance first\n\
         \x20   server a1 10.0.0.1:80 maxconn 30\n    server a2 10.0.0.2:80 maxconn 30\n"
    ));
    assert!(notes(&i).is_empty(), "{:?}", notes(&i));
    let c = parsed(&i);
    assert_eq!(c.global.balance, crate::config::Balance::First);
    assert_eq!(c.nodes[0].max_inflight, Some(30));
    let timeouts: Vec<Duration> = c.stats_sockets.iter().map(|s| s.timeout).collect();
    assert_eq!(timeouts, [Duration::from_secs(120); 2]);
    let i = imported("global\n    stats socket /run/a.sock\n    stats timeout 2d\n");
    assert!(
        has_note(&i, 3, "not a timeout rdmalb's stats socket takes"),
        "{:?}",
        notes(&i)
    );
}

#[test]
fn one_site_defaults_and_default_server() {
    let i = imported(&format!(
        "global\n    maxconn 2000\n    nbthread 4\n{HEAD}    timeout client 1m\n    timeout server 30000\n    default-server inter 3s fall 2\n\
         frontend web\n    bind 127.0.0.1:8080\n    default_backend app\n\
         backend app\n    balance leastconn\n    option httpchk GET /alive\n    http-check expect status 204\n\
         \x20   server a1 10.0.0.1:80 check weight 10 maxconn 30\n    server a2 10.0.0.2:80 check backup disabled\n"
    ));
    assert!(!i.changes_routing(), "{:?}", notes(&i));
    let c = parsed(&i);
    assert_eq!(c.limits.max_connections, 2000);
    assert_eq!(c.global.workers, 4);
    assert_eq!(c.timeouts.client, Duration::from_secs(60));
    assert_eq!(c.timeouts.server, Duration::from_secs(30));
    assert_eq!(c.health.path, "/alive");
    assert_eq!(c.health.expect_status, Some(204));
    assert_eq!(
        (c.health.interval, c.health.fall, c.health.rise),
        (Duration::from_secs(3), 2, 2)
    );
    assert_eq!(c.global.default_site, Some(0));
    assert_eq!(c.nodes.len(), 2);
    assert!(i.toml.contains("balance = \"leastconn\""));
    assert!(
        i.toml.contains("weight = 10\nmax_inflight = 30\n"),
        "{}",
        i.toml
    );
    assert!(
        i.toml.contains("backup = true\ndisabled = true\n"),
        "{}",
        i.toml
    );
}

#[test]
fn hosts_paths_or_and_inline_acls_make_sites() {
    let i = imported(&format!(
        "{HEAD}frontend web\n    bind :80\n\
         \x20   acl shop hdr(host) -i shop.example.com www.shop.example.com\n\
         \x20   acl api path_beg /api/ /v2/\n\
         \x20   acl blog hdr_end(host) -i .blog.example.org\n\
         \x20   use_backend shop_api if shop api\n\
         \x20   use_backend shop if shop\n\
         \x20   use_backend blog if blog || {{ hdr(host) -i blog.example.org }}\n\
         \x20   use_backend static if {{ path_beg /static/ }}\n\
         \x20   default_backend www\n\
         backend www\n    server w 10.0.0.1:80\nbackend shop_api\n    server a 10.0.0.2:80\n\
         backend shop\n    server s 10.0.0.3:80\nbackend blog\n    server b 10.0.0.4:80\nbackend static\n    server st 10.0.0.5:80\n"
    ));
    assert!(!i.changes_routing(), "{:?}", notes(&i));
    let c = parsed(&i);
    let site = |n: &str| c.sites.iter().find(|s| s.name == n).unwrap();
    assert_eq!(site("shop_api").path_prefixes, ["/api/", "/v2/"]);
    assert_eq!(site("shop_api").hosts.len(), 2);
    assert!(site("shop").path_prefixes.is_empty());
    assert!(site("blog").hosts[0].matches("a.blog.example.org"));
    assert!(site("blog").hosts[1].matches("blog.example.org"));
    assert!(site("static").hosts[0].matches("anything.net"));
    let t = crate::front::route::RouteTable::build(&c);
    let name = |h: &str, p: &str| t.route(Some(h), p).map(|s| c.sites[s].name.clone());
    assert_eq!(
        name("shop.example.com", "/api/x").as_deref(),
        Some("shop_api")
    );
    assert_eq!(
        name("shop.example.com", "/static/x").as_deref(),
        Some("shop")
    );
    assert_eq!(name("other.net", "/static/x").as_deref(), Some("static"));
    assert_eq!(name("other.net", "/").as_deref(), Some("www"));
}

#[test]
fn earlier_general_rules_keep_their_order_over_later_specific_ones() {
    // HAProxy: every /api/ request goes to `api`, shop's included; rdmalb
    // prefers shop's exact name to `*`, so `api` also takes shop's /api/.
    // shop's /api/v2/ rule is never reached in HAProxy: left out.
    let i = imported(&format!(
        "{HEAD}frontend web\n    bind :80\n\
         \x20   use_backend api if {{ path_beg /api/ }}\n\
         \x20   use_backend shop if {{ hdr(host) -i shop.example.com }}\n\
         \x20   use_backend v2 if {{ hdr(host) -i shop.example.com }} {{ path_beg /api/v2/ }}\n\
         backend api\n    server a 10.0.0.1:80\nbackend shop\n    server s 10.0.0.2:80\nbackend v2\n    server v 10.0.0.3:80\n"
    ));
    assert!(!i.changes_routing(), "{:?}", notes(&i));
    assert!(has_note(&i, 13, "no rule reaches `v2`"), "{:?}", notes(&i));
    assert!(
        i.toml.contains(
            "name = \"api\"\nhosts = [\"*\", \"shop.example.com\"]\npath_prefixes = [\"/api/\"]\n"
        ),
        "{}",
        i.toml
    );
    let c = parsed(&i);
    let t = crate::front::route::RouteTable::build(&c);
    let name = |h: &str, p: &str| t.route(Some(h), p).map(|s| c.sites[s].name.clone());
    assert_eq!(
        name("shop.example.com", "/api/v2/x").as_deref(),
        Some("api")
    );
    assert_eq!(name("shop.example.com", "/x").as_deref(), Some("shop"));
    assert_eq!(name("other.example.com", "/api/x").as_deref(), Some("api"));
}

#[test]
fn areas_one_site_cannot_hold_become_site_rules() {
    // `x` is reached by a.com (all paths) and b.com/x/ only: one site has one
    // host list × one prefix list, so the rules become site rules.
    let i = imported(&format!(
        "{HEAD}frontend web\n    bind :80\n\
         \x20   use_backend x if {{ hdr(host) -i a.com }} || {{ hdr(host) -i b.com }} {{ path_beg /x/ }}\n\
         \x20   default_backend www\n\
         backend x\n    server a 10.0.0.1:80\nbackend www\n    server s 10.0.0.2:80\n"
    ));
    assert!(!i.changes_routing(), "{:?}", notes(&i));
    assert!(
        i.toml
            .contains("[[site_rule]]\nsite = \"x\"\nif = \"line6_1 || line6_2 line6_3\""),
        "{}",
        i.toml
    );
    let c = parsed(&i);
    assert_eq!(reached(&c, "web", "b.com", "/").as_deref(), Some("www"));
    assert_eq!(reached(&c, "web", "b.com", "/x/y").as_deref(), Some("x"));
    assert_eq!(reached(&c, "web", "A.com", "/").as_deref(), Some("x"));
}

#[test]
fn negations_unless_and_source_tests_are_carried_exactly() {
    let i = imported(&format!(
        "{HEAD}frontend web\n    bind :80\n    acl admin src 192.0.2.0/24\n    acl st path_beg /s/\n\
         \x20   use_backend a if st !admin\n    use_backend b if admin\n    use_backend c unless st\n\
         backend a\n    server a 10.0.0.1:80\nbackend b\n    server b 10.0.0.2:80\nbackend c\n    server c 10.0.0.3:80\n"
    ));
    assert!(!i.changes_routing(), "{:?}", notes(&i));
    let c = parsed(&i);
    // The client is 192.0.2.1: `admin`.
    assert_eq!(reached(&c, "web", "x", "/s/1").as_deref(), Some("b"));
    assert_eq!(reached(&c, "web", "x", "/t").as_deref(), Some("b"));
    assert!(i.toml.contains("unless = \"st\""), "{}", i.toml);
    assert!(i.toml.contains("if = \"st !admin\""), "{}", i.toml);
}

#[test]
fn a_negation_is_carried_whatever_the_rule_order() {
    let rules = |admin_rule: &str| {
        imported(&format!(
            "{HEAD}frontend web\n    bind :80\n    acl st path_beg /static/\n    acl adm path_beg /static/admin/\n\
             \x20   use_backend static if st !adm\n{admin_rule}    default_backend www\n\
             backend static\n    server s 10.0.0.1:80\nbackend admin\n    server a 10.0.0.2:80\n\
             backend www\n    server w 10.0.0.3:80\n"
        ))
    };
    let i = rules("    use_backend admin if adm\n");
    assert!(!i.changes_routing(), "{:?}", notes(&i));
    let c = parsed(&i);
    assert_eq!(
        reached(&c, "web", "x", "/static/admin/a").as_deref(),
        Some("admin")
    );
    assert_eq!(
        reached(&c, "web", "x", "/static/a").as_deref(),
        Some("static")
    );
    // Without that rule HAProxy sends /static/admin/ to `www`; so does rdmalb.
    let i = rules("");
    assert!(!i.changes_routing(), "{:?}", notes(&i));
    let c = parsed(&i);
    assert_eq!(
        reached(&c, "web", "x", "/static/admin/a").as_deref(),
        Some("www")
    );
}

#[test]
fn tcp_mode_unknown_backends_and_bad_servers_change_routing() {
    let i = imported(
        "defaults\n    timeout connect 5s\nfrontend db\n    bind :3306\n    default_backend mysql\n\
         backend mysql\n    server m 10.0.0.1:3306\n",
    );
    assert!(i.changes_routing());
    assert!(
        has_note(&i, 3, "HAProxy's default mode is tcp"),
        "{:?}",
        notes(&i)
    );
    let i = imported(&format!(
        "{HEAD}frontend web\n    bind :80\n    use_backend nope if {{ path_beg /x }}\n    default_backend app\n\
         backend app\n    server a unix@/run/app.sock\n    server b 10.0.0.2:80 ssl verify none\n"
    ));
    assert!(
        has_note(&i, 6, "no http backend named `nope`"),
        "{:?}",
        notes(&i)
    );
    assert!(
        has_note(&i, 9, "address `unix@/run/app.sock` not supported"),
        "{:?}",
        notes(&i)
    );
    assert!(
        has_note(&i, 10, "rdmalb speaks cleartext HTTP"),
        "{:?}",
        notes(&i)
    );
    parsed(&i);
}

#[test]
fn unsupported_directives_are_noted_without_routing_changes() {
    let i = imported(&format!(
        "global\n    daemon\n    log /dev/log local0\n{HEAD}frontend web\n    bind :80\n    http-request capture req.hdr(host) len 20\n\
         \x20   stick-table type ip size 1m\n    default_backend app\n\
         backend app\n    balance source\n    cookie SRV insert\n    server a 10.0.0.1:80 cookie a check inter 5s\n    server b 10.0.0.2:80 check\n"
    ));
    assert!(!i.changes_routing(), "{:?}", notes(&i));
    for (line, needle) in [
        (2, "systemd"),
        (3, "access log"),
        (9, "the action `capture` is not supported"),
        (10, "entries expire after 24 days"),
    ] {
        assert!(
            has_note(&i, line, needle),
            "line {line}: {needle}: {:?}",
            notes(&i)
        );
    }
    // `balance source`, `cookie` and the server's `cookie` are carried over.
    for line in [13, 14, 15] {
        assert!(
            !i.notes.iter().any(|n| n.line == line),
            "line {line}: {:?}",
            notes(&i)
        );
    }
    assert!(i.toml.contains("balance = \"source\""), "{}", i.toml);
    assert!(
        i.toml.contains("[site.sticky]\ncookie = \"SRV\"\n"),
        "{}",
        i.toml
    );
    assert!(
        !i.toml.contains("mode = "),
        "insert is the default: {}",
        i.toml
    );
    assert!(i.toml.contains("cookie = \"a\""), "{}", i.toml);
    parsed(&i);
}

#[test]
fn listen_sections_and_several_frontends() {
    let i = imported(&format!(
        "{HEAD}listen app 127.0.0.1:8080\n    server a 10.0.0.1:80\n\
         frontend other\n    bind 127.0.0.1:8081\n    use_backend b if {{ path_beg /b }}\n\
         backend b\n    server b 10.0.0.2:80\n"
    ));
    // The listen section's own servers are its default; the frontend's
    // rule applies to its own listener only.
    assert!(!i.changes_routing(), "{:?}", notes(&i));
    let c = parsed(&i);
    assert_eq!(c.listeners.len(), 2);
    assert_eq!(
        c.global.default_site.map(|s| c.sites[s].name.as_str()),
        Some("app")
    );
    assert_eq!(reached(&c, "other", "x", "/b/1").as_deref(), Some("b"));
    assert_eq!(reached(&c, "app", "x", "/b/1").as_deref(), Some("app"));
}

#[test]
fn note_rendering() {
    let n = Note::new(12, "use_backend", Kind::Routing, "x".into());
    assert_eq!(
        n.render("haproxy.cfg"),
        "haproxy.cfg:12: use_backend: routing changed: x"
    );
    let n = Note::new(3, "daemon", Kind::Unsupported, "not supported".into());
    assert_eq!(n.render("h.cfg"), "h.cfg:3: daemon: not supported");
}

proptest::proptest! {
    /// Any sequence of HAProxy-like words (sections, directives, options,
    /// quotes, escapes, braces) imports without a panic, and a line is
    /// noted at most where it is.
    #[test]
    fn arbitrary_directives_never_panic(lines in proptest::collection::vec(
        proptest::collection::vec(proptest::sample::select(vec![
            "frontend", "backend", "listen", "defaults", "global", "bind", "server", "acl", "use_backend",
            "default_backend", "option", "no", "httpchk", "timeout", "client", "http-check", "expect", "status",
            "if", "unless", "!", "{", "}", "||", "or", "hdr(host)", "hdr_dom(host)", "hdr_end(host)", "path_beg",
            "-i", "-m", "end", "dom", "a", "b", "x.com", "*.y.org", ".z.net", "/p/", ":80", "1.2.3.4:80",
            "[::]:443", "ssl", "crt", "alpn", "h2", "check", "inter", "5s", "7x", "weight", "300", "backup",
            "default-server", "mode", "http", "tcp", "\\", "\"", "'", "#", "\\x4", "$V", "balance", "random",
        ]), 0..8),
        0..24,
    )) {
        let text: String = lines.iter().map(|l| l.join(" ") + "\n").collect();
        let i = import(&text, Path::new("/nonexistent"));
        for n in &i.notes {
            proptest::prop_assert!(n.line <= lines.len());
        }
    }
}

#[test]
fn directives_without_their_arguments_are_noted_not_fatal() {
    let mut text = String::from("global\n    maxconn\n    nbthread x\ndefaults\n    mode http\n");
    text.push_str("frontend\n    bind\n    acl\n    use_backend\n    use_backend b if\n    no\n    option\n    option httpchk\n    timeout\n    default_backend\n");
    text.push_str("backend b\n    server\n    server s\n    server s 1.2.3.4:80 inter\n    http-check\n    balance\n    retries\n");
    let i = imported(&text);
    assert!(has_note(&i, 2, "is not a number"), "{:?}", notes(&i));
    assert!(
        has_note(&i, 18, "server `s`: address `` not supported"),
        "{:?}",
        notes(&i)
    );
    assert!(has_note(&i, 19, "`inter `: not a time"), "{:?}", notes(&i));
}

/// Issue 27, defect 5: rules that decide who gets in were dropped with
/// exit 0. Each is now a routing change naming its line.
#[test]
fn dropped_access_rules_are_routing_changes_naming_their_line() {
    let i = imported(&format!(
        "{HEAD}frontend web\n    bind :80\n    bind :443 ssl crt site.pem verify required ca-file ca.pem\n\
         \x20   option forwardfor header X-Client except 10.0.0.0/8\n\
         \x20   tcp-request connection reject if {{ src 192.0.2.0/24 }}\n\
         \x20   http-request deny if {{ path_beg /admin }}\n\
         \x20   http-request auth realm ops if {{ path_beg /ops }}\n\
         \x20   http-request redirect scheme https unless {{ ssl_fc }}\n\
         \x20   http-request track-sc0 src\n\
         \x20   default_backend app\n\
         backend app\n    server a 10.0.0.1:80\n"
    ));
    assert!(i.changes_routing(), "{:?}", notes(&i));
    let routing = |line: usize, needle: &str| {
        assert!(
            i.notes
                .iter()
                .any(|n| n.line == line && n.kind == Kind::Routing && n.why.contains(needle)),
            "line {line}: {needle}: {:?}",
            notes(&i)
        )
    };
    // Client certificates are carried over too.
    assert!(
        i.toml.contains(
            "tls = { h2 = false, verify = \"required\", client_ca = \"ca.pem\", certificates = ["
        ),
        "{}",
        i.toml
    );
    routing(7, "X-Client");
    routing(7, "10.0.0.0/8");
    routing(8, "tcp-request connection reject");
    // The deny, the auth and the redirect are carried over (docs/rules.md).
    assert!(
        i.notes.iter().all(|n| !(9..=11).contains(&n.line)),
        "{:?}",
        notes(&i)
    );
    for rule in [
        "[[request_rule]]\naction = \"deny\"\nstatus = 403\nif = { fetch = \"path\", match = \"prefix\", values = [\"/admin\"] }\n",
        "[[request_rule]]\naction = \"return\"\nstatus = 401\nheaders = { \"WWW-Authenticate\" = 'Basic realm=\"ops\"' }\nif = { fetch = \"path\", match = \"prefix\", values = [\"/ops\"] }\n",
        "[[request_rule]]\naction = \"redirect\"\nscheme = \"https\"\nunless = { fetch = \"tls\" }\n",
    ] {
        assert!(i.toml.contains(rule), "{rule}\nin\n{}", i.toml);
    }
    // Counting alone changes nothing a backend or client sees.
    assert!(
        i.notes
            .iter()
            .all(|n| n.line != 12 || n.kind == Kind::Unsupported),
        "{:?}",
        notes(&i)
    );
}

/// Issue 27, defect 6: `backend idle` became a site named `idle`, which
/// means the idle pool, so every request got 503.
#[test]
fn a_backend_named_idle_gets_another_site_name() {
    let i = imported(&format!(
        "{HEAD}frontend web\n    bind :80\n    use_backend idle if {{ hdr(host) -i idle.example.com }}\n\
         \x20   default_backend idle\n\
         backend idle\n    server a 10.0.0.1:80\n"
    ));
    assert!(i.toml.contains("name = \"idle-site\""), "{}", i.toml);
    assert!(
        i.toml.contains("default_site = \"idle-site\""),
        "{}",
        i.toml
    );
    assert!(!i.toml.contains("name = \"idle\""), "{}", i.toml);
    assert!(has_note(&i, 8, "reserved"), "{:?}", notes(&i));
    parsed(&i);
}

#[test]
fn retries_and_retry_on_carry_over_as_the_global_settings() {
    let i = imported(&format!(
        "{HEAD}frontend web\n    bind :80\n    default_backend app\n\
         backend app\n    retries 2\n    retry-on conn-failure empty-response response-timeout\n    server a 10.0.0.1:80\n\
         backend big\n    retries 50\n    server b 10.0.0.2:80\n"
    ));
    assert!(i.toml.contains("\nretries = 2\n"), "{}", i.toml);
    assert!(
        i.toml
            .contains("\nretry_on = [\"conn-failure\", \"empty-response\"]\n"),
        "{}",
        i.toml
    );
    assert!(
        has_note(&i, 9, "`response-timeout` is not retried"),
        "{:?}",
        notes(&i)
    );
    assert!(has_note(&i, 12, "50 lowered"), "{:?}", notes(&i));
    assert!(!i.changes_routing(), "{:?}", notes(&i));
    parsed(&i);
    // Nothing said: nothing written (HAProxy's defaults are rdmalb's).
    let plain = imported(&format!(
        "{HEAD}frontend web\n    bind :80\n    default_backend app\nbackend app\n    server a 10.0.0.1:80\n"
    ));
    assert!(!plain.toml.contains("retr"), "{}", plain.toml);
}

#[test]
fn stick_tables_of_peers_and_backends_carry_over_with_their_trackers() {
    let i = imported(&format!(
        "{HEAD}peers mesh\n    peer lb1 127.0.0.1:10000\n    table shared type ipv6 size 1m expire 1h store conn_cur,conn_rate(3s),gpc0_rate(1m)\n\
frontend web\n    bind :80\n    tcp-request connection track-sc2 src table mesh/shared\n    tcp-request content sc-inc-gpc(0,2)\n    http-request deny deny_status 429 if {{ sc2_conn_rate gt 20 }} || {{ src_gpc0_rate(mesh/shared) gt 5 }}\n    default_backend app\n\
backend app\n    stick-table type string len 64 size 100 store http_err_rate(10s) peers mesh\n    http-request track-sc1 cook(session)\n    http-request deny if {{ sc1_http_err_rate gt 10 }}\n    server a 192.0.2.10:80\n\
backend other\n    stick-table type integer size 10\n    server b 192.0.2.11:80\n"
    ));
    let c = parsed(&i);
    let names: Vec<&str> = c.rules.tables.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["app", "mesh_shared"], "{}", i.toml);
    let shared = &c.rules.tables[1];
    assert_eq!(shared.size, 1 << 20);
    assert_eq!(shared.expire, 3_600_000);
    assert_eq!(
        shared.store.period(crate::rules::stick::Data::ConnRate),
        3_000
    );
    assert_eq!(
        c.rules.tables[0].kind,
        crate::rules::stick::KeyKind::Str { len: 64 }
    );
    // The frontend's tracking and deny, the backend's own, all carried.
    assert_eq!(c.rules.request.len(), 3, "{}", i.toml);
    assert_eq!(c.rules.site_request.iter().map(Vec::len).sum::<usize>(), 2);
    assert!(
        has_note(&i, 9, "rdmalb tracks per request"),
        "{:#?}",
        notes(&i)
    );
    assert!(has_note(&i, 14, "is not replicated"), "{:#?}", notes(&i));
    assert!(
        has_note(&i, 14, "entries expire after 24 days"),
        "{:#?}",
        notes(&i)
    );
    // An integer table is not carried: a routing change, named.
    assert!(
        has_note(&i, 19, "a table of type `integer`"),
        "{:#?}",
        notes(&i)
    );
}

mod acme;

#[test]
fn a_peers_section_with_other_peers_becomes_a_stick_share() {
    let i = imported(&format!(
        "global\n    localpeer lb2\n{HEAD}peers mesh\n    peer lb1 127.0.0.1:10001\n    peer lb2 127.0.0.1:10002\n    peer lb3 127.0.0.1:10003\n    table per_ip type ip size 10k expire 1m store http_req_rate(10s)\n\
frontend web\n    bind :80\n    http-request track-sc0 src table mesh/per_ip\n    http-request deny deny_status 429 if {{ sc0_http_req_rate gt 20 }}\n    default_backend app\n\
backend app\n    stick-table type ip size 100 expire 1m store http_req_cnt peers mesh\n    server a 192.0.2.10:80\n"
    ));
    assert!(
        i.toml.contains(
            "[stick_share]\nlisten = \"127.0.0.1:10002\"\npeers = [\"127.0.0.1:10001\", \"127.0.0.1:10003\"]\nkey_file = \"stick_share.key\"\n"
        ),
        "{}",
        i.toml
    );
    assert!(
        has_note(&i, 7, "rdmalb psk --out stick_share.key"),
        "{:#?}",
        notes(&i)
    );
    // With the key made next to the config, it checks: both tables shared.
    let dir = tempfile::tempdir().unwrap();
    rdmalb_window::Psk::generate()
        .write_new_file(dir.path().join("stick_share.key"))
        .unwrap();
    let c = crate::config::parse(&i.toml, &dir.path().join("rdmalb.toml"))
        .unwrap_or_else(|e| panic!("{e}\n{}", i.toml));
    assert!(c.rules.tables.iter().all(|t| t.is_shared()), "{}", i.toml);
    let share = c.rules.share.as_ref().unwrap();
    assert_eq!(share.peers.len(), 2);
    // Without `localpeer`, the first peer is taken, and noted.
    let j = imported(&format!(
        "{HEAD}peers mesh\n    peer lb1 127.0.0.1:10001\n    peer lb2 127.0.0.1:10002\n    table t type ip size 10 expire 1m store http_req_cnt\n"
    ));
    assert!(
        j.toml
            .contains("listen = \"127.0.0.1:10001\"\npeers = [\"127.0.0.1:10002\"]"),
        "{}",
        j.toml
    );
    assert!(
        has_note(&j, 5, "taken to be peer `lb1`"),
        "{:#?}",
        notes(&j)
    );
}
