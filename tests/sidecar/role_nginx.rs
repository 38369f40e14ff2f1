//! Role application end to end with Debian's nginx as the unmodified app:
//! nginx runs with its own prefix, pid file and an `include` of the file the
//! sidecar owns. It runs with a master process (a single-process nginx does
//! not start listening on a reloaded config), in its own process group so
//! the guard kills master and workers together; the real `rdmalb sidecar` binary
//! renders the shipped template (`conf/role/nginx-site.conf.tpl`), and the
//! test acts as a proxy, CASing the role word over shm (and over tcp with a
//! PSK), then checks what nginx serves.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::role::{claim, get_json, outcome, served, SidecarProc};
use crate::support::{admin_text, client, eventually, free_addr, GroupNginx, NGINX};
use rdmalb_window::layout::word;
use rdmalb_window::{
    site_table_hash, Expect, Psk, RemoteWindow, RoleState, RoleStatusCode, RoleWord, ShmWindow,
    SiteSlot, TcpWindow,
};

const SITES: [&str; 3] = ["shop", "blog", "news"];
const SHOP: SiteSlot = SiteSlot::Site(0);
const BLOG: SiteSlot = SiteSlot::Site(1);
const NEWS: SiteSlot = SiteSlot::Site(2);

/// nginx + the sidecar that manages its site file, in one temp dir.
struct Node {
    dir: tempfile::TempDir,
    app: std::net::SocketAddr,
    admin: std::net::SocketAddr,
    tcp: std::net::SocketAddr,
    sidecar: SidecarProc,
    _nginx: GroupNginx,
}

fn d(dir: &Path) -> String {
    dir.display().to_string()
}

impl Node {
    /// `news_template` is the news site's template text (the failing cases).
    fn start(news_template: &str, verify_timeout: &str) -> Option<Node> {
        let dir = tempfile::tempdir().unwrap();
        let p = d(dir.path());
        let app = free_addr();
        for site in SITES {
            std::fs::create_dir_all(dir.path().join("www").join(site)).unwrap();
            std::fs::write(
                dir.path().join("www").join(site).join("index.html"),
                format!("{site} home\n"),
            )
            .unwrap();
        }
        // Before the sidecar runs, nginx serves a placeholder: the sidecar
        // must apply the initial site at start-up.
        let nginx = GroupNginx::start(dir.path(), app)?;
        let tpl = Path::new(env!("CARGO_MANIFEST_DIR")).join("conf/role/nginx-site.conf.tpl");
        std::fs::write(dir.path().join("news.tpl"), news_template).unwrap();
        let psk = dir.path().join("cluster.psk");
        Psk::generate().write_new_file(&psk).unwrap();
        std::fs::set_permissions(&psk, std::fs::Permissions::from_mode(0o600)).unwrap();
        let (admin, tcp) = (free_addr(), free_addr());
        let config = format!(
            r#"node = "n-role"
node_id = 9
sites = ["shop", "blog", "news"]
site = "shop"
[window.shm]
path = "{p}/window"
[window.tcp]
listen = "{tcp}"
psk_file = "cluster.psk"
[[collector]]
kind = "system"
[admin]
listen = "{admin}"
[role]
file = "site.conf"
reload = ["sh", "{reload}", "{p}/nginx.pid", "{NGINX}", "-p", "{p}", "-e", "{p}/error.log", "-c", "{p}/nginx.conf", "-s", "reload"]
verify = "{app}"
verify_timeout = "{verify_timeout}"
verify_header = "x-rdmalb-site"
[role.site.shop]
template = "{tpl}"
hosts = ["shop.example", "www.shop.example"]
health_path = "/healthz"
vars = {{ root = "{p}/www/shop" }}
[role.site.blog]
template = "{tpl}"
hosts = ["blog.example"]
health_path = "/healthz"
vars = {{ root = "{p}/www/blog" }}
[role.site.news]
template = "news.tpl"
hosts = ["news.example"]
health_path = "/healthz"
vars = {{ root = "{p}/www/news" }}
"#,
            tpl = tpl.display(),
            reload = tpl.with_file_name("nginx-reload.sh").display()
        );
        let sidecar = SidecarProc::start(
            dir.path(),
            &config,
            admin,
            Some(dir.path().join("error.log")),
        );
        Some(Node {
            dir,
            app,
            admin,
            tcp,
            sidecar,
            _nginx: nginx,
        })
    }

    fn site_file(&self) -> PathBuf {
        self.dir.path().join("site.conf")
    }

    fn shm(&self) -> ShmWindow {
        ShmWindow::open(self.dir.path().join("window"), &expect()).unwrap()
    }

    async fn tcp(&self) -> TcpWindow {
        let psk = Psk::from_file(self.dir.path().join("cluster.psk")).unwrap();
        TcpWindow::connect(self.tcp, &psk, 1, &expect())
            .await
            .unwrap()
    }

    /// The site nginx says served `Host: host` (its X-Rdmalb-Site header).
    async fn served(&self, host: &str) -> (u16, String) {
        served(self.app, host, "/", "x-rdmalb-site").await
    }

    async fn status_json(&self) -> serde_json::Value {
        get_json(&format!("http://{}/status", self.admin)).await
    }
}

fn expect() -> Expect {
    Expect {
        node_id: Some(9),
        site_hash: Some(site_table_hash(&SITES)),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nginx_switches_site_on_a_claim_over_shm_and_survives_a_broken_template() {
    // The news template is not valid nginx: `nginx -s reload` refuses it.
    let Some(mut node) = Node::start(
        "server {\n    listen {{listen}};\n    no_such_directive {{site}};\n}\n",
        "5s",
    ) else {
        return;
    };
    let w = node.shm();

    // Start-up: role word initialised, initial site applied and verified.
    let role = RoleWord::decode(w.read_word(word::ROLE).await.unwrap()).unwrap();
    assert_eq!(
        role,
        RoleWord {
            site: SHOP,
            state: RoleState::Active,
            epoch: 1
        }
    );
    let (st, applied) = outcome(&node.sidecar, &w, 1).await;
    assert_eq!(
        (st.code, st.serving, applied),
        (RoleStatusCode::Ok, SHOP, 1)
    );
    assert_eq!(node.served("shop.example").await, (200, "shop".to_string()));

    // Claim for blog.
    let c = claim(&w, BLOG).await;
    let (st, applied) = outcome(&node.sidecar, &w, c.epoch).await;
    assert_eq!(
        (st.code, st.serving, applied),
        (RoleStatusCode::Ok, BLOG, c.epoch),
        "{}",
        node.sidecar.logs()
    );
    assert_eq!(node.served("blog.example").await, (200, "blog".to_string()));
    let page = crate::support::get_host(&client(), node.app, "blog.example", "/index.html")
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(page, "blog home\n");
    let blog_file = std::fs::read(node.site_file()).unwrap();

    // Claim for news, whose config nginx rejects: RELOAD_FAILED, the blog
    // file is back, nginx still serves blog, the sidecar keeps running.
    let c = claim(&w, NEWS).await;
    let (st, applied) = outcome(&node.sidecar, &w, c.epoch).await;
    assert_eq!(
        (st.code, st.serving, applied),
        (RoleStatusCode::ReloadFailed, BLOG, c.epoch - 1)
    );
    assert_eq!(std::fs::read(node.site_file()).unwrap(), blog_file);
    assert_eq!(node.served("blog.example").await, (200, "blog".to_string()));
    node.sidecar.assert_running();
    let status = node.status_json().await;
    assert_eq!(status["role_status"]["code"], "reload_failed");
    assert_eq!(status["role_status"]["serving"], "blog");
    let failure = &status["role_application"]["last_failure"];
    assert_eq!(failure["site"], "news");
    assert!(
        failure["reason"]
            .as_str()
            .unwrap()
            .contains("no_such_directive"),
        "{failure}"
    );
    assert_eq!(status["role_application"]["last_switch"]["site"], "blog");

    // Rollback as the agent does it: claim the site it really serves.
    let c = claim(&w, st.serving).await;
    let (st, applied) = outcome(&node.sidecar, &w, c.epoch).await;
    assert_eq!(
        (st.code, st.serving, applied),
        (RoleStatusCode::Ok, BLOG, c.epoch)
    );

    // Back to shop; the switch time is in /metrics.
    let c = claim(&w, SHOP).await;
    let (st, _) = outcome(&node.sidecar, &w, c.epoch).await;
    assert_eq!(st.code, RoleStatusCode::Ok);
    assert_eq!(
        node.served("www.shop.example").await,
        (200, "shop".to_string())
    );
    // The sidecar records the switch in /metrics after it publishes the
    // outcome in the window (off the switch's critical path): wait for it.
    let admin = node.admin;
    eventually(
        "the fourth switch in /metrics",
        Duration::from_secs(10),
        || async move {
            let metrics = admin_text(admin, "/metrics").await;
            let counted = [
                "rdmalb_sidecar_role_switch_seconds_count{node=\"n-role\"} 4",
                "rdmalb_sidecar_role_switches_total{node=\"n-role\",result=\"reload_failed\"} 1",
            ]
            .iter()
            .all(|line| metrics.contains(line));
            if counted {
                Ok(())
            } else {
                Err(metrics)
            }
        },
    )
    .await;
    node.sidecar.assert_running();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nginx_switches_site_on_a_claim_over_tcp_and_rolls_back_a_failed_verification() {
    // The news config is valid nginx but its health check answers 500.
    let Some(mut node) = Node::start(
        "server {\n    listen {{listen}};\n    add_header X-Rdmalb-Site {{site}} always;\n    location = {{health_path}} { return 500; }\n}\n",
        "500ms",
    ) else {
        return;
    };
    let w = node.tcp().await;
    outcome(&node.sidecar, &w, 1).await;

    let c = claim(&w, BLOG).await;
    let (st, applied) = outcome(&node.sidecar, &w, c.epoch).await;
    assert_eq!(
        (st.code, st.serving, applied),
        (RoleStatusCode::Ok, BLOG, c.epoch)
    );
    assert_eq!(node.served("blog.example").await, (200, "blog".to_string()));
    let blog_file = std::fs::read(node.site_file()).unwrap();

    let c = claim(&w, NEWS).await;
    let (st, applied) = outcome(&node.sidecar, &w, c.epoch).await;
    assert_eq!(
        (st.code, st.serving, applied),
        (RoleStatusCode::VerifyFailed, BLOG, c.epoch - 1)
    );
    // Restored and reloaded: nginx serves blog again, not news.
    assert_eq!(std::fs::read(node.site_file()).unwrap(), blog_file);
    let served = eventually("nginx back on blog", Duration::from_secs(10), || async {
        match node.served("blog.example").await {
            (200, s) if s == "blog" => Ok(()),
            other => Err(format!("{other:?}")),
        }
    });
    served.await;
    node.sidecar.assert_running();
    let status = node.status_json().await;
    assert!(
        status["role_application"]["last_failure"]["reason"]
            .as_str()
            .unwrap()
            .contains("500"),
        "{status}"
    );
}
