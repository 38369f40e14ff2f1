//! `[[stats_socket]]`: HAProxy's stats socket (`stats socket` in its
//! `global` section), the text door to the runtime commands: a UNIX stream
//! socket (`path`, with `mode`, `user` and `group` set on the file) or a
//! TCP one (`listen`, as HAProxy's `stats socket ipv4@…`), and the `level`
//! its sessions start at, and how long a session may stay idle
//! (`timeout`, HAProxy's `stats timeout`). Defaults are HAProxy's: level
//! `operator`, a 10 s timeout, the socket file's mode, owner and group as
//! the process makes them. A session's `set timeout cli` wins over
//! `timeout` for that session.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use rdmalb_base::problems::ConfigCheck;

/// `[[stats_socket]]` as written.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawStatsSocket {
    /// A UNIX socket path (HAProxy's `stats socket /path`). One of `path` and
    /// `listen`.
    ///
    /// Default: none. Example: `"/run/rdmalb/admin.sock"`.
    pub path: Option<String>,
    /// A loopback TCP address instead of `path` (HAProxy's `stats socket
    /// ipv4@...`).
    ///
    /// Default: none. Example: `"127.0.0.1:9999"`.
    pub listen: Option<String>,
    /// The socket file's mode, octal (HAProxy's `mode 660`); `path` only.
    ///
    /// Default: none (as the process makes it). Example: `"660"`.
    pub mode: Option<String>,
    /// The socket file's owner: a user name or a numeric uid; `path` only.
    ///
    /// Default: none (the process's). Example: `"haproxy"`.
    pub user: Option<String>,
    /// The socket file's group: a group name or a numeric gid; `path` only.
    ///
    /// Default: none (the process's). Example: `"adm"`.
    pub group: Option<String>,
    /// What sessions may run (HAProxy's `level`): `"user"` (show), `"operator"`
    /// (also clear counters) or `"admin"` (also set and move).
    ///
    /// Default: `"operator"`. Example: `"admin"`.
    pub level: Option<String>,
    /// How long a session may send nothing, or leave its answer unread, before
    /// the socket closes it (HAProxy's `stats timeout`; 1s to 1d). `set timeout
    /// cli` changes it for one session.
    ///
    /// Default: `"10s"`. Example: `"2m"`.
    pub timeout: Option<String>,
}

/// What a session on a stats socket may run (HAProxy's `level`): `user`
/// reads, `operator` also changes what is safe to change, `admin` runs
/// everything. A session can lower its level (`user`, `operator`), never
/// raise it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    User,
    Operator,
    Admin,
}

impl Level {
    pub const ACCEPTED: &'static str = "user, operator or admin";

    pub fn parse(word: &str) -> Option<Level> {
        match word {
            "user" => Some(Level::User),
            "operator" => Some(Level::Operator),
            "admin" => Some(Level::Admin),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Level::User => "user",
            Level::Operator => "operator",
            Level::Admin => "admin",
        }
    }
}

/// Where a stats socket listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StatsEndpoint {
    Unix(PathBuf),
    Tcp(SocketAddr),
}

/// One validated stats socket.
#[derive(Debug, Clone)]
pub struct StatsSocket {
    pub endpoint: StatsEndpoint,
    /// Permission bits of the socket file.
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub level: Level,
    /// A session's idle timeout until its `set timeout cli`.
    pub timeout: Duration,
}

impl StatsSocket {
    /// `timeout` when not set: HAProxy's default `stats timeout`.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
    /// The longest `timeout` (and `set timeout cli`): a day.
    pub const MAX_TIMEOUT: Duration = Duration::from_secs(86_400);
}

/// Validates every `[[stats_socket]]` entry.
pub(super) fn validate(c: &mut ConfigCheck, raw: Vec<Option<RawStatsSocket>>) -> Vec<StatsSocket> {
    let mut out = Vec::new();
    for (i, r) in raw.into_iter().enumerate() {
        let Some(r) = r else { continue };
        let key = format!("stats_socket[{i}]");
        let endpoint = match (r.path.as_deref(), r.listen.as_deref()) {
            (Some(""), None) => {
                c.add(
                    format!("{key}.path"),
                    "empty (expected the socket file's path such as \"/run/rdmalb/admin.sock\")",
                );
                None
            }
            (Some(p), None) => Some(StatsEndpoint::Unix(c.path(p))),
            (None, Some(l)) => {
                let addr = c.socket_addr(&format!("{key}.listen"), Some(l));
                if let Some(a) = addr.filter(|a| !a.ip().is_loopback()) {
                    c.add(format!("{key}.listen"), format!("{a} is reachable from other hosts and the stats socket has no authentication (expected a loopback address such as 127.0.0.1:{})", a.port()));
                }
                addr.map(StatsEndpoint::Tcp)
            }
            _ => {
                c.add(key.clone(), "needs exactly one of `path` (a UNIX socket) or `listen` (a loopback TCP address)");
                None
            }
        };
        let tcp = matches!(endpoint, Some(StatsEndpoint::Tcp(_)));
        let mode = r
            .mode
            .as_deref()
            .and_then(|m| match u32::from_str_radix(m, 8) {
                Ok(v) if v <= 0o777 && !m.is_empty() => Some(v),
                _ => {
                    c.add(
                        format!("{key}.mode"),
                        format!("`{m}` is not a file mode (expected octal digits such as \"660\")"),
                    );
                    None
                }
            });
        let uid = r
            .user
            .as_deref()
            .and_then(|u| owner(c, &key, "user", u, "/etc/passwd"));
        let gid = r
            .group
            .as_deref()
            .and_then(|g| owner(c, &key, "group", g, "/etc/group"));
        if tcp && (mode.is_some() || uid.is_some() || gid.is_some()) {
            c.add(key.clone(), "`mode`, `user` and `group` apply to a UNIX socket's file (`path`), not to `listen`");
        }
        let level = match r.level.as_deref() {
            None => Level::Operator,
            Some(l) => Level::parse(l).unwrap_or_else(|| {
                c.add(
                    format!("{key}.level"),
                    format!("`{l}` is not a level (expected {})", Level::ACCEPTED),
                );
                Level::Operator
            }),
        };
        let timeout = c.duration_within(
            &format!("{key}.timeout"),
            r.timeout.as_deref(),
            StatsSocket::DEFAULT_TIMEOUT,
            Duration::from_secs(1),
            StatsSocket::MAX_TIMEOUT,
        );
        if let Some(endpoint) = endpoint {
            if out.iter().any(|s: &StatsSocket| s.endpoint == endpoint) {
                c.add(
                    key.clone(),
                    format!("{endpoint:?} is already a stats socket"),
                );
            }
            out.push(StatsSocket {
                endpoint,
                mode,
                uid,
                gid,
                level,
                timeout,
            });
        }
    }
    out
}

/// A user or group as a number, or its name looked up in `database`
/// (`/etc/passwd`, `/etc/group`: `name:x:id:…`).
fn owner(c: &mut ConfigCheck, key: &str, what: &str, name: &str, database: &str) -> Option<u32> {
    if let Ok(id) = name.parse() {
        return Some(id);
    }
    let found = std::fs::read_to_string(database).ok().and_then(|text| {
        text.lines().find_map(|line| {
            let mut f = line.split(':');
            (f.next() == Some(name)).then(|| f.nth(1).and_then(|id| id.parse().ok()))?
        })
    });
    if found.is_none() {
        c.add(
            format!("{key}.{what}"),
            format!(
                "no {what} named `{name}` in {database} (expected a {what} name or a numeric id)"
            ),
        );
    }
    found
}
