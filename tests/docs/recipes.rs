//! docs/recipes.md, run as written: a proxy on the page's config in a
//! fresh folder, started as the page says (`rdmalb proxy -c rdmalb.toml`
//! there, `rdmalb` the folder's own `bin/rdmalb`, so that installing a new
//! build over it touches nothing else), each recipe's `sh` blocks run
//! there with `bash` (that `bin` first on the PATH, `$PID` the serving
//! proxy's pid), and what the recipe says happens checked through the
//! proxy. Node web2 is Debian's nginx, a real process the stuck-node
//! recipe stops (SIGSTOP) and resumes. The ports are the page's
//! (8090-8093, 8443, 9190), below the range the test suite draws its own
//! from.

use std::net::SocketAddr;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::proxy::restart::{number_after, Successor};
use crate::support::*;

/// The page: the setup block and the config of its introduction, then each
/// recipe's title and `sh` blocks, in order.
struct Page {
    setup: String,
    config: String,
    recipes: Vec<(String, Vec<String>)>,
}

fn blocks(text: &str, lang: &str) -> Vec<String> {
    text.split(&format!("```{lang}\n"))
        .skip(1)
        .filter_map(|rest| Some(rest.split("\n```").next()?.to_string() + "\n"))
        .collect()
}

fn page() -> Page {
    let text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/recipes.md"))
            .expect("docs/recipes.md");
    let mut parts = text.split("\n## ");
    let intro = parts.next().unwrap();
    let recipes = parts
        .map(|p| {
            let title = p.lines().next().unwrap().to_string();
            let sh = blocks(p, "sh");
            assert!(!sh.is_empty(), "recipe `{title}` has no sh block");
            (title, sh)
        })
        .collect();
    let first = |lang: &str, what: &str| blocks(intro, lang).into_iter().next().expect(what);
    Page {
        setup: first("sh", "the introduction's sh block"),
        config: first("toml", "the introduction's config"),
        recipes,
    }
}

/// Runs `script` with bash in `dir`, `dir/bin` first on the PATH:
/// (success, stdout, stderr).
fn run(dir: &Path, script: &str, pid: Option<u32>) -> (bool, String, String) {
    let path = format!(
        "{}:{}",
        dir.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = Command::new("bash");
    cmd.args(["-e", "-o", "pipefail", "-c", script])
        .current_dir(dir)
        .env("PATH", path);
    if let Some(pid) = pid {
        cmd.env("PID", pid.to_string());
    }
    let out = cmd.output().expect("run bash");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

async fn bind(addr: &str) -> tokio::net::TcpListener {
    tokio::net::TcpListener::bind(addr)
        .await
        .unwrap_or_else(|e| {
            panic!("{addr}, which docs/recipes.md uses, is taken by another process: {e}")
        })
}

/// `bin/rdmalb` in `dir`: the test's build, linked (copied across file
/// systems) under the name the recipes install over.
fn own_binary(dir: &Path, name: &str) -> PathBuf {
    let to = dir.join(name);
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    if std::fs::hard_link(RDMALB, &to).is_err() {
        std::fs::copy(RDMALB, &to).expect("copy the rdmalb binary");
    }
    to
}

/// Starts `bin/rdmalb proxy -c rdmalb.toml` in `dir` (stderr to
/// `dir/stderr.log`, which the processes a restart starts share) and waits
/// until every address in `wait_for` accepts connections.
fn start_proxy(dir: &Path, wait_for: &[SocketAddr]) -> ChildGuard {
    let child = Command::new(dir.join("bin/rdmalb"))
        .args(["proxy", "-c", "rdmalb.toml"])
        .current_dir(dir)
        .env("RDMALB_LOG", "info,rdmalb=debug")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(dir.join("stdout.log")).unwrap())
        .stderr(std::fs::File::create(dir.join("stderr.log")).unwrap())
        .spawn()
        .expect("spawn rdmalb");
    let mut guard = ChildGuard { child };
    for addr in wait_for {
        let mut tries = 0;
        while std::net::TcpStream::connect(addr).is_err() {
            if let Ok(Some(status)) = guard.child.try_wait() {
                panic!("rdmalb exited early ({status}):\n{}", log(dir));
            }
            tries += 1;
            assert!(
                tries < 400,
                "rdmalb does not listen on {addr}:\n{}",
                log(dir)
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }
    guard
}

fn log(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("stderr.log")).unwrap_or_default()
}

/// Sends `sig` (`STOP`, `CONT`) to the process group `pgid`.
fn signal_group(pgid: u32, sig: &str) {
    let status = Command::new("kill")
        .args([&format!("-{sig}"), "--", &format!("-{pgid}")])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -{sig} -{pgid} failed");
}

/// `openssl x509 -fingerprint -sha256` of the certificate file `pem`.
fn fingerprint(pem: &Path) -> String {
    let out = Command::new("openssl")
        .args(["x509", "-noout", "-fingerprint", "-sha256", "-in"])
        .arg(pem)
        .output()
        .expect("run openssl");
    assert!(out.status.success(), "openssl x509 -in {}", pem.display());
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Which node answers a request for `host` (its `x-backend`), or the status.
async fn served_by(c: &reqwest::Client, listen: SocketAddr, host: &str) -> Result<String, String> {
    let resp = c
        .get(format!("http://{listen}/"))
        .header("host", host)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    match resp.headers().get("x-backend") {
        Some(v) if resp.status() == 200 => Ok(v.to_str().unwrap().to_string()),
        _ => Err(format!("status {}", resp.status())),
    }
}

/// Requests for shop.localhost, one after the other, until `stop`: how many
/// were answered by a node, and the failures.
fn load(
    listen: SocketAddr,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<(usize, Vec<String>)> {
    tokio::spawn(async move {
        let c = client();
        let (mut ok, mut failed) = (0, Vec::new());
        while !stop.load(Ordering::SeqCst) {
            match served_by(&c, listen, "shop.localhost").await {
                Ok(_) => ok += 1,
                Err(e) => failed.push(e),
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        (ok, failed)
    })
}

fn node<'a>(status: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    status["nodes"]
        .as_array()
        .and_then(|n| n.iter().find(|n| n["name"] == name))
        .unwrap_or_else(|| panic!("no node {name} in {status:#}"))
}

/// The running page: its folder, its addresses, and a client.
struct Recipes {
    page: Page,
    folder: PathBuf,
    listen: SocketAddr,
    admin: SocketAddr,
    client: reqwest::Client,
}

impl Recipes {
    /// Runs block `j` of recipe `i` with `$PID` = `pid`; its stdout.
    fn step(&self, i: usize, j: usize, pid: u32) -> String {
        let (title, sh) = &self.page.recipes[i];
        let (ok, out, err) = run(&self.folder, &sh[j], Some(pid));
        assert!(
            ok,
            "recipe `{title}`, block {j}, failed:\n{err}\nproxy log:\n{}",
            log(&self.folder)
        );
        out
    }

    /// Which nodes answered 8 requests for shop.localhost, sorted.
    async fn spread(&self) -> Vec<String> {
        let mut seen = Vec::new();
        for _ in 0..8 {
            seen.push(
                served_by(&self.client, self.listen, "shop.localhost")
                    .await
                    .unwrap(),
            );
        }
        seen.sort();
        seen.dedup();
        seen
    }

    async fn both_serve(&self) {
        assert_eq!(self.spread().await, ["web1", "web2"]);
    }

    fn log(&self) -> String {
        log(&self.folder)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_recipe_runs_as_written() {
    const TEST: &str = "docs::recipes::every_recipe_runs_as_written";
    let page = page();
    let titles: Vec<&str> = page.recipes.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(
        titles,
        [
            "Read the stats page and the state of every node",
            "Drain a node for a deploy, then bring it back",
            "Take a node out for maintenance",
            "Add a site (reload)",
            "Refuse a broken edit (reload)",
            "Recover from a stuck node",
            "Restart the binary without dropping connections",
            "Rotate a certificate",
        ],
        "a recipe was added or renamed: give it its checks here"
    );
    for tool in ["/usr/bin/jq", "/usr/bin/openssl", "/usr/bin/ss"] {
        if !Path::new(tool).exists() {
            skip(TEST, &format!("{tool} is not installed (scripts/setup.sh)"));
            return;
        }
    }
    let tmp = tempfile::tempdir().unwrap();
    let folder = tmp.path().to_path_buf();
    let bin = own_binary(&folder, "bin/rdmalb");
    let (ok, _, err) = run(&folder, &page.setup, None);
    assert!(ok, "setup: {err}");
    std::fs::write(folder.join("rdmalb.toml"), &page.config).unwrap();

    let _web1 = Backend::start_on("web1", bind("127.0.0.1:8091").await);
    let nginx_dir = tempfile::tempdir().unwrap();
    let web2 = "127.0.0.1:8092".parse().unwrap();
    let site = format!(
        "server {{ listen {web2}; location / {{ add_header x-backend web2; return 200 \"ok\\n\"; }} }}\n"
    );
    let Some(nginx) = GroupNginx::start_with(nginx_dir.path(), web2, &site) else {
        return;
    };
    let nginx = nginx.into_child();
    let _blog1 = Backend::start_on("blog1", bind("127.0.0.1:8093").await);
    let r = Recipes {
        page,
        folder,
        listen: "127.0.0.1:8090".parse().unwrap(),
        admin: "127.0.0.1:9190".parse().unwrap(),
        client: client(),
    };
    let tls: SocketAddr = "127.0.0.1:8443".parse().unwrap();
    let first = start_proxy(&r.folder, &[r.listen, tls, r.admin]);
    r.both_serve().await;
    let pid = first.pid();

    read_drain_and_maint(&r, pid).await;
    add_a_site_and_refuse_a_broken_edit(&r, pid).await;
    recover_a_stuck_node(&r, pid, nginx.id()).await;
    let (new_pid, _second) = restart_the_binary(&r, first, &bin).await;
    rotate_a_certificate(&r, new_pid).await;
}

/// Recipes 0 to 2: the stats page, a drain, a maintenance.
async fn read_drain_and_maint(r: &Recipes, pid: u32) {
    // The stats page is served; both nodes UP in the CSV, up and ready in
    // /status.
    let out = r.step(0, 0, pid);
    assert!(out.contains("<title>rdmalb stats</title>"), "{out}");
    assert!(
        out.contains("shop,web1,UP") && out.contains("shop,web2,UP"),
        "{out}"
    );
    assert!(
        out.contains("web1 up ready") && out.contains("web2 up ready"),
        "{out}"
    );

    // Drain: the CSV line the recipe prints shows 0 sessions and DRAIN, and
    // web1 is back in the rotation at the end.
    let out = r.step(1, 0, pid);
    assert_eq!(out.trim(), "0,DRAIN", "{out}");
    r.both_serve().await;

    // Maintenance: MAINT while it lasts, both nodes serve afterwards.
    let out = r.step(2, 0, pid);
    assert_eq!(out.trim(), "MAINT", "{out}");
    r.both_serve().await;
}

/// Recipes 3 and 4: a reload that adds a site, then a broken edit refused.
async fn add_a_site_and_refuse_a_broken_edit(r: &Recipes, pid: u32) {
    let (c, listen) = (&r.client, r.listen);
    // Add a site: blog.localhost reaches blog1 once the reload is in force.
    assert!(served_by(c, listen, "blog.localhost").await.is_err());
    r.step(3, 0, pid);
    eventually(
        "blog.localhost served by blog1 after the reload",
        Duration::from_secs(10),
        || {
            let c = c.clone();
            async move {
                match served_by(&c, listen, "blog.localhost").await {
                    Ok(n) if n == "blog1" => Ok(()),
                    other => Err(format!("{other:?}")),
                }
            }
        },
    )
    .await;
    assert!(
        !r.log().contains("apply only after a restart"),
        "adding a site is all a reload's: {}",
        r.log()
    );

    // A broken edit: refused by the check, the file restored, both sites serve.
    let config = r.folder.join("rdmalb.toml");
    let before = std::fs::read_to_string(&config).unwrap();
    r.step(4, 0, pid);
    assert_eq!(std::fs::read_to_string(&config).unwrap(), before);
    assert_eq!(
        served_by(c, listen, "blog.localhost").await.as_deref(),
        Ok("blog1")
    );
    r.both_serve().await;
    assert!(!r.log().contains("reload rejected"), "{}", r.log());
}

/// Recipe 5: nginx (process group `nginx`) stopped: it still accepts, the
/// kernel queues the connections, nothing answers. Its checks time out and
/// take it down; the recipe reads DOWN and why; web1 takes every request.
async fn recover_a_stuck_node(r: &Recipes, pid: u32, nginx: u32) {
    let admin = r.admin;
    signal_group(nginx, "STOP");
    eventually(
        "web2 down after its checks time out",
        Duration::from_secs(60),
        || async move {
            let s = admin_status(admin).await;
            let n = node(&s, "web2");
            if n["state"] == "down" {
                Ok(())
            } else {
                Err(format!("{:#}", n["health"]))
            }
        },
    )
    .await;
    let out = r.step(5, 0, pid);
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        ["DOWN", "checks: no response within 1s"],
        "{out}"
    );
    assert_eq!(r.spread().await, ["web1"]);
    // Into maint while the app is repaired (resumed), then ready: UP again
    // after its checks pass, and back in the rotation.
    let out = r.step(5, 1, pid);
    assert_eq!(out.trim(), "");
    assert_eq!(
        node(&admin_status(admin).await, "web2")["admin_state"],
        "maint"
    );
    signal_group(nginx, "CONT");
    let out = r.step(5, 2, pid);
    assert_eq!(out.trim(), "UP", "{out}");
    r.both_serve().await;
}

/// Recipe 6: a new build (another file of the same build) is installed
/// over `bin`; SIGUSR2; the old process (`first`) drains and exits 0
/// (reaped here, so that `kill -0` in the recipe sees it go); the pid the
/// recipe prints listens and runs the installed file; requests sent all
/// along are answered. Returns the new process.
async fn restart_the_binary(
    r: &Recipes,
    first: ChildGuard,
    bin: &Path,
) -> (u32, Option<Successor>) {
    own_binary(&r.folder, "rdmalb.new");
    let old_inode = std::fs::metadata(bin).unwrap().ino();
    let old_pid = first.pid();
    let reaper = std::thread::spawn(move || {
        let mut first = first;
        for _ in 0..1800 {
            if let Ok(Some(status)) = first.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None // dropping the guard kills it
    });
    let stop = Arc::new(AtomicBool::new(false));
    let traffic = load(r.listen, Arc::clone(&stop));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let script = r.page.recipes[6].1[0].clone();
    let dir = r.folder.clone();
    let (ok, out, err) = tokio::task::spawn_blocking(move || run(&dir, &script, Some(old_pid)))
        .await
        .unwrap();
    let logged = number_after(&r.log(), "new_pid=");
    // Stopped when the test ends (or fails here).
    let second = logged.map(Successor);
    assert!(
        ok,
        "recipe `Restart the binary`: failed:\n{err}\nproxy log:\n{}",
        r.log()
    );
    let new_pid: u32 = out
        .lines()
        .last()
        .and_then(|l| l.strip_prefix("pid="))
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("the recipe prints one pid=N: {out}"));
    assert_eq!(Some(new_pid), logged, "{}", r.log());
    assert_ne!(new_pid, old_pid);
    let exit = reaper.join().unwrap();
    assert!(
        exit.is_some_and(|s| s.success()),
        "the old process: {exit:?}"
    );
    let exe = std::fs::read_link(format!("/proc/{new_pid}/exe")).unwrap();
    assert_eq!(exe, bin, "the new process runs the installed binary");
    let installed = std::fs::metadata(bin).unwrap().ino();
    assert_ne!(installed, old_inode, "install wrote a new file");
    assert_eq!(
        std::fs::metadata(format!("/proc/{new_pid}/exe"))
            .unwrap()
            .ino(),
        installed
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, Ordering::SeqCst);
    let (answered, failed) = traffic.await.unwrap();
    assert!(
        failed.is_empty() && answered > 10,
        "{answered} answered, failed: {failed:?}\n{}",
        r.log()
    );
    r.both_serve().await;
    (new_pid, second)
}

/// Recipe 7: the recipe prints the fingerprint served once it is the new
/// file's; the old one is served no more, and a third process serves.
async fn rotate_a_certificate(r: &Recipes, pid: u32) {
    let old_fingerprint = fingerprint(&r.folder.join("shop.pem"));
    let out = r.step(7, 0, pid);
    let third = number_after(&r.log(), "new_pid=").unwrap();
    let _third = Successor(third);
    let new_fingerprint = fingerprint(&r.folder.join("shop.pem"));
    assert_ne!(new_fingerprint, old_fingerprint);
    assert_eq!(
        out.lines().last(),
        Some(new_fingerprint.as_str()),
        "{out}\n{}",
        r.log()
    );
    assert_ne!(third, pid);
    r.both_serve().await;
}
