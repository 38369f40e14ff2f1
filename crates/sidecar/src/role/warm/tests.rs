//! Warm switches against real files, a real reload process and a real HTTP
//! app that does what the warm nginx template does: it serves the blocks of
//! the file its reload loaded, picks the block by Host, and answers 421
//! unless that block's gate marker exists (checked on every request).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::super::*;
use crate::config;

/// The answer of the test app for `host` with the config in `live`: the
/// block whose `host=` matches; 421 when its `gate=` file is absent or no
/// block matches; else its `status=` (default 200) with `x-site`.
fn answer(live: &std::path::Path, host: &str) -> Response<Full<Bytes>> {
    let text = std::fs::read_to_string(live).unwrap_or_default();
    let block = text
        .split("block\n")
        .find(|b| b.lines().any(|l| l == format!("host={host}")));
    let get = |k: &str| block.and_then(|b| b.lines().find_map(|l| l.strip_prefix(k)));
    let open = get("gate=").is_some_and(|g| std::path::Path::new(g).is_file());
    let mut r = Response::new(Full::new(Bytes::new()));
    if !open {
        *r.status_mut() = StatusCode::MISDIRECTED_REQUEST;
        return r;
    }
    *r.status_mut() = get("status=")
        .and_then(|c| c.parse::<u16>().ok())
        .and_then(|c| StatusCode::from_u16(c).ok())
        .unwrap_or(StatusCode::OK);
    if let Some(site) = get("site=") {
        r.headers_mut().insert("x-site", site.parse().unwrap());
    }
    r
}

async fn app(live: PathBuf) -> SocketAddr {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((s, _)) = l.accept().await else {
                continue;
            };
            let live = live.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |req: Request<Incoming>| {
                    let host = req
                        .headers()
                        .get(http::header::HOST)
                        .and_then(|h| h.to_str().ok())
                        .unwrap_or_default()
                        .to_string();
                    let r = answer(&live, &host);
                    async move { Ok::<_, std::convert::Infallible>(r) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(s), svc)
                    .await;
            });
        }
    });
    addr
}

/// `GET /` with `Host: host`: the status code and `x-site`.
async fn get(addr: SocketAddr, host: &str) -> (u16, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).await.unwrap();
    let code = text[9..12].parse().unwrap();
    let site = text
        .lines()
        .find_map(|l| l.strip_prefix("x-site: "))
        .unwrap_or_default()
        .to_string();
    (code, site)
}

struct Node {
    dir: tempfile::TempDir,
    memory: Arc<WindowMemory>,
    cfg: Arc<SidecarConfig>,
    app: SocketAddr,
}

impl Node {
    fn file(&self) -> PathBuf {
        self.dir.path().join("conf").join("sites.conf")
    }
    fn gate(&self) -> gate::Gate {
        gate::Gate::new(self.dir.path().join("gate"))
    }
    /// How many times the reload command ran.
    fn reloads(&self) -> usize {
        std::fs::read_to_string(self.dir.path().join("reloads"))
            .map(|t| t.lines().count())
            .unwrap_or(0)
    }
    fn word(&self, w: usize) -> u64 {
        self.memory.load(w).unwrap()
    }
    fn status(&self) -> RoleStatus {
        RoleStatus::decode(self.word(word::ROLE_STATUS)).unwrap()
    }
    fn claim(&self, site: SiteSlot) -> RoleWord {
        let old = RoleWord::decode(self.word(word::ROLE)).unwrap();
        let new = old.next(site, RoleState::Switching);
        assert_eq!(
            self.memory
                .compare_swap(word::ROLE, old.encode(), new.encode()),
            Some(old.encode())
        );
        new
    }
}

const SHOP: SiteSlot = SiteSlot::Site(0);
const BLOG: SiteSlot = SiteSlot::Site(1);
const NEWS: SiteSlot = SiteSlot::Site(2);
const BLOCK: &str = "block\nsite={{site}}\nhost={{primary_host}}\ngate={{gate}}\n";

/// A warm node serving shop and blog (news has no section); `blog` is
/// blog's template.
async fn node(blog: &str) -> Node {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir(d.join("conf")).unwrap();
    std::fs::write(d.join("shop.tpl"), BLOCK).unwrap();
    std::fs::write(d.join("blog.tpl"), blog).unwrap();
    std::fs::write(d.join("idle.tpl"), "# idle {{node}}\n").unwrap();
    let live = d.join("live.conf");
    let app = app(live.clone()).await;
    let file = d.join("conf").join("sites.conf");
    let text = format!(
        r#"node = "n1"
node_id = 1
sites = ["shop", "blog", "news"]
site = "shop"
[window.shm]
path = "/dev/shm/unused"
[[collector]]
kind = "system"
[role]
mode = "warm"
gate = "gate"
file = "{file}"
reload = ["sh", "-c", "echo reload >> {reloads}; if grep -q fail-reload {file}; then echo config test failed >&2; exit 1; fi; cp {file} {live}"]
verify = "{app}"
verify_timeout = "300ms"
verify_header = "x-site"
[role.idle]
template = "idle.tpl"
[role.site.shop]
template = "shop.tpl"
hosts = ["shop.example"]
[role.site.blog]
template = "blog.tpl"
hosts = ["blog.example"]
"#,
        file = file.display(),
        live = live.display(),
        reloads = d.join("reloads").display(),
    );
    let cfg = config::parse(&text, &d.join("sidecar.toml")).unwrap_or_else(|e| panic!("{e}"));
    Node {
        memory: Arc::new(WindowMemory::anonymous(1, cfg.site_hash).unwrap()),
        cfg: Arc::new(cfg),
        dir,
        app,
    }
}

async fn started(blog: &str) -> (Node, Applier) {
    let n = node(blog).await;
    let mut a = Applier::init(n.cfg.clone(), n.memory.clone()).unwrap();
    a.start_up().await.unwrap();
    (n, a)
}

fn st(epoch: u64, serving: SiteSlot, code: RoleStatusCode) -> RoleStatus {
    RoleStatus {
        epoch,
        serving,
        code,
    }
}

#[tokio::test]
async fn start_up_loads_every_site_once_and_opens_the_initial_site() {
    let (n, _a) = started(BLOCK).await;
    assert_eq!(n.word(word::ROLE_APPLIED), 1);
    assert_eq!(n.status(), st(1, SHOP, RoleStatusCode::Ok));
    let gate = n.dir.path().join("gate");
    assert_eq!(
        std::fs::read_to_string(n.file()).unwrap(),
        format!(
            "# idle n1\nblock\nsite=shop\nhost=shop.example\ngate={g}/active-shop\n\
             block\nsite=blog\nhost=blog.example\ngate={g}/active-blog\n",
            g = gate.display()
        ),
        "idle block first, then every site in the order of `sites`"
    );
    assert_eq!(n.reloads(), 1);
    assert_eq!(n.gate().markers().unwrap(), ["active-shop"]);
    assert_eq!(get(n.app, "shop.example").await, (200, "shop".into()));
    assert_eq!(get(n.app, "blog.example").await.0, 421);
}

#[tokio::test]
async fn a_warm_claim_moves_the_gate_without_a_reload() {
    let (n, mut a) = started(BLOCK).await;
    let c = n.claim(BLOG);
    assert_eq!(a.step().await, Some(c.epoch));
    assert_eq!(n.word(word::ROLE_APPLIED), c.epoch);
    assert_eq!(n.status(), st(c.epoch, BLOG, RoleStatusCode::Ok));
    assert_eq!(n.reloads(), 1, "no reload after the start-up");
    assert_eq!(n.gate().markers().unwrap(), ["active-blog"]);
    assert_eq!(get(n.app, "blog.example").await, (200, "blog".into()));
    assert_eq!(get(n.app, "shop.example").await.0, 421);

    // Idle: every site closed, nothing to verify.
    let c = n.claim(SiteSlot::Idle);
    assert_eq!(a.step().await, Some(c.epoch));
    assert_eq!(n.status(), st(c.epoch, SiteSlot::Idle, RoleStatusCode::Ok));
    assert_eq!(n.gate().markers().unwrap(), ["idle"]);
    assert_eq!(get(n.app, "blog.example").await.0, 421);
    assert_eq!(get(n.app, "shop.example").await.0, 421);

    let c = n.claim(SHOP);
    a.step().await;
    assert_eq!(n.word(word::ROLE_APPLIED), c.epoch);
    assert_eq!(get(n.app, "shop.example").await, (200, "shop".into()));
    assert_eq!(n.reloads(), 1);
    assert_eq!(a.report().lock().unwrap().switches_total, 4);
}

#[tokio::test]
async fn a_warm_verify_failure_puts_the_gate_back_and_reports_failed() {
    let (n, mut a) = started(&format!("{BLOCK}status=500\n")).await;
    let c = n.claim(BLOG);
    a.step().await;
    assert_eq!(
        n.status(),
        st(c.epoch, SHOP, RoleStatusCode::VerifyFailed),
        "FAILED, still serving shop"
    );
    assert_eq!(n.word(word::ROLE_APPLIED), 1, "not applied");
    assert_eq!(n.gate().markers().unwrap(), ["active-shop"]);
    assert_eq!(get(n.app, "shop.example").await, (200, "shop".into()));
    assert_eq!(n.reloads(), 1, "the warm file stays loaded");
    let f = a.report().lock().unwrap().last_failure.clone().unwrap();
    assert!(f.reason.contains("status 500"), "{}", f.reason);
    // The failed epoch is not retried; the rollback claim is acknowledged.
    assert_eq!(a.step().await, None);
    let c = n.claim(SHOP);
    a.step().await;
    assert_eq!(n.status(), st(c.epoch, SHOP, RoleStatusCode::Ok));
    assert_eq!(n.word(word::ROLE_APPLIED), c.epoch);
}

#[tokio::test]
async fn a_warm_claim_for_a_site_without_a_section_changes_nothing() {
    let (n, mut a) = started(BLOCK).await;
    let c = n.claim(NEWS);
    a.step().await;
    assert_eq!(n.status(), st(c.epoch, SHOP, RoleStatusCode::NoTemplate));
    assert_eq!(n.gate().markers().unwrap(), ["active-shop"]);
    assert_eq!(n.reloads(), 1);
}

#[tokio::test]
async fn a_failed_warm_load_restores_the_previous_file() {
    let n = node(&format!("{BLOCK}# fail-reload\n")).await;
    std::fs::write(n.file(), "previous\n").unwrap();
    let mut a = Applier::init(n.cfg.clone(), n.memory.clone()).unwrap();
    let e = a.start_up().await.unwrap_err();
    assert_eq!(e.code, RoleStatusCode::ReloadFailed);
    assert!(e.reason.contains("config test failed"), "{}", e.reason);
    assert_eq!(std::fs::read_to_string(n.file()).unwrap(), "previous\n");
    assert!(
        n.gate().markers().unwrap_or_default().is_empty(),
        "no gate opened"
    );
}

#[tokio::test]
async fn a_restart_loads_the_warm_file_again_and_resumes_the_site() {
    let (n, mut a) = started(BLOCK).await;
    let c = n.claim(BLOG);
    a.step().await;
    drop(a);
    // A stray marker left by hand must not stay open.
    std::fs::write(n.dir.path().join("gate/active-shop"), "").unwrap();
    let memory = Arc::new(WindowMemory::anonymous(1, n.cfg.site_hash).unwrap());
    let mut a = Applier::init(n.cfg.clone(), memory.clone()).unwrap();
    a.start_up().await.unwrap();
    let role = RoleWord::decode(memory.load(word::ROLE).unwrap()).unwrap();
    assert_eq!(role.site, BLOG);
    assert!(role.epoch > c.epoch + state::RESTART_GAP - 1);
    assert_eq!(memory.load(word::ROLE_APPLIED), Some(role.epoch));
    assert_eq!(n.reloads(), 2, "the restart loads the warm file once");
    assert_eq!(n.gate().markers().unwrap(), ["active-blog"]);
    assert_eq!(get(n.app, "shop.example").await.0, 421);
}
