//! The rules corpus (`tests/import/rules/*.cfg`): hosting front ends as
//! operators' guides write them (host maps, admin paths kept to an office
//! network, redirects to HTTPS and to the canonical host, security
//! headers, basic auth, error pages). Each runs in the real HAProxy and,
//! imported by `rdmalb import` (which must carry everything over: exit 0),
//! in rdmalb, both in front of the same echo backends (one per `server`,
//! answering with `x-backend: <backend>/<server>` and the request head it
//! got). Every request of a matrix (the hosts, paths, methods, headers and
//! client addresses the configuration tests, and ones it does not name)
//! must get the same status, the same backend, the same `Location` and
//! the same values of the headers the rules set, on both sides (the
//! forwarding headers rdmalb adds to every request aside, [`OWN`]).
//!
//! Where a configuration balances by hash key or pins clients with a
//! `cookie`, the server that answered must be the same too, and so must
//! the `Set-Cookie` and `Cache-Control` the client gets and the `Cookie`
//! the server got ([`per_server`]).
//!
//! Files a configuration names under `/etc/haproxy/` are read from
//! `tests/import/rules/etc/haproxy/` (copied into the test's directory).
//! `NAME.requests` adds requests: `METHOD HOST PATH [from ADDR]
//! [Header: value]...`, one a line.

use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::corpus::{certificates_for, import};
use super::haproxy::{rewrite, Listen};
use crate::support::haproxy::Haproxy;
use crate::support::*;

fn rules_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/import/rules")
}

/// One request of the matrix.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Probe {
    method: String,
    host: String,
    path: String,
    from: IpAddr,
    headers: Vec<(String, String)>,
}

impl std::fmt::Display for Probe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}{} from {}",
            self.method, self.host, self.path, self.from
        )?;
        for (k, v) in &self.headers {
            write!(f, " [{k}: {v}]")?;
        }
        Ok(())
    }
}

/// What a client saw, reduced to what must be alike.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    status: u16,
    backend: Option<String>,
    /// The server that answered (only where the configuration decides
    /// it: [`per_server`]).
    server: Option<String>,
    /// The request line the backend got (its echo).
    target: Option<String>,
    location: Option<String>,
    /// The values of the headers the rules set: on the response, and as
    /// the backend got them (its echo).
    headers: Vec<(String, Vec<String>)>,
}

/// Copies `from` into `to`, recursively.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

/// Whether `cfg` chooses the server itself: a hash `balance` or a
/// persistence `cookie` (else the server within a backend is the
/// balancer's business and only the backend is compared).
fn per_server(cfg: &str) -> bool {
    cfg.lines().any(|l| {
        let w: Vec<&str> = l.split_whitespace().collect();
        match w.as_slice() {
            ["cookie", ..] => true,
            ["balance", algo, ..] => {
                ["source", "uri", "url_param", "hash"].contains(algo) || algo.starts_with("hdr(")
            }
            _ => false,
        }
    })
}

/// The header names the configuration's rules set, add, delete or replace
/// (and the cookie headers, with a persistence `cookie`).
fn rule_headers(cfg: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in cfg.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        if w.first() == Some(&"cookie") {
            for h in ["set-cookie", "cache-control", "cookie"] {
                out.insert(h.to_string());
            }
        }
        if matches!(
            w.first(),
            Some(&("http-request" | "http-response" | "http-after-response"))
        ) && matches!(
            w.get(1),
            Some(
                &("set-header" | "add-header" | "del-header" | "replace-header" | "replace-value")
            )
        ) {
            if let Some(n) = w.get(2) {
                out.insert(n.to_ascii_lowercase());
            }
        }
        if w.first() == Some(&"http-request") && w.get(1) == Some(&"return") {
            let mut i = 2;
            while i + 1 < w.len() {
                if w[i] == "hdr" {
                    out.insert(w[i + 1].to_ascii_lowercase());
                }
                i += 1;
            }
        }
    }
    out
}

/// The matrix: the hosts and paths the imported tests and maps name (and
/// ones they do not), GET and POST, from 127.0.0.1 and, when a rule tests
/// the client's address, 127.0.0.2; plus `NAME.requests`.
fn matrix(toml_text: &str, dir: &Path, extra: &str) -> Vec<Probe> {
    let value: toml::Value = toml::from_str(toml_text).expect("imported TOML");
    let mut hosts = BTreeSet::from(["unlisted.example.net".to_string()]);
    let mut paths = BTreeSet::from([
        "/".to_string(),
        "/unlisted".to_string(),
        "/a/b?x=1".to_string(),
    ]);
    let mut methods = BTreeSet::from(["GET".to_string(), "POST".to_string()]);
    let mut from = vec![IpAddr::from([127, 0, 0, 1])];
    let arr = |k: &str| {
        value
            .get(k)
            .and_then(|a| a.as_array())
            .cloned()
            .unwrap_or_default()
    };
    let host_value = |hosts: &mut BTreeSet<String>, v: &str| {
        let name = v.trim_start_matches(['.', '^']).trim_end_matches('$');
        if name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':'))
            && !name.is_empty()
        {
            hosts.insert(name.to_string());
            hosts.insert(format!("probe.{name}"));
        }
    };
    // The tests: the `[[acl]]`s and the rules' anonymous ones.
    let mut tests = arr("acl");
    for section in ["request_rule", "site_rule", "response_rule"] {
        for r in arr(section) {
            for key in ["if", "unless"] {
                if let Some(t) = r.get(key).filter(|t| t.is_table()) {
                    tests.push(t.clone());
                }
            }
        }
    }
    for t in &tests {
        let fetch = t.get("fetch").and_then(|f| f.as_str()).unwrap_or("");
        for v in t
            .get("values")
            .and_then(|v| v.as_array())
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str())
        {
            match fetch {
                "host" | "sni" => host_value(&mut hosts, v),
                "path" | "url" if v.starts_with('/') => {
                    paths.insert(v.to_string());
                    paths.insert(format!("{}/more", v.trim_end_matches('/')));
                    paths.insert(format!("{v}x"));
                }
                "method" => {
                    methods.insert(v.to_string());
                }
                "src" if from.len() == 1 => from.push(IpAddr::from([127, 0, 0, 2])),
                _ => {}
            }
        }
    }
    for m in arr("map") {
        let file = m.get("file").and_then(|f| f.as_str()).unwrap_or("");
        let text = std::fs::read_to_string(dir.join(file)).unwrap_or_default();
        for line in text
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        {
            let key = line.split_whitespace().next().unwrap_or("");
            if key.starts_with('/') {
                paths.insert(key.to_string());
                paths.insert(format!("{key}x"));
            } else {
                host_value(&mut hosts, key);
            }
        }
    }
    // A Host with a port: hdr(host) compares it whole.
    if let Some(h) = hosts
        .iter()
        .find(|h| h.contains('.') && !h.contains(':'))
        .cloned()
    {
        hosts.insert(format!("{h}:8080"));
    }
    let mut out = Vec::new();
    for method in &methods {
        for host in &hosts {
            for path in &paths {
                for f in &from {
                    out.push(Probe {
                        method: method.clone(),
                        host: host.clone(),
                        path: path.clone(),
                        from: *f,
                        headers: Vec::new(),
                    });
                }
            }
        }
    }
    out.extend(listed(extra));
    out
}

/// The requests of `NAME.requests`: `METHOD HOST PATH [from ADDR]
/// [Header: value]...`, one a line.
fn listed(extra: &str) -> Vec<Probe> {
    let mut out = Vec::new();
    for line in extra
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
    {
        let mut parts = line.split(" [");
        let head: Vec<&str> = parts.next().unwrap_or("").split_whitespace().collect();
        let mut p = Probe {
            method: head[0].to_string(),
            host: head[1].to_string(),
            path: head[2].to_string(),
            from: IpAddr::from([127, 0, 0, 1]),
            headers: Vec::new(),
        };
        if head.get(3) == Some(&"from") {
            p.from = head[4].parse().expect("an address after `from`");
        }
        for h in parts {
            let (k, v) = h
                .trim_end_matches(']')
                .split_once(": ")
                .expect("[Name: value]");
            p.headers.push((k.to_string(), v.to_string()));
        }
        out.push(p);
    }
    out
}

/// One client per listener and client address.
fn client(l: &Listen, from: IpAddr, hosts: &BTreeSet<&str>) -> reqwest::Client {
    let mut b = reqwest::Client::builder()
        .no_proxy()
        .http1_only()
        .redirect(reqwest::redirect::Policy::none())
        .local_address(from)
        .timeout(Duration::from_secs(20))
        .danger_accept_invalid_certs(true);
    for h in hosts {
        let name = h.split(':').next().unwrap_or(h);
        b = b.resolve(name, l.addr);
    }
    b.build().unwrap()
}

async fn send(
    c: &reqwest::Client,
    l: &Listen,
    p: &Probe,
    names: &BTreeSet<String>,
    per_server: bool,
) -> Seen {
    let url = if l.tls {
        let name = p.host.split(':').next().unwrap_or(&p.host);
        format!("https://{name}:{}{}", l.addr.port(), p.path)
    } else {
        format!("http://{}{}", l.addr, p.path)
    };
    let mut req = c
        .request(p.method.parse().unwrap(), &url)
        .header("host", &p.host);
    for (k, v) in &p.headers {
        req = req.header(k, v);
    }
    let resp = req
        .send()
        .await
        .unwrap_or_else(|e| panic!("{p} ({url}): {e}"));
    let status = resp.status().as_u16();
    let h = resp.headers().clone();
    let answered = h.get("x-backend").and_then(|v| v.to_str().ok());
    let backend = answered
        .and_then(|v| v.split('/').next())
        .map(str::to_string);
    let server = answered
        .filter(|_| per_server)
        .and_then(|v| v.split('/').nth(1))
        .map(str::to_string);
    let location = h
        .get("location")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let body = resp.text().await.unwrap_or_default();
    let echoed = if backend.is_some() {
        echoed_headers(&body)
    } else {
        Vec::new()
    };
    let target = backend
        .as_ref()
        .and_then(|_| body.lines().next())
        .map(str::to_string);
    let headers = names
        .iter()
        .map(|n| {
            let mut v: Vec<String> = h
                .get_all(n.as_str())
                .iter()
                .filter_map(|v| v.to_str().ok())
                .map(|v| format!("response: {v}"))
                .collect();
            v.extend(
                echoed
                    .iter()
                    .filter(|(k, _)| k.eq_ignore_ascii_case(n))
                    .map(|(_, v)| format!("request: {v}")),
            );
            (n.clone(), v)
        })
        .collect();
    Seen {
        status,
        backend,
        server,
        target,
        location,
        headers,
    }
}

/// The forwarding headers rdmalb adds to every request (docs/proxy.md):
/// compared only when the rules made HAProxy send one too.
const OWN: &[&str] = &["x-forwarded-for", "x-forwarded-proto", "forwarded", "via"];

fn own_headers_aside(want: &Seen, mut got: Seen) -> Seen {
    for ((name, w), (_, g)) in want.headers.iter().zip(got.headers.iter_mut()) {
        if OWN.contains(&name.as_str()) && !w.iter().any(|v| v.starts_with("request: ")) {
            g.retain(|v| !v.starts_with("request: "));
        }
    }
    got
}

/// Runs rules-corpus configuration `name` through both proxies.
async fn alike(test: &str, name: &str) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().display().to_string();
    let text = std::fs::read_to_string(rules_dir().join(format!("{name}.cfg")))
        .unwrap()
        .replace("/etc/haproxy/", &format!("{root}/etc/haproxy/"));
    copy_tree(&rules_dir().join("etc"), &dir.path().join("etc"));
    certificates_for(&text, dir.path());
    let mut servers = Vec::new();
    let (haproxy_cfg, haproxy_listens) = rewrite(&text, dir.path(), &mut servers);
    let (rdmalb_cfg, rdmalb_listens) = rewrite(&text, dir.path(), &mut servers);
    let mut backends = Vec::new();
    for (b, s, a) in &servers {
        let l = tokio::net::TcpListener::bind(a)
            .await
            .expect("bind a backend");
        backends.push(Backend::start_on(&format!("{b}/{s}"), l));
    }
    let haproxy_dir = dir.path().join("haproxy");
    std::fs::create_dir(&haproxy_dir).unwrap();
    let addrs: Vec<SocketAddr> = haproxy_listens.iter().map(|l| l.addr).collect();
    let Some(_haproxy) = Haproxy::start(test, &haproxy_dir, &haproxy_cfg, &addrs) else {
        return;
    };
    std::fs::write(dir.path().join(format!("{name}.cfg")), &rdmalb_cfg).unwrap();
    let (toml_text, notes, code) = import(dir.path(), name, &[]);
    assert_eq!(
        code, 0,
        "{name} imports with every rule carried over:\n{notes}"
    );
    let addrs: Vec<SocketAddr> = rdmalb_listens.iter().map(|l| l.addr).collect();
    let proxy = Proxy::start(&toml_text, &addrs);

    let extra =
        std::fs::read_to_string(rules_dir().join(format!("{name}.requests"))).unwrap_or_default();
    let names = rule_headers(&text);
    if toml_text.contains("[[stick_table]]") {
        return in_sequence(
            name,
            &extra,
            &haproxy_listens,
            &rdmalb_listens,
            &names,
            &proxy,
        )
        .await;
    }
    let probes = matrix(&toml_text, dir.path(), &extra);
    let per_server = per_server(&text);
    let hosts: BTreeSet<&str> = probes.iter().map(|p| p.host.as_str()).collect();
    let froms: BTreeSet<IpAddr> = probes.iter().map(|p| p.from).collect();
    // Nodes may need their first health checks: the whole matrix again
    // until both agree (bounded), then what still differs is reported.
    let mut differ = Vec::new();
    for attempt in 0..40 {
        differ.clear();
        for (i, (h, r)) in haproxy_listens.iter().zip(&rdmalb_listens).enumerate() {
            for from in &froms {
                let (hc, rc) = (client(h, *from, &hosts), client(r, *from, &hosts));
                for p in probes.iter().filter(|p| p.from == *from) {
                    let want = send(&hc, h, p, &names, per_server).await;
                    let got = own_headers_aside(&want, send(&rc, r, p, &names, per_server).await);
                    // A 503 early on may be a node not checked up yet.
                    if want != got || (want.status == 503 && attempt < 12) {
                        differ.push(format!(
                            "listener {i}: {p}:\n  HAProxy {want:?}\n  rdmalb  {got:?}"
                        ));
                    }
                }
            }
        }
        if differ.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(
        differ.is_empty(),
        "{name}: {} of {} requests answered differently:\n{}\n{}",
        differ.len(),
        probes.len() * haproxy_listens.len(),
        differ
            .iter()
            .take(20)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n"),
        proxy.stderr_text()
    );
    let reached: usize = backends.iter().map(Backend::requests).sum();
    assert!(reached > 0, "{name}: no request reached a backend");
    eprintln!(
        "{name}: {} requests on {} listeners answered alike",
        probes.len(),
        haproxy_listens.len()
    );
}

/// A configuration with a stick table answers by history: its
/// `NAME.requests` are sent once, in order, to both proxies (each keeps
/// its own counts), and every answer must be alike. The rates' periods
/// are far longer than the sequence takes, so no period ends inside it.
async fn in_sequence(
    name: &str,
    extra: &str,
    haproxy: &[Listen],
    rdmalb: &[Listen],
    names: &BTreeSet<String>,
    proxy: &Proxy,
) {
    let probes = listed(extra);
    assert!(
        !probes.is_empty(),
        "{name}: a stick-table configuration needs {name}.requests"
    );
    let hosts: BTreeSet<&str> = probes.iter().map(|p| p.host.as_str()).collect();
    let mut differ = Vec::new();
    let mut limited = 0;
    for (i, (h, r)) in haproxy.iter().zip(rdmalb).enumerate() {
        let mut clients = std::collections::BTreeMap::new();
        for p in &probes {
            let (hc, rc) = clients
                .entry(p.from)
                .or_insert_with(|| (client(h, p.from, &hosts), client(r, p.from, &hosts)));
            let want = send(hc, h, p, names, false).await;
            let got = own_headers_aside(&want, send(rc, r, p, names, false).await);
            limited += usize::from(want.status == 429);
            if want != got {
                differ.push(format!(
                    "listener {i}: {p}:\n  HAProxy {want:?}\n  rdmalb  {got:?}"
                ));
            }
        }
    }
    assert!(
        differ.is_empty(),
        "{name}: {} of {} requests answered differently:\n{}\n{}",
        differ.len(),
        probes.len() * haproxy.len(),
        differ.join("\n"),
        proxy.stderr_text()
    );
    assert!(limited > 0, "{name}: HAProxy limited no request");
    eprintln!(
        "{name}: {} requests in sequence answered alike ({limited} limited)",
        probes.len()
    );
}

macro_rules! corpus {
    ($($test:ident => $name:literal),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $test() {
                alike(stringify!($test), $name).await;
            }
        )*

        /// Every configuration of the corpus has its test.
        #[test]
        fn every_rules_corpus_file_has_a_test() {
            let names: BTreeSet<&str> = [$($name),*].into_iter().collect();
            let files: BTreeSet<String> = std::fs::read_dir(rules_dir())
                .unwrap()
                .filter_map(|e| {
                    let p = e.unwrap().path();
                    (p.extension()? == "cfg").then(|| p.file_stem().unwrap().to_string_lossy().into_owned())
                })
                .collect();
            assert_eq!(files.iter().map(String::as_str).collect::<BTreeSet<_>>(), names);
            assert!(names.len() >= 30, "the rules corpus has {} configurations", names.len());
        }
    };
}

corpus! {
    admin_office_alike => "admin-office",
    api_static_split_alike => "api-static-split",
    backend_rules_alike => "backend-rules",
    basic_auth_alike => "basic-auth",
    basic_auth_admin_alike => "basic-auth-admin",
    beta_cookie_alike => "beta-cookie",
    blocklist_file_alike => "blocklist-file",
    canonical_www_alike => "canonical-www",
    cors_preflight_alike => "cors-preflight",
    customer_wildcard_alike => "customer-wildcard",
    error_pages_alike => "error-pages",
    hash_header_alike => "hash-header",
    hash_param_alike => "hash-param",
    hash_source_alike => "hash-source",
    hash_uri_alike => "hash-uri",
    health_return_alike => "health-return",
    host_map_alike => "host-map",
    host_port_alike => "host-port",
    host_regex_alike => "host-regex",
    https_redirect_alike => "https-redirect",
    legacy_redirect_alike => "legacy-redirect",
    login_bruteforce_alike => "login-bruteforce",
    listen_section_alike => "listen-section",
    maintenance_alike => "maintenance",
    map_dom_alike => "map-dom",
    method_split_alike => "method-split",
    mobile_header_alike => "mobile-header",
    path_dir_alike => "path-dir",
    path_map_alike => "path-map",
    path_reg_alike => "path-reg",
    rate_limit_api_key_alike => "rate-limit-api-key",
    rate_limit_src_alike => "rate-limit-src",
    replace_path_alike => "replace-path",
    request_headers_alike => "request-headers",
    security_headers_alike => "security-headers",
    set_path_query_alike => "set-path-query",
    sni_routing_alike => "sni-routing",
    status_headers_alike => "status-headers",
    sticky_insert_alike => "sticky-insert",
    sticky_prefix_alike => "sticky-prefix",
    trailing_slash_alike => "trailing-slash",
    two_frontends_alike => "two-frontends",
    unless_or_alike => "unless-or",
    url_param_alike => "url-param",
    www_to_apex_alike => "www-to-apex",
}
