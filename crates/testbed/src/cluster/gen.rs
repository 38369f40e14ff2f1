//! The configs the cluster generates for its sidecars and proxies, and
//! what it reads back at the end of a run (node moves, QoS meeting).
//!
//! Sidecars get a `[role]` section (docs/sidecar.md "Role application")
//! that renders the node's testsrv site file from [`SITE_TEMPLATE`] (or
//! [`IDLE_TEMPLATE`]) and reloads the node with
//! `kill -HUP $(cat <pid_file>)`, verified through testsrv's `X-Site`
//! header — so a proxy's claim moves a node for real, as
//! conf/role/sidecar-testsrv.toml does by hand. Proxies get `[reconfig]`:
//! the spec's mode, their own shm window and, with several proxies, each
//! other as peers with proxy 1 as lock home (seed 001 §3.2). The spec's
//! `[sidecar]` and `[proxy]` pass-through tables are merged on top.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{merge, Spec};
use crate::qos::{self, QosMeeting};
use crate::report::Report;
use rdmalb_window::layout::word;
use rdmalb_window::{Expect, RemoteWindow, RoleWord, ShmWindow};

/// The testsrv site file a sidecar renders for a site (the same text as
/// conf/role/testsrv-site.toml.tpl).
pub const SITE_TEMPLATE: &str =
    "# Rendered by the rdmalb sidecar of node {{node}} for site {{site}}.\n\
# Do not edit: the sidecar replaces this file whenever a proxy moves the node.\n\
site = \"{{site}}\"\nhosts = [{{hosts_quoted}}]\n";

/// The site file of a node in the idle pool: testsrv serves a site named
/// `idle`, so every real site's Host gets 421.
pub const IDLE_TEMPLATE: &str =
    "# Rendered by the rdmalb sidecar of node {{node}}: idle pool.\nsite = \"{{site}}\"\n";

/// The name testsrv and the configs use for the idle pool.
pub const IDLE: &str = "idle";

/// One node's addresses and files.
pub struct NodePlan {
    pub name: String,
    /// A site name, or [`IDLE`].
    pub site: String,
    pub listen: SocketAddr,
    /// The sidecar's push collector: a unix socket in the output's conf/
    /// (no loopback port that an ephemeral connection could take first).
    pub push: PathBuf,
    pub shm: PathBuf,
    /// The sidecar's tcp window responder, when the spec's transport is
    /// tcp (the proxies then read the window there, two-sided).
    pub tcp: Option<SocketAddr>,
    pub site_file: PathBuf,
    pub pid_file: PathBuf,
}

fn strings(v: &[String]) -> toml::Value {
    toml::Value::Array(v.iter().map(|s| toml::Value::String(s.clone())).collect())
}

fn table(pairs: &[(&str, toml::Value)]) -> toml::Table {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

fn s(v: impl ToString) -> toml::Value {
    toml::Value::String(v.to_string())
}

/// The sidecar config of node `n` (id `id`); templates live in `conf`,
/// `psk` is the cluster's key file (tcp transport).
pub fn sidecar(
    spec: &Spec,
    n: &NodePlan,
    id: usize,
    conf: &Path,
    psk: Option<&Path>,
) -> toml::Table {
    let mut t: toml::Table = toml::from_str(&format!(
        "node = \"{}\"\nnode_id = {id}\n[window.shm]\npath = \"{}\"\n[[collector]]\nkind = \"system\"\n[[collector]]\nkind = \"push\"\nlisten = \"{}\"\nexpire = \"2s\"\n",
        n.name, n.shm.display(), n.push.display()
    ))
    .unwrap_or_default();
    if let (Some(addr), Some(psk), Some(toml::Value::Table(w))) = (n.tcp, psk, t.get_mut("window"))
    {
        w.insert(
            "tcp".into(),
            toml::Value::Table(table(&[
                ("listen", s(addr)),
                ("psk_file", s(psk.display())),
            ])),
        );
    }
    t.insert("sites".into(), strings(&spec.sites));
    // The node's initial role: proxies route by the role word the sidecar
    // writes from this ("idle" starts it in the idle pool).
    t.insert("site".into(), s(&n.site));
    let mut sites = toml::Table::new();
    for site in &spec.sites {
        sites.insert(
            site.clone(),
            toml::Value::Table(table(&[
                ("template", s(conf.join("site.toml.tpl").display())),
                ("hosts", strings(&[format!("{site}.localhost")])),
                ("health_path", s("/health")),
            ])),
        );
    }
    let role = table(&[
        ("file", s(n.site_file.display())),
        (
            "reload",
            strings(&[
                "sh".into(),
                "-c".into(),
                format!("kill -HUP $(cat {})", n.pid_file.display()),
            ]),
        ),
        ("reload_timeout", s("2s")),
        ("verify", s(n.listen)),
        ("verify_timeout", s("2s")),
        ("verify_header", s("x-site")),
        (
            "idle",
            toml::Value::Table(table(&[(
                "template",
                s(conf.join("idle.toml.tpl").display()),
            )])),
        ),
        ("site", toml::Value::Table(sites)),
    ]);
    t.insert("role".into(), toml::Value::Table(role));
    merge(&mut t, &spec.sidecar);
    t
}

/// The shm window of proxy `id`, for its peers.
pub fn proxy_window(tag: u32, id: u32) -> PathBuf {
    PathBuf::from(format!("/dev/shm/rdmalb-cluster-{tag}-proxy{id}"))
}

/// The config of proxy `id` (1-based) listening on `listen`/`admin`;
/// `psk` is the cluster's key file (tcp transport).
pub fn proxy(
    spec: &Spec,
    id: u32,
    nodes: &[NodePlan],
    (listen, admin): (SocketAddr, SocketAddr),
    tag: u32,
    psk: Option<&Path>,
) -> toml::Table {
    let mut t: toml::Table = toml::from_str(&format!(
        "[global]\nproxy_id = {id}\nbalance = \"{}\"\naccess_log = \"off\"\n\
         [health]\npath = \"/health\"\ninterval = \"200ms\"\ntimeout = \"1s\"\nrise = 1\nfall = 3\n\
         [admin]\nlisten = \"{admin}\"\n[[listener]]\nname = \"web\"\nlisten = \"{listen}\"\n",
        spec.balance.replace('"', "")
    ))
    .unwrap_or_default();
    let site_tables = spec.sites.iter().enumerate().map(|(i, site)| {
        let mut st = table(&[
            ("name", s(site)),
            ("hosts", strings(&[format!("{site}.localhost")])),
        ]);
        // The QoS policy's inputs (docs/reconfiguration.md, QoS).
        if let Some(g) = spec.guarantees.get(i).copied().flatten() {
            st.insert("guarantee".into(), toml::Value::Float(g));
        }
        if let Some(p) = spec.priorities.get(i).copied().flatten() {
            st.insert("priority".into(), toml::Value::Integer(i64::from(p)));
        }
        if let Some(sticky) = &spec.sticky {
            st.insert("sticky".into(), toml::Value::Table(sticky.site.clone()));
        }
        toml::Value::Table(st)
    });
    t.insert("site".into(), toml::Value::Array(site_tables.collect()));
    let node_tables = nodes.iter().map(|n| {
        let (transport, sidecar) = match n.tcp {
            Some(addr) => ("tcp", addr.to_string()),
            None => ("shm", n.shm.display().to_string()),
        };
        let mut nt = table(&[
            ("name", s(&n.name)),
            ("address", s(n.listen)),
            ("site", s(&n.site)),
            ("transport", s(transport)),
            ("sidecar", s(sidecar)),
        ]);
        // Its persistence value is its name: `SRVID=n3`.
        if spec.sticky.is_some() {
            nt.insert("cookie".into(), s(&n.name));
        }
        toml::Value::Table(nt)
    });
    if let Some(psk) = psk {
        t.insert(
            "cluster".into(),
            toml::Value::Table(table(&[("psk_file", s(psk.display()))])),
        );
    }
    t.insert("node".into(), toml::Value::Array(node_tables.collect()));
    let mut reconfig = table(&[
        ("mode", s(spec.reconfig.as_str())),
        (
            "window",
            toml::Value::Table(table(&[("shm", s(proxy_window(tag, id).display()))])),
        ),
    ]);
    if spec.proxies > 1 {
        reconfig.insert("lock_home".into(), toml::Value::Integer(1));
        let peers = (1..=spec.proxies).filter(|&p| p != id).map(|p| {
            toml::Value::Table(table(&[
                ("id", toml::Value::Integer(i64::from(p))),
                ("transport", s("shm")),
                ("window", s(proxy_window(tag, p).display())),
            ]))
        });
        reconfig.insert("peer".into(), toml::Value::Array(peers.collect()));
    }
    t.insert("reconfig".into(), toml::Value::Table(reconfig));
    merge(&mut t, &spec.proxy);
    t
}

/// Where one node ended.
#[derive(Debug, Clone, Serialize)]
pub struct NodeEnd {
    pub node: String,
    pub initial_site: String,
    /// The site of its last role word (`idle`, or `?` when unreadable).
    pub site: String,
    /// Role changes since start-up: the role word's epoch − 1.
    pub moves: u64,
    /// Whether its sidecar applied and verified the last role
    /// (`ROLE_APPLIED` equals the role word's epoch).
    pub applied: bool,
}

/// What `rdmalb-testbed cluster` writes into `cluster.json` besides the report.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub mode: String,
    pub overprovision: bool,
    pub split: Vec<u32>,
    pub idle: u32,
    /// Node moves in the run (sum of the nodes' role-epoch changes).
    pub moves: u64,
    pub nodes: Vec<NodeEnd>,
    /// Served requests/s over the whole run, all sites.
    pub aggregate_served_per_s: f64,
    /// Sites with a guarantee.
    pub qos: Vec<QosOut>,
    /// CPU the components used while the load ran.
    pub cpu: CpuUse,
}

/// CPU time (user + system) used by the cluster's processes, by kind, in
/// seconds: what the proxies' routing costs on a machine they share with
/// the emulated nodes (the nodes' service times stretch when the CPU is
/// contended, docs/testbed.md).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct CpuUse {
    pub proxies_s: f64,
    pub nodes_s: f64,
    pub sidecars_s: f64,
}

impl CpuUse {
    /// The CPU used between `before` and `self`.
    pub fn since(self, before: CpuUse) -> CpuUse {
        CpuUse {
            proxies_s: (self.proxies_s - before.proxies_s).max(0.0),
            nodes_s: (self.nodes_s - before.nodes_s).max(0.0),
            sidecars_s: (self.sidecars_s - before.sidecars_s).max(0.0),
        }
    }
}

/// One guaranteed site's QoS meeting.
#[derive(Debug, Clone, Serialize)]
pub struct QosOut {
    #[serde(flatten)]
    pub meeting: QosMeeting,
    pub percent: Option<f64>,
}

/// How long [`outcome`] waits for a sidecar to apply a role the agent
/// claimed just before the load ended (a bound on a stuck sidecar, not a
/// timing claim: applying is a file rewrite and a reload).
const SETTLE: std::time::Duration = std::time::Duration::from_secs(15);

/// Reads a node's role word and the epoch its sidecar last applied; while
/// they differ (a move in progress), reads again until [`SETTLE`] has
/// passed since `since`.
async fn settled_role(
    shm: &std::path::Path,
    since: std::time::Instant,
) -> (Option<u64>, Option<u64>) {
    let Ok(w) = ShmWindow::open(shm, &Expect::ANY) else {
        return (None, None);
    };
    loop {
        let word = w.read_word(word::ROLE).await.ok();
        let applied = w.read_word(word::ROLE_APPLIED).await.ok();
        let epoch = word.and_then(|w| RoleWord::decode(w).ok()).map(|r| r.epoch);
        if epoch.is_none() || epoch == applied || since.elapsed() >= SETTLE {
            return (word, applied);
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// Reads every node's role word (the sidecars are still up; a move claimed
/// as the load ended is given time to be applied) and computes the QoS
/// accounting of `report`.
pub async fn outcome(spec: &Spec, nodes: &[NodePlan], report: &Report) -> Outcome {
    let mut ends = Vec::new();
    let since = std::time::Instant::now();
    for n in nodes {
        let (word, applied) = settled_role(&n.shm, since).await;
        let role = word.and_then(|w| RoleWord::decode(w).ok());
        ends.push(NodeEnd {
            node: n.name.clone(),
            initial_site: n.site.clone(),
            site: match role.map(|r| r.site.index()) {
                None => "?".into(),
                Some(None) => IDLE.into(),
                Some(Some(i)) => spec.sites.get(i).cloned().unwrap_or_else(|| "?".into()),
            },
            moves: role.map(|r| r.epoch.saturating_sub(1)).unwrap_or(0),
            applied: matches!((role, applied), (Some(r), Some(a)) if r.epoch == a),
        });
    }
    let qos = spec
        .sites
        .iter()
        .zip(&spec.guarantees)
        .filter_map(|(site, g)| g.map(|g| qos::meeting(report, site, g)))
        .map(|m| QosOut {
            percent: m.percent(),
            meeting: m,
        })
        .collect();
    Outcome {
        mode: spec.reconfig.as_str().into(),
        overprovision: spec.overprovision,
        split: spec.split.clone(),
        idle: spec.idle,
        moves: ends.iter().map(|e| e.moves).sum(),
        nodes: ends,
        aggregate_served_per_s: report.summary.last().map(|r| r.served_per_s).unwrap_or(0.0),
        qos,
        cpu: Default::default(),
    }
}

impl Outcome {
    /// Lines appended to the summary table.
    pub fn text(&self) -> String {
        let mut s = format!(
            "mode {}{}, split {}{}, node moves {}, aggregate served/s {:.1}\n",
            self.mode,
            if self.overprovision {
                " (over-provisioned)"
            } else {
                ""
            },
            self.split
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(":"),
            if self.idle > 0 {
                format!(" + {} idle", self.idle)
            } else {
                String::new()
            },
            self.moves,
            self.aggregate_served_per_s
        );
        s.push_str(&format!(
            "CPU while the load ran: proxies {:.2} s, nodes {:.2} s, sidecars {:.2} s\n",
            self.cpu.proxies_s, self.cpu.nodes_s, self.cpu.sidecars_s
        ));
        for q in &self.qos {
            s.push_str(&format!(
                "QoS {}: guarantee {:.0}/s met in {} of {} intervals with demand >= guarantee ({}); \
                 burst edges apart: met in {} of {}\n",
                q.meeting.site,
                q.meeting.guarantee,
                q.meeting.met,
                q.meeting.counted,
                q.percent
                    .map(|p| format!("{p:.1} %"))
                    .unwrap_or_else(|| "no such interval".into()),
                q.meeting.edges_met,
                q.meeting.edges,
            ));
        }
        s
    }
}
