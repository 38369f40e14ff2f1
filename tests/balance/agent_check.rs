//! HAProxy's agent-check both ways, all real processes: `rdmalb sidecar`
//! processes (push collector, shm window, `[agent_check]`) beside
//! in-process HTTP backends, read by Debian's HAProxy (`agent-check
//! agent-port P`, weights seen in its own `show stat` through its stats
//! socket) and by the `rdmalb proxy` binary (`[[node]] agent_port`, seen
//! in `/status` and in where real requests go).
//!
//! The test plays the app: it pushes busy/capacity to a sidecar's push
//! collector; the sidecar answers `up ready N%` with N from that load, or
//! `drain` while its node sits in the idle pool. Every wait is for an
//! eventual state with a bound.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::support::haproxy::Haproxy;
use crate::support::role::SidecarProc;
use crate::support::{admin_status, client, eventually, free_addr, listener_toml, Backend};
use rdmalb_sidecar::collect::push::{Client, PushSample};
use rdmalb_sidecar::config::PushListen;

const BOUND: Duration = Duration::from_secs(30);

/// A sidecar with a push collector and an agent-check responder.
struct AgentSidecar {
    proc: SidecarProc,
    push: SocketAddr,
    agent: SocketAddr,
}

/// Starts `rdmalb sidecar` for node `name` in `dir/name`, its role
/// `site` ("web" or "idle").
fn sidecar(dir: &Path, name: &str, id: u16, site: &str) -> AgentSidecar {
    let dir = dir.join(name);
    std::fs::create_dir(&dir).unwrap();
    let (push, admin, agent) = (free_addr(), free_addr(), free_addr());
    let config = format!(
        "node = \"{name}\"\nnode_id = {id}\nsites = [\"web\"]\nsite = \"{site}\"\n\
         [window.shm]\npath = \"{}\"\n\
         [[collector]]\nkind = \"push\"\nlisten = \"{push}\"\n\
         [admin]\nlisten = \"{admin}\"\n\
         [agent_check]\nlisten = \"{agent}\"\n",
        dir.join("window").display()
    );
    let proc = SidecarProc::start(&dir, &config, admin, None);
    AgentSidecar { proc, push, agent }
}

impl AgentSidecar {
    /// Pushes the app's `busy` of 8 workers and waits until the sidecar's
    /// agent answers with `percent`.
    async fn push_busy(&self, busy: u64, percent: u32) {
        let listen = PushListen::Tcp(self.push);
        let mut c = eventually("push connection", BOUND, || async {
            Client::connect(&listen).await.map_err(|e| e.to_string())
        })
        .await;
        c.push(&PushSample {
            busy: Some(busy),
            capacity: Some(8),
            ..Default::default()
        })
        .await
        .expect("push accepted");
        let want = format!(" {percent}%");
        eventually("the agent answers the pushed load", BOUND, || async {
            let line = agent_line(self.agent);
            if line.contains(&want) {
                Ok(())
            } else {
                Err(format!("agent said {line:?}\n{}", self.proc.logs()))
            }
        })
        .await;
    }
}

/// One agent-check by hand: the line the sidecar writes.
fn agent_line(agent: SocketAddr) -> String {
    let mut s = std::net::TcpStream::connect(agent).expect("connect to the agent");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).expect("the agent's line");
    out
}

/// HAProxy's `show stat` through its stats socket: the named column of
/// server `server` of backend `backend`.
fn haproxy_stat(
    socket: &Path,
    backend: &str,
    server: &str,
    column: &str,
) -> Result<String, String> {
    let mut s = UnixStream::connect(socket).map_err(|e| format!("stats socket: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"show stat\n").map_err(|e| e.to_string())?;
    let mut text = String::new();
    s.read_to_string(&mut text).map_err(|e| e.to_string())?;
    let mut lines = text.lines();
    let header = lines
        .next()
        .and_then(|h| h.strip_prefix("# "))
        .ok_or_else(|| format!("no header in {text:?}"))?;
    let col = header
        .split(',')
        .position(|c| c == column)
        .ok_or_else(|| format!("no column {column} in {header}"))?;
    lines
        .map(|l| l.split(',').collect::<Vec<_>>())
        .find(|f| f.first() == Some(&backend) && f.get(1) == Some(&server))
        .and_then(|f| f.get(col).map(|v| v.to_string()))
        .ok_or_else(|| format!("no row {backend}/{server} in {text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn haproxy_weighs_and_drains_servers_by_the_sidecars_agent_check() {
    let test = "haproxy_weighs_and_drains_servers_by_the_sidecars_agent_check";
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (Backend::start("a").await, Backend::start("b").await);
    let serving = sidecar(dir.path(), "n1", 1, "web");
    let idle = sidecar(dir.path(), "n2", 2, "idle");
    serving.push_busy(0, 100).await;

    let front = free_addr();
    let socket = dir.path().join("haproxy.sock");
    let Some(_haproxy) = Haproxy::start(
        test,
        dir.path(),
        &format!(
            "global\n    maxconn 100\n    stats socket {} mode 600 level admin\n\n\
             defaults\n    mode http\n    timeout connect 5s\n    \
             timeout client 30s\n    timeout server 30s\n\n\
             frontend web\n    bind {front}\n    default_backend web\n\n\
             backend web\n    balance roundrobin\n    \
             server n1 {} check weight 100 agent-check agent-port {} agent-inter 500ms\n    \
             server n2 {} check weight 100 agent-check agent-port {} agent-inter 500ms\n",
            socket.display(),
            a.addr,
            serving.agent.port(),
            b.addr,
            idle.agent.port(),
        ),
        &[front],
    ) else {
        return;
    };
    let stat = |server: &'static str, column: &'static str, want: &'static str| {
        let socket = socket.clone();
        async move {
            eventually(
                &format!("haproxy's {column} of {server} = {want}"),
                BOUND,
                || {
                    let got = haproxy_stat(&socket, "web", server, column);
                    async move {
                        match got {
                            // `status` may carry a cause: "DRAIN (agent)".
                            Ok(v) if v == want || v.starts_with(&format!("{want} (")) => Ok(()),
                            other => Err(format!("{other:?}")),
                        }
                    }
                },
            )
            .await
        }
    };
    // The idle node's agent says drain: HAProxy shows it drained by the
    // agent.
    stat("n2", "status", "DRAIN").await;
    stat("n1", "status", "UP").await;
    stat("n1", "weight", "100").await;

    // The app gets busy: 6 of 8 workers → 25 % of weight 100.
    serving.push_busy(6, 25).await;
    stat("n1", "weight", "25").await;
    // Saturated: the floor, 1 %.
    serving.push_busy(8, 1).await;
    stat("n1", "weight", "1").await;
    // Idle again: the full weight.
    serving.push_busy(0, 100).await;
    stat("n1", "weight", "100").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_follows_the_sidecars_agent_check() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (Backend::start("a").await, Backend::start("b").await);
    let serving = sidecar(dir.path(), "n1", 1, "web");
    let idle = sidecar(dir.path(), "n2", 2, "idle");
    serving.push_busy(0, 100).await;

    let (listeners, proxy_addr, admin) = listener_toml();
    let mut config = format!(
        "[global]\naccess_log = \"off\"\n{listeners}\
         [[site]]\nname = \"web\"\nhosts = [\"web.test\"]\n"
    );
    for (name, backend, sc) in [("n1", &a, &serving), ("n2", &b, &idle)] {
        config.push_str(&format!(
            "[[node]]\nname = \"{name}\"\naddress = \"{}\"\nsite = \"web\"\nweight = 100\n\
             agent_port = {}\nagent_interval = \"200ms\"\n",
            backend.addr,
            sc.agent.port()
        ));
    }
    let proxy = crate::support::Proxy::start(&config, &[proxy_addr, admin]);
    let node = |status: &Value, name: &str| -> Value {
        status["nodes"]
            .as_array()
            .and_then(|ns| ns.iter().find(|n| n["name"] == name))
            .cloned()
            .unwrap_or(Value::Null)
    };
    let wait_node = |name: &'static str, what: &'static str, ok: fn(&Value) -> bool| {
        let proxy = &proxy;
        async move {
            eventually(what, BOUND, || async {
                let status = admin_status(admin).await;
                let n = node(&status, name);
                if ok(&n) {
                    Ok(())
                } else {
                    Err(format!("{n}\n{}", proxy.stderr_text()))
                }
            })
            .await
        }
    };

    // The idle node's agent drains it; the serving one keeps its weight.
    wait_node("n2", "n2 drained by its agent", |n| {
        n["admin_state"] == "drain" && n["admin_source"] == "agent"
    })
    .await;
    wait_node("n1", "n1 ready at full weight from its agent", |n| {
        n["admin_state"] == "ready" && n["weight"] == 100 && n["weight_source"] == "agent"
    })
    .await;

    // Real requests: the drained node gets none of them.
    let before = (a.requests(), b.requests());
    let http = client();
    for _ in 0..20 {
        let r = http
            .get(format!("http://{proxy_addr}/"))
            .header("host", "web.test")
            .send()
            .await
            .expect("request");
        assert_eq!(r.status(), 200);
    }
    assert_eq!(a.requests() - before.0, 20);
    assert_eq!(b.requests() - before.1, 0, "the drained node took requests");

    // The serving node's app gets busy: its weight follows.
    serving.push_busy(6, 25).await;
    wait_node("n1", "n1's weight 25 from its agent", |n| n["weight"] == 25).await;
    serving.push_busy(0, 100).await;
    wait_node("n1", "n1's weight back to 100", |n| n["weight"] == 100).await;

    let metrics = crate::support::admin_text(admin, "/metrics").await;
    assert!(
        metrics.contains("rdmalb_agent_checks_total{node=\"n1\",result=\"ok\"}"),
        "{metrics}"
    );
}
