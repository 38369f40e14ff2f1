//! README.md's minimal config, taken from the README and run exactly as
//! written: the proxy on 127.0.0.1:8080 in front of two apps on 8081 and
//! 8082 (the test's own backends), each site answered by its node. The
//! ports are fixed by the README; the test suite's own ports are all from
//! 10000 up (`rdmalb_testbed::ports`), so only an outside process can hold
//! them, and the test then says so.

use std::net::SocketAddr;

use crate::support::*;

/// The first ```toml block under the README's "A minimal rdmalb.toml"
/// heading.
fn minimal_config() -> String {
    let readme =
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
            .expect("README.md");
    let section = readme
        .split("\n## ")
        .find(|s| s.starts_with("A minimal rdmalb.toml"))
        .expect("README.md has a section \"A minimal rdmalb.toml\"");
    let block = section
        .split("```toml\n")
        .nth(1)
        .and_then(|rest| rest.split("\n```").next())
        .expect("the section has a ```toml block");
    format!("{block}\n")
}

async fn bind(addr: &str) -> tokio::net::TcpListener {
    tokio::net::TcpListener::bind(addr)
        .await
        .unwrap_or_else(|e| {
            panic!(
                "{addr}, which README.md's minimal config uses, is taken by another process: {e}"
            )
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_minimal_config_serves_both_sites_as_written() {
    let config = minimal_config();
    // What the README says the file is: about 15 lines, two sites.
    assert!(config.lines().count() <= 20, "{config}");
    let parsed: toml::Table = config.parse().expect("the README's config is TOML");
    assert_eq!(parsed["site"].as_array().map(Vec::len), Some(2));

    let shop = Backend::start_on("shop-app", bind("127.0.0.1:8081").await);
    let blog = Backend::start_on("blog-app", bind("127.0.0.1:8082").await);
    // Fail with the port's owner named rather than with the proxy's bind error.
    drop(std::net::TcpListener::bind("127.0.0.1:8080").unwrap_or_else(|e| {
        panic!("127.0.0.1:8080, which README.md's minimal config uses, is taken by another process: {e}")
    }));
    let listen: SocketAddr = "127.0.0.1:8080".parse().unwrap();
    let proxy = Proxy::start(&config, &[listen]);

    let c = client();
    for (host, app) in [
        ("shop.localhost", "shop-app"),
        ("blog.localhost", "blog-app"),
    ] {
        let resp = c
            .get(format!("http://{listen}/"))
            .header("host", host)
            .send()
            .await
            .unwrap_or_else(|e| panic!("GET {host}: {e}; proxy log: {}", proxy.stderr_text()));
        assert_eq!(resp.status(), 200, "{host}");
        let served_by = resp
            .headers()
            .get("x-backend")
            .map(|v| v.to_str().unwrap().to_string());
        assert_eq!(served_by.as_deref(), Some(app), "{host}");
    }
    assert_eq!((shop.requests(), blog.requests()), (1, 1));
}
