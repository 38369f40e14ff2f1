//! Automatic HTTPS: certificates the proxy orders from an ACME server (RFC
//! 8555) for the sites with `acme = true` and, with `[acme.on_demand]`,
//! for names first seen in a handshake; and renews before they expire.
//!
//! - [`Acme`] is what the data path reads: the certificates in force by
//!   name (an `ArcSwap`'d map the TLS resolver consults, so a renewed
//!   certificate is served from the next handshake on, without a restart
//!   or a dropped connection) and the challenge answers ([`challenge`]).
//! - [`renew`] is the background loop: it re-reads the storage folder
//!   (another proxy may have renewed), and orders ([`order`]) what is due,
//!   two thirds into a certificate's lifetime with jitter, under the
//!   folder's lock ([`store`]) so that one proxy orders a name at a time;
//!   a failure is retried with exponential backoff while the old
//!   certificate keeps serving.
//! - [`on_demand`]: the allowlist (a file, or an `ask` URL whose answers
//!   are cached) and the rate limit for names ordered at handshake time.
//!
//! Settings are read at start-up (a reload keeps them). docs/tls.md.

pub mod challenge;
pub mod on_demand;
pub mod order;
pub mod renew;
pub mod store;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;
use rustls::sign::CertifiedKey;
use serde::Serialize;

use crate::config::acme::Acme as Settings;
use crate::config::Config;
use challenge::Challenges;
use store::Store;

/// `rdmalb_cert_expiry_seconds{host}` gauge: when the certificate served
/// for the host expires (Unix seconds).
pub const CERT_EXPIRY: &str = "rdmalb_cert_expiry_seconds";

/// Where a managed certificate comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// `acme = true` on the named site.
    Site(String),
    /// `[acme.on_demand]`: first asked for in a handshake.
    OnDemand,
}

/// One certificate the proxy keeps current.
#[derive(Debug, Clone)]
pub struct Managed {
    /// Its file stem in the storage folder: the first name.
    pub id: String,
    pub names: Vec<String>,
    pub source: Source,
    pub state: CertState,
}

/// What is known about a managed certificate.
#[derive(Debug, Clone, Default)]
pub struct CertState {
    pub serial: Option<String>,
    /// The leaf's issuer (its common name, else its whole name).
    pub issuer: Option<String>,
    pub not_before: Option<SystemTime>,
    pub not_after: Option<SystemTime>,
    /// Two thirds into the lifetime, less a random part of a twentieth.
    pub renew_at: Option<SystemTime>,
    /// The file as last read (its modification time).
    pub loaded_mtime: Option<SystemTime>,
    pub last_attempt: Option<SystemTime>,
    pub last_error: Option<String>,
    /// Orders failed in a row.
    pub failures: u32,
    /// No order before this (backoff after a failure).
    pub retry_at: Option<SystemTime>,
    /// An order is in progress (this proxy's).
    pub running: bool,
    /// `acme renew`: order at the next pass, whatever the schedule.
    pub forced: bool,
}

/// The ACME runtime shared by the listeners, the request path, the admin
/// and the renewal loop.
#[derive(Debug)]
pub struct Acme {
    pub settings: Settings,
    pub store: Store,
    pub challenges: Challenges,
    served: ArcSwap<HashMap<String, Arc<CertifiedKey>>>,
    managed: Mutex<Vec<Managed>>,
    /// Wakes the renewal loop (a forced renewal, a new on-demand name).
    pub wake: tokio::sync::Notify,
    /// Signalled after each certificate installed.
    installed: tokio::sync::Notify,
    pub on_demand: Option<on_demand::Gate>,
}

impl Acme {
    /// From the config's `[acme]` and its sites with `acme = true`; the
    /// certificates already in the storage folder are served at once.
    pub fn start(config: &Config) -> Result<Option<Arc<Acme>>, String> {
        let Some(settings) = config.acme.clone() else {
            return Ok(None);
        };
        let store = Store::open(&settings.storage).map_err(|e| {
            format!(
                "acme.storage {}: cannot create it: {e}",
                settings.storage.display()
            )
        })?;
        let managed = config
            .sites
            .iter()
            .filter(|s| !s.acme_names.is_empty())
            .map(|s| Managed {
                id: s.acme_names[0].clone(),
                names: s.acme_names.clone(),
                source: Source::Site(s.name.clone()),
                state: CertState::default(),
            })
            .collect();
        let acme = Arc::new(Acme {
            on_demand: settings.on_demand.as_ref().map(on_demand::Gate::new),
            challenges: Challenges::new(store.clone()),
            store,
            settings,
            served: ArcSwap::from_pointee(HashMap::new()),
            managed: Mutex::new(managed),
            wake: tokio::sync::Notify::new(),
            installed: tokio::sync::Notify::new(),
        });
        for id in acme.ids() {
            acme.reload(&id);
        }
        Ok(Some(acme))
    }

    /// The certificate in force for `name` (lower-case), if any.
    pub fn served(&self, name: &str) -> Option<Arc<CertifiedKey>> {
        self.served.load().get(name).cloned()
    }

    pub fn ids(&self) -> Vec<String> {
        self.lock().iter().map(|m| m.id.clone()).collect()
    }

    /// A copy of every managed certificate, for status pages.
    pub fn snapshot(&self) -> Vec<Managed> {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Managed>> {
        self.managed.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` on the managed certificate `id`.
    fn with<T>(&self, id: &str, f: impl FnOnce(&mut Managed) -> T) -> Option<T> {
        self.lock().iter_mut().find(|m| m.id == id).map(f)
    }

    /// `acme renew <id>`: orders at once, whatever the schedule and the
    /// backoff. `false` for an unknown certificate.
    pub fn force(&self, id: &str) -> bool {
        let found = self.with(id, |m| m.state.forced = true).is_some();
        if found {
            self.wake.notify_one();
        }
        found
    }

    /// Reads `certs/<id>.pem` when it changed since last read and serves
    /// it; `true` when a certificate was installed.
    pub fn reload(&self, id: &str) -> bool {
        let path = self.store.cert(id);
        let Ok(mtime) = std::fs::metadata(&path).and_then(|m| m.modified()) else {
            return false;
        };
        if self.with(id, |m| m.state.loaded_mtime == Some(mtime)) != Some(false) {
            return false;
        }
        let loaded = std::fs::read(&path)
            .map_err(|e| e.to_string())
            .and_then(|pem| {
                let key = crate::front::tls::certified_key(&pem, &pem)?;
                let info = Leaf::parse(key.cert.first().ok_or("no certificate")?)?;
                Ok((key, info))
            });
        let (key, leaf) = match loaded {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(file = %path.display(), error = %e, "ACME certificate unusable; the one in force keeps serving");
                self.with(id, |m| m.state.loaded_mtime = Some(mtime));
                return false;
            }
        };
        let key = Arc::new(key);
        let Leaf {
            serial,
            issuer,
            not_before,
            not_after,
            ..
        } = leaf;
        let names = self.with(id, |m| {
            let lifetime = not_after.duration_since(not_before).unwrap_or_default();
            let jitter = lifetime.mul_f64(rand::random::<f64>() / 20.0);
            let s = &mut m.state;
            s.serial = Some(serial.clone());
            s.issuer = Some(issuer);
            s.not_before = Some(not_before);
            s.not_after = Some(not_after);
            s.renew_at = Some(not_before + lifetime * 2 / 3 - jitter);
            s.loaded_mtime = Some(mtime);
            m.names.clone()
        });
        let Some(names) = names else { return false };
        self.served.rcu(|old| {
            let mut map = HashMap::clone(old);
            for n in &names {
                map.insert(n.clone(), Arc::clone(&key));
            }
            map
        });
        let expiry = rdmalb_base::time::unix_secs(not_after) as f64;
        for n in &names {
            metrics::gauge!(CERT_EXPIRY, "host" => n.clone()).set(expiry);
        }
        tracing::info!(certificate = %id, %serial, not_after = %httpdate::fmt_http_date(not_after), "ACME certificate in force");
        self.installed.notify_waiters();
        true
    }

    /// Adds an on-demand certificate for `name` (once) and wakes the loop.
    fn add_on_demand(&self, name: &str) {
        let mut managed = self.lock();
        if !managed.iter().any(|m| m.names.iter().any(|n| n == name)) {
            managed.push(Managed {
                id: name.to_string(),
                names: vec![name.to_string()],
                source: Source::OnDemand,
                state: CertState::default(),
            });
        }
        drop(managed);
        self.reload(name);
        self.wake.notify_one();
    }

    /// Waits up to `bound` for a certificate for `name` to be served.
    async fn wait_served(&self, name: &str, bound: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + bound;
        loop {
            let installed = self.installed.notified();
            if self.served(name).is_some() {
                return true;
            }
            if tokio::time::timeout_at(deadline, installed).await.is_err() {
                return self.served(name).is_some();
            }
        }
    }

    /// The `/status` view.
    pub fn status(&self) -> Vec<CertStatus> {
        let now = SystemTime::now();
        self.snapshot()
            .into_iter()
            .map(|m| CertStatus::new(&m, now))
            .collect()
    }
}

/// What the status pages show of a certificate's leaf.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leaf {
    /// Hex, without separators.
    pub serial: String,
    /// The issuer's common name, else its whole distinguished name.
    pub issuer: String,
    /// The DNS names of its subjectAltName.
    pub names: Vec<String>,
    pub not_before: SystemTime,
    pub not_after: SystemTime,
}

impl Leaf {
    /// Reads a DER certificate.
    pub fn parse(der: &[u8]) -> Result<Leaf, String> {
        let (_, cert) = x509_parser::parse_x509_certificate(der)
            .map_err(|e| format!("bad certificate: {e}"))?;
        let at = |t: x509_parser::time::ASN1Time| {
            SystemTime::UNIX_EPOCH + Duration::from_secs(t.timestamp().max(0) as u64)
        };
        let issuer = cert
            .issuer()
            .iter_common_name()
            .find_map(|cn| cn.as_str().ok().map(str::to_string))
            .unwrap_or_else(|| cert.issuer().to_string());
        let names = match cert.subject_alternative_name() {
            Ok(Some(san)) => san
                .value
                .general_names
                .iter()
                .filter_map(|n| match n {
                    x509_parser::extensions::GeneralName::DNSName(d) => Some(d.to_string()),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        };
        let validity = cert.validity();
        Ok(Leaf {
            serial: cert.raw_serial_as_string().replace(':', ""),
            issuer,
            names,
            not_before: at(validity.not_before),
            not_after: at(validity.not_after),
        })
    }
}

/// One certificate in `/status` (`acme`).
#[derive(Debug, Serialize)]
pub struct CertStatus {
    pub certificate: String,
    pub names: Vec<String>,
    /// `site:<name>` or `on-demand`.
    pub source: String,
    /// HAProxy's `acme status` states: `Running` (an order in progress),
    /// `Scheduled`, or `Stopped` (no certificate and none being ordered).
    pub state: &'static str,
    pub serial: Option<String>,
    /// Who issued the certificate in force (its common name).
    pub issuer: Option<String>,
    pub not_after_unix: Option<u64>,
    pub expires_in_seconds: Option<u64>,
    pub renew_at_unix: Option<u64>,
    pub last_attempt_unix: Option<u64>,
    pub last_error: Option<String>,
    pub failures: u32,
    pub retry_at_unix: Option<u64>,
}

impl CertStatus {
    /// `Running` (an order in progress), `Scheduled` (a certificate, or
    /// none yet and no failure), `Stopped` (none, and orders failing).
    pub fn state_of(s: &CertState) -> &'static str {
        if s.running {
            "Running"
        } else if s.not_after.is_some() || s.failures == 0 {
            "Scheduled"
        } else {
            "Stopped"
        }
    }

    fn new(m: &Managed, now: SystemTime) -> CertStatus {
        let s = &m.state;
        let unix = |t: Option<SystemTime>| t.map(rdmalb_base::time::unix_secs);
        CertStatus {
            certificate: m.id.clone(),
            names: m.names.clone(),
            source: match &m.source {
                Source::Site(name) => format!("site:{name}"),
                Source::OnDemand => "on-demand".into(),
            },
            state: CertStatus::state_of(s),
            serial: s.serial.clone(),
            issuer: s.issuer.clone(),
            not_after_unix: unix(s.not_after),
            expires_in_seconds: s
                .not_after
                .map(|t| t.duration_since(now).unwrap_or_default().as_secs()),
            renew_at_unix: unix(s.renew_at),
            last_attempt_unix: unix(s.last_attempt),
            last_error: s.last_error.clone(),
            failures: s.failures,
            retry_at_unix: unix(s.retry_at),
        }
    }
}
