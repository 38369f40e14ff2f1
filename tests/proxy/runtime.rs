//! The runtime API through `rdmalb ctl` against the real proxy in front of
//! real nginx nodes: `show stat` read by a script written for HAProxy's CSV
//! (checked against the real HAProxy's `show stat` of the same farm), node
//! states and weights steering real traffic, runtime state across a SIGHUP
//! reload, and the refusals (no token, unknown node, bad weight, no agent).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use crate::support::haproxy::Haproxy;
use crate::support::*;

const READER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/proxy/runtime/haproxy_stat.py"
);

/// An nginx node answering every request with its name in `X-Node`.
pub(super) fn nginx_node(dir: &Path, name: &str) -> Option<(GroupNginx, SocketAddr)> {
    let app = free_addr();
    let site = format!(
        "server {{\n    listen {app};\n    location / {{\n        add_header X-Node {name} always;\n        \
         default_type text/plain;\n        return 200 \"{name}\\n\";\n    }}\n}}\n"
    );
    let nginx = GroupNginx::start_with(dir, app, &site)?;
    Some((nginx, app))
}

pub(super) fn ctl(config: &Path, command: &str) -> Output {
    Command::new(RDMALB)
        .arg("ctl")
        .arg("-c")
        .arg(config)
        .args(command.split(' '))
        .stdin(Stdio::null())
        .output()
        .expect("run rdmalb ctl")
}

pub(super) fn ctl_ok(config: &Path, command: &str) -> String {
    let out = ctl(config, command);
    assert!(
        out.status.success(),
        "`rdmalb ctl {command}` failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Which node answered each of `n` requests.
async fn spread(addr: SocketAddr, n: usize) -> HashMap<String, usize> {
    let c = client();
    let mut seen = HashMap::new();
    for _ in 0..n {
        let resp = c
            .get(format!("http://{addr}/"))
            .header("host", "www.example.com")
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 200);
        let node = resp.headers()["x-node"].to_str().unwrap().to_string();
        *seen.entry(node).or_insert(0) += 1;
    }
    seen
}

/// Runs the HAProxy-style reader on `csv`.
fn read_like_haproxy_users(csv: &str) -> String {
    let mut child = Command::new("python3")
        .arg(READER)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3");
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(csv.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the reader fails on:\n{csv}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `show stat` of the real HAProxy over its stats socket.
fn haproxy_show_stat(socket: &Path) -> String {
    use std::io::{Read, Write};
    for _ in 0..200 {
        if let Ok(mut s) = std::os::unix::net::UnixStream::connect(socket) {
            s.write_all(b"show stat\n").unwrap();
            let mut out = String::new();
            s.read_to_string(&mut out).unwrap();
            return out;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    panic!("HAProxy's stats socket {} never opened", socket.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctl_reads_stats_and_steers_real_traffic() {
    let dir = tempfile::tempdir().unwrap();
    let (d1, d2) = (dir.path().join("n1"), dir.path().join("n2"));
    std::fs::create_dir_all(&d1).unwrap();
    std::fs::create_dir_all(&d2).unwrap();
    let Some((_n1, a1)) = nginx_node(&d1, "n1") else {
        return;
    };
    let Some((_n2, a2)) = nginx_node(&d2, "n2") else {
        return;
    };
    let pdir = tempfile::tempdir().unwrap();
    let token = pdir.path().join("admin.token");
    std::fs::write(&token, "t".repeat(40)).unwrap();
    std::fs::set_permissions(&token, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let (listen, addr, admin) = listener_toml();
    let config = format!(
        "{listen}token_file = \"{{dir}}/admin.token\"\n\n[global]\naccess_log = \"off\"\nbalance = \"roundrobin\"\n\n\
         [health]\ninterval = \"100ms\"\n\n[[site]]\nname = \"www\"\nhosts = [\"www.example.com\"]\n\n\
         [[node]]\nname = \"n1\"\naddress = \"{a1}\"\nsite = \"www\"\nweight = 3\n\n\
         [[node]]\nname = \"n2\"\naddress = \"{a2}\"\nsite = \"www\"\n"
    )
    // [admin] comes from listener_toml: the token file goes in it.
    .replacen("\n\n[global]", "\n[global]", 1);
    let proxy = Proxy::start_in(pdir, &config, &[addr, admin]);
    let cfg = proxy.config.clone();

    // Weights 3:1 under roundrobin.
    let seen = spread(addr, 40).await;
    assert_eq!((seen["n1"], seen["n2"]), (30, 10), "{seen:?}");

    // show stat: HAProxy's header, readable by a script written for
    // HAProxy, and the same reading as the real HAProxy's for this farm.
    let ours = ctl_ok(&cfg, "show stat");
    let hdir = tempfile::tempdir().unwrap();
    let socket = hdir.path().join("stats.sock");
    let hport = free_addr();
    let Some(_haproxy) = Haproxy::start(
        "ctl_reads_stats_and_steers_real_traffic",
        hdir.path(),
        &format!(
            "global\n    stats socket {} mode 600 level admin\ndefaults\n    mode http\n    timeout connect 1s\n    \
             timeout client 5s\n    timeout server 5s\nfrontend fe\n    bind {hport}\n    default_backend www\n\
             backend www\n    balance roundrobin\n    server n1 {a1} check inter 100ms weight 3\n    \
             server n2 {a2} check inter 100ms\n",
            socket.display()
        ),
        &[hport],
    ) else {
        return;
    };
    let theirs = eventually(
        "HAProxy sees both servers up",
        Duration::from_secs(10),
        || {
            let t = haproxy_show_stat(&socket);
            async move {
                if t.matches(",UP,").count() >= 3 {
                    Ok(t)
                } else {
                    Err(t)
                }
            }
        },
    )
    .await;
    assert_eq!(
        ours.lines().next(),
        theirs.lines().next(),
        "the CSV header is HAProxy's"
    );
    assert_eq!(
        read_like_haproxy_users(&ours),
        read_like_haproxy_users(&theirs)
    );
    let stot = |csv: &str, node: &str| -> u64 {
        let header: Vec<&str> = csv.lines().next().unwrap()[2..].split(',').collect();
        let col = header.iter().position(|c| *c == "stot").unwrap();
        let row = csv
            .lines()
            .find(|l| l.starts_with(&format!("www,{node},")))
            .unwrap();
        row.split(',').nth(col).unwrap().parse().unwrap()
    };
    assert_eq!(stot(&ours, "n1"), 30);
    assert_eq!(stot(&ours, "n2"), 10);

    // Drain n1: every new request goes to n2; the state shows as DRAIN.
    // A change answers HAProxy's empty line, like every answer's end.
    assert_eq!(ctl_ok(&cfg, "set node n1 state drain"), "\n");
    let seen = spread(addr, 12).await;
    assert_eq!(seen.get("n1"), None, "{seen:?}");
    assert!(read_like_haproxy_users(&ctl_ok(&cfg, "show stat")).contains("www/n1 DRAIN 3 1 0"));

    // Runtime state survives a SIGHUP reload of the same file.
    let reloads = |admin| async move {
        metric(
            &admin_text(admin, "/metrics").await,
            "rdmalb_config_reloads_total{result=\"ok\"}",
        )
    };
    signal(proxy.pid(), SIGHUP);
    eventually("the reload", Duration::from_secs(10), || async {
        let n = reloads(admin).await;
        if n >= 1.0 {
            Ok(())
        } else {
            Err(format!("{n} reloads"))
        }
    })
    .await;
    let seen = spread(addr, 12).await;
    assert_eq!(seen.get("n1"), None, "drain lost on reload: {seen:?}");

    // Ready again, and HAProxy's spelling: n2 weight 0 takes nothing.
    ctl_ok(&cfg, "set server www/n1 state ready ; set weight www/n2 0");
    // Each answer ends with an empty line, as on HAProxy's socket.
    assert_eq!(ctl_ok(&cfg, "get weight n2"), "0 (initial 1)\n\n");
    let seen = spread(addr, 12).await;
    assert_eq!(seen.get("n2"), None, "{seen:?}");
    ctl_ok(&cfg, "set node n2 weight 100%");
    assert_eq!(ctl_ok(&cfg, "get weight www/n2"), "1 (initial 1)\n\n");

    let info = ctl_ok(&cfg, "show info");
    assert!(info.contains("Name: rdmalb\n"), "{info}");
    assert!(info.contains(&format!("Pid: {}\n", proxy.pid())), "{info}");
    // HAProxy's JSON: one array of typed fields per row.
    let json: serde_json::Value = serde_json::from_str(&ctl_ok(&cfg, "show stat json")).unwrap();
    let field = |row: &serde_json::Value, name: &str| {
        row.as_array()
            .unwrap()
            .iter()
            .find(|f| f["field"]["name"] == name)
            .map(|f| f["value"]["value"].clone())
    };
    let n1 = json
        .as_array()
        .unwrap()
        .iter()
        .find(|r| field(r, "svname") == Some("n1".into()))
        .expect("a row for n1");
    assert_eq!(field(n1, "weight"), Some(3.into()));

    // Refusals, each named.
    let out = ctl(&cfg, "set node nope state drain");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("404 no node named `nope`"));
    let out = ctl(&cfg, "set node n1 weight 900");
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("400 Absolute weight can only be between 0 and 256 inclusive."));
    let out = ctl(&cfg, "set node n1 state sleepy");
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("'set server <srv> state' expects 'ready', 'drain' and 'maint'."));
    let out = ctl(&cfg, "move node n1 site www");
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("503 this proxy runs no reconfiguration agent"));
    let out = ctl(&cfg, "frobnicate");
    assert!(String::from_utf8_lossy(&out.stderr).contains("Unknown command"));
    // No token: 401, nothing changed.
    let resp = raw_exchange(
        admin,
        b"POST /runtime HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-rdmalb-commands\r\n\
          Content-Length: 23\r\nConnection: close\r\n\r\nset node n1 state maint",
    );
    assert_eq!(status_line(&resp), "HTTP/1.1 401 Unauthorized", "{resp}");
    assert!(read_like_haproxy_users(&ctl_ok(&cfg, "show stat")).contains("www/n1 UP 3 1 0"));
    // The HAProxy-style CSV URL, read-only like /status.
    let csv = admin_text(admin, "/stats;csv").await;
    assert_eq!(
        read_like_haproxy_users(&csv),
        read_like_haproxy_users(&ctl_ok(&cfg, "show stat"))
    );
}
