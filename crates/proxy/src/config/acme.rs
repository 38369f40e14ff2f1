//! `[acme]` (raw → typed [`Acme`]): the ACME (RFC 8555) account the proxy
//! orders certificates with, where it keeps them, how it proves control
//! of a name, and on-demand TLS (`[acme.on_demand]`); and `acme = true` on
//! a `[[site]]` (its exact hosts get one certificate). The runtime is
//! [`crate::acme`]; docs/tls.md explains the settings.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use rdmalb_base::problems::ConfigCheck;

/// `[acme]` as written.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawAcme {
    /// The ACME server's directory URL.
    ///
    /// Default: `"https://acme-v02.api.letsencrypt.org/directory"`. Example: `"https://127.0.0.1:14000/dir"`.
    pub directory: Option<String>,
    /// Contact addresses given to the ACME server (`mailto:` optional).
    ///
    /// Default: `[]`. Example: `["ops@example.com"]`.
    pub contact: Option<Vec<String>>,
    /// The folder of the account key, certificates and keys (files 0600).
    /// Proxies serving the same names share it: one orders, all serve.
    ///
    /// Default: none (required). Example: `"/var/lib/rdmalb/acme"`.
    pub storage: Option<String>,
    /// The ACME server's HTTPS root certificate, when it is private (pebble).
    ///
    /// Default: none (the system's roots). Example: `"pebble-ca.pem"`.
    pub ca_root: Option<String>,
    /// `"http-01"` (the server fetches a token over HTTP on port 80) or
    /// `"tls-alpn-01"` (a TLS handshake on port 443).
    ///
    /// Default: `"http-01"`. Example: `"tls-alpn-01"`.
    pub challenge: Option<String>,
    /// How often certificates are checked for renewal (renewed two thirds into
    /// their lifetime).
    ///
    /// Default: `"1m"`.
    pub check_interval: Option<String>,
    /// The first wait after a failed order; doubled after each failure.
    ///
    /// Default: `"1m"`.
    pub retry_min: Option<String>,
    /// The longest wait between failed orders.
    ///
    /// Default: `"6h"`.
    pub retry_max: Option<String>,
    /// How long one proxy holds the order lock in `storage`.
    ///
    /// Default: `"10m"`.
    pub lock_lease: Option<String>,
    /// Certificates ordered at the first TLS handshake for a name, when
    /// `allow_file` lists it or `ask` allows it.
    pub on_demand: Option<RawOnDemand>,
}

/// `[acme.on_demand]` as written.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawOnDemand {
    /// A file of names (one a line) that may get a certificate on demand.
    ///
    /// Default: none. Example: `"ondemand-names.txt"`.
    pub allow_file: Option<String>,
    /// A URL asked `GET <ask>?domain=<name>`; 200 allows the name.
    ///
    /// Default: none. Example: `"http://127.0.0.1:9000/allowed"`.
    pub ask: Option<String>,
    /// How long an answer of `ask` is kept.
    ///
    /// Default: `"5m"`.
    pub ask_cache: Option<String>,
    /// New names ordered per minute at most. Accepted: 1 to 10000.
    ///
    /// Default: `10`.
    pub rate: Option<i64>,
    /// How long a first handshake for a name being ordered waits for it.
    ///
    /// Default: `"10s"`.
    pub wait: Option<String>,
}

/// How the proxy proves to the ACME server that it controls a name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChallengeKind {
    /// `http-01`: the server fetches
    /// `http://<name>/.well-known/acme-challenge/<token>` on port 80 (the
    /// proxy's plain listener answers it before any rule).
    Http01,
    /// `tls-alpn-01` (RFC 8737): the server connects on port 443 asking
    /// for ALPN `acme-tls/1`; the proxy's TLS listener answers with a
    /// self-signed certificate carrying the key authorization's digest.
    TlsAlpn01,
}

impl ChallengeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ChallengeKind::Http01 => "http-01",
            ChallengeKind::TlsAlpn01 => "tls-alpn-01",
        }
    }
}

/// The ACME client's settings (`[acme]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acme {
    /// The server's directory URL (default: Let's Encrypt's production).
    pub directory: String,
    /// `mailto:` addresses given to the account.
    pub contact: Vec<String>,
    /// Account key, certificates, locks and challenge answers: a folder
    /// the proxies that serve the same names share (docs/tls.md).
    pub storage: PathBuf,
    /// A PEM file of the root the ACME server's own HTTPS certificate
    /// chains to (a test server such as pebble); `None`: the system's.
    pub ca_root: Option<PathBuf>,
    pub challenge: ChallengeKind,
    /// How often certificates on disk are re-read (another proxy may have
    /// renewed them) and due renewals started.
    pub check_interval: Duration,
    /// The first wait after a failed order; doubled after each failure
    /// up to `retry_max`.
    pub retry_min: Duration,
    pub retry_max: Duration,
    /// A lock file older than this is taken over (its proxy died while
    /// ordering).
    pub lock_lease: Duration,
    pub on_demand: Option<OnDemand>,
}

/// `[acme.on_demand]`: names without a configured site get a certificate
/// on their first handshake when the allowlist says yes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OnDemand {
    /// A file of allowed names, one a line (`#` comments).
    pub allow_file: Option<PathBuf>,
    /// `http://host:port/path`: asked `GET <ask>?domain=<name>`; 200 allows.
    pub ask: Option<String>,
    /// How long an answer of `ask` is kept.
    pub ask_cache: Duration,
    /// Most new names ordered per minute (the rest fail their handshake).
    pub rate: u32,
    /// How long a handshake for a name being ordered waits for it.
    pub wait: Duration,
}

/// The default directory: Let's Encrypt's production server.
pub const LETS_ENCRYPT: &str = "https://acme-v02.api.letsencrypt.org/directory";

pub(super) fn validate(c: &mut ConfigCheck, raw: RawAcme) -> Acme {
    let directory = raw.directory.unwrap_or_else(|| LETS_ENCRYPT.to_string());
    if !directory.starts_with("https://") || directory.parse::<http::Uri>().is_err() {
        c.add(
            "acme.directory",
            format!("`{directory}` is not an https:// URL (expected the ACME server's directory, such as {LETS_ENCRYPT})"),
        );
    }
    let mut contact = Vec::new();
    for (i, mail) in raw.contact.unwrap_or_default().into_iter().enumerate() {
        let address = mail.strip_prefix("mailto:").unwrap_or(&mail);
        if !address.contains('@') || address.contains(char::is_whitespace) {
            c.add(
                format!("acme.contact[{i}]"),
                format!("`{mail}` is not an e-mail address (expected e.g. \"ops@example.com\")"),
            );
        } else {
            contact.push(format!("mailto:{address}"));
        }
    }
    let storage = match raw.storage.as_deref() {
        Some("") | None => {
            c.add(
                "acme.storage",
                "missing (expected a folder for the account key and certificates, e.g. \"/var/lib/rdmalb/acme\")",
            );
            PathBuf::new()
        }
        Some(p) => c.path(p),
    };
    let ca_root = readable(c, "acme.ca_root", raw.ca_root.as_deref());
    let challenge = match raw.challenge.as_deref() {
        None | Some("http-01") => ChallengeKind::Http01,
        Some("tls-alpn-01") => ChallengeKind::TlsAlpn01,
        Some(other) => {
            c.add(
                "acme.challenge",
                format!("`{other}` is not a challenge (expected \"http-01\" or \"tls-alpn-01\")"),
            );
            ChallengeKind::Http01
        }
    };
    let retry_min = c.duration(
        "acme.retry_min",
        raw.retry_min.as_deref(),
        Duration::from_secs(60),
    );
    let retry_max = c.duration(
        "acme.retry_max",
        raw.retry_max.as_deref(),
        Duration::from_secs(6 * 3600),
    );
    if retry_max < retry_min {
        c.add(
            "acme.retry_max",
            "is below retry_min (expected retry_max >= retry_min)",
        );
    }
    Acme {
        directory,
        contact,
        storage,
        ca_root,
        challenge,
        check_interval: c.duration(
            "acme.check_interval",
            raw.check_interval.as_deref(),
            Duration::from_secs(60),
        ),
        retry_min,
        retry_max,
        lock_lease: c.duration(
            "acme.lock_lease",
            raw.lock_lease.as_deref(),
            Duration::from_secs(600),
        ),
        on_demand: raw.on_demand.map(|o| on_demand(c, o)),
    }
}

/// The file `p` names (relative to the config's folder); a problem at
/// `key` when it cannot be read.
fn readable(c: &mut ConfigCheck, key: &str, p: Option<&str>) -> Option<PathBuf> {
    let path = c.path(p?);
    if let Err(e) = std::fs::read(&path) {
        c.add(key, format!("cannot read {}: {e}", path.display()));
    }
    Some(path)
}

fn on_demand(c: &mut ConfigCheck, raw: RawOnDemand) -> OnDemand {
    let allow_file = readable(c, "acme.on_demand.allow_file", raw.allow_file.as_deref());
    if let Some(ask) = &raw.ask {
        let ok = ask
            .parse::<http::Uri>()
            .is_ok_and(|u| u.scheme_str() == Some("http") && u.authority().is_some());
        if !ok {
            c.add(
                "acme.on_demand.ask",
                format!("`{ask}` is not an http:// URL (expected e.g. \"http://127.0.0.1:9000/allowed\")"),
            );
        }
    }
    if allow_file.is_none() && raw.ask.is_none() {
        c.add(
            "acme.on_demand",
            "needs allow_file or ask: without an allowlist anyone could make the proxy order certificates for any name",
        );
    }
    OnDemand {
        allow_file,
        ask: raw.ask,
        ask_cache: c.duration(
            "acme.on_demand.ask_cache",
            raw.ask_cache.as_deref(),
            Duration::from_secs(300),
        ),
        rate: c.int("acme.on_demand.rate", raw.rate, 10, 1, 10_000) as u32,
        wait: c.duration(
            "acme.on_demand.wait",
            raw.wait.as_deref(),
            Duration::from_secs(10),
        ),
    }
}

/// The names a site with `acme = true` orders: its exact hosts. A
/// wildcard needs the dns-01 challenge, which the proxy does not answer.
pub(super) fn site_names(
    c: &mut ConfigCheck,
    key: &str,
    hosts: &[super::HostPattern],
    acme: bool,
) -> Vec<String> {
    let mut names = Vec::new();
    for h in hosts {
        match h {
            super::HostPattern::Exact(name) if acme => names.push(name.clone()),
            super::HostPattern::Wildcard(suffix) if acme => c.add(
                format!("{key}.hosts"),
                format!("*{suffix} cannot get an ACME certificate (wildcards need the dns-01 challenge; list the names, or give the listener a certificate)"),
            ),
            _ => {}
        }
    }
    if acme && names.is_empty() && !c.has_problem_under(&format!("{key}.hosts")) {
        c.add(
            format!("{key}.acme"),
            "the site has no host name to order a certificate for (expected hosts = [\"www.example.com\"])",
        );
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(text: &str) -> String {
        let raw: RawAcme = toml::from_str(text).unwrap();
        let mut c = ConfigCheck::new(std::path::Path::new("/etc/rdmalb/test.toml"));
        validate(&mut c, raw);
        match c.finish(()) {
            Ok(()) => String::new(),
            Err(e) => e
                .problems
                .iter()
                .map(|p| format!("{}: {}", p.key, p.message))
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }

    #[test]
    fn defaults_need_only_storage() {
        let raw: RawAcme = toml::from_str("storage = \"acme\"").unwrap();
        let mut c = ConfigCheck::new(std::path::Path::new("/etc/rdmalb/test.toml"));
        let acme = validate(&mut c, raw);
        assert_eq!(c.count(), 0);
        assert_eq!(acme.directory, LETS_ENCRYPT);
        assert_eq!(acme.storage, PathBuf::from("/etc/rdmalb/acme"));
        assert_eq!(acme.challenge, ChallengeKind::Http01);
        assert!(acme.on_demand.is_none());
    }

    #[test]
    fn bad_values_name_their_key() {
        let text = problems(
            "directory = \"http://acme.test/dir\"\ncontact = [\"ops\"]\nchallenge = \"dns-01\"\n\
             retry_min = \"1h\"\nretry_max = \"1m\"\n[on_demand]\nask = \"ftp://x\"\n",
        );
        for needle in [
            "acme.storage: missing",
            "acme.directory: `http://acme.test/dir` is not an https:// URL",
            "acme.contact[0]: `ops` is not an e-mail address",
            "acme.challenge: `dns-01` is not a challenge",
            "acme.retry_max: is below retry_min",
            "acme.on_demand.ask: `ftp://x` is not an http:// URL",
        ] {
            assert!(text.contains(needle), "{needle} not in:\n{text}");
        }
    }

    #[test]
    fn on_demand_needs_an_allowlist() {
        let text = problems("storage = \"/tmp\"\n[on_demand]\nrate = 5\n");
        assert!(
            text.contains("acme.on_demand: needs allow_file or ask"),
            "{text}"
        );
    }

    #[test]
    fn wildcard_sites_cannot_use_acme() {
        let mut c = ConfigCheck::new(std::path::Path::new("t.toml"));
        let hosts = [
            super::super::HostPattern::Exact("a.example".into()),
            super::super::HostPattern::Wildcard(".example".into()),
        ];
        assert_eq!(site_names(&mut c, "site[0]", &hosts, true), ["a.example"]);
        assert_eq!(c.count(), 1);
        assert!(site_names(&mut c, "site[1]", &hosts, false).is_empty());
        assert_eq!(c.count(), 1);
    }
}
