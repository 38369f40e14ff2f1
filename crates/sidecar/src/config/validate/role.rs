//! Validation of `site` and `[role]`: the initial site, the reload command,
//! the verification probe, the mode (cold, or warm with its gate directory)
//! and the per-site templates (read and parsed here, with every variable
//! they use checked against what the renderer defines; in warm mode every
//! site template must use `{{gate}}`, in cold mode none may).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::super::raw::{RawRole, RawRoleIdle, RawRoleSite};
use super::super::{
    RoleConfig, RoleMode, RoleTemplate, SiteRole, DEFAULT_HEALTH_PATH, DEFAULT_RELOAD_TIMEOUT,
    DEFAULT_VERIFY_TIMEOUT,
};
use crate::template::{Template, IDLE_VARIABLES, SITE_VARIABLES, WARM_SITE_VARIABLES};
use rdmalb_base::problems::ConfigCheck;
use rdmalb_window::SiteSlot;

/// `site`: a name from `sites`, or "idle" (the default).
pub(super) fn initial_site(
    r: &mut ConfigCheck,
    v: Option<&toml::Value>,
    sites: &[String],
) -> SiteSlot {
    let Some(name) = r.field::<String>("site", v, "a site name from `sites` or \"idle\"") else {
        return SiteSlot::Idle;
    };
    if let Some(i) = sites.iter().position(|s| *s == name) {
        return SiteSlot::Site(i as u16);
    }
    if name == rdmalb_window::role::IDLE_POOL {
        return SiteSlot::Idle;
    }
    r.add(
        "site",
        format!(
            "`{name}` is not in `sites` (accepted: one of {}, or \"idle\")",
            quoted(sites)
        ),
    );
    SiteSlot::Idle
}

fn quoted(names: &[String]) -> String {
    names
        .iter()
        .map(|s| format!("\"{s}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `[role]`, or `None` when absent (role application off).
pub(super) fn role(
    r: &mut ConfigCheck,
    v: Option<&toml::Value>,
    sites: &[String],
    initial: SiteSlot,
) -> Option<RoleConfig> {
    let v = v?;
    let raw: RawRole = r.value("role", v);
    let before = r.count();
    let mode = mode(r, raw.mode.as_deref(), raw.gate.as_deref());
    // From the text, so that a warm config whose gate is wrong still has its
    // templates checked as warm ones.
    let warm = raw.mode.as_deref() == Some("warm");
    let poll = raw.poll.as_deref().map(|t| {
        r.duration_within(
            "role.poll",
            Some(t),
            Duration::from_millis(1),
            Duration::from_micros(100),
            Duration::from_secs(10),
        )
    });
    let file = target_file(r, raw.file.as_deref());
    let reload = reload(r, raw.reload.clone());
    let reload_timeout = r.duration_within(
        "role.reload_timeout",
        raw.reload_timeout.as_deref(),
        DEFAULT_RELOAD_TIMEOUT,
        Duration::from_millis(1),
        Duration::from_secs(600),
    );
    let (verify, verify_timeout, verify_header) = verify(r, &raw);
    let idle = raw.idle.as_ref().and_then(|v| {
        let i: RawRoleIdle = r.value("role.idle", v);
        template(
            r,
            "role.idle",
            i.template.as_deref(),
            i.vars.as_ref(),
            IDLE_VARIABLES,
        )
    });
    let by_site = site_roles(r, raw.site.as_ref(), sites, warm);
    if let Some(name) = initial.index().and_then(|i| sites.get(i)) {
        if !by_site.contains_key(name) && !r.has_problem_under(&format!("role.site.{name}")) {
            r.add(
                "site",
                format!("`{name}` has no [role.site.{name}] section; with [role] configured the sidecar applies the initial site at start-up (accepted: add [role.site.{name}], or site = \"idle\")"),
            );
        }
    }
    if warm && by_site.is_empty() && !r.has_problem_under("role.site") {
        r.add(
            "role.site",
            "mode = \"warm\" needs at least one [role.site.<name>] section (the sites the node keeps configured; accepted: add [role.site.<name>] sections, or mode = \"cold\")",
        );
    }
    if r.count() > before {
        return None;
    }
    Some(RoleConfig {
        mode: mode?,
        poll,
        file: file?,
        reload: reload?,
        reload_timeout,
        verify: verify?,
        verify_timeout,
        verify_header,
        idle,
        sites: by_site,
    })
}

/// `[role.site.<name>]`: each site's role, for the sites in `sites`
/// (with `warm`, names that can be gate markers).
fn site_roles(
    r: &mut ConfigCheck,
    site: Option<&toml::Value>,
    sites: &[String],
    warm: bool,
) -> BTreeMap<String, SiteRole> {
    let mut by_site = BTreeMap::new();
    match site {
        None => {}
        Some(toml::Value::Table(t)) => {
            for (name, v) in t {
                let key = format!("role.site.{name}");
                if !sites.contains(name) {
                    r.add(
                        key,
                        format!(
                            "`{name}` is not in `sites` (accepted: one of {})",
                            quoted(sites)
                        ),
                    );
                    continue;
                }
                if warm && !is_marker_name(name) {
                    r.add(
                        key,
                        format!("`{name}` cannot name a gate marker: with mode = \"warm\" the site's marker file is `active-{name}` in the gate directory and its path is written into the app's config (accepted for warm sites: letters, digits, . _ -)"),
                    );
                    continue;
                }
                let s: RawRoleSite = r.value(&key, v);
                if let Some(site) = site_role(r, &key, s, warm) {
                    by_site.insert(name.clone(), site);
                }
            }
        }
        Some(other) => r.add(
            "role.site",
            format!(
                "expected a table of sites ([role.site.<name>] sections), found {}",
                other.type_str()
            ),
        ),
    }
    by_site
}

/// The verification probe: the app's address, how long it may take and
/// the header naming the site.
fn verify(
    r: &mut ConfigCheck,
    raw: &RawRole,
) -> (
    Option<std::net::SocketAddr>,
    Duration,
    Option<http::HeaderName>,
) {
    let verify = match raw.verify.as_deref() {
        None => {
            r.add("role.verify", "missing (expected the app's local address the verification probe connects to, e.g. \"127.0.0.1:8081\")");
            None
        }
        Some(t) => r.ip_socket_addr("role.verify", Some(t)),
    };
    let verify_timeout = r.duration_within(
        "role.verify_timeout",
        raw.verify_timeout.as_deref(),
        DEFAULT_VERIFY_TIMEOUT,
        Duration::from_millis(1),
        Duration::from_secs(600),
    );
    let verify_header =
        raw.verify_header.as_deref().and_then(|h| {
            match http::HeaderName::from_bytes(h.as_bytes()) {
                Ok(n) => Some(n),
                Err(_) => {
                    r.add(
                        "role.verify_header",
                        format!("`{h}` is not an HTTP header name (accepted: e.g. \"x-site\")"),
                    );
                    None
                }
            }
        });
    (verify, verify_timeout, verify_header)
}

/// `[role] mode` and `[role] gate`: `None` when either is wrong.
fn mode(r: &mut ConfigCheck, mode: Option<&str>, gate: Option<&str>) -> Option<RoleMode> {
    let warm = match mode {
        None | Some("cold") => false,
        Some("warm") => true,
        Some(other) => {
            r.add(
                "role.mode",
                format!("`{other}` is not a role mode (accepted: \"cold\": render the site's template and reload the app on each switch, or \"warm\": every site configured at once, switched by the gate marker without a reload)"),
            );
            return None;
        }
    };
    match (warm, gate) {
        (false, None) => Some(RoleMode::Cold),
        (false, Some(_)) => {
            r.add(
                "role.gate",
                "only used with mode = \"warm\" (accepted: remove `gate`, or set mode = \"warm\")",
            );
            None
        }
        (true, None) => {
            r.add(
                "role.gate",
                "missing: mode = \"warm\" needs the directory where the sidecar keeps the gate marker (e.g. \"/run/rdmalb/n1\")",
            );
            None
        }
        (true, Some(t)) => gate_dir(r, t).map(|gate| RoleMode::Warm { gate }),
    }
}

/// Characters of a gate path: it is written unquoted into the app's config
/// (`if (!-f {{gate}}) ...`), so nothing that nginx or a shell would parse.
fn is_gate_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '_' | '-')
}

/// A site name usable in a gate marker's file name (`active-<name>`).
fn is_marker_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// `[role] gate`: a directory path safe to write into the app's config.
/// It may not exist yet (the sidecar creates it, with its parents, at
/// start-up: `/run` is emptied on every boot), but it must not be a file.
fn gate_dir(r: &mut ConfigCheck, text: &str) -> Option<PathBuf> {
    if text.is_empty() {
        r.add(
            "role.gate",
            "empty path (expected a directory such as \"/run/rdmalb/n1\")",
        );
        return None;
    }
    let path = r.path(text);
    let shown = path.display().to_string();
    if let Some(c) = shown.chars().find(|c| !is_gate_char(*c)) {
        r.add(
            "role.gate",
            format!("`{shown}` contains {c:?}: the gate path is written unquoted into the app's config (accepted: letters, digits, / . _ -)"),
        );
        return None;
    }
    if path.exists() && !path.is_dir() {
        r.add(
            "role.gate",
            format!("`{shown}` exists and is not a directory (expected a directory for the gate marker; the sidecar creates it when missing)"),
        );
        return None;
    }
    Some(path)
}

fn target_file(r: &mut ConfigCheck, text: Option<&str>) -> Option<PathBuf> {
    let Some(text) = text else {
        r.add("role.file", "missing (expected the path of the config file the app reads, e.g. \"/etc/nginx/conf.d/rdmalb-site.conf\")");
        return None;
    };
    if text.is_empty() || text.ends_with('/') {
        r.add(
            "role.file",
            format!("`{text}` is not a file path (expected e.g. \"/etc/nginx/conf.d/rdmalb-site.conf\")"),
        );
        return None;
    }
    let path = r.path(text);
    let dir = path.parent().unwrap_or(Path::new("/"));
    if !dir.is_dir() {
        r.add(
            "role.file",
            format!(
                "directory `{}` does not exist (the file is replaced by writing a temporary file next to it and renaming it)",
                dir.display()
            ),
        );
        return None;
    }
    if path.is_dir() {
        r.add(
            "role.file",
            format!("`{}` is a directory (expected a file path)", path.display()),
        );
        return None;
    }
    Some(path)
}

fn reload(r: &mut ConfigCheck, argv: Option<Vec<String>>) -> Option<Vec<String>> {
    let Some(argv) = argv else {
        r.add("role.reload", "missing (expected the reload command as an argv list, e.g. [\"nginx\", \"-s\", \"reload\"] or [\"sh\", \"-c\", \"kill -HUP $(cat /run/app.pid)\"])");
        return None;
    };
    match argv.first() {
        None => {
            r.add("role.reload", "empty list (expected a program and its arguments, e.g. [\"nginx\", \"-s\", \"reload\"])");
            None
        }
        Some(p) if p.is_empty() || p.contains('\0') => {
            r.add(
                "role.reload[0]",
                "empty program name (expected e.g. \"nginx\" or \"/usr/sbin/nginx\")",
            );
            None
        }
        Some(_) if argv.iter().any(|a| a.contains('\0')) => {
            r.add("role.reload", "an argument contains a NUL byte");
            None
        }
        Some(_) => Some(argv),
    }
}

/// Host names: DNS-ish names, optionally a wildcard label or a port.
fn is_host(h: &str) -> bool {
    !h.is_empty()
        && h.len() <= 253
        && h.chars().all(|c| {
            c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '*' | ':' | '[' | ']')
        })
}

fn site_role(r: &mut ConfigCheck, key: &str, s: RawRoleSite, warm: bool) -> Option<SiteRole> {
    let mut ok = true;
    let hosts = match s.hosts {
        None => {
            r.add(
                format!("{key}.hosts"),
                "missing (expected the site's host names as in the proxy config, e.g. [\"shop.example.com\"])",
            );
            None
        }
        Some(h) if h.is_empty() => {
            r.add(
                format!("{key}.hosts"),
                "empty list (expected at least one host name; the first is the probe's Host header)",
            );
            None
        }
        Some(h) => {
            for (i, host) in h.iter().enumerate() {
                if !is_host(host) {
                    r.add(
                        format!("{key}.hosts[{i}]"),
                        format!("`{host}` is not a host name (accepted: letters, digits, - . _ * : [ ], no spaces)"),
                    );
                    ok = false;
                }
            }
            Some(h)
        }
    };
    let health_path = match s.health_path {
        None => Some(DEFAULT_HEALTH_PATH.to_string()),
        Some(p) if p.starts_with('/') && p.parse::<http::uri::PathAndQuery>().is_ok() => Some(p),
        Some(p) => {
            r.add(
                format!("{key}.health_path"),
                format!("`{p}` is not an absolute request path (accepted: e.g. \"/\" or \"/health?full=1\")"),
            );
            None
        }
    };
    let builtins: Vec<&str> = SITE_VARIABLES
        .iter()
        .chain(WARM_SITE_VARIABLES)
        .copied()
        .collect();
    let template = template(r, key, s.template.as_deref(), s.vars.as_ref(), &builtins);
    if let Some(t) = &template {
        let gated = t.template.variables().iter().any(|(n, _)| *n == "gate");
        let tkey = format!("{key}.template");
        if warm && !gated {
            r.add(
                tkey,
                format!("`{}` does not use {{{{gate}}}}: with mode = \"warm\" every site's block must refuse requests while its gate marker is absent (nginx: `if (!-f {{{{gate}}}}) {{ return 421; }}`), or the node would answer for sites it does not serve (accepted: a template with the gate check, e.g. conf/role/nginx-warm-site.conf.tpl)", t.path.display()),
            );
            ok = false;
        } else if !warm && gated {
            r.add(
                tkey,
                format!("`{}` uses {{{{gate}}}}, which is defined only with [role] mode = \"warm\" (accepted: set mode = \"warm\" and gate, or remove the gate check)", t.path.display()),
            );
            ok = false;
        }
    }
    if !ok {
        return None;
    }
    Some(SiteRole {
        template: template?,
        hosts: hosts?,
        health_path: health_path?,
    })
}

/// Reads and parses a template file, checking every variable it uses is a
/// built-in (`builtins`) or one of its `vars`.
fn template(
    r: &mut ConfigCheck,
    key: &str,
    path: Option<&str>,
    vars: Option<&toml::Table>,
    builtins: &[&str],
) -> Option<RoleTemplate> {
    let mut values = BTreeMap::new();
    let mut ok = true;
    for (name, v) in vars.into_iter().flatten() {
        let vkey = format!("{key}.vars.{name}");
        if builtins.contains(&name.as_str()) {
            r.add(
                vkey,
                format!(
                    "`{name}` is a built-in variable and cannot be redefined (built-ins: {})",
                    builtins.join(", ")
                ),
            );
            ok = false;
            continue;
        }
        if !crate::template::is_name(name) {
            r.add(vkey, format!("`{name}` is not a variable name (accepted: letters, digits and _, not starting with a digit)"));
            ok = false;
            continue;
        }
        let text = match v {
            toml::Value::String(s) => s.clone(),
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Boolean(b) => b.to_string(),
            other => {
                r.add(
                    vkey,
                    format!(
                        "expected a string, integer or boolean, found {}",
                        other.type_str()
                    ),
                );
                ok = false;
                continue;
            }
        };
        values.insert(name.clone(), text);
    }
    let tkey = format!("{key}.template");
    let Some(text) = path else {
        r.add(
            tkey,
            "missing (expected the path of a template file, e.g. \"templates/nginx-site.conf\")",
        );
        return None;
    };
    let path = r.path(text);
    let content = match std::fs::read_to_string(&path) {
        Ok(c) => c,
        Err(e) => {
            r.add(tkey, format!("cannot read `{}`: {e}", path.display()));
            return None;
        }
    };
    let template = match Template::parse(&content) {
        Ok(t) => t,
        Err(e) => {
            r.add(tkey, format!("`{}`: {e}", path.display()));
            return None;
        }
    };
    let mut known: Vec<&str> = builtins.to_vec();
    known.extend(values.keys().map(String::as_str));
    if let Err(e) = template.check(&known) {
        r.add(tkey, format!("`{}`: {e}", path.display()));
        return None;
    }
    ok.then_some(RoleTemplate {
        path,
        template,
        vars: values,
    })
}
