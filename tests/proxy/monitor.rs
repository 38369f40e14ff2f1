//! `monitor_uri` (HAProxy's `monitor-uri`) against the real HAProxy: the
//! same status, headers that matter and page for the monitor path, and any
//! other path still routed to the site.

use crate::support::haproxy::Haproxy;
use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn monitor_uri_answers_as_haproxys() {
    let test = "monitor_uri_answers_as_haproxys";
    let backend = Backend::start("app").await;
    let (web, haproxy_web) = (free_addr(), free_addr());
    let _proxy = Proxy::start(
        &www_config(
            &format!("[[listener]]\nname = \"fe\"\nlisten = \"{web}\"\nmonitor_uri = \"/haproxy_test\"\n\n"),
            "",
            backend.addr,
        ),
        &[web],
    );
    let hdir = tempfile::tempdir().unwrap();
    let Some(_haproxy) = Haproxy::start(
        test,
        hdir.path(),
        &format!(
            "defaults\n    mode http\n    timeout connect 1s\n    timeout client 5s\n    timeout server 5s\n\
             frontend fe\n    bind {haproxy_web}\n    monitor-uri /haproxy_test\n    default_backend www\n\
             backend www\n    server n1 {}\n",
            backend.addr
        ),
        &[haproxy_web],
    ) else {
        return;
    };
    let c = client();
    let get = |addr: std::net::SocketAddr, path: &'static str| {
        let c = c.clone();
        async move {
            let r = c
                .get(format!("http://{addr}{path}"))
                .header("host", "www.example.com")
                .send()
                .await
                .unwrap();
            let status = r.status().as_u16();
            let headers = ["content-type", "cache-control"]
                .map(|h| r.headers().get(h).map(|v| v.to_str().unwrap().to_string()));
            (status, headers, r.text().await.unwrap())
        }
    };
    let before = backend.requests();
    let ours = get(web, "/haproxy_test").await;
    assert_eq!(ours, get(haproxy_web, "/haproxy_test").await);
    assert_eq!(ours.0, 200);
    assert!(ours.2.contains("Service ready."), "{}", ours.2);
    // Answered by the proxy: the node saw none of them.
    assert_eq!(backend.requests(), before);
    // Another path, or the same with a query, goes to the site.
    assert_eq!(
        get(web, "/haproxy_test?x=1").await.0,
        get(haproxy_web, "/haproxy_test?x=1").await.0
    );
    assert!(backend.requests() > before);
}
