//! The apply state machine against real files, real reload processes and a
//! real HTTP app: a small in-test server that serves whatever config its
//! "reload" (a `cp` of the rendered file into the file it reads) loaded.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;

use super::*;
use crate::config;
use crate::template::{IDLE_VARIABLES, SITE_VARIABLES};

/// A test app: answers every request from the `site=` and `status=` lines
/// of the config it has loaded (`live`), with header `x-site`.
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
                let svc = service_fn(move |_req: Request<Incoming>| {
                    let text = std::fs::read_to_string(&live).unwrap_or_default();
                    let get = |k: &str| {
                        text.lines()
                            .find_map(|l| l.strip_prefix(k))
                            .map(str::to_string)
                    };
                    let mut r = Response::new(Full::new(Bytes::from(text.clone())));
                    *r.status_mut() = get("status=")
                        .and_then(|c| c.parse::<u16>().ok())
                        .and_then(|c| http::StatusCode::from_u16(c).ok())
                        .unwrap_or(http::StatusCode::OK);
                    if let Some(site) = get("site=") {
                        r.headers_mut().insert("x-site", site.parse().unwrap());
                    }
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

struct Node {
    dir: tempfile::TempDir,
    memory: Arc<WindowMemory>,
    cfg: Arc<SidecarConfig>,
}

impl Node {
    fn file(&self) -> PathBuf {
        self.dir.path().join("conf").join("site.conf")
    }
    fn live(&self) -> PathBuf {
        self.dir.path().join("live.conf")
    }
    fn word(&self, w: usize) -> u64 {
        self.memory.load(w).unwrap()
    }
    fn status(&self) -> RoleStatus {
        RoleStatus::decode(self.word(word::ROLE_STATUS)).unwrap()
    }
    fn role(&self) -> RoleWord {
        RoleWord::decode(self.word(word::ROLE)).unwrap()
    }
    /// What a proxy does: CAS the role word to `next(site, state)`.
    fn claim(&self, site: SiteSlot, state: RoleState) -> RoleWord {
        let old = self.role();
        let new = old.next(site, state);
        assert_eq!(
            self.memory
                .compare_swap(word::ROLE, old.encode(), new.encode()),
            Some(old.encode())
        );
        new
    }
}

const SITE: SiteSlot = SiteSlot::Site(0);
const BLOG: SiteSlot = SiteSlot::Site(1);
const NEWS: SiteSlot = SiteSlot::Site(2);

/// A node whose `[role]` has templates for shop and blog; `role_extra` is
/// appended to `[role]`, `blog` is blog's template text.
async fn node(initial: &str, role_extra: &str, blog: &str) -> Node {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir(d.join("conf")).unwrap();
    std::fs::write(
        d.join("shop.tpl"),
        "site={{site}}\nhost={{primary_host}}\nroot={{root}}\n",
    )
    .unwrap();
    std::fs::write(d.join("blog.tpl"), blog).unwrap();
    std::fs::write(d.join("idle.tpl"), "site={{site}}\nstatus=503\n").unwrap();
    let addr = app(d.join("live.conf")).await;
    let file = d.join("conf").join("site.conf");
    let live = d.join("live.conf");
    let text = format!(
        r#"node = "n1"
node_id = 1
sites = ["shop", "blog", "news"]
site = "{initial}"
[window.shm]
path = "/dev/shm/unused"
[[collector]]
kind = "system"
[role]
file = "{file}"
reload = ["sh", "-c", "if grep -q fail-reload {file}; then echo config test failed >&2; exit 1; fi; cp {file} {live}"]
verify = "{addr}"
verify_timeout = "1s"
{role_extra}
[role.site.shop]
template = "shop.tpl"
hosts = ["shop.example", "www.shop.example"]
vars = {{ root = "/srv/shop" }}
[role.site.blog]
template = "blog.tpl"
hosts = ["blog.example"]
health_path = "/health"
"#,
        file = file.display(),
        live = live.display()
    );
    let path = d.join("sidecar.toml");
    let cfg = config::parse(&text, &path).unwrap_or_else(|e| panic!("{e}"));
    Node {
        memory: Arc::new(WindowMemory::anonymous(1, cfg.site_hash).unwrap()),
        cfg: Arc::new(cfg),
        dir,
    }
}

/// A node whose applier has run its start-up (initial site applied).
async fn started(initial: &str, role_extra: &str, blog: &str) -> (Node, Applier) {
    let n = node(initial, role_extra, blog).await;
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

fn last_failure(a: &Applier) -> FailureRecord {
    a.report().lock().unwrap().last_failure.clone().unwrap()
}

#[tokio::test]
async fn start_up_applies_and_verifies_the_initial_site() {
    let n = node("shop", "verify_header = \"x-site\"", "site={{site}}\n").await;
    let mut a = Applier::init(n.cfg.clone(), n.memory.clone()).unwrap();
    assert_eq!(
        n.role(),
        RoleWord {
            site: SITE,
            state: RoleState::Active,
            epoch: 1
        }
    );
    assert_eq!(n.word(word::ROLE_APPLIED), 0, "not applied before start_up");
    a.start_up().await.unwrap();
    assert_eq!(n.word(word::ROLE_APPLIED), 1);
    assert_eq!(n.status(), st(1, SITE, RoleStatusCode::Ok));
    assert_eq!(
        std::fs::read_to_string(n.file()).unwrap(),
        "site=shop\nhost=shop.example\nroot=/srv/shop\n"
    );
    assert_eq!(
        std::fs::read(n.live()).unwrap(),
        std::fs::read(n.file()).unwrap()
    );
    // Nothing changes without a new epoch.
    assert_eq!(a.step().await, None);
}

#[tokio::test]
async fn a_claim_is_applied_verified_and_published() {
    let n = node(
        "shop",
        "verify_header = \"x-site\"",
        "site={{site}}\nhosts={{hosts_quoted}}\n",
    )
    .await;
    let mut a = Applier::init(n.cfg.clone(), n.memory.clone()).unwrap();
    a.start_up().await.unwrap();
    let claim = n.claim(BLOG, RoleState::Switching);
    assert_eq!(a.step().await, Some(claim.epoch));
    assert_eq!(n.status(), st(2, BLOG, RoleStatusCode::Ok));
    assert_eq!(n.word(word::ROLE_APPLIED), 2);
    assert_eq!(n.role(), claim, "the sidecar never writes the role word");
    assert_eq!(
        std::fs::read_to_string(n.live()).unwrap(),
        "site=blog\nhosts=\"blog.example\"\n"
    );
    let r = a.report().lock().unwrap().clone();
    assert_eq!(r.switches_total, 2);
    let last = r.last_switch.unwrap();
    assert_eq!((last.epoch, last.site.as_str()), (2, "blog"));
    assert_eq!(a.serving(), BLOG);
}

#[tokio::test]
async fn reload_failure_restores_the_previous_file_and_reports_reload_failed() {
    let (n, mut a) = started("shop", "", "site={{site}}\nfail-reload\n").await;
    let before = std::fs::read(n.file()).unwrap();
    n.claim(BLOG, RoleState::Switching);
    a.step().await;
    assert_eq!(n.status(), st(2, SITE, RoleStatusCode::ReloadFailed));
    assert_eq!(
        n.word(word::ROLE_APPLIED),
        1,
        "applied untouched on failure"
    );
    assert_eq!(
        std::fs::read(n.file()).unwrap(),
        before,
        "previous file restored"
    );
    assert_eq!(std::fs::read(n.live()).unwrap(), before);
    let f = last_failure(&a);
    assert_eq!((f.epoch, f.code), (2, RoleStatusCode::ReloadFailed));
    assert!(f.reason.contains("config test failed"), "{}", f.reason);
    // The same epoch is not retried.
    assert_eq!(a.step().await, None);
    // A rollback claim for the site it serves brings it back to OK.
    n.claim(SITE, RoleState::Switching);
    a.step().await;
    assert_eq!(n.status(), st(3, SITE, RoleStatusCode::Ok));
    assert_eq!(n.word(word::ROLE_APPLIED), 3);
}

#[tokio::test]
async fn verify_failure_restores_reloads_and_reports_verify_failed() {
    let (n, mut a) = started("shop", "", "site={{site}}\nstatus=404\n").await;
    let before = std::fs::read(n.file()).unwrap();
    n.claim(BLOG, RoleState::Switching);
    a.step().await;
    assert_eq!(n.status(), st(2, SITE, RoleStatusCode::VerifyFailed));
    assert_eq!(std::fs::read(n.file()).unwrap(), before);
    // The restore was reloaded: the app serves the old config again.
    assert_eq!(std::fs::read(n.live()).unwrap(), before);
    let f = last_failure(&a);
    assert!(
        f.reason.contains("404") && f.reason.contains("Host: blog.example"),
        "{}",
        f.reason
    );
}

#[tokio::test]
async fn verify_header_must_name_the_new_site() {
    // The blog template keeps answering as "shop": a stale config.
    let (n, mut a) = started("shop", "verify_header = \"x-site\"", "site=shop\n").await;
    n.claim(BLOG, RoleState::Switching);
    a.step().await;
    assert_eq!(n.status().code, RoleStatusCode::VerifyFailed);
    let f = last_failure(&a);
    assert!(
        f.reason.contains("x-site: shop (expected blog)"),
        "{}",
        f.reason
    );
}

#[tokio::test]
async fn a_site_without_template_is_no_template_and_leaves_the_file_alone() {
    let (n, mut a) = started("shop", "", "site={{site}}\n").await;
    let before = std::fs::read(n.file()).unwrap();
    n.claim(NEWS, RoleState::Switching);
    a.step().await;
    assert_eq!(n.status(), st(2, SITE, RoleStatusCode::NoTemplate));
    assert_eq!(std::fs::read(n.file()).unwrap(), before);
    // An index past the site table is no template either.
    n.claim(SiteSlot::Site(9), RoleState::Switching);
    a.step().await;
    assert_eq!(n.status().code, RoleStatusCode::NoTemplate);
    assert_eq!(n.status().epoch, 3);
}

#[tokio::test]
async fn an_unwritable_config_file_is_render_failed() {
    let (n, mut a) = started("shop", "", "site={{site}}\n").await;
    std::fs::remove_dir_all(n.file().parent().unwrap()).unwrap();
    n.claim(BLOG, RoleState::Switching);
    a.step().await;
    assert_eq!(n.status(), st(2, SITE, RoleStatusCode::RenderFailed));
    let f = last_failure(&a);
    assert!(f.reason.contains("cannot write"), "{}", f.reason);
}

#[tokio::test]
async fn idle_renders_the_idle_template_without_verification() {
    let n = node(
        "shop",
        "[role.idle]\ntemplate = \"idle.tpl\"",
        "site={{site}}\n",
    )
    .await;
    let mut a = Applier::init(n.cfg.clone(), n.memory.clone()).unwrap();
    a.start_up().await.unwrap();
    n.claim(SiteSlot::Idle, RoleState::Switching);
    a.step().await;
    // The idle config answers 503, which would fail a probe: none is run.
    assert_eq!(n.status(), st(2, SiteSlot::Idle, RoleStatusCode::Ok));
    assert_eq!(
        std::fs::read_to_string(n.live()).unwrap(),
        "site=idle\nstatus=503\n"
    );
}

#[tokio::test]
async fn idle_without_template_leaves_the_app_config_unchanged() {
    let (n, mut a) = started("shop", "", "site={{site}}\n").await;
    let before = std::fs::read(n.file()).unwrap();
    n.claim(SiteSlot::Idle, RoleState::Switching);
    a.step().await;
    assert_eq!(n.status(), st(2, SiteSlot::Idle, RoleStatusCode::Ok));
    assert_eq!(n.word(word::ROLE_APPLIED), 2);
    assert_eq!(std::fs::read(n.file()).unwrap(), before);
}

#[tokio::test]
async fn only_the_newest_epoch_is_applied_and_other_states_are_not_acted_on() {
    let (n, mut a) = started("shop", "", "site={{site}}\n").await;
    n.claim(BLOG, RoleState::Switching);
    n.claim(SITE, RoleState::Switching);
    let newest = n.claim(BLOG, RoleState::Switching);
    assert_eq!(a.step().await, Some(newest.epoch));
    assert_eq!(n.word(word::ROLE_APPLIED), 4);
    // ACTIVE for the site already served: acknowledged without a reload.
    std::fs::remove_file(n.live()).unwrap();
    let same = n.claim(BLOG, RoleState::Active);
    assert_eq!(a.step().await, Some(same.epoch));
    assert_eq!(n.word(word::ROLE_APPLIED), 5);
    assert_eq!(n.status().code, RoleStatusCode::Ok);
    assert!(!n.live().exists(), "no reload for an acknowledged role");
    // DRAINING is not something the sidecar applies.
    n.claim(SITE, RoleState::Draining);
    assert_eq!(a.step().await, None);
    assert_eq!(n.word(word::ROLE_APPLIED), 5);
}

#[tokio::test]
async fn without_role_section_the_initial_site_is_published_and_claims_get_no_template() {
    let dir = tempfile::tempdir().unwrap();
    let text = "node = \"n1\"\nnode_id = 1\nsites = [\"shop\", \"blog\"]\nsite = \"blog\"\n[window.shm]\npath = \"/dev/shm/unused\"\n[[collector]]\nkind = \"system\"\n";
    let cfg = Arc::new(config::parse(text, &dir.path().join("s.toml")).unwrap());
    let memory = Arc::new(WindowMemory::anonymous(1, cfg.site_hash).unwrap());
    let mut a = Applier::init(cfg, memory.clone()).unwrap();
    a.start_up().await.unwrap();
    let status = |m: &WindowMemory| RoleStatus::decode(m.load(word::ROLE_STATUS).unwrap()).unwrap();
    assert_eq!(status(&memory), st(1, BLOG, RoleStatusCode::Ok));
    assert_eq!(memory.load(word::ROLE_APPLIED), Some(1));
    let old = RoleWord::decode(memory.load(word::ROLE).unwrap()).unwrap();
    assert_eq!(
        old,
        RoleWord {
            site: BLOG,
            state: RoleState::Active,
            epoch: 1
        }
    );
    let claim = old.next(SITE, RoleState::Switching);
    memory.compare_swap(word::ROLE, old.encode(), claim.encode());
    a.step().await;
    assert_eq!(status(&memory), st(2, BLOG, RoleStatusCode::NoTemplate));
    assert_eq!(memory.load(word::ROLE_APPLIED), Some(1));
    // Rolling back to the site it serves needs no template.
    let back = claim.next(BLOG, RoleState::Switching);
    memory.compare_swap(word::ROLE, claim.encode(), back.encode());
    a.step().await;
    assert_eq!(status(&memory).code, RoleStatusCode::Ok);
    assert_eq!(memory.load(word::ROLE_APPLIED), Some(3));
}

#[tokio::test]
async fn start_up_failure_is_an_error_and_restores_the_file() {
    let n = node("blog", "", "site={{site}}\nfail-reload\n").await;
    std::fs::write(n.file(), "hand-written\n").unwrap();
    let mut a = Applier::init(n.cfg.clone(), n.memory.clone()).unwrap();
    let e = a.start_up().await.unwrap_err();
    assert_eq!(e.code, RoleStatusCode::ReloadFailed);
    assert_eq!(std::fs::read_to_string(n.file()).unwrap(), "hand-written\n");
    assert_eq!(n.word(word::ROLE_APPLIED), 0);
}

#[test]
fn variables_cover_every_builtin() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let n = rt.block_on(node("shop", "[role.idle]\ntemplate = \"idle.tpl\"", "x"));
    let role = n.cfg.role.as_ref().unwrap();
    let (_, v) = variables(&n.cfg, role, SITE).unwrap();
    let mut names = v.names();
    names.retain(|n| *n != "root");
    let mut builtins = SITE_VARIABLES.to_vec();
    builtins.sort_unstable();
    assert_eq!(names, builtins);
    assert_eq!(v.0["hosts"], "shop.example www.shop.example");
    assert_eq!(
        v.0["hosts_quoted"],
        "\"shop.example\", \"www.shop.example\""
    );
    assert_eq!(v.0["primary_host"], "shop.example");
    assert_eq!(v.0["health_path"], "/");
    assert_eq!(v.0["port"], role.verify.port().to_string());
    assert_eq!(v.0["root"], "/srv/shop");
    let (_, v) = variables(&n.cfg, role, SiteSlot::Idle).unwrap();
    let mut idle = IDLE_VARIABLES.to_vec();
    idle.sort_unstable();
    assert_eq!(v.names(), idle);
    assert_eq!(v.0["site"], "idle");
    assert!(variables(&n.cfg, role, NEWS).is_none());
    let _ = Path::new("");
}

/// A node without `[role]`; the dir holds its state file.
fn role_off() -> (tempfile::TempDir, Arc<SidecarConfig>, Arc<WindowMemory>) {
    let dir = tempfile::tempdir().unwrap();
    let text = "node = \"n1\"\nnode_id = 1\nsites = [\"shop\", \"blog\"]\nsite = \"shop\"\n[window.shm]\npath = \"/dev/shm/unused\"\n[[collector]]\nkind = \"system\"\n";
    let cfg = Arc::new(config::parse(text, &dir.path().join("s.toml")).unwrap());
    let memory = Arc::new(WindowMemory::anonymous(1, cfg.site_hash).unwrap());
    (dir, cfg, memory)
}

fn cas_next(memory: &WindowMemory, site: SiteSlot) -> RoleWord {
    let old = RoleWord::decode(memory.load(word::ROLE).unwrap()).unwrap();
    let new = old.next(site, RoleState::Switching);
    memory.compare_swap(word::ROLE, old.encode(), new.encode());
    new
}

#[tokio::test(start_paused = true)]
async fn the_watcher_wakes_on_the_publishers_notice_and_rechecks_without_one() {
    let (_dir, cfg, memory) = role_off();
    let mut a = Applier::init(cfg, memory.clone()).unwrap();
    a.start_up().await.unwrap();
    let notify = Arc::new(Notify::new());
    let (stop, stop_rx) = watch::channel(false);
    let task = tokio::spawn(a.run(notify.clone(), stop_rx));
    let status = || RoleStatus::decode(memory.load(word::ROLE_STATUS).unwrap()).unwrap();

    // Noticed: acted on without any time passing.
    let c = cas_next(&memory, BLOG);
    notify.notify_one();
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert_eq!(status(), st(c.epoch, SITE, RoleStatusCode::NoTemplate));

    // Not noticed: found by the recheck, not before it.
    let c = cas_next(&memory, BLOG);
    tokio::time::sleep(config::ROLE_RECHECK / 2).await;
    assert_eq!(status().epoch, c.epoch - 1);
    tokio::time::sleep(config::ROLE_RECHECK).await;
    assert_eq!(status(), st(c.epoch, SITE, RoleStatusCode::NoTemplate));

    stop.send(true).unwrap();
    task.await.unwrap();
}

#[tokio::test]
async fn with_poll_set_the_watcher_reads_the_word_on_its_own_timer() {
    let (n, a) = started("shop", "poll = \"5ms\"", "site={{site}}\n").await;
    assert_eq!(
        n.cfg.role.as_ref().unwrap().poll,
        Some(Duration::from_millis(5))
    );
    let (stop, stop_rx) = watch::channel(false);
    // Nobody ever notifies.
    let task = tokio::spawn(a.run(Arc::new(Notify::new()), stop_rx));
    let c = n.claim(NEWS, RoleState::Switching);
    let mut seen = None;
    for _ in 0..500 {
        if n.status().epoch == c.epoch {
            seen = Some(n.status());
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(seen, Some(st(c.epoch, SITE, RoleStatusCode::NoTemplate)));
    stop.send(true).unwrap();
    task.await.unwrap();
}

/// A restart: a new applier over fresh window memory (the window dies with
/// the sidecar), same config and state file.
fn restart(n: &mut Node) -> Applier {
    n.memory = Arc::new(WindowMemory::anonymous(1, n.cfg.site_hash).unwrap());
    Applier::init(n.cfg.clone(), n.memory.clone()).unwrap()
}

#[tokio::test]
async fn a_restart_resumes_the_site_moved_to_at_an_epoch_past_every_earlier_one() {
    let (mut n, mut a) = started("shop", "", "site={{site}}\n").await;
    let claim = n.claim(BLOG, RoleState::Switching);
    assert_eq!(a.step().await, Some(claim.epoch));
    assert_eq!(a.serving(), BLOG);
    drop(a);
    let mut a = restart(&mut n);
    let role = n.role();
    assert_eq!((role.site, role.state), (BLOG, RoleState::Active));
    assert_eq!(role.epoch, claim.epoch + state::RESTART_GAP);
    assert_eq!(n.word(word::ROLE_APPLIED), 0, "not applied before start-up");
    a.start_up().await.unwrap();
    assert_eq!(n.status(), st(role.epoch, BLOG, RoleStatusCode::Ok));
    assert_eq!(n.word(word::ROLE_APPLIED), role.epoch);
    assert_eq!(std::fs::read_to_string(n.live()).unwrap(), "site=blog\n");
}

#[tokio::test]
async fn a_restart_after_dying_mid_apply_finishes_the_apply() {
    let (mut n, a) = started("shop", "", "site={{site}}\n").await;
    let claim = n.claim(BLOG, RoleState::Switching);
    // What the sidecar records before it acts on the epoch; then it dies.
    let mut a = a;
    a.record(claim.epoch, Some(BLOG));
    drop(a);
    let mut a = restart(&mut n);
    assert_eq!(n.role().site, BLOG, "the apply it died in is finished");
    a.start_up().await.unwrap();
    assert_eq!(n.status().code, RoleStatusCode::Ok);
    assert_eq!(n.status().serving, BLOG);
    assert_eq!(std::fs::read_to_string(n.live()).unwrap(), "site=blog\n");
}

#[tokio::test]
async fn a_restart_whose_apply_fails_reports_failed_and_keeps_running() {
    let (mut n, mut a) = started("shop", "", "site={{site}}\nfail-reload\n").await;
    a.record(7, Some(BLOG));
    drop(a);
    let mut a = restart(&mut n);
    let epoch = n.role().epoch;
    a.start_up()
        .await
        .expect("a restart does not refuse to start");
    assert_eq!(
        n.status(),
        st(epoch, SITE, RoleStatusCode::ReloadFailed),
        "failed, still serving the site it served"
    );
    assert_eq!(n.word(word::ROLE_APPLIED), 0);
}
