//! Role application end to end with our test server (`rdmalb testsrv`, one
//! process, re-reads its site file on SIGHUP) as the app: the shipped
//! example template (`conf/role/testsrv-site.toml.tpl`), the real sidecar
//! binary, claims over shm. testsrv answers 421 for hosts of a site it does
//! not serve, so after a switch the old site's requests must be refused.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::role::{claim, get_json, outcome, served, SidecarProc};
use crate::support::{free_addr, ChildGuard};
use rdmalb_window::layout::word;
use rdmalb_window::{
    site_table_hash, Expect, RemoteWindow, RoleState, RoleStatusCode, RoleWord, ShmWindow, SiteSlot,
};

const SHOP: SiteSlot = SiteSlot::Site(0);
const BLOG: SiteSlot = SiteSlot::Site(1);
const NEWS: SiteSlot = SiteSlot::Site(2);

/// A testsrv app serving shop and the sidecar config around it (templates
/// for shop and blog from the shipped example; news renders a site file
/// testsrv rejects).
struct Node {
    _testsrv: ChildGuard,
    app: std::net::SocketAddr,
    admin: std::net::SocketAddr,
    config: String,
}

fn testsrv_node(d: &Path) -> Node {
    let p = d.display();
    let (app, admin) = (free_addr(), free_addr());
    std::fs::write(
        d.join("site.toml"),
        "site = \"shop\"\nhosts = [\"shop.example\"]\n",
    )
    .unwrap();
    std::fs::write(
        d.join("testsrv.toml"),
        format!("name = \"t1\"\nlisten = \"{app}\"\nsite_file = \"{p}/site.toml\"\npid_file = \"{p}/testsrv.pid\"\n"),
    )
    .unwrap();
    let testsrv = Command::new(crate::support::testbed_bin())
        .args(["testsrv", "-c"])
        .arg(d.join("testsrv.toml"))
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(d.join("testsrv.log")).unwrap())
        .spawn()
        .expect("start rdmalb testsrv");
    for _ in 0..400 {
        if std::net::TcpStream::connect(app).is_ok() && d.join("testsrv.pid").exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    // news renders a site file testsrv rejects (it keeps serving the old
    // site): the probe's X-Site never says news → VERIFY_FAILED.
    std::fs::write(
        d.join("news.tpl"),
        "site = \"{{site}}\"\nhosts = \"not a list\"\n",
    )
    .unwrap();
    let tpl = Path::new(env!("CARGO_MANIFEST_DIR")).join("conf/role/testsrv-site.toml.tpl");
    let tpl = tpl.display();
    let config = format!(
        r#"node = "t1"
node_id = 4
sites = ["shop", "blog", "news"]
site = "shop"
[window.shm]
path = "{p}/window"
[[collector]]
kind = "system"
[admin]
listen = "{admin}"
[role]
file = "site.toml"
reload = ["sh", "-c", "kill -HUP $(cat {p}/testsrv.pid)"]
verify = "{app}"
verify_timeout = "1s"
verify_header = "x-site"
[role.site.shop]
template = "{tpl}"
hosts = ["shop.example"]
health_path = "/health"
[role.site.blog]
template = "{tpl}"
hosts = ["blog.example", "www.blog.example"]
health_path = "/health"
[role.site.news]
template = "news.tpl"
hosts = ["news.example"]
health_path = "/health"
"#
    );
    Node {
        _testsrv: ChildGuard { child: testsrv },
        app,
        admin,
        config,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn testsrv_switches_site_on_a_claim_and_keeps_it_when_the_new_site_file_is_bad() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let node = testsrv_node(d);
    let (app, admin, config) = (node.app, node.admin, &node.config);
    let mut sc = SidecarProc::start(d, config, admin, Some(d.join("testsrv.log")));
    let w = ShmWindow::open(
        d.join("window"),
        &Expect {
            node_id: Some(4),
            site_hash: Some(site_table_hash(&["shop", "blog", "news"])),
        },
    )
    .unwrap();
    let (st, applied) = outcome(&sc, &w, 1).await;
    assert_eq!(
        (st.code, st.serving, applied),
        (RoleStatusCode::Ok, SHOP, 1)
    );

    let c = claim(&w, BLOG).await;
    let (st, applied) = outcome(&sc, &w, c.epoch).await;
    assert_eq!(
        (st.code, st.serving, applied),
        (RoleStatusCode::Ok, BLOG, c.epoch),
        "{}",
        sc.logs()
    );
    assert_eq!(
        served(app, "www.blog.example", "/health", "x-site").await,
        (200, "blog".into())
    );
    // Never two sites at once: the old site's host is refused now.
    assert_eq!(
        served(app, "shop.example", "/health", "x-site").await.0,
        421
    );
    assert_eq!(
        std::fs::read_to_string(d.join("site.toml"))
            .unwrap()
            .lines()
            .filter(|l| !l.starts_with('#'))
            .collect::<Vec<_>>(),
        [
            "site = \"blog\"",
            "hosts = [\"blog.example\", \"www.blog.example\"]"
        ]
    );
    let blog_file = std::fs::read(d.join("site.toml")).unwrap();

    let c = claim(&w, NEWS).await;
    let (st, applied) = outcome(&sc, &w, c.epoch).await;
    assert_eq!(
        (st.code, st.serving, applied),
        (RoleStatusCode::VerifyFailed, BLOG, c.epoch - 1)
    );
    assert_eq!(
        std::fs::read(d.join("site.toml")).unwrap(),
        blog_file,
        "old site file restored"
    );
    assert_eq!(
        served(app, "blog.example", "/health", "x-site").await,
        (200, "blog".into())
    );
    assert_eq!(w.read_word(word::ROLE_APPLIED).await.unwrap(), c.epoch - 1);
    sc.assert_running();
    let status = get_json(&format!("http://{admin}/status")).await;
    assert_eq!(
        status["role_application"]["last_failure"]["code"],
        "verify_failed"
    );
    assert_eq!(status["role_status"]["serving"], "blog");
}

/// Issue 12, defect 2: a sidecar killed and started again resumes the site
/// it was moved to, at an epoch past every one published before, so a CAS
/// prepared before the restart can never succeed again (no ABA).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_sidecar_restarts_serving_the_site_it_was_moved_to_past_every_earlier_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let node = testsrv_node(d);
    let expect = Expect {
        node_id: Some(4),
        site_hash: Some(site_table_hash(&["shop", "blog", "news"])),
    };
    let mut sc = SidecarProc::start(d, &node.config, node.admin, Some(d.join("testsrv.log")));
    let w = ShmWindow::open(d.join("window"), &expect).unwrap();
    outcome(&sc, &w, 1).await;
    let moved = claim(&w, BLOG).await;
    let (st, _) = outcome(&sc, &w, moved.epoch).await;
    assert_eq!((st.code, st.serving), (RoleStatusCode::Ok, BLOG));
    // What a slow proxy read before the restart and may still CAS from.
    let stale = w.read_word(word::ROLE).await.unwrap();

    sc.guard.child.kill().unwrap();
    sc.guard.child.wait().unwrap();
    drop(w);
    // SIGKILL leaves the shm file behind; the new sidecar replaces it.
    let mut sc = SidecarProc::start(d, &node.config, node.admin, Some(d.join("testsrv.log")));
    let w = ShmWindow::open(d.join("window"), &expect).unwrap();
    let role = RoleWord::decode(w.read_word(word::ROLE).await.unwrap()).unwrap();
    assert_eq!(
        role.site,
        BLOG,
        "the move survived the restart:\n{}",
        sc.logs()
    );
    assert!(
        role.epoch > moved.epoch,
        "epoch {} after the restart, {} before",
        role.epoch,
        moved.epoch
    );
    let (st, applied) = outcome(&sc, &w, role.epoch).await;
    assert_eq!(
        (st.code, st.serving, applied),
        (RoleStatusCode::Ok, BLOG, role.epoch)
    );
    assert_eq!(
        served(node.app, "blog.example", "/health", "x-site").await,
        (200, "blog".into())
    );
    // Climb the epochs back to the stale word's: its CAS still fails.
    let again = claim(&w, SHOP).await;
    outcome(&sc, &w, again.epoch).await;
    let back = RoleWord::decode(stale).unwrap();
    assert_ne!(
        w.compare_swap(
            word::ROLE,
            stale,
            back.next(NEWS, RoleState::Switching).encode()
        )
        .await
        .unwrap(),
        stale,
        "a CAS prepared before the restart succeeded"
    );
    sc.assert_running();
}
