//! docs/recipes.md, run as written: a proxy on the page's config in a
//! fresh folder, each recipe's `sh` block run there with `bash` (with
//! `rdmalb` on the PATH and `$PID` the proxy's pid), and what the recipe
//! says happens checked through the proxy. The ports are the page's
//! (8090-8093, 9190), below the range the test suite draws its own from.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::support::*;

/// The page: the setup block and the config of its introduction, then each
/// recipe's title and `sh` block.
struct Page {
    setup: String,
    config: String,
    recipes: Vec<(String, String)>,
}

fn block(text: &str, lang: &str) -> Option<String> {
    let rest = text.split(&format!("```{lang}\n")).nth(1)?;
    Some(rest.split("\n```").next()?.to_string() + "\n")
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
            let sh = block(p, "sh").unwrap_or_else(|| panic!("recipe `{title}` has no sh block"));
            (title, sh)
        })
        .collect();
    Page {
        setup: block(intro, "sh").expect("the introduction's sh block"),
        config: block(intro, "toml").expect("the introduction's config"),
        recipes,
    }
}

/// Runs `script` with bash in `dir`: (success, stdout, stderr).
fn run(dir: &Path, script: &str, pid: Option<u32>) -> (bool, String, String) {
    let bin_dir = Path::new(RDMALB).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_recipe_runs_as_written() {
    let page = page();
    let titles: Vec<&str> = page.recipes.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(
        titles,
        [
            "Read the state of every node",
            "Drain a node for a deploy, then bring it back",
            "Take a node out for maintenance",
            "Add a site (reload)",
            "Refuse a broken edit (reload)",
        ],
        "a recipe was added or renamed: give it its checks here"
    );
    let dir = tempfile::tempdir().unwrap();
    let (ok, _, err) = run(dir.path(), &page.setup, None);
    assert!(ok, "setup: {err}");

    let _web1 = Backend::start_on("web1", bind("127.0.0.1:8091").await);
    let _web2 = Backend::start_on("web2", bind("127.0.0.1:8092").await);
    let _blog1 = Backend::start_on("blog1", bind("127.0.0.1:8093").await);
    let listen: SocketAddr = "127.0.0.1:8090".parse().unwrap();
    let admin: SocketAddr = "127.0.0.1:9190".parse().unwrap();
    let proxy = Proxy::start_in(dir, &page.config, &[listen, admin]);
    let pid = Some(proxy.pid());
    let folder = proxy.dir.path().to_path_buf();
    let c = client();
    let recipe = |i: usize| {
        let (title, sh) = &page.recipes[i];
        let (ok, out, err) = run(&folder, sh, pid);
        assert!(
            ok,
            "recipe `{title}` failed:\n{err}\nproxy log:\n{}",
            proxy.stderr_text()
        );
        out
    };
    let spread = |c: reqwest::Client| async move {
        let mut seen = Vec::new();
        for _ in 0..8 {
            seen.push(served_by(&c, listen, "shop.localhost").await.unwrap());
        }
        seen.sort();
        seen.dedup();
        seen
    };
    assert_eq!(spread(c.clone()).await, ["web1", "web2"]);

    // Read the state of every node: both nodes, both UP, in the CSV and /status.
    let out = recipe(0);
    assert!(
        out.contains("shop,web1,UP") && out.contains("shop,web2,UP"),
        "{out}"
    );
    assert!(
        out.contains("\"name\": \"web1\"") && out.contains("\"name\": \"web2\""),
        "{out}"
    );

    // Drain: the CSV line the recipe prints shows 0 sessions and DRAIN, and
    // web1 is back in the rotation at the end.
    let out = recipe(1);
    assert_eq!(out.trim(), "0,DRAIN", "{out}");
    assert_eq!(spread(c.clone()).await, ["web1", "web2"]);

    // Maintenance: MAINT while it lasts, both nodes serve afterwards.
    let out = recipe(2);
    assert_eq!(out.trim(), "MAINT", "{out}");
    assert_eq!(spread(c.clone()).await, ["web1", "web2"]);

    // Add a site: blog.localhost reaches blog1 once the reload is in force.
    assert!(served_by(&c, listen, "blog.localhost").await.is_err());
    recipe(3);
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

    // A broken edit: refused by the check, the file restored, both sites serve.
    let before = std::fs::read_to_string(folder.join("rdmalb.toml")).unwrap();
    recipe(4);
    assert_eq!(
        std::fs::read_to_string(folder.join("rdmalb.toml")).unwrap(),
        before
    );
    assert_eq!(
        served_by(&c, listen, "blog.localhost").await.as_deref(),
        Ok("blog1")
    );
    assert_eq!(spread(c.clone()).await, ["web1", "web2"]);
    assert!(
        !proxy.stderr_text().contains("reload rejected"),
        "{}",
        proxy.stderr_text()
    );
}
