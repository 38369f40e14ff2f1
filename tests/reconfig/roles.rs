//! Routing follows roles, end to end through a real `rdmalb proxy`: node
//! windows owned by the test (the sidecar's side of the role contract played
//! by a thread), real HTTP backends (every response names its node). An
//! admin move (`POST /reconfig/move`, the agent's lock + CAS path) sends an
//! idle node to a site: it serves that site only once applied and checked;
//! moved away again, it gets no new request of the old site from the moment
//! the move returns. `/status` shows the roles, `/metrics` the claims. A
//! move needs the admin bearer token and is refused from another origin.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use std::os::unix::fs::PermissionsExt;

use crate::support::reconfig::{Endpoint, Nodes, SITES};
use crate::support::{eventually, Backend, Proxy};

/// The admin token the proxies here are started with (`[admin] token_file`).
const TOKEN: &str = "admin-test-token-8c1f5e0b7a2d4c6e9f3a1b5d7e9c0a2f";

async fn served_by(client: &reqwest::Client, listen: SocketAddr, host: &str) -> String {
    let r = client
        .get(format!("http://{listen}/"))
        .header("host", host)
        .send()
        .await
        .expect("request");
    assert!(r.status().is_success(), "{host}: {}", r.status());
    r.headers()
        .get("x-backend")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
}

/// `POST /reconfig/move?{query}` with `headers`: status, JSON body and the
/// `WWW-Authenticate` header.
async fn post_with(
    client: &reqwest::Client,
    admin: SocketAddr,
    query: &str,
    headers: &[(&str, &str)],
) -> (u16, serde_json::Value, Option<String>) {
    let mut req = client.post(format!("http://{admin}/reconfig/move?{query}"));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let r = req.send().await.expect("admin");
    let code = r.status().as_u16();
    let challenge = r
        .headers()
        .get("www-authenticate")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let text = r.text().await.unwrap_or_default();
    (
        code,
        serde_json::from_str(&text).unwrap_or_default(),
        challenge,
    )
}

/// The `[[site]]` tables of [`SITES`], each with host `<site>.test`.
fn sites_toml() -> String {
    SITES
        .iter()
        .map(|s| format!("[[site]]\nname = \"{s}\"\nhosts = [\"{s}.test\"]\n\n"))
        .collect()
}

/// An admin move as an operator makes it: with the bearer token.
async fn post(
    client: &reqwest::Client,
    admin: SocketAddr,
    query: &str,
) -> (u16, serde_json::Value) {
    let bearer = format!("Bearer {TOKEN}");
    let (code, body, _) = post_with(client, admin, query, &[("authorization", &bearer)]).await;
    (code, body)
}

/// Three nodes behind a real proxy in rigid mode (n0 serves hot, n1 cold,
/// n2 is idle), its admin listener guarded by [`TOKEN`].
struct Farm {
    nodes: Nodes,
    _backends: [Backend; 3],
    proxy: Proxy,
    listen: SocketAddr,
    admin: SocketAddr,
    status: serde_json::Value,
}

async fn farm(tag: &str) -> Farm {
    farm_with(
        tag,
        "[reconfig]\nmode = \"rigid\"\nsensitivity = \"50ms\"\nhistory = \"50ms\"\n",
    )
    .await
}

/// [`farm`] with `reconfig` as its `[reconfig]` table.
async fn farm_with(tag: &str, reconfig: &str) -> Farm {
    let nodes = Nodes::start(tag, &[Some(0), Some(1), None], false);
    nodes.behaviour.lock().unwrap().apply_delay = vec![Duration::from_millis(100); 3];
    let backends = [
        Backend::start("n0").await,
        Backend::start("n1").await,
        Backend::start("n2").await,
    ];
    let dir = tempfile::tempdir().expect("tempdir");
    let token = dir.path().join("admin.token");
    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    // listener_toml ends with the [admin] table: the token file joins it.
    let (listener, listen, admin) = crate::support::listener_toml();
    let mut config = format!(
        "[health]\ninterval = \"100ms\"\nrise = 2\n\n{listener}token_file = \"admin.token\"\n\n"
    );
    config.push_str(&sites_toml());
    for (i, e) in nodes.endpoints.iter().enumerate() {
        let Endpoint::Shm(path) = e else {
            unreachable!()
        };
        let site = ["hot", "cold", "idle"][i];
        config.push_str(&format!(
            "[[node]]\nname = \"n{i}\"\naddress = \"{}\"\nsite = \"{site}\"\ntransport = \"shm\"\nsidecar = \"{}\"\n\n",
            backends[i].addr,
            path.display()
        ));
    }
    config.push_str(reconfig);
    let proxy = Proxy::start_in(dir, &config, &[listen, admin]);
    let client = crate::support::client();

    // /status shows every node's role.
    let status: serde_json::Value =
        eventually("roles in /status", Duration::from_secs(10), || async {
            let s: serde_json::Value = client
                .get(format!("http://{admin}/status"))
                .send()
                .await
                .map_err(|e| e.to_string())?
                .text()
                .await
                .map_err(|e| e.to_string())
                .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))?;
            let active = s["reconfig"]["nodes"].as_array().map_or(0, |n| {
                n.iter().filter(|n| n["effective"] == "active").count()
            });
            if active == 3 {
                Ok(s)
            } else {
                Err(format!("{s}"))
            }
        })
        .await;
    Farm {
        nodes,
        _backends: backends,
        proxy,
        listen,
        admin,
        status,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_moves_route_a_node_to_its_new_site_and_never_misroute() {
    let Farm {
        nodes,
        _backends,
        proxy,
        listen,
        admin,
        status,
    } = farm("admin").await;
    let client = crate::support::client();
    assert_eq!(status["reconfig"]["mode"], "rigid");
    assert_eq!(status["reconfig"]["nodes"][2]["site"], "idle");
    assert_eq!(status["reconfig"]["nodes"][0]["epoch"], 1);

    // Rigid: nothing moves by itself; n2 serves nothing.
    for _ in 0..20 {
        assert_eq!(served_by(&client, listen, "hot.test").await, "n0");
        assert_eq!(served_by(&client, listen, "cold.test").await, "n1");
    }

    // Refusals.
    assert_eq!(post(&client, admin, "node=n9&site=hot").await.0, 404);
    assert_eq!(post(&client, admin, "node=n2&site=nowhere").await.0, 404);
    assert_eq!(post(&client, admin, "node=n2").await.0, 400);
    assert_eq!(
        post(&client, admin, "node=n2&site=idle").await.0,
        409,
        "already idle"
    );
    let get = client
        .get(format!("http://{admin}/reconfig/move?node=n2&site=hot"))
        .send()
        .await
        .unwrap();
    assert_eq!(get.status().as_u16(), 405);

    // Move n2 to hot: served there once applied and checked, never for cold.
    let (code, body) = post(&client, admin, "node=n2&site=hot").await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["outcome"], "claimed");
    assert_eq!(body["epoch"], 2);
    assert_eq!(
        post(&client, admin, "node=n2&site=cold").await.0,
        409,
        "a switching node does not move"
    );
    eventually("n2 serving hot", Duration::from_secs(20), || async {
        let by = served_by(&client, listen, "hot.test").await;
        assert!(by == "n0" || by == "n2", "hot served by {by}");
        assert_eq!(served_by(&client, listen, "cold.test").await, "n1");
        if by == "n2" {
            Ok(())
        } else {
            Err(by)
        }
    })
    .await;
    assert_eq!(nodes.applied(2), 2);

    // Move n2 to cold: from the moment the move returns, no hot request
    // reaches it (in-flight ones would finish).
    let (code, body) = post(&client, admin, "node=n2&site=cold").await;
    assert_eq!(code, 200, "{body}");
    eventually("n2 serving cold", Duration::from_secs(20), || async {
        assert_eq!(served_by(&client, listen, "hot.test").await, "n0");
        let by = served_by(&client, listen, "cold.test").await;
        assert!(by == "n1" || by == "n2", "cold served by {by}");
        if by == "n2" {
            Ok(())
        } else {
            Err(by)
        }
    })
    .await;

    let metrics = crate::support::admin_text(admin, "/metrics").await;
    let claims = metrics
        .lines()
        .filter(|l| l.starts_with("rdmalb_reconfig_claims_total") && l.contains("by=\"admin\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>();
    assert_eq!(claims, 2.0, "{metrics}");
    drop(proxy);
}

/// `POST /runtime` with the admin token: status and answer.
async fn runtime(client: &reqwest::Client, admin: SocketAddr, command: &str) -> (u16, String) {
    let r = client
        .post(format!("http://{admin}/runtime"))
        .header("authorization", format!("Bearer {TOKEN}"))
        .body(command.to_string())
        .send()
        .await
        .expect("POST /runtime");
    (r.status().as_u16(), r.text().await.unwrap_or_default())
}

/// Node `i`'s entry in the agent's `/status` roles.
async fn role(client: &reqwest::Client, admin: SocketAddr, i: usize) -> serde_json::Value {
    let text = client
        .get(format!("http://{admin}/status"))
        .send()
        .await
        .expect("GET /status")
        .text()
        .await
        .unwrap_or_default();
    let s: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    s["reconfig"]["nodes"][i].clone()
}

/// The operator's word holds. n1 (home: cold) moved by hand to hot is a
/// loan the agent brings home as soon as hot is cool and the node's
/// cool-down (200 ms here) has passed; that is what happens with
/// `manual_pin = "off"`. Pinned (the default), it stays in hot, shown in
/// `/status`, until `release node n1`, and then goes home.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manual_move_holds_until_released() {
    let client = crate::support::client();
    let reconfig =
        "[reconfig]\nmode = \"reconfigure\"\nsensitivity = \"50ms\"\nhistory = \"50ms\"\n\
                    cooldown = \"200ms\"\n";
    let home = |admin, label: &'static str| {
        let client = client.clone();
        async move {
            eventually(label, Duration::from_secs(20), || async {
                let r = role(&client, admin, 1).await;
                if r["site"] == "cold" && r["effective"] == "active" {
                    Ok(())
                } else {
                    Err(r.to_string())
                }
            })
            .await
        }
    };
    let moved = |admin| {
        let client = client.clone();
        async move {
            let (code, answer) = runtime(&client, admin, "move node n1 site hot").await;
            assert_eq!(code, 200, "{answer}");
            answer
        }
    };

    // Without a pin the agent undoes the move.
    let f = farm_with("pin-off", &format!("{reconfig}manual_pin = \"off\"\n")).await;
    let answer = moved(f.admin).await;
    assert!(!answer.contains("pinned"), "{answer}");
    eventually("n1 in hot", Duration::from_secs(20), || async {
        let r = role(&client, f.admin, 1).await;
        (r["site"] == "hot").then_some(()).ok_or(r.to_string())
    })
    .await;
    home(f.admin, "n1 back home without a pin").await;
    drop(f);

    // Pinned: it stays, and /status says until when.
    let f = farm_with("pin", reconfig).await;
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let answer = moved(f.admin).await;
    assert!(
        answer.contains("pinned for 3600s (release node n1)"),
        "{answer}"
    );
    eventually("n1 serving hot", Duration::from_secs(20), || async {
        let r = role(&client, f.admin, 1).await;
        (r["site"] == "hot" && r["effective"] == "active")
            .then_some(())
            .ok_or(r.to_string())
    })
    .await;
    let r = role(&client, f.admin, 1).await;
    let until = r["pinned_until_unix_ms"]
        .as_u64()
        .unwrap_or_else(|| panic!("{r}"));
    assert!(
        (before + 3_599_000..=before + 3_700_000).contains(&until),
        "{r}"
    );
    assert_eq!(r["pinned_by"], 1, "{r}");
    // Many times the cool-down and the loan return: still in hot.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let r = role(&client, f.admin, 1).await;
    assert_eq!(r["site"], "hot", "the agent moved a pinned node: {r}");
    assert_eq!(f.nodes.applied(1), 2, "{r}");

    let (code, answer) = runtime(&client, f.admin, "release node n1").await;
    assert_eq!(
        (code, answer.as_str()),
        (200, "node n1 released: the agents may move it again\n\n")
    );
    home(f.admin, "n1 home after release").await;
    let r = role(&client, f.admin, 1).await;
    assert!(r["pinned_until_unix_ms"].is_null(), "{r}");
    let (code, answer) = runtime(&client, f.admin, "release node n1").await;
    assert_eq!((code, answer.as_str()), (200, "node n1 was not pinned\n\n"));
    assert_eq!(runtime(&client, f.admin, "release node n9").await.0, 404);
}

/// Mutations need the bearer token (401 with a Bearer challenge without it
/// or with a wrong one) and are refused when a browser could have sent them
/// for another site (403); reads stay open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_moves_need_the_token_and_refuse_other_origins() {
    let f = farm("admin-auth").await;
    let client = crate::support::client();
    let bearer = format!("Bearer {TOKEN}");
    let auth = ("authorization", bearer.as_str());
    let own_origin = format!("http://{}", f.admin);
    let move_n2 = "node=n2&site=hot";

    let (code, body, challenge) = post_with(&client, f.admin, move_n2, &[]).await;
    assert_eq!(code, 401, "without a token: {body}");
    assert!(
        challenge
            .as_deref()
            .is_some_and(|c| c.starts_with("Bearer")),
        "{challenge:?}"
    );
    let wrong = format!("Bearer {}", TOKEN.replace('8', "9"));
    let (code, body, challenge) =
        post_with(&client, f.admin, move_n2, &[("authorization", &wrong)]).await;
    assert_eq!(code, 401, "with a wrong token: {body}");
    assert!(challenge.is_some());
    for cross in [
        ("origin", "http://evil.example"),
        ("origin", "null"),
        ("sec-fetch-site", "cross-site"),
        ("content-type", "application/x-www-form-urlencoded"),
        ("content-type", "text/plain"),
    ] {
        let (code, body, _) = post_with(&client, f.admin, move_n2, &[auth, cross]).await;
        assert_eq!(code, 403, "{cross:?}: {body}");
    }
    // Nothing moved; reads need no token.
    let status: serde_json::Value =
        serde_json::from_str(&crate::support::admin_text(f.admin, "/status").await).unwrap();
    assert_eq!(status["reconfig"]["nodes"][2]["site"], "idle");

    let (code, body, _) = post_with(
        &client,
        f.admin,
        move_n2,
        &[
            auth,
            ("origin", &own_origin),
            ("sec-fetch-site", "same-origin"),
        ],
    )
    .await;
    assert_eq!(code, 200, "with the token: {body}");
    assert_eq!(body["outcome"], "claimed");
    drop(f.proxy);
}

/// A node that answers every request 421 Misdirected Request (it serves
/// another site now, and this proxy has not read its role word yet),
/// except its health check.
/// Returns its address and the count of requests it answered 421.
async fn misdirected_node() -> (SocketAddr, Arc<AtomicUsize>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = hits.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = l.accept().await else {
                continue;
            };
            let counted = counted.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut b = [0u8; 4096];
                loop {
                    let Ok(n) = s.read(&mut b).await else { return };
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&b[..n]);
                    while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        let health = buf.starts_with(b"GET /health ");
                        buf.drain(..end + 4);
                        let reply: &[u8] = if health {
                            b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"
                        } else {
                            counted.fetch_add(1, Ordering::SeqCst);
                            b"HTTP/1.1 421 Misdirected Request\r\ncontent-length: 0\r\n\r\n"
                        };
                        if s.write_all(reply).await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    (addr, hits)
}

/// Issue 12, campaign finding: a proxy whose view of a node's role is
/// behind (a link fault on its window, or the moment between another
/// proxy's claim and this proxy's next role read) forwards a request to a
/// node that serves another site now; the node answers 421. A request
/// without a body is replayed on another node of the site (RFC 9110
/// 15.5.20), so the client never sees the 421.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_421_from_a_node_that_moved_is_replayed_on_another_node() {
    misdirected_case("misdirected", false).await;
}

/// The same after a failed connect on a dead node first: the replay after
/// a 421 has its own budget, so the request still ends on a node that
/// serves the site (the chaos campaign's long run over shm, seed 1001, saw
/// 3 requests get the 421 when the connect retry had used the only one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_421_after_a_failed_connect_is_still_replayed() {
    misdirected_case("misdirected-dead", true).await;
}

/// Nodes of site hot behind a roundrobin proxy: one that moved (answers
/// 421), one good (`n-good`), and with `dead`, first one nobody listens on
/// (no health check, so it stays in rotation). Every request must end 200
/// from the good node.
async fn misdirected_case(tag: &str, dead: bool) {
    let (moved, hits) = misdirected_node().await;
    let good = Backend::start("n-good").await;
    let mut addrs = Vec::new();
    if dead {
        addrs.push((crate::support::free_addr(), "check = false\n"));
    }
    addrs.push((moved, ""));
    addrs.push((good.addr, ""));
    let sites: Vec<Option<u16>> = addrs.iter().map(|_| Some(0)).collect();
    let nodes = Nodes::start(tag, &sites, false);
    let (listener, listen, _admin) = crate::support::listener_toml();
    let mut config = format!(
        "[global]\nbalance = \"roundrobin\"\n\n[health]\npath = \"/health\"\ninterval = \"100ms\"\n\n{listener}\n"
    );
    config.push_str(&sites_toml());
    for (i, (e, (addr, extra))) in nodes.endpoints.iter().zip(&addrs).enumerate() {
        let Endpoint::Shm(path) = e else {
            unreachable!()
        };
        config.push_str(&format!(
            "[[node]]\nname = \"n{i}\"\naddress = \"{addr}\"\nsite = \"hot\"\n{extra}transport = \"shm\"\nsidecar = \"{}\"\n\n",
            path.display()
        ));
    }
    let _proxy = Proxy::start(&config, &[listen]);
    let client = crate::support::client();
    // Until the moved node (it still passes its health check) has been
    // tried a few times, bounded.
    let mut i = 0;
    while hits.load(Ordering::SeqCst) < 3 {
        assert!(i < 500, "the moved node never got a request");
        i += 1;
        let r = client
            .get(format!("http://{listen}/page{i}"))
            .header("host", "hot.test")
            .send()
            .await
            .expect("request");
        assert_eq!(r.status(), 200, "request {i} got {}", r.status());
        assert_eq!(r.headers()["x-backend"], "n-good");
    }
}

/// Chaos campaign finding (seed 2002 over tcp): a proxy (re)started while
/// other proxies had moved its nodes routed by the sites its config gives
/// them until it read their role words, and their apps answered 421. A
/// node with a window now gets traffic only once its role word has been
/// read: here one whose window cannot be read gets none at all, while a
/// node without a window serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_role_word_was_never_read_gets_no_traffic() {
    let (unknown, hits) = misdirected_node().await;
    let good = Backend::start("n-good").await;
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-window");
    let (listener, listen, _admin) = crate::support::listener_toml();
    let mut config = format!(
        "[global]\nbalance = \"roundrobin\"\n\n[health]\npath = \"/health\"\ninterval = \"100ms\"\n\n{listener}\n"
    );
    config.push_str(&sites_toml());
    config.push_str(&format!(
        "[[node]]\nname = \"n0\"\naddress = \"{unknown}\"\nsite = \"hot\"\ntransport = \"shm\"\nsidecar = \"{}\"\n\n[[node]]\nname = \"n1\"\naddress = \"{}\"\nsite = \"hot\"\n",
        missing.display(),
        good.addr
    ));
    let _proxy = Proxy::start(&config, &[listen]);
    let client = crate::support::client();
    // Both nodes pass their health checks; give them time to be up.
    tokio::time::sleep(Duration::from_millis(500)).await;
    for i in 0..20 {
        let r = client
            .get(format!("http://{listen}/page{i}"))
            .header("host", "hot.test")
            .send()
            .await
            .expect("request");
        assert_eq!(r.status(), 200, "request {i}");
        assert_eq!(r.headers()["x-backend"], "n-good");
    }
    assert_eq!(
        hits.load(Ordering::SeqCst),
        0,
        "a node whose role word was never read got requests"
    );
}
