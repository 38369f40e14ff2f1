//! End to end with everything real: three nodes, each Debian's nginx (its own
//! prefix, an `include` of the file its sidecar owns) and a real `rdmalb
//! sidecar` (shm window, push collector, role templates from
//! `conf/role/`), and two real `rdmalb proxy` processes: proxy 1 in
//! `reconfigure` mode, proxy 2 `rigid` (it only follows role words). The
//! test pushes application load: the shop site runs hot, the blog's second
//! node is idle. Proxy 1's agent claims that node; its sidecar rewrites
//! nginx's config and reloads it; both proxies route shop requests to it
//! once applied and checked. All along, through both proxies, every response
//! carries the site that served it (nginx's `X-Rdmalb-Site`) and the node
//! (the page body): none is misrouted, including by the proxy that did not
//! make the claim.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::{client, eventually, free_addr, ChildGuard, GroupNginx, NGINX};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const SITES: [&str; 2] = ["shop", "blog"];

/// One backend node: nginx plus its sidecar.
struct Node {
    dir: tempfile::TempDir,
    app: SocketAddr,
    push: SocketAddr,
    sidecar: ChildGuard,
    _nginx: GroupNginx,
}

impl Node {
    fn start(name: &str, id: u16, site: &str) -> Node {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().display().to_string();
        let app = free_addr();
        for s in SITES {
            let root = dir.path().join("www").join(s);
            std::fs::create_dir_all(&root).unwrap();
            std::fs::write(root.join("index.html"), format!("{s} on {name}\n")).unwrap();
        }
        // The sidecar reloads nginx at start-up: nginx must be up first.
        let nginx = GroupNginx::start(dir.path(), app).expect("nginx is installed");
        let role = Path::new(env!("CARGO_MANIFEST_DIR")).join("conf/role");
        let (admin, push) = (free_addr(), free_addr());
        let mut config = format!(
            "node = \"{name}\"\nnode_id = {id}\nsites = [\"shop\", \"blog\"]\nsite = \"{site}\"\n\
             [window.shm]\npath = \"{p}/window\"\n\
             [[collector]]\nkind = \"push\"\nlisten = \"{push}\"\n\
             [admin]\nlisten = \"{admin}\"\n\
             [role]\nfile = \"site.conf\"\n\
             reload = [\"sh\", \"{reload}\", \"{p}/nginx.pid\", \"{NGINX}\", \"-p\", \"{p}\", \"-e\", \"{p}/error.log\", \"-c\", \"{p}/nginx.conf\", \"-s\", \"reload\"]\n\
             verify = \"{app}\"\nverify_timeout = \"10s\"\nverify_header = \"x-rdmalb-site\"\n",
            reload = role.join("nginx-reload.sh").display(),
        );
        for s in SITES {
            config.push_str(&format!(
                "[role.site.{s}]\ntemplate = \"{}\"\nhosts = [\"{s}.example\"]\nhealth_path = \"/healthz\"\nvars = {{ root = \"{p}/www/{s}\" }}\n",
                role.join("nginx-site.conf.tpl").display()
            ));
        }
        let cfg = dir.path().join("sidecar.toml");
        std::fs::write(&cfg, config).unwrap();
        let sidecar = Command::new(crate::support::RDMALB)
            .args(["sidecar", "-c"])
            .arg(&cfg)
            .env("RDMALB_LOG", "info")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("sidecar.log")).unwrap())
            .spawn()
            .expect("spawn rdmalb sidecar");
        let mut node = Node {
            dir,
            app,
            push,
            sidecar: ChildGuard { child: sidecar },
            _nginx: nginx,
        };
        for _ in 0..800 {
            if let Ok(Some(status)) = node.sidecar.child.try_wait() {
                panic!("sidecar {name} exited ({status}):\n{}", node.log());
            }
            if std::net::TcpStream::connect(admin).is_ok()
                && node.dir.path().join("window").exists()
            {
                return node;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        panic!("sidecar {name} did not start:\n{}", node.log());
    }

    fn log(&self) -> String {
        let sc = std::fs::read_to_string(self.dir.path().join("sidecar.log")).unwrap_or_default();
        let ng = std::fs::read_to_string(self.dir.path().join("error.log")).unwrap_or_default();
        format!("--- sidecar:\n{sc}\n--- nginx:\n{ng}")
    }

    /// Pushes the application's load (busy of 10 workers).
    async fn push_busy(&self, busy: u32) {
        let stream = tokio::net::TcpStream::connect(self.push)
            .await
            .expect("push");
        let (rd, mut wr) = stream.into_split();
        wr.write_all(format!("busy={busy} capacity=10 queue=0\n").as_bytes())
            .await
            .unwrap();
        let mut line = String::new();
        BufReader::new(rd).read_line(&mut line).await.unwrap();
        assert_eq!(line.trim(), "ok", "push rejected");
    }
}

/// (status, site that served, node that served) for one request.
async fn get(c: &reqwest::Client, listen: SocketAddr, site: &str) -> (u16, String, String) {
    let r = c
        .get(format!("http://{listen}/"))
        .header("host", format!("{site}.example"))
        .send()
        .await
        .expect("request");
    let status = r.status().as_u16();
    let served = r
        .headers()
        .get("x-rdmalb-site")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let body = r.text().await.unwrap_or_default();
    let node = body.trim().rsplit(' ').next().unwrap_or("").to_string();
    (status, served, node)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hot_site_gets_an_idle_nginx_node_and_no_request_is_misrouted() {
    if !crate::support::nginx_available(
        "a_hot_site_gets_an_idle_nginx_node_and_no_request_is_misrouted",
    ) {
        return;
    }
    let nodes = [
        Node::start("n0", 1, "shop"),
        Node::start("n1", 2, "blog"),
        Node::start("n2", 3, "blog"),
    ];
    let mut cluster = String::new();
    for s in SITES {
        cluster.push_str(&format!(
            "[[site]]\nname = \"{s}\"\nhosts = [\"{s}.example\"]\nhealth_path = \"/healthz\"\n\n"
        ));
    }
    for (i, n) in nodes.iter().enumerate() {
        cluster.push_str(&format!(
            "[[node]]\nname = \"n{i}\"\nnode_id = {}\naddress = \"{}\"\nsite = \"{}\"\ntransport = \"shm\"\nsidecar = \"{}\"\n\n",
            i + 1,
            n.app,
            ["shop", "blog", "blog"][i],
            n.dir.path().join("window").display()
        ));
    }
    let health = "[health]\ninterval = \"100ms\"\nrise = 2\n\n";
    // Proxy 1 runs the agent; proxy 2 (rigid) only follows the role words,
    // so a claim it did not make must stop its old-site requests in time.
    let (listener, listen, admin) = crate::support::listener_toml();
    let config = format!(
        "{health}{listener}{cluster}[reconfig]\nmode = \"reconfigure\"\nsensitivity = \"50ms\"\nhistory = \"300ms\"\ncooldown = \"0s\"\n"
    );
    let (listener2, listen2, admin2) = crate::support::listener_toml();
    let config2 = format!(
        "[global]\nproxy_id = 2\n\n{health}{listener2}{cluster}[reconfig]\nmode = \"rigid\"\n"
    );
    // Quiet start: nobody is hot.
    for n in &nodes {
        n.push_busy(1).await;
    }
    let proxy = crate::support::Proxy::start(&config, &[listen, admin]);
    let proxy2 = crate::support::Proxy::start(&config2, &[listen2, admin2]);
    let c = client();
    for admin in [admin, admin2] {
        eventually(
            "every node active and up",
            Duration::from_secs(30),
            || async {
                let s = crate::support::admin_status(admin).await;
                let active = s["reconfig"]["nodes"].as_array().map_or(0, |n| {
                    n.iter().filter(|n| n["effective"] == "active").count()
                });
                let up = s["nodes"]
                    .as_array()
                    .map_or(0, |n| n.iter().filter(|n| n["state"] == "up").count());
                if active == 3 && up == 3 {
                    Ok(())
                } else {
                    Err(s.to_string())
                }
            },
        )
        .await;
    }

    // Shop runs hot (9 of 10 workers busy), blog's n1 is half busy, n2 idle.
    nodes[0].push_busy(9).await;
    nodes[1].push_busy(5).await;
    nodes[2].push_busy(0).await;
    // Bounded (60 s): a broken build fails here instead of hanging.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    // Until both proxies have sent shop requests to n2, through both
    // proxies alike: every answer from the site asked for.
    let mut shop_nodes = [
        std::collections::BTreeSet::new(),
        std::collections::BTreeSet::new(),
    ];
    while !shop_nodes.iter().all(|s| s.contains("n2")) {
        assert!(
            std::time::Instant::now() < deadline,
            "shop never served by n2 through both proxies ({shop_nodes:?}):\n{}\n{}",
            crate::support::admin_status(admin).await,
            nodes[2].log()
        );
        for (p, via) in [listen, listen2].into_iter().enumerate() {
            for site in SITES {
                let (code, served, node) = get(&c, via, site).await;
                assert_eq!(code, 200, "{site} answered {code} through proxy {}", p + 1);
                assert_eq!(
                    served,
                    site,
                    "a {site} request through proxy {} was served as {served} by {node}",
                    p + 1
                );
                if site == "shop" {
                    shop_nodes[p].insert(node);
                } else {
                    assert!(node == "n1" || node == "n2", "blog served by {node}");
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // From now on blog is n1's alone and shop is n0's and n2's.
    for i in 0..40 {
        let via = if i % 2 == 0 { listen } else { listen2 };
        let (code, served, node) = get(&c, via, "blog").await;
        assert_eq!((code, served.as_str(), node.as_str()), (200, "blog", "n1"));
        let (code, served, node) = get(&c, via, "shop").await;
        assert_eq!((code, served.as_str()), (200, "shop"));
        assert!(node == "n0" || node == "n2", "shop served by {node}");
    }
    // One hot event, one claim: shop's load is now (0.9 + 0) / 2.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let s = crate::support::admin_status(admin).await;
    assert_eq!(s["reconfig"]["counters"]["claims"], 1, "{s}");
    let n2 = &s["reconfig"]["nodes"][2];
    assert_eq!(
        (n2["site"].as_str(), n2["effective"].as_str()),
        (Some("shop"), Some("active")),
        "{s}"
    );
    assert_eq!(n2["epoch"], 2);
    let s2 = crate::support::admin_status(admin2).await;
    assert_eq!(
        s2["reconfig"]["counters"]["claims"], 0,
        "proxy 2 only follows"
    );
    assert_eq!(s2["reconfig"]["nodes"][2]["site"], "shop");
    drop(proxy);
    drop(proxy2);
}
