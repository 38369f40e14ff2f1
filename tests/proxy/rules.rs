//! Request and response rules through the real `rdmalb proxy`: a deny, a
//! redirect, a `return`, a header the node sees, a site chosen from a map
//! file, response headers and an error page (docs/rules.md); runtime map
//! commands through `rdmalb ctl` under load.

use std::net::SocketAddr;
use std::time::Duration;

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_answer_rewrite_and_choose_sites() {
    let app = Backend::start("app").await;
    let admin = Backend::start("admin").await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("hosts.map"),
        "# host site\nadmin.example.com admin\napp.example.com app\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("503.http"),
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/html\r\n\r\n<h1>down for maintenance</h1>\n",
    )
    .unwrap();
    let (listen, addr, _admin) = listener_toml();
    let config = format!(
        r#"{listen}[global]
access_log = "off"
default_site = "app"

[[site]]
name = "app"
hosts = []
[[site]]
name = "admin"
hosts = []
[[site]]
name = "empty"
hosts = []

{}{}
[[map]]
name = "hosts"
file = "{{dir}}/hosts.map"

[[acl]]
name = "private"
fetch = "path"
match = "prefix"
values = ["/private"]

[[request_rule]]
action = "deny"
if = "private"

[[request_rule]]
action = "redirect"
prefix = "https://www.example.com"
code = 301
if = {{ fetch = "host", values = ["example.com"], ignore_case = true }}

[[request_rule]]
action = "return"
status = 200
content_type = "text/plain"
body = "pong\n"
if = {{ fetch = "path", values = ["/ping"] }}

[[request_rule]]
action = "set-header"
name = "X-Site-Key"
value = "{{host|lower|map:hosts:none}}"

[[request_rule]]
action = "set-header"
name = "X-Admin"
value = "1"
site = "admin"

[[site_rule]]
site = "empty"
if = {{ fetch = "path", values = ["/empty"] }}

[[site_rule]]
site = "{{host|lower|map:hosts}}"

[[response_rule]]
action = "set-header"
name = "X-Frame-Options"
value = "DENY"

[[error_page]]
status = 503
file = "{{dir}}/503.http"
"#,
        node_toml("a1", app.addr, "app"),
        node_toml("b1", admin.addr, "admin"),
    );
    let _proxy = Proxy::start_in(dir, &config, &[addr]);
    let client = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let get = |host: &'static str, path: &'static str| {
        let client = client.clone();
        async move {
            let r = client
                .get(format!("http://{addr}{path}"))
                .header("host", host)
                .send()
                .await
                .unwrap();
            let status = r.status().as_u16();
            let h = r.headers().clone();
            (status, h, r.text().await.unwrap())
        }
    };
    // Nodes come up after their first health checks.
    eventually(
        "both nodes answer",
        std::time::Duration::from_secs(10),
        || async {
            let a = get("app.example.com", "/").await.0;
            let b = get("ADMIN.example.com", "/").await.0;
            if a == 200 && b == 200 {
                Ok(())
            } else {
                Err(format!("{a} {b}"))
            }
        },
    )
    .await;

    let (s, h, body) = get("ADMIN.example.com", "/x").await;
    assert_eq!(s, 200);
    assert_eq!(h["x-backend"], "admin");
    assert_eq!(h["x-frame-options"], "DENY");
    let seen = echoed_headers(&body);
    assert_eq!(echoed(&seen, "x-site-key"), ["admin"]);
    assert_eq!(echoed(&seen, "x-admin"), ["1"]);

    let (s, h, body) = get("app.example.com", "/y").await;
    assert_eq!((s, &h["x-backend"]), (200, &"app".parse().unwrap()));
    assert!(echoed(&echoed_headers(&body), "x-admin").is_empty());

    // A host the map does not have: the default site.
    let (s, h, body) = get("other.example.org", "/").await;
    assert_eq!((s, &h["x-backend"]), (200, &"app".parse().unwrap()));
    assert_eq!(echoed(&echoed_headers(&body), "x-site-key"), ["none"]);

    let (s, _, _) = get("app.example.com", "/private/x").await;
    assert_eq!(s, 403);
    let (s, h, _) = get("Example.com", "/a?b=1").await;
    assert_eq!(s, 301);
    assert_eq!(h["location"], "https://www.example.com/a?b=1");
    let (s, h, body) = get("app.example.com", "/ping").await;
    assert_eq!((s, body.as_str()), (200, "pong\n"));
    assert_eq!(h["content-type"], "text/plain");
    // A site without nodes: the configured 503 page.
    let (s, _, body) = get("app.example.com", "/empty").await;
    assert_eq!((s, body.as_str()), (503, "<h1>down for maintenance</h1>\n"));
    assert!(app.requests() > 0 && admin.requests() > 0);
}

/// `add map`, `set map`, `del map` through `rdmalb ctl` while requests
/// run: every request is answered, each change routes at once, and a
/// reload (SIGHUP) reads the map file again, dropping them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runtime_map_changes_route_at_once_under_load() {
    use super::runtime::{ctl, ctl_ok};
    let app = Backend::start("app").await;
    let shop = Backend::start("shop").await;
    let pdir = tempfile::tempdir().unwrap();
    std::fs::write(pdir.path().join("hosts.map"), "shop.example.com shop\n").unwrap();
    let token = pdir.path().join("admin.token");
    std::fs::write(&token, "t".repeat(40)).unwrap();
    std::fs::set_permissions(&token, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let (listen, addr, admin) = listener_toml();
    let config = format!(
        "{listen}token_file = \"{{dir}}/admin.token\"\n[global]\naccess_log = \"off\"\ndefault_site = \"app\"\n\n\
         [[site]]\nname = \"app\"\nhosts = []\n[[site]]\nname = \"shop\"\nhosts = []\n\n{}{}\
         [[map]]\nname = \"hosts\"\nfile = \"{{dir}}/hosts.map\"\n\n\
         [[site_rule]]\nsite = \"{{host|lower|map:hosts}}\"\n",
        node_toml("a1", app.addr, "app"),
        node_toml("s1", shop.addr, "shop"),
    )
    .replacen("\n\n[global]", "\n[global]", 1);
    let proxy = Proxy::start_in(pdir, &config, &[addr, admin]);
    let cfg = proxy.config.clone();
    let c = client();
    let backend_of = |host: &'static str| {
        let c = c.clone();
        async move {
            let r = c
                .get(format!("http://{addr}/"))
                .header("host", host)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 200, "{host}");
            r.headers()["x-backend"].to_str().unwrap().to_string()
        }
    };
    eventually("the nodes answer", Duration::from_secs(10), || async {
        let r = c
            .get(format!("http://{addr}/"))
            .header("host", "shop.example.com")
            .send()
            .await;
        match r {
            Ok(r) if r.status() == 200 => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    assert_eq!(backend_of("shop.example.com").await, "shop");
    assert_eq!(backend_of("new.example.com").await, "app");

    // Load: a bounded number of requests, each must be answered 200.
    let load = {
        let c = c.clone();
        tokio::spawn(async move {
            let mut failed = 0;
            for i in 0..400 {
                let host = if i % 2 == 0 {
                    "new.example.com"
                } else {
                    "shop.example.com"
                };
                match c
                    .get(format!("http://{addr}/"))
                    .header("host", host)
                    .send()
                    .await
                {
                    Ok(r) if r.status() == 200 => {}
                    _ => failed += 1,
                }
            }
            failed
        })
    };
    ctl_ok(&cfg, "add map hosts new.example.com shop");
    assert_eq!(backend_of("new.example.com").await, "shop");
    ctl_ok(&cfg, "set map hosts new.example.com app");
    assert_eq!(backend_of("new.example.com").await, "app");
    ctl_ok(&cfg, "add map hosts new.example.com shop");
    let shown = ctl_ok(&cfg, "show map hosts");
    assert!(
        shown.contains(" new.example.com app\n") && shown.contains(" shop.example.com shop\n"),
        "{shown}"
    );
    assert!(
        ctl_ok(&cfg, "show map").contains("hosts ("),
        "show map lists the maps"
    );
    ctl_ok(&cfg, "del map hosts new.example.com");
    assert_eq!(backend_of("new.example.com").await, "app");
    let refused = ctl(&cfg, "del map hosts new.example.com");
    assert!(
        !refused.status.success(),
        "deleting a missing key is refused"
    );
    let refused = ctl(&cfg, "add map nosuch a b");
    assert!(String::from_utf8_lossy(&refused.stderr).contains("no map named `nosuch`"));
    assert_eq!(
        load.await.unwrap(),
        0,
        "every request under load was answered"
    );

    // Not written to the file: a reload drops the runtime change.
    ctl_ok(&cfg, "add map hosts new.example.com shop");
    assert_eq!(backend_of("new.example.com").await, "shop");
    signal(proxy.pid(), SIGHUP);
    eventually(
        "the reload reads the file again",
        Duration::from_secs(10),
        || {
            let b = backend_of("new.example.com");
            async move {
                let b = b.await;
                if b == "app" {
                    Ok(())
                } else {
                    Err(b)
                }
            }
        },
    )
    .await;
    assert_eq!(backend_of("shop.example.com").await, "shop");
}

/// A CA, a client certificate it signed (PEM cert + key), and the CA's PEM.
fn client_ca(dir: &std::path::Path) -> (std::path::PathBuf, String) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let client_key = KeyPair::generate().unwrap();
    let client = CertificateParams::new(vec!["client.example.com".to_string()])
        .unwrap()
        .signed_by(&client_key, &issuer)
        .unwrap();
    let ca_path = dir.join("clients-ca.pem");
    std::fs::write(&ca_path, ca.pem()).unwrap();
    (
        ca_path,
        format!("{}{}", client.pem(), client_key.serialize_pem()),
    )
}

/// Client certificates on a listener (`verify = "optional"`): the rules
/// see whether one was sent, and forward it in a header; `"required"`
/// refuses a client without one in the handshake.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_certificates_are_a_condition_and_a_header() {
    let app = Backend::start("app").await;
    let dir = tempfile::tempdir().unwrap();
    let (cert, key, _) = certificate(dir.path(), "site", &["app.example.com"]);
    let (ca, identity) = client_ca(dir.path());
    let (optional, required) = (free_addr(), free_addr());
    let tls = |verify: &str| {
        format!(
            "tls = {{ verify = \"{verify}\", client_ca = \"{}\", certificates = [{{ cert = \"{}\", key = \"{}\" }}] }}",
            ca.display(),
            cert.display(),
            key.display()
        )
    };
    let config = format!(
        "[[listener]]\nname = \"optional\"\nlisten = \"{optional}\"\n{}\n\n\
         [[listener]]\nname = \"required\"\nlisten = \"{required}\"\n{}\n\n\
         [global]\naccess_log = \"off\"\n\n[[site]]\nname = \"app\"\nhosts = [\"*\"]\n\n{}\
         [[request_rule]]\naction = \"deny\"\nunless = {{ fetch = \"client_cert\" }}\n\
         listeners = [\"optional\"]\n\
         [[request_rule]]\naction = \"set-header\"\nname = \"X-Client-Cert\"\nvalue = \"{{cert_used}}/{{cert_verify}}\"\n",
        tls("optional"),
        tls("required"),
        node_toml("a1", app.addr, "app"),
    );
    let _proxy = Proxy::start(&config, &[optional, required]);
    let builder = || {
        reqwest::Client::builder()
            .no_proxy()
            .danger_accept_invalid_certs(true)
            .resolve("app.example.com", optional)
    };
    let anonymous = builder().build().unwrap();
    let with_cert = builder()
        .identity(reqwest::Identity::from_pem(identity.as_bytes()).unwrap())
        .build()
        .unwrap();
    let get = |c: &reqwest::Client, addr: SocketAddr| {
        let c = c.clone();
        async move {
            let r = c
                .get(format!("https://app.example.com:{}/x", addr.port()))
                .send()
                .await?;
            let s = r.status().as_u16();
            Ok::<_, reqwest::Error>((s, r.text().await.unwrap_or_default()))
        }
    };
    let (s, body) = eventually("the node answers", Duration::from_secs(10), || async {
        match get(&with_cert, optional).await {
            Ok((200, b)) => Ok((200, b)),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    assert_eq!(s, 200);
    assert_eq!(echoed(&echoed_headers(&body), "x-client-cert"), ["1/0"]);
    // Without a certificate on the optional listener: refused by the rule.
    let (s, _) = get(&anonymous, optional).await.unwrap();
    assert_eq!(s, 403);
    // The required listener refuses it in the handshake, takes the other.
    assert!(
        get(&anonymous, required).await.is_err(),
        "no certificate, no connection"
    );
    let (s, body) = get(&with_cert, required).await.unwrap();
    assert_eq!(s, 200);
    assert_eq!(echoed(&echoed_headers(&body), "x-client-cert"), ["1/0"]);
}
