//! Sidecar configuration: TOML file → raw serde structs ([`raw`]) → validated,
//! immutable [`SidecarConfig`] ([`validate`]) → the runtime in
//! [`crate::run`].
//!
//! Validation collects *every* problem, each naming the file, the key path
//! and what would be accepted (the same [`ConfigErrors`] type as the proxy
//! config, so `rdmalb check` prints both alike). Relative paths (`psk_file`)
//! are anchored at the config file's directory. Defaults are documented on
//! each field below and in `conf/sidecar.toml`.
//!
//! `site` and `[role]` (role application: templates, reload command,
//! verification probe) are validated in [`validate`]'s `role` part; template
//! files are read and parsed at validation time, so `rdmalb check` catches
//! an unknown template variable and a running sidecar never re-reads them.
//!
//! Several collectors may be configured; each fills the load-block fields it
//! knows and, per field, a later `[[collector]]` entry wins over an earlier
//! one (see [`crate::collect`]).

pub mod raw;
pub mod reference;
pub mod validate;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rdmalb_window::SiteSlot;

pub use rdmalb_base::problems::{ConfigErrors, Problem};

/// Default `publish_interval`: 1 ms, the fine granularity of seed 002.
pub const DEFAULT_PUBLISH_INTERVAL: Duration = Duration::from_millis(1);
/// Default `staleness` advertised to readers.
pub const DEFAULT_STALENESS: Duration = Duration::from_millis(50);
/// Default interval of the `system`, `cgroup` and `status` collectors.
pub const DEFAULT_COLLECT_INTERVAL: Duration = Duration::from_millis(100);
/// Default `[window.shm] mode`.
pub const DEFAULT_SHM_MODE: u32 = 0o600;
/// Default `/proc` location (override for containers that mount the host's
/// procfs elsewhere).
pub const DEFAULT_PROC_ROOT: &str = "/proc";

/// A validated sidecar config. Immutable once built.
#[derive(Debug, Clone)]
pub struct SidecarConfig {
    /// The file it was read from (for messages).
    pub file: PathBuf,
    /// Node name, as in the proxy config's `[[node]] name`.
    pub node: String,
    /// Node id written into the window header (non-zero, unique in the cluster).
    pub node_id: u16,
    /// The cluster's site table in proxy-config order.
    pub sites: Vec<String>,
    /// `site_table_hash(sites)`, written into the window header.
    pub site_hash: u64,
    /// How often the load block is republished (default 1 ms).
    pub publish_interval: Duration,
    /// Staleness bound advertised in /status (default 50 ms).
    pub staleness: Duration,
    /// Transports serving the window.
    pub window: WindowServing,
    /// Load collectors, in config order (later entries win per field).
    pub collectors: Vec<CollectorConfig>,
    /// The admin endpoint, when configured.
    pub admin: Option<AdminConfig>,
    /// The agent-check responder (`[agent_check]`), when configured.
    pub agent_check: Option<AgentCheckConfig>,
    /// The site this node serves at its first start (`site`, default
    /// idle): the role word is initialised to it (ACTIVE, epoch 1). A
    /// restart resumes the role recorded in `state_file` instead.
    pub site: SiteSlot,
    /// Where the node's role (site served, site being applied, highest
    /// epoch) is kept across restarts (`state_file`, default
    /// `<node>.state` beside the config file); see `role::state`.
    pub state_file: PathBuf,
    /// Role application (`[role]`); `None` = off: the sidecar never changes
    /// the app's config and answers every claim for another site with
    /// NO_TEMPLATE.
    pub role: Option<RoleConfig>,
}

impl SidecarConfig {
    /// The name of a site slot: the site's name, or "idle".
    pub fn site_name(&self, slot: SiteSlot) -> Option<&str> {
        match slot.index() {
            None => Some(rdmalb_window::role::IDLE_POOL),
            Some(i) => self.sites.get(i).map(String::as_str),
        }
    }
}

/// Safety-net interval of the role watcher: with the publisher thread
/// checking the role word on every tick, the watcher also looks this often
/// by itself (a missed wake-up can only delay a switch by this much).
pub const ROLE_RECHECK: Duration = Duration::from_secs(1);
/// Default `[role] reload_timeout`.
pub const DEFAULT_RELOAD_TIMEOUT: Duration = Duration::from_secs(10);
/// Default `[role] verify_timeout`.
pub const DEFAULT_VERIFY_TIMEOUT: Duration = Duration::from_secs(5);
/// Default `[role.site.*] health_path`.
pub const DEFAULT_HEALTH_PATH: &str = "/";

/// `[role]`: how the sidecar applies a role a proxy wrote into its window.
#[derive(Debug, Clone)]
pub struct RoleConfig {
    /// `None` (default): the publisher thread compares the role word on
    /// every publish tick (`publish_interval`, 1 ms by default) and wakes
    /// the watcher when it changed, so watching costs no extra wake-ups.
    /// `Some(d)`: the watcher reads it on its own timer every `d`.
    pub poll: Option<std::time::Duration>,
    /// The config file the app reads, replaced atomically on each switch.
    pub file: PathBuf,
    /// Reload command as an argv list (no shell).
    pub reload: Vec<String>,
    /// The reload command is killed after this long (default 10 s).
    pub reload_timeout: Duration,
    /// The app's local address the verification probe connects to.
    pub verify: SocketAddr,
    /// How long the probe retries before the switch counts as failed
    /// (default 5 s).
    pub verify_timeout: Duration,
    /// When set, a probe passes only if this response header equals the
    /// site's name (proves the new config is live, not the old one).
    pub verify_header: Option<http::HeaderName>,
    /// `[role.idle]`: rendered when the node is moved to the idle pool.
    pub idle: Option<RoleTemplate>,
    /// `[role.site.<name>]`, keyed by site name.
    pub sites: std::collections::BTreeMap<String, SiteRole>,
    /// `[role] mode`: cold (default) or warm.
    pub mode: RoleMode,
}

/// How a switch changes what the app serves (`[role] mode`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RoleMode {
    /// `"cold"` (default): each switch renders the target site's template
    /// into `file` and runs the reload command.
    Cold,
    /// `"warm"`: `file` holds every `[role.site.*]` block at once (rendered
    /// and loaded with one reload at start-up); a switch only moves the gate
    /// marker in `gate`, which the app checks on every request, so no reload
    /// runs (`role::warm`).
    Warm {
        /// The directory of the gate marker (`[role] gate`).
        gate: PathBuf,
    },
}

impl RoleMode {
    /// The gate directory in warm mode.
    pub fn gate(&self) -> Option<&Path> {
        match self {
            RoleMode::Cold => None,
            RoleMode::Warm { gate } => Some(gate),
        }
    }
}

/// A template file, parsed, with its free-form variables.
#[derive(Debug, Clone)]
pub struct RoleTemplate {
    /// Where it was read from (for messages).
    pub path: PathBuf,
    pub template: crate::template::Template,
    /// `vars`: extra variables, by name.
    pub vars: std::collections::BTreeMap<String, String>,
}

/// `[role.site.<name>]`.
#[derive(Debug, Clone)]
pub struct SiteRole {
    pub template: RoleTemplate,
    /// Host names of the site (the first is the probe's Host header).
    pub hosts: Vec<String>,
    /// Path the probe requests (default "/").
    pub health_path: String,
}

/// Which transports serve the window. At least one is set.
#[derive(Debug, Clone, Default)]
pub struct WindowServing {
    pub shm: Option<ShmServe>,
    pub tcp: Option<TcpServe>,
    pub verbs: Option<VerbsServe>,
}

impl WindowServing {
    /// The transports that run a server (all but shm), each with the key
    /// file it authenticates peers with.
    pub fn listeners(&self) -> Vec<(rdmalb_window::Listen, &Path)> {
        let tcp = self.tcp.iter().map(|t| {
            let listen = rdmalb_window::Listen::Tcp { addr: t.listen };
            (listen, t.psk_file.as_path())
        });
        let verbs = self.verbs.iter().map(|v| {
            let listen = rdmalb_window::Listen::Verbs {
                control: v.control,
                device: v.device.clone(),
            };
            (listen, v.psk_file.as_path())
        });
        tcp.chain(verbs).collect()
    }
}

/// `[window.shm]`.
#[derive(Debug, Clone)]
pub struct ShmServe {
    /// Absolute path of the window file (normally under /dev/shm).
    pub path: PathBuf,
    /// File mode; never grants access to "other".
    pub mode: u32,
}

/// `[window.tcp]`.
#[derive(Debug, Clone)]
pub struct TcpServe {
    pub listen: SocketAddr,
    /// Pre-shared key file (checked: readable, a key made by `rdmalb psk`, not world-accessible).
    pub psk_file: PathBuf,
}

/// `[window.verbs]`.
#[derive(Debug, Clone)]
pub struct VerbsServe {
    /// Authenticated TCP control port where proxies exchange QP details.
    pub control: SocketAddr,
    pub psk_file: PathBuf,
    /// RDMA device name; `None` = the first device found.
    pub device: Option<String>,
}

/// `[admin]`.
#[derive(Debug, Clone)]
pub struct AdminConfig {
    pub listen: SocketAddr,
}

/// `[agent_check]`: HAProxy's agent-check protocol served for this node
/// (see [`crate::agent_check`]).
#[derive(Debug, Clone)]
pub struct AgentCheckConfig {
    pub listen: SocketAddr,
}

/// One `[[collector]]` entry.
#[derive(Debug, Clone)]
pub enum CollectorConfig {
    System(SystemCollector),
    Cgroup(CgroupCollector),
    Status(StatusCollector),
    Push(PushCollector),
}

impl CollectorConfig {
    /// The `kind` word as written in the file.
    pub fn kind(&self) -> &'static str {
        match self {
            CollectorConfig::System(_) => "system",
            CollectorConfig::Cgroup(_) => "cgroup",
            CollectorConfig::Status(_) => "status",
            CollectorConfig::Push(_) => "push",
        }
    }
}

/// `kind = "system"`: whole-machine load from procfs.
#[derive(Debug, Clone)]
pub struct SystemCollector {
    pub interval: Duration,
    pub proc_root: PathBuf,
    /// Count ESTABLISHED TCP connections whose local port is this one.
    pub app_port: Option<u16>,
    /// Interfaces summed for net rx/tx; `None` = every interface except `lo`.
    pub interfaces: Option<Vec<String>>,
}

/// `kind = "cgroup"`: one cgroup v2 directory (the app's service).
#[derive(Debug, Clone)]
pub struct CgroupCollector {
    pub interval: Duration,
    /// Absolute path of the cgroup directory.
    pub path: PathBuf,
    /// CPUs that count as 100 %; `None` = the `cpu.max` quota if set, else
    /// the cgroup's effective cpuset, else the machine's CPU count.
    pub cpus: Option<f64>,
    /// Where `meminfo` is read when `memory.max` is `max`.
    pub proc_root: PathBuf,
}

/// `kind = "status"`: the app's own status page.
#[derive(Debug, Clone)]
pub struct StatusCollector {
    pub interval: Duration,
    pub url: http::Uri,
    pub format: StatusFormat,
    /// Per-scrape deadline (default: the interval, at most 1 s).
    pub timeout: Duration,
    /// App capacity to publish when the page does not tell (nginx).
    pub capacity: Option<u64>,
}

/// Status page formats understood by the `status` collector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusFormat {
    /// nginx `stub_status`.
    Nginx,
    /// Apache `mod_status` with `?auto`.
    Apache,
}

/// `kind = "push"`: the app reports its own numbers.
#[derive(Debug, Clone)]
pub struct PushCollector {
    pub listen: PushListen,
    /// After this long without a push, the pushed fields fall back to zero.
    pub expire: Option<Duration>,
}

/// Where the push collector listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PushListen {
    /// A loopback TCP address (the protocol is unauthenticated).
    Tcp(SocketAddr),
    /// A unix stream socket path.
    Unix(PathBuf),
}

impl std::fmt::Display for PushListen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PushListen::Tcp(a) => write!(f, "{a}"),
            PushListen::Unix(p) => write!(f, "{}", p.display()),
        }
    }
}

/// Reads and validates a sidecar config file.
pub fn load(path: &Path) -> Result<SidecarConfig, ConfigErrors> {
    parse(&rdmalb_base::problems::read(path)?, path)
}

/// Validates config text; `path` names the file in messages and anchors
/// relative paths at its directory.
pub fn parse(text: &str, path: &Path) -> Result<SidecarConfig, ConfigErrors> {
    validate::validate(text, path)
}
