//! Warm roles end to end with Debian's nginx (`[role] mode = "warm"`): the
//! real `rdmalb sidecar` binary renders every site's block from the shipped
//! templates (`conf/role/nginx-warm-site.conf.tpl`, the default server from
//! `conf/role/nginx-warm-default.conf.tpl`) into one file, reloads nginx
//! once at start-up, and then switches sites by renaming the gate marker.
//!
//! The test acts as a proxy (CAS on the role word over shm) while client
//! tasks send requests for every site, over kept-alive and fresh
//! connections, the whole time. Every answer must be the asked-for site's
//! (its header and its page) or a 421 naming no site; and every request
//! sent after "applied" and answered before the next claim must be answered
//! by exactly the site the node serves (421 for the others). The nginx worker is the
//! same process before and after the switches: no reload happened. A failed
//! verification puts the gate back, and a restarted sidecar (SIGKILL)
//! resumes its site with the warm file loaded again.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::role::{claim, get_json, outcome, served, SidecarProc};
use crate::support::{eventually, free_addr, GroupNginx, NGINX};
use rdmalb_window::layout::word;
use rdmalb_window::{
    site_table_hash, Expect, RemoteWindow, RoleStatusCode, RoleWord, ShmWindow, SiteSlot,
};

const SITES: [&str; 3] = ["shop", "blog", "news"];
const SHOP: SiteSlot = SiteSlot::Site(0);
const BLOG: SiteSlot = SiteSlot::Site(1);
const NEWS: SiteSlot = SiteSlot::Site(2);
const HOSTS: [&str; 3] = ["shop.example", "blog.example", "news.example"];

/// news: a valid warm block whose health check answers 500 (the probe of a
/// switch to news fails).
const BROKEN_NEWS: &str = "server {\n    listen {{listen}};\n    server_name {{hosts}};\n    open_file_cache off;\n    if (!-f {{gate}}) { return 421; }\n    location = {{health_path}} { add_header X-Rdmalb-Site {{site}} always; return 500; }\n    location / { add_header X-Rdmalb-Site {{site}} always; root {{root}}; }\n}\n";

/// One answered request.
#[derive(Debug, Clone)]
struct Answer {
    sent: Instant,
    /// When the answer had arrived: nginx ran the gate check between
    /// `sent` and `done`.
    done: Instant,
    host: &'static str,
    status: u16,
    site: String,
    body: String,
}

/// Client tasks sending `GET /index.html` for every host until stopped.
struct Traffic {
    stop: Arc<AtomicBool>,
    answers: Arc<Mutex<Vec<Answer>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Traffic {
    fn start(app: SocketAddr) -> Traffic {
        let stop = Arc::new(AtomicBool::new(false));
        let answers = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for fresh in [false, false, true, true] {
            let (stop, answers) = (stop.clone(), answers.clone());
            let mut b = reqwest::Client::builder()
                .no_proxy()
                .timeout(Duration::from_secs(10));
            if fresh {
                b = b.pool_max_idle_per_host(0);
            }
            let c = b.build().unwrap();
            tasks.push(tokio::spawn(async move {
                let mut i = 0usize;
                // Bounded: at most this many requests per task.
                while !stop.load(Ordering::Relaxed) && i < 200_000 {
                    let host = HOSTS[i % HOSTS.len()];
                    i += 1;
                    let sent = Instant::now();
                    let r = c
                        .get(format!("http://{app}/index.html"))
                        .header("host", host)
                        .send()
                        .await
                        .unwrap_or_else(|e| panic!("GET (Host: {host}): {e}"));
                    let status = r.status().as_u16();
                    let site = r
                        .headers()
                        .get("x-rdmalb-site")
                        .map(|v| v.to_str().unwrap().to_string())
                        .unwrap_or_default();
                    let body = r.text().await.unwrap_or_default();
                    answers.lock().unwrap().push(Answer {
                        sent,
                        done: Instant::now(),
                        host,
                        status,
                        site,
                        body,
                    });
                }
            }));
        }
        Traffic {
            stop,
            answers,
            tasks,
        }
    }

    fn count(&self) -> usize {
        self.answers.lock().unwrap().len()
    }

    /// Waits (bounded) until `n` more answers arrived.
    async fn more(&self, n: usize) {
        let want = self.count() + n;
        eventually("traffic", Duration::from_secs(30), || async move {
            let c = self.count();
            if c >= want {
                Ok(())
            } else {
                Err(format!("{c} answers of {want}"))
            }
        })
        .await
    }

    async fn stop(self) -> Vec<Answer> {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.tasks {
            t.await.unwrap();
        }
        Arc::try_unwrap(self.answers).unwrap().into_inner().unwrap()
    }
}

/// The pid of nginx's worker (the master's only child).
fn worker(dir: &Path) -> String {
    let master = std::fs::read_to_string(dir.join("nginx.pid")).unwrap();
    let out = std::process::Command::new("pgrep")
        .args(["-P", master.trim()])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn sidecar_config(dir: &Path, app: SocketAddr, admin: SocketAddr) -> String {
    let p = dir.display();
    let conf = Path::new(env!("CARGO_MANIFEST_DIR")).join("conf/role");
    let tpl = conf.join("nginx-warm-site.conf.tpl");
    let mut c = format!(
        r#"node = "n-warm"
node_id = 11
sites = ["shop", "blog", "news"]
site = "shop"
[window.shm]
path = "{p}/window"
[[collector]]
kind = "system"
[admin]
listen = "{admin}"
[role]
mode = "warm"
gate = "gate"
file = "site.conf"
reload = ["sh", "{reload}", "{p}/nginx.pid", "{NGINX}", "-p", "{p}", "-e", "{p}/error.log", "-c", "{p}/nginx.conf", "-s", "reload"]
verify = "{app}"
verify_timeout = "1s"
verify_header = "x-rdmalb-site"
[role.idle]
template = "{default}"
"#,
        reload = conf.join("nginx-reload.sh").display(),
        default = conf.join("nginx-warm-default.conf.tpl").display(),
    );
    for site in SITES {
        let t = if site == "news" {
            "news.tpl".to_string()
        } else {
            tpl.display().to_string()
        };
        c.push_str(&format!(
            "[role.site.{site}]\ntemplate = \"{t}\"\nhosts = [\"{site}.example\"]\nhealth_path = \"/healthz\"\nvars = {{ root = \"{p}/www/{site}\" }}\n"
        ));
    }
    c
}

fn expect() -> Expect {
    Expect {
        node_id: Some(11),
        site_hash: Some(site_table_hash(&SITES)),
    }
}

/// The site a host belongs to.
fn site_of(host: &str) -> &str {
    host.trim_end_matches(".example")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nginx_warm_switches_under_traffic_without_a_reload_or_a_wrong_site() {
    let dir = tempfile::tempdir().unwrap();
    let app = free_addr();
    for site in SITES {
        let www = dir.path().join("www").join(site);
        std::fs::create_dir_all(&www).unwrap();
        std::fs::write(www.join("index.html"), format!("{site} home\n")).unwrap();
    }
    std::fs::write(dir.path().join("news.tpl"), BROKEN_NEWS).unwrap();
    let Some(_nginx) = GroupNginx::start(dir.path(), app) else {
        return;
    };
    let admin = free_addr();
    let config = sidecar_config(dir.path(), app, admin);
    let log = Some(dir.path().join("error.log"));
    let mut sidecar = SidecarProc::start(dir.path(), &config, admin, log.clone());
    let w = ShmWindow::open(dir.path().join("window"), &expect()).unwrap();
    let (st, _) = outcome(&sidecar, &w, 1).await;
    assert_eq!(st.code, RoleStatusCode::Ok, "{}", sidecar.logs());
    let rendered = std::fs::read_to_string(dir.path().join("site.conf")).unwrap();
    assert_eq!(rendered.matches("server {").count(), 4, "{rendered}");
    assert_eq!(
        served(app, "shop.example", "/", "x-rdmalb-site").await.0,
        200
    );
    assert_eq!(
        served(app, "blog.example", "/", "x-rdmalb-site").await.0,
        421
    );
    assert_eq!(
        served(app, "unknown.example", "/", "x-rdmalb-site").await,
        (421, String::new()),
        "the default server refuses hosts of no site"
    );
    let status = get_json(&format!("http://{admin}/status")).await;
    assert_eq!(status["role_application"]["mode"], "warm", "{status}");
    assert_eq!(
        status["role_application"]["gate"],
        dir.path().join("gate").display().to_string()
    );
    let worker_before = worker(dir.path());
    assert!(!worker_before.is_empty());

    // Windows [applied, next claim): who must answer in each.
    let traffic = Traffic::start(app);
    let mut windows: Vec<(Instant, Instant, Option<&str>)> = Vec::new();
    let mut from = Instant::now();
    let mut serving = Some("shop");
    traffic.more(60).await;
    for (target, name) in [
        (BLOG, Some("blog")),
        (SiteSlot::Idle, None),
        (SHOP, Some("shop")),
        (BLOG, Some("blog")),
    ] {
        let claimed = Instant::now();
        windows.push((from, claimed, serving));
        let c = claim(&w, target).await;
        let (st, applied) = outcome(&sidecar, &w, c.epoch).await;
        assert_eq!(
            (st.code, st.serving, applied),
            (RoleStatusCode::Ok, target, c.epoch),
            "{}",
            sidecar.logs()
        );
        from = Instant::now();
        serving = name;
        traffic.more(60).await;
    }
    windows.push((from, Instant::now(), serving));

    // news: its probe fails, the gate goes back to blog.
    let c = claim(&w, NEWS).await;
    let (st, applied) = outcome(&sidecar, &w, c.epoch).await;
    assert_eq!(
        (st.code, st.serving, applied),
        (RoleStatusCode::VerifyFailed, BLOG, c.epoch - 1)
    );
    let from = Instant::now();
    traffic.more(60).await;
    windows.push((from, Instant::now(), Some("blog")));
    let answers = traffic.stop().await;

    assert_eq!(
        worker(dir.path()),
        worker_before,
        "the nginx worker changed: a warm switch must not reload"
    );
    for a in &answers {
        match a.status {
            200 => {
                let site = site_of(a.host);
                assert_eq!(
                    (a.site.as_str(), a.body.as_str()),
                    (site, format!("{site} home\n").as_str()),
                    "a request for {} answered by another site: {a:?}",
                    a.host
                );
            }
            421 => assert_eq!(a.site, "", "a 421 names no site: {a:?}"),
            _ => panic!("unexpected answer {a:?}"),
        }
    }
    for (start, end, site) in &windows {
        let inside: Vec<&Answer> = answers
            .iter()
            .filter(|a| a.sent >= *start && a.done < *end)
            .collect();
        assert!(!inside.is_empty(), "no traffic while serving {site:?}");
        for a in inside {
            let want = if Some(site_of(a.host)) == *site {
                200
            } else {
                421
            };
            assert_eq!(a.status, want, "while serving {site:?}: {a:?}");
        }
    }

    // A restart (SIGKILL) resumes blog, with the warm file loaded again.
    let _ = sidecar.guard.child.kill();
    let _ = sidecar.guard.child.wait();
    drop(w);
    let sidecar = SidecarProc::start(dir.path(), &config, admin, log);
    let w = ShmWindow::open(dir.path().join("window"), &expect()).unwrap();
    let epoch = RoleWord::decode(w.read_word(word::ROLE).await.unwrap())
        .unwrap()
        .epoch;
    assert!(epoch > c.epoch, "epoch {epoch} after {}", c.epoch);
    let (st, applied) = outcome(&sidecar, &w, epoch).await;
    assert_eq!(
        (st.code, st.serving, applied),
        (RoleStatusCode::Ok, BLOG, epoch),
        "{}",
        sidecar.logs()
    );
    eventually(
        "blog served after the restart",
        Duration::from_secs(10),
        || async {
            match served(app, "blog.example", "/", "x-rdmalb-site").await {
                (200, s) if s == "blog" => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
    assert_eq!(
        served(app, "shop.example", "/", "x-rdmalb-site").await.0,
        421
    );
}
