//! Request and response rules through the real `rdmalb proxy`: a deny, a
//! redirect, a `return`, a header the node sees, a site chosen from a map
//! file, response headers and an error page (docs/rules.md).

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
