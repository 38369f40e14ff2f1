//! Sidecar configuration: TOML file → raw serde structs ([`raw`]) → validated,
//! immutable [`SidecarConfig`] ([`validate`]) → the runtime in
//! [`crate::sidecar::run`].
//!
//! Validation collects *every* problem, each naming the file, the key path
//! and what would be accepted (the same [`ConfigErrors`] type as the proxy
//! config, so `rdmalb check` prints both alike). Relative paths (`psk_file`)
//! are anchored at the config file's directory. Defaults are documented on
//! each field below and in `conf/sidecar.toml`.
//!
//! Several collectors may be configured; each fills the load-block fields it
//! knows and, per field, a later `[[collector]]` entry wins over an earlier
//! one (see [`crate::sidecar::collect`]).

pub mod raw;
pub mod validate;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use crate::config::{ConfigErrors, Problem};

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
}

/// Which transports serve the window. At least one is set.
#[derive(Debug, Clone, Default)]
pub struct WindowServing {
    pub shm: Option<ShmServe>,
    pub tcp: Option<TcpServe>,
    pub verbs: Option<VerbsServe>,
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
    /// Pre-shared key file (checked: readable, ≥ 16 bytes, not world-accessible).
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
    let text = std::fs::read_to_string(path).map_err(|e| ConfigErrors {
        file: path.to_path_buf(),
        problems: vec![Problem {
            key: String::new(),
            message: format!("cannot read file: {e}"),
        }],
    })?;
    parse(&text, path)
}

/// Validates config text; `path` names the file in messages and anchors
/// relative paths at its directory.
pub fn parse(text: &str, path: &Path) -> Result<SidecarConfig, ConfigErrors> {
    validate::validate(text, path)
}
