//! Sticky cookies with `maxidle` and `maxlife` carry their dates in the
//! value (HAProxy's `SRV|LAST|FIRST`, 4-second units as five base64
//! characters): the cookie rdmalb inserts must be the one HAProxy inserts,
//! each must pin the client on the other, and an expired one must be
//! ignored by both. Real HAProxy and the imported config in rdmalb, in
//! front of the same echo servers.

use std::net::SocketAddr;
use std::time::SystemTime;

use super::corpus::import;
use super::haproxy::rewrite;
use crate::support::haproxy::Haproxy;
use crate::support::*;

const CFG: &str = "\
defaults
    mode http
    timeout connect 5s
    timeout client 30s
    timeout server 30s

frontend web
    bind :80
    default_backend shop

backend shop
    balance uri
    cookie SRV insert maxidle 30m maxlife 8h
    server s1 10.0.1.1:8080 cookie s1
    server s2 10.0.1.2:8080 cookie s2
    server s3 10.0.1.3:8080 cookie s3
";

/// The server that answered and the `Set-Cookie` it came with.
async fn get(addr: SocketAddr, path: &str, cookie: Option<&str>) -> (String, Option<String>) {
    let mut req = client().get(format!("http://{addr}{path}"));
    if let Some(c) = cookie {
        req = req.header("cookie", c);
    }
    let r = req.send().await.expect("request");
    let server = r.headers()["x-backend"].to_str().unwrap().to_string();
    let set = r
        .headers()
        .get("set-cookie")
        .map(|v| v.to_str().unwrap().to_string());
    (server, set)
}

/// HAProxy's `s30tob64`.
fn b64(v: u32) -> String {
    const T: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    (0..5)
        .map(|i| T[((v >> (24 - 6 * i)) & 0x3f) as usize] as char)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dated_cookies_are_haproxys_and_work_on_either_proxy() {
    let dir = tempfile::tempdir().unwrap();
    let mut servers = Vec::new();
    let (haproxy_cfg, h) = rewrite(CFG, dir.path(), &mut servers);
    let (rdmalb_cfg, r) = rewrite(CFG, dir.path(), &mut servers);
    let mut backends = Vec::new();
    for (b, s, a) in &servers {
        let l = tokio::net::TcpListener::bind(a).await.unwrap();
        backends.push(Backend::start_on(&format!("{b}/{s}"), l));
    }
    let hdir = dir.path().join("haproxy");
    std::fs::create_dir(&hdir).unwrap();
    let Some(_haproxy) = Haproxy::start(
        "dated_cookies_are_haproxys_and_work_on_either_proxy",
        &hdir,
        &haproxy_cfg,
        &[h[0].addr],
    ) else {
        return;
    };
    std::fs::write(dir.path().join("dated.cfg"), &rdmalb_cfg).unwrap();
    let (toml, notes, code) = import(dir.path(), "dated", &[]);
    assert_eq!(code, 0, "{notes}");
    assert!(toml.contains("maxidle = \"1800s\""), "{toml}");
    let _proxy = Proxy::start(&toml, &[r[0].addr]);
    let (ha, rd) = (h[0].addr, r[0].addr);

    // The same cookie for the same new client (a 4-second tick between the
    // two requests changes the dates: then try again, a bounded number of
    // times).
    let mut seen = Vec::new();
    let mut same = None;
    for path in ["/a", "/b", "/c", "/d", "/e"] {
        let want = get(ha, path, None).await;
        let got = get(rd, path, None).await;
        if want == got {
            same = Some(want);
            break;
        }
        seen.push(format!("{path}: HAProxy {want:?}, rdmalb {got:?}"));
    }
    let (server, set) = same.unwrap_or_else(|| panic!("{seen:#?}"));
    let set = set.expect("a new client gets a cookie");
    let value = set
        .strip_prefix("SRV=")
        .and_then(|v| v.split(';').next())
        .unwrap()
        .to_string();
    assert_eq!(value.split('|').count(), 3, "{set}");

    // Each proxy's cookie pins the client on the other.
    let node = value.split('|').next().unwrap();
    assert!(server.ends_with(&format!("/{node}")), "{server} {set}");
    let cookie = format!("SRV={value}");
    for path in ["/x", "/y", "/z"] {
        assert_eq!(get(rd, path, Some(&cookie)).await.0, server);
        assert_eq!(get(ha, path, Some(&cookie)).await.0, server);
    }

    // Idle for an hour (over maxidle): both ignore it and balance the
    // request by its path, with a fresh cookie.
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs() as u32;
    let old = b64((now - 3600) >> 2);
    let other = ["s1", "s2", "s3"].into_iter().find(|s| *s != node).unwrap();
    let stale = format!("SRV={other}|{old}|{old}");
    for path in ["/p", "/q", "/r"] {
        let (hs, hset) = get(ha, path, Some(&stale)).await;
        let (rs, rset) = get(rd, path, Some(&stale)).await;
        assert_eq!(hs, rs, "{path}");
        assert!(
            hset.is_some() && rset.is_some(),
            "{path}: {hset:?} {rset:?}"
        );
    }
    // Within maxidle, the other node's cookie keeps the client there.
    let fresh = format!("SRV={other}|{}|{}", b64(now >> 2), b64((now - 60) >> 2));
    assert!(get(rd, "/p", Some(&fresh)).await.0.ends_with(other));
    assert!(get(ha, "/p", Some(&fresh)).await.0.ends_with(other));
}
