//! A corpus configuration run by the real HAProxy and, imported, by rdmalb,
//! both in front of the same Debian nginx servers (one `server` block per
//! HAProxy server, answering `backend/server`): every request of a matrix
//! of hosts × paths (the imported sites' hosts and path prefixes, and ones
//! no rule names) must be answered by the same backend through both.
//! Listen and server addresses are rewritten to free loopback ports, `crt`
//! files are generated at test time.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use super::corpus::{certificates_for, corpus_dir, import};
use crate::support::haproxy::Haproxy;
use crate::support::*;

/// Process-level directives a test must not run (privileges, sockets and
/// syslog of a real installation).
const DROPPED: &[&str] = &["daemon", "log", "user", "group", "chroot", "pidfile"];

/// One listener: its address and whether it is TLS.
#[derive(Clone, Copy)]
pub(super) struct Listen {
    pub addr: SocketAddr,
    pub tls: bool,
}

/// `text` with every `bind` (and `listen` address) on a fresh loopback
/// port, every server at its address in `servers` (allocated on first
/// use, keyed by backend and server name) and `crt` paths under `dir`.
pub(super) fn rewrite(
    text: &str,
    dir: &Path,
    servers: &mut Vec<(String, String, SocketAddr)>,
) -> (String, Vec<Listen>) {
    let mut out = String::new();
    let mut listens = Vec::new();
    let mut section = String::new();
    let mut in_global = false;
    for line in text.lines() {
        let mut words: Vec<String> = line.split_whitespace().map(str::to_string).collect();
        let Some(first) = words.first().cloned() else {
            continue;
        };
        // A global maxconn may need more file descriptors than a test has.
        let global_maxconn = first == "maxconn" && in_global;
        if DROPPED.contains(&first.as_str())
            || global_maxconn
            || (first == "stats" && words.get(1).is_some_and(|w| w == "socket"))
        {
            continue;
        }
        match first.as_str() {
            "frontend" | "backend" | "listen" | "defaults" | "global" => {
                in_global = first == "global";
                section = words.get(1).cloned().unwrap_or_default();
                if first == "listen" && words.len() > 2 {
                    let addr = free_addr();
                    words[2] = addr.to_string();
                    listens.push(Listen { addr, tls: false });
                }
            }
            "bind" => {
                let addr = free_addr();
                words[1] = addr.to_string();
                listens.push(Listen {
                    addr,
                    tls: words.iter().any(|w| w == "ssl"),
                });
                for i in 0..words.len() - 1 {
                    if words[i] == "crt" {
                        words[i + 1] = format!("{}/{}", dir.display(), words[i + 1]);
                    }
                }
            }
            "server" => {
                let name = words[1].clone();
                let addr = match servers.iter().find(|(b, s, _)| *b == section && *s == name) {
                    Some((_, _, a)) => *a,
                    None => {
                        let a = free_addr();
                        servers.push((section.clone(), name, a));
                        a
                    }
                };
                words[2] = addr.to_string();
            }
            _ => {}
        }
        // Every line indented, section keywords too: HAProxy does not mind.
        out.push_str("    ");
        out.push_str(&words.join(" "));
        out.push('\n');
    }
    (out, listens)
}

/// The backend that answered (the nginx body `backend/server`), or `None`
/// for any other answer.
async fn answered(client: &reqwest::Client, url: &str, host: &str) -> Option<String> {
    let resp = client
        .get(url)
        .header("host", host)
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET {url} (Host: {host}): {e}"));
    if resp.status() != 200 {
        return None;
    }
    let body = resp.text().await.ok()?;
    body.trim()
        .split_once('/')
        .map(|(backend, _)| backend.to_string())
}

/// The hosts and paths to try: the imported sites' names (a wildcard as one
/// name under it, `*` as an unlisted name) and prefixes, and ones no rule
/// names.
fn matrix(toml_text: &str) -> (Vec<String>, Vec<String>) {
    let value: toml::Value = toml::from_str(toml_text).expect("imported TOML");
    let mut hosts = BTreeSet::from(["unlisted.example.net".to_string()]);
    let mut paths = BTreeSet::from(["/".to_string(), "/unlisted".to_string()]);
    for site in value
        .get("site")
        .and_then(|s| s.as_array())
        .into_iter()
        .flatten()
    {
        for h in site
            .get("hosts")
            .and_then(|h| h.as_array())
            .into_iter()
            .flatten()
        {
            let h = h.as_str().unwrap();
            match h.strip_prefix("*.") {
                Some(rest) => {
                    hosts.insert(format!("probe.{rest}"));
                    hosts.insert(rest.to_string());
                }
                None if h == "*" => {}
                None => {
                    hosts.insert(h.to_string());
                }
            }
        }
        for p in site
            .get("path_prefixes")
            .and_then(|p| p.as_array())
            .into_iter()
            .flatten()
        {
            let p = p.as_str().unwrap();
            paths.insert(p.to_string());
            paths.insert(format!("{p}more"));
        }
    }
    // Names and prefixes the `[[acl]]`s of site rules test.
    for acl in value
        .get("acl")
        .and_then(|a| a.as_array())
        .into_iter()
        .flatten()
    {
        let values = acl.get("values").and_then(|v| v.as_array());
        for v in values.into_iter().flatten().filter_map(|v| v.as_str()) {
            match acl.get("fetch").and_then(|f| f.as_str()) {
                Some("host" | "sni") => {
                    let name = v.trim_start_matches('.');
                    hosts.insert(name.to_string());
                    hosts.insert(format!("probe.{name}"));
                }
                Some("path") if v.starts_with('/') => {
                    paths.insert(v.to_string());
                    paths.insert(format!("{v}more"));
                }
                _ => {}
            }
        }
    }
    (hosts.into_iter().collect(), paths.into_iter().collect())
}

/// Runs corpus configuration `name` through HAProxy and rdmalb and checks
/// that each request of the matrix reaches the same backend through both.
async fn same_backend_through_both(test: &str, name: &str) {
    if !nginx_available(test) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(corpus_dir().join(format!("{name}.cfg"))).unwrap();
    certificates_for(&text, dir.path());
    let mut servers = Vec::new();
    let (haproxy_cfg, haproxy_listens) = rewrite(&text, dir.path(), &mut servers);
    let (rdmalb_cfg, rdmalb_listens) = rewrite(&text, dir.path(), &mut servers);

    // One nginx, one server block per HAProxy server.
    let nginx_dir = dir.path().join("nginx");
    std::fs::create_dir(&nginx_dir).unwrap();
    let site: String = servers
        .iter()
        .map(|(b, s, a)| format!("server {{\n    listen {a};\n    default_type text/plain;\n    location / {{ return 200 \"{b}/{s}\\n\"; }}\n}}\n"))
        .collect();
    let Some(_nginx) = GroupNginx::start_with(&nginx_dir, servers[0].2, &site) else {
        return;
    };
    for (_, _, a) in &servers {
        eventually(
            &format!("nginx listens on {a}"),
            Duration::from_secs(10),
            || async move { std::net::TcpStream::connect(a).map_err(|e| e.to_string()) },
        )
        .await;
    }

    let haproxy_dir = dir.path().join("haproxy");
    std::fs::create_dir(&haproxy_dir).unwrap();
    let addrs: Vec<SocketAddr> = haproxy_listens.iter().map(|l| l.addr).collect();
    let Some(_haproxy) = Haproxy::start(test, &haproxy_dir, &haproxy_cfg, &addrs) else {
        return;
    };

    std::fs::write(dir.path().join(format!("{name}.cfg")), &rdmalb_cfg).unwrap();
    let (toml_text, notes, code) = import(dir.path(), name, &[]);
    assert_eq!(code, 0, "{name} imports without routing changes:\n{notes}");
    let addrs: Vec<SocketAddr> = rdmalb_listens.iter().map(|l| l.addr).collect();
    let proxy = Proxy::start(&toml_text, &addrs);

    let (hosts, paths) = matrix(&toml_text);
    let clients: Vec<reqwest::Client> = [&haproxy_listens, &rdmalb_listens]
        .iter()
        .flat_map(|listens| listens.iter())
        .map(|l| {
            // HTTP/1.1 with a Host without port, the form hdr(host) rules
            // are written for (over h2, HAProxy's Host is the :authority,
            // port included).
            let mut b = reqwest::Client::builder()
                .no_proxy()
                .http1_only()
                .timeout(Duration::from_secs(20))
                .danger_accept_invalid_certs(true);
            for h in &hosts {
                b = b.resolve(h, l.addr);
            }
            b.build().unwrap()
        })
        .collect();
    let url = |l: &Listen, host: &str, path: &str| {
        if l.tls {
            format!("https://{host}:{}{path}", l.addr.port())
        } else {
            format!("http://{}{path}", l.addr)
        }
    };
    // Nodes may need their first health checks: try the whole matrix until
    // both agree (bounded), then report what still differs.
    let mut differ = Vec::new();
    let mut reached = BTreeSet::new();
    for _ in 0..80 {
        differ.clear();
        reached.clear();
        for (i, (h, r)) in haproxy_listens.iter().zip(&rdmalb_listens).enumerate() {
            let (hc, rc) = (&clients[i], &clients[haproxy_listens.len() + i]);
            for host in &hosts {
                for path in &paths {
                    let want = answered(hc, &url(h, host, path), host).await;
                    let got = answered(rc, &url(r, host, path), host).await;
                    if let Some(b) = &want {
                        reached.insert(b.clone());
                    }
                    if want != got || want.is_none() {
                        differ.push(format!("listener {i} Host {host} path {path}: HAProxy {want:?}, rdmalb {got:?}"));
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
        "{name}: the same request reaches different backends:\n{}\n{}",
        differ.join("\n"),
        proxy.stderr_text()
    );
    let backends: BTreeSet<String> = servers.iter().map(|(b, _, _)| b.clone()).collect();
    assert_eq!(
        reached, backends,
        "{name}: every backend answers some request of the matrix"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn imported_single_site_routes_as_haproxy() {
    same_backend_through_both("imported_single_site_routes_as_haproxy", "single-site").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn imported_virtual_hosts_route_as_haproxy() {
    same_backend_through_both("imported_virtual_hosts_route_as_haproxy", "virtual-hosts").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn imported_path_routing_routes_as_haproxy() {
    same_backend_through_both("imported_path_routing_routes_as_haproxy", "path-routing").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn imported_tls_termination_routes_as_haproxy() {
    same_backend_through_both(
        "imported_tls_termination_routes_as_haproxy",
        "tls-termination",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn imported_listen_sections_route_as_haproxy() {
    same_backend_through_both(
        "imported_listen_sections_route_as_haproxy",
        "listen-sections",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn imported_backups_route_as_haproxy() {
    same_backend_through_both("imported_backups_route_as_haproxy", "backups").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn imported_defaults_inheritance_routes_as_haproxy() {
    same_backend_through_both(
        "imported_defaults_inheritance_routes_as_haproxy",
        "defaults-inheritance",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn imported_negation_routes_as_haproxy() {
    same_backend_through_both("imported_negation_routes_as_haproxy", "negation").await;
}
