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
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawShm {
    /// The window file, under /dev/shm.
    ///
    /// Default: none (required). Example: `"/dev/shm/rdmalb-n1"`.
    pub path: Option<String>,
    /// The file's mode, octal: owner read-write, optionally group; never other.
    ///
    /// Default: `"0600"`. Example: `"0660"`.
    pub mode: Option<String>,
}

/// `[window.tcp]`: the authenticated two-sided responder.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawTcp {
    /// The responder's listen address. Proxies authenticate with a mutual
    /// HMAC-SHA256 challenge-response on the cluster's pre-shared key.
    ///
    /// Default: none (required). Example: `"127.0.0.1:7101"`.
    pub listen: Option<String>,
    /// The cluster's pre-shared key (`rdmalb psk --out FILE`; 256 random bits,
    /// not readable by other users); the proxies' `cluster.psk_file`.
    ///
    /// Default: none (required). Example: `"cluster.psk"`.
    pub psk_file: Option<String>,
}

/// `[window.verbs]`: RDMA memory regions plus the authenticated control port.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawVerbs {
    /// The control port's listen address: queue-pair details are exchanged there
    /// after the same key handshake as tcp.
    ///
    /// Default: none (required). Example: `"127.0.0.1:7201"`.
    pub control: Option<String>,
    /// The cluster's pre-shared key, as `[window.tcp] psk_file`.
    ///
    /// Default: none (required). Example: `"cluster.psk"`.
    pub psk_file: Option<String>,
    /// The RDMA device.
    ///
    /// Default: none (the first device). Example: `"mlx5_0"`.
    pub device: Option<String>,
}

/// One `[[collector]]` entry. The struct is the union of every kind's keys;
/// validation rejects keys that do not belong to the entry's `kind`, naming
/// the keys that do.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawCollector {
    /// `"system"` (the whole machine from /proc: cpu, run queue, memory, network,
    /// interrupts, connections to `app_port`), `"cgroup"` (a cgroup v2's share),
    /// `"status"` (the app's status page: nginx stub_status or Apache
    /// mod_status) or `"push"` (the app pushes its own figures).
    ///
    /// Default: none (required). Example: `"system"`.
    pub kind: Option<String>,
    /// `system`, `cgroup`, `status`: how often it reads (1ms to 60s).
    ///
    /// Default: `"100ms"`.
    pub interval: Option<String>,
    // system (+ cgroup: proc_root)
    /// `system`, `cgroup`: where /proc is (containers that mount the host's).
    ///
    /// Default: `"/proc"`. Example: `"/host/proc"`.
    pub proc_root: Option<String>,
    /// `system`: count ESTABLISHED connections to this port.
    ///
    /// Default: none. Example: `8081`.
    pub app_port: Option<i64>,
    /// `system`: the network interfaces counted.
    ///
    /// Default: all but lo. Example: `["eth0"]`.
    pub interfaces: Option<Vec<String>>,
    // cgroup
    /// `cgroup`: the cgroup's folder.
    ///
    /// Default: none (required). Example: `"/sys/fs/cgroup/system.slice/nginx.service"`.
    pub path: Option<String>,
    /// `cgroup`: the CPUs the cgroup may use, for its utilisation.
    ///
    /// Default: the cgroup's `cpu.max` quota, else its `cpuset.cpus.effective`,
    /// else the machine's CPUs. Example: `2.0`.
    pub cpus: Option<f64>,
    // status
    /// `status`: the status page's URL.
    ///
    /// Default: none (required). Example: `"http://127.0.0.1:8081/nginx_status"`.
    pub url: Option<String>,
    /// `status`: `"nginx"` (stub_status) or `"apache"` (mod_status `?auto`).
    ///
    /// Default: none (required). Example: `"nginx"`.
    pub format: Option<String>,
    /// `status`: a read that takes longer fails.
    ///
    /// Default: the interval, at most 1s. Example: `"100ms"`.
    pub timeout: Option<String>,
    /// `status`: the app's capacity, published with its busy count (nginx cannot
    /// tell its own).
    ///
    /// Default: none. Example: `512`.
    pub capacity: Option<i64>,
    // push
    /// `push`: where the app pushes: a loopback address or a UNIX socket path
    /// (the protocol is unauthenticated).
    ///
    /// Default: none (required). Example: `"127.0.0.1:7301"`.
    pub listen: Option<String>,
    /// `push`: pushed figures older than this count as gone (1ms to 1h).
    ///
    /// Default: none (kept). Example: `"1s"`.
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
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawAdmin {
    /// The address of `GET /metrics` and `GET /status`.
    ///
    /// Default: none (required). Example: `"127.0.0.1:9201"`.
    pub listen: Option<String>,
}

/// `[agent_check]`: HAProxy's agent-check responder.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawAgentCheck {
    /// The agent's address (the proxy's `node.agent_port`, HAProxy's
    /// `agent-port`). The weight is 100 x (1 - max(cpu, (busy + queue) /
    /// capacity)) %, at least 1; `drain` while the role is not applied.
    ///
    /// Default: none (required). Example: `"127.0.0.1:9999"`.
    pub listen: Option<String>,
}

/// `[role]`: role application. `idle` and `site` stay untyped here so each
/// site's entry is checked on its own (one bad entry does not hide others).
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawRole {
    /// `"cold"` (render the site's template and reload the app on each switch) or
    /// `"warm"` (every site configured at once, switched by the gate marker
    /// without a reload).
    ///
    /// Default: `"cold"`. Example: `"warm"`.
    pub mode: Option<String>,
    /// `mode = "warm"`: the folder where the sidecar keeps the gate marker.
    ///
    /// Default: none (required when warm). Example: `"/run/rdmalb/n1"`.
    pub gate: Option<String>,
    /// How often the role word is checked, on its own timer.
    ///
    /// Default: none (on every publish tick). Example: `"1ms"`.
    pub poll: Option<String>,
    /// The app's config file the template is rendered into, replaced atomically.
    ///
    /// Default: none (required). Example: `"/etc/nginx/conf.d/rdmalb-site.conf"`.
    pub file: Option<String>,
    /// The reload command as an argument list (no shell).
    ///
    /// Default: none (required). Example: `["nginx", "-s", "reload"]`.
    pub reload: Option<Vec<String>>,
    /// The reload is killed after this long.
    ///
    /// Default: `"10s"`.
    pub reload_timeout: Option<String>,
    /// The app's address the verification probe connects to.
    ///
    /// Default: none (required). Example: `"127.0.0.1:8081"`.
    pub verify: Option<String>,
    /// The probe is retried every 10ms until this long.
    ///
    /// Default: `"5s"`.
    pub verify_timeout: Option<String>,
    /// A response header that must equal the site's name for the probe to pass.
    ///
    /// Default: none. Example: `"x-rdmalb-site"`.
    pub verify_header: Option<String>,
    /// Rendered when the node goes idle.
    #[schemars(with = "Option<RawRoleIdle>")]
    pub idle: Option<toml::Value>,
    /// One per site this node may serve (`[role.site.shop]`).
    #[schemars(with = "Option<std::collections::BTreeMap<String, RawRoleSite>>")]
    pub site: Option<toml::Value>,
}

/// `[role.idle]`.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawRoleIdle {
    /// The template file (`{{site}}`, `{{hosts}}`, `{{primary_host}}`, the
    /// `vars`, ...; docs/sidecar.md).
    ///
    /// Default: none (required). Example: `"role/nginx-idle.conf.tpl"`.
    pub template: Option<String>,
    /// Extra template variables.
    ///
    /// Default: none. Example: `{ root = "/srv/www/idle" }`.
    #[schemars(with = "Option<serde_json::Map<String, serde_json::Value>>")]
    pub vars: Option<toml::Table>,
}

/// `[role.site.<name>]`.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawRoleSite {
    /// The site's template file.
    ///
    /// Default: none (required). Example: `"role/nginx-site.conf.tpl"`.
    pub template: Option<String>,
    /// The site's host names; the first is the probe's Host.
    ///
    /// Default: none (required). Example: `["shop.example.com"]`.
    pub hosts: Option<Vec<String>>,
    /// The path the probe GETs.
    ///
    /// Default: `"/"`. Example: `"/healthz"`.
    pub health_path: Option<String>,
    /// Extra template variables.
    ///
    /// Default: none. Example: `{ root = "/srv/www/shop" }`.
    #[schemars(with = "Option<serde_json::Map<String, serde_json::Value>>")]
    pub vars: Option<toml::Table>,
}
