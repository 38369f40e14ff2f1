//! Switching time of role application (docs/benchmarks.md, "Role switching time"): from a proxy's CAS on a
//! node's role word to the node's `ROLE_APPLIED` reaching the new epoch,
//! i.e. template rendered, config file replaced, app reloaded and the new
//! site verified by the probe. Transport: shm (the CAS and the polling of
//! `ROLE_APPLIED` go through `ShmWindow`, as a same-host proxy's would).
//!
//! Run: `cargo bench --bench role_switch -- --runs N --app APP` (runs
//! default 20; testsrv needs `target/debug/rdmalb-testbed` from `cargo
//! build`, or `RDMALB_TESTBED_BIN`). APP:
//!
//! - `nginx` (default): Debian's nginx with its own prefix, the shipped
//!   template (`conf/role/nginx-site.conf.tpl`) and reload wrapper
//!   (`conf/role/nginx-reload.sh`);
//! - `nginx-plain`: bare `nginx -s reload`, not waiting for nginx's old
//!   workers; comparison only (such a switch can be published while old
//!   workers still answer with the old site);
//! - `nginx-warm`: warm roles (`[role] mode = "warm"`): every site
//!   in one file from `conf/role/nginx-warm-site.conf.tpl`, loaded once at
//!   start-up; a switch renames the gate marker and probes, no reload;
//! - `testsrv`: `rdmalb-testbed testsrv`, `sh -c "kill -HUP $(cat pid)"`;
//! - `testsrv-pkill`: the same signalled with `pkill -HUP -F pid`
//!   (comparison only).
//!
//! The sidecar runs in this process (`Sidecar::start`, the same code as
//! `rdmalb sidecar`). Switches alternate between two sites. Prints a
//! markdown table and writes it to `bench/results/role_switch-<app>.md`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use rdmalb_sidecar::{config, Sidecar};
use rdmalb_window::layout::word;
use rdmalb_window::{
    site_table_hash, Expect, RemoteWindow, RoleState, RoleStatus, RoleStatusCode, RoleWord,
    ShmWindow, SiteSlot,
};

// The process-group guard and the nginx start of the integration tests.
#[path = "../tests/support/group.rs"]
mod group;
use group::{GroupChild, GroupNginx, NGINX};

/// The app (nginx or testsrv), stopped with its process group on drop.
type App = GroupChild;

const SITES: [&str; 2] = ["shop", "blog"];

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind 127.0.0.1:0")
}

fn wait_listening(port: u16) {
    for _ in 0..400 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    panic!("the app does not listen on port {port}");
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// How the nginx bench reloads and switches.
#[derive(Clone, Copy, PartialEq, Eq)]
enum NginxMode {
    /// Cold, with the wrapper that waits for nginx's old workers.
    Wrapper,
    /// Cold, bare `nginx -s reload` (comparison only).
    Plain,
    /// Warm: every site loaded once, a switch moves the gate marker.
    Warm,
}

/// Starts nginx on `port` including `<dir>/site.conf`; returns the guard
/// and the sidecar's `[role]` lines for it.
fn nginx(dir: &Path, port: u16, mode: NginxMode) -> (App, String) {
    let plain = mode == NginxMode::Plain;
    let p = dir.display();
    for site in SITES {
        std::fs::create_dir_all(dir.join("www").join(site)).unwrap();
    }
    let Some(nginx) = GroupNginx::start(dir, format!("127.0.0.1:{port}").parse().unwrap()) else {
        std::process::exit(0);
    };
    let app = nginx.into_child();
    let tpl = repo().join(if mode == NginxMode::Warm {
        "conf/role/nginx-warm-site.conf.tpl"
    } else {
        "conf/role/nginx-site.conf.tpl"
    });
    let wrapper = format!(
        "\"sh\", \"{}\", \"{p}/nginx.pid\", ",
        repo().join("conf/role/nginx-reload.sh").display()
    );
    let mut role = format!(
        "[role]\nfile = \"site.conf\"\nreload = [{}\"{NGINX}\", \"-p\", \"{p}\", \"-e\", \"{p}/error.log\", \"-c\", \"{p}/nginx.conf\", \"-s\", \"reload\"]\n\
         verify = \"127.0.0.1:{port}\"\nverify_header = \"x-rdmalb-site\"\n",
        if plain { "" } else { wrapper.as_str() }
    );
    if mode == NginxMode::Warm {
        role.push_str(&format!(
            "mode = \"warm\"\ngate = \"{p}/gate\"\n[role.idle]\ntemplate = \"{}\"\n",
            repo()
                .join("conf/role/nginx-warm-default.conf.tpl")
                .display()
        ));
    }
    for site in SITES {
        role.push_str(&format!(
            "[role.site.{site}]\ntemplate = \"{}\"\nhosts = [\"{site}.example\"]\nhealth_path = \"/healthz\"\nvars = {{ root = \"{p}/www/{site}\" }}\n",
            tpl.display()
        ));
    }
    (app, role)
}

/// Starts `rdmalb-testbed testsrv` on `port` reading `<dir>/site.toml` (reloaded
/// on SIGHUP); the probe checks its `X-Site` header. `pkill`: signal it with
/// `pkill -HUP -F <pid file>` (one process) instead of `sh -c "kill -HUP
/// $(cat <pid file>)"` (a shell and a `cat`).
fn testsrv(dir: &Path, port: u16, pkill: bool) -> (App, String) {
    let p = dir.display();
    std::fs::write(
        dir.join("site.toml"),
        "site = \"shop\"\nhosts = [\"shop.example\"]\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("testsrv.toml"),
        format!(
            "name = \"bench\"\nlisten = \"127.0.0.1:{port}\"\nsite_file = \"{p}/site.toml\"\npid_file = \"{p}/testsrv.pid\"\n"
        ),
    )
    .unwrap();
    let bin = std::env::var("RDMALB_TESTBED_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|_| repo().join("target/debug/rdmalb-testbed"));
    let child = GroupChild::spawn(
        Command::new(&bin)
            .args(["testsrv", "-c"])
            .arg(dir.join("testsrv.toml")),
    )
    .unwrap_or_else(|e| {
        panic!(
            "start {} testsrv (cargo build -p rdmalb-testbed): {e}",
            bin.display()
        )
    });
    let app = child;
    wait_listening(port);
    let tpl = repo().join("conf/role/testsrv-site.toml.tpl");
    let reload = if pkill {
        format!("\"pkill\", \"-HUP\", \"-F\", \"{p}/testsrv.pid\"")
    } else {
        format!("\"sh\", \"-c\", \"kill -HUP $(cat {p}/testsrv.pid)\"")
    };
    let mut role = format!(
        "[role]\nfile = \"site.toml\"\nreload = [{reload}]\n\
         verify = \"127.0.0.1:{port}\"\nverify_header = \"x-site\"\n"
    );
    for site in SITES {
        role.push_str(&format!(
            "[role.site.{site}]\ntemplate = \"{}\"\nhosts = [\"{site}.example\"]\nhealth_path = \"/health\"\n",
            tpl.display()
        ));
    }
    (app, role)
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let runs: usize = arg("--runs").and_then(|r| r.parse().ok()).unwrap_or(20);
    let app_name = arg("--app").unwrap_or_else(|| "nginx".into());
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let (_app, role) = match app_name.as_str() {
        "nginx" => nginx(dir.path(), port, NginxMode::Wrapper),
        "nginx-plain" => nginx(dir.path(), port, NginxMode::Plain),
        "nginx-warm" => nginx(dir.path(), port, NginxMode::Warm),
        "testsrv" => testsrv(dir.path(), port, false),
        "testsrv-pkill" => testsrv(dir.path(), port, true),
        other => {
            panic!("--app {other}: accepted nginx, nginx-plain, nginx-warm, testsrv, testsrv-pkill")
        }
    };
    let text = format!(
        "node = \"bench\"\nnode_id = 3\nsites = [\"shop\", \"blog\"]\nsite = \"shop\"\n\
         [window.shm]\npath = \"{}/window\"\n[[collector]]\nkind = \"system\"\n{role}",
        dir.path().display()
    );
    let cfg =
        config::parse(&text, &dir.path().join("sidecar.toml")).unwrap_or_else(|e| panic!("{e}"));
    let sidecar = Sidecar::start(cfg).await.unwrap_or_else(|e| panic!("{e}"));
    let w = ShmWindow::open(
        dir.path().join("window"),
        &Expect {
            node_id: Some(3),
            site_hash: Some(site_table_hash(&SITES)),
        },
    )
    .unwrap();

    let mut ms = Vec::with_capacity(runs);
    for i in 0..runs {
        let target = SiteSlot::Site(((i + 1) % 2) as u16);
        let raw = w.read_word(word::ROLE).await.unwrap();
        let new = RoleWord::decode(raw)
            .unwrap()
            .next(target, RoleState::Switching);
        let t0 = Instant::now();
        let old = w.compare_swap(word::ROLE, raw, new.encode()).await.unwrap();
        assert_eq!(old, raw, "claim lost");
        loop {
            if w.read_word(word::ROLE_APPLIED).await.unwrap() == new.epoch {
                break;
            }
            let st = RoleStatus::decode(w.read_word(word::ROLE_STATUS).await.unwrap()).unwrap();
            if st.epoch == new.epoch && st.code != RoleStatusCode::Applying {
                panic!("switch {i} failed: {st}");
            }
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "switch {i} did not finish"
            );
            tokio::time::sleep(Duration::from_micros(100)).await;
        }
        ms.push(t0.elapsed().as_secs_f64() * 1e3);
    }
    sidecar.stop().await;

    let mut sorted = ms.clone();
    sorted.sort_by(|a, b| a.total_cmp(b));
    let mean = ms.iter().sum::<f64>() / ms.len() as f64;
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    let report = format!(
        "# Role switching time ({app_name}, transport shm)\n\n\
         CAS on the role word → ROLE_APPLIED = new epoch ({}).\n\
         {runs} switches alternating shop/blog; {profile} build; {}.\n\n\
         | app | transport | switches | median ms | p10 ms | p90 ms | min ms | max ms | mean ms |\n\
         |---|---|---|---|---|---|---|---|---|\n\
         | {app_name} | shm | {runs} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} |\n\n\
         Every switch (ms): {}\n",
        if app_name == "nginx-warm" {
            "gate marker renamed, verify; the warm file was loaded once at start-up"
        } else {
            "render, atomic replace, reload, verify"
        },
        std::fs::read_to_string("/proc/loadavg")
            .map(|l| format!(
                "load average at the end {}",
                l.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
            ))
            .unwrap_or_default(),
        percentile(&sorted, 0.5),
        percentile(&sorted, 0.1),
        percentile(&sorted, 0.9),
        sorted[0],
        sorted[sorted.len() - 1],
        mean,
        ms.iter()
            .map(|m| format!("{m:.1}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    print!("{report}");
    let out = repo().join(format!("bench/results/role_switch-{app_name}.md"));
    std::fs::write(&out, &report).unwrap();
    println!("written to {}", out.display());
}
