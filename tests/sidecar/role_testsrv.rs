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
use rdmalb_window::{site_table_hash, Expect, RemoteWindow, RoleStatusCode, ShmWindow, SiteSlot};

const SHOP: SiteSlot = SiteSlot::Site(0);
const BLOG: SiteSlot = SiteSlot::Site(1);
const NEWS: SiteSlot = SiteSlot::Site(2);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn testsrv_switches_site_on_a_claim_and_keeps_it_when_the_new_site_file_is_bad() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
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
    let _testsrv = ChildGuard { child: testsrv };
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
    let mut sc = SidecarProc::start(d, &config, admin, Some(d.join("testsrv.log")));
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
