//! The sidecar config file as written: serde structs mirroring the TOML
//! sections, with `deny_unknown_fields` so a misspelt key is an error rather
//! than a silently ignored setting. Values stay as text or wide integers here
//! (durations, addresses, modes, ids) so that validation can report each bad
//! value with its key instead of aborting on the first type error.

use serde::Deserialize;

/// Keys accepted at the top level of a sidecar config file.
pub const TOP_LEVEL_KEYS: &[&str] = &[
    "node",
    "node_id",
    "sites",
    "publish_interval",
    "staleness",
    "window",
    "collector",
    "admin",
    "agent_check",
    "site",
    "role",
    "state_file",
];

/// Keys accepted inside `[window]`.
pub const WINDOW_KEYS: &[&str] = &["shm", "tcp", "verbs"];

/// `[window.shm]`: the window as a file under /dev/shm, mapped by local proxies.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawShm {
    pub path: Option<String>,
    /// Octal text such as "0600".
    pub mode: Option<String>,
}

/// `[window.tcp]`: the authenticated two-sided responder.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTcp {
    pub listen: Option<String>,
    pub psk_file: Option<String>,
}

/// `[window.verbs]`: RDMA memory regions plus the authenticated control port.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawVerbs {
    pub control: Option<String>,
    pub psk_file: Option<String>,
    pub device: Option<String>,
}

/// One `[[collector]]` entry. The struct is the union of every kind's keys;
/// validation rejects keys that do not belong to the entry's `kind`, naming
/// the keys that do.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCollector {
    pub kind: Option<String>,
    pub interval: Option<String>,
    // system (+ cgroup: proc_root)
    pub proc_root: Option<String>,
    pub app_port: Option<i64>,
    pub interfaces: Option<Vec<String>>,
    // cgroup
    pub path: Option<String>,
    pub cpus: Option<f64>,
    // status
    pub url: Option<String>,
    pub format: Option<String>,
    pub timeout: Option<String>,
    pub capacity: Option<i64>,
    // push
    pub listen: Option<String>,
    pub expire: Option<String>,
}

impl RawCollector {
    /// The keys set in this entry, for the "not valid for this kind" check.
    pub fn keys_set(&self) -> Vec<&'static str> {
        let mut keys = Vec::new();
        let mut add = |set: bool, key: &'static str| {
            if set {
                keys.push(key);
            }
        };
        add(self.interval.is_some(), "interval");
        add(self.proc_root.is_some(), "proc_root");
        add(self.app_port.is_some(), "app_port");
        add(self.interfaces.is_some(), "interfaces");
        add(self.path.is_some(), "path");
        add(self.cpus.is_some(), "cpus");
        add(self.url.is_some(), "url");
        add(self.format.is_some(), "format");
        add(self.timeout.is_some(), "timeout");
        add(self.capacity.is_some(), "capacity");
        add(self.listen.is_some(), "listen");
        add(self.expire.is_some(), "expire");
        keys
    }
}

/// `[admin]`: the sidecar's own /metrics and /status endpoint.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAdmin {
    pub listen: Option<String>,
}

/// `[agent_check]`: HAProxy's agent-check responder.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAgentCheck {
    pub listen: Option<String>,
}

/// `[role]`: role application. `idle` and `site` stay untyped here so each
/// site's entry is checked on its own (one bad entry does not hide others).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRole {
    pub mode: Option<String>,
    pub gate: Option<String>,
    pub poll: Option<String>,
    pub file: Option<String>,
    pub reload: Option<Vec<String>>,
    pub reload_timeout: Option<String>,
    pub verify: Option<String>,
    pub verify_timeout: Option<String>,
    pub verify_header: Option<String>,
    pub idle: Option<toml::Value>,
    pub site: Option<toml::Value>,
}

/// `[role.idle]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRoleIdle {
    pub template: Option<String>,
    pub vars: Option<toml::Table>,
}

/// `[role.site.<name>]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRoleSite {
    pub template: Option<String>,
    pub hosts: Option<Vec<String>>,
    pub health_path: Option<String>,
    pub vars: Option<toml::Table>,
}
