//! Validation of two endpoint settings: a listener's TLS certificates and a
//! node's window endpoint (shm / tcp / verbs). Kept apart from `validate`,
//! which walks the sections and their cross-checks.

use std::path::PathBuf;

use crate::config::raw::*;
use crate::config::types::*;
use rdmalb_base::problems::ConfigCheck;
use rdmalb_window::TransportKind;

/// `acme`: the config has an `[acme]` section, so a listener may start
/// without a certificate of its own (it serves those the proxy orders).
pub(super) fn tls(c: &mut ConfigCheck, key: &str, t: RawTls, acme: bool) -> Tls {
    if t.certificates.is_empty() && !acme {
        c.add(
            format!("{key}.tls.certificates"),
            "empty (expected at least one { cert = \"site.pem\", key = \"site.key\" }, or an [acme] section)",
        );
    }
    let client_auth = client_auth(c, key, &t);
    let mut certificates = Vec::new();
    for (i, pair) in t.certificates.into_iter().enumerate() {
        let k = format!("{key}.tls.certificates[{i}]");
        let (Some(cert), Some(keyf)) = (pair.cert, pair.key) else {
            c.add(
                k,
                "needs both `cert` (PEM certificate chain) and `key` (PEM private key)",
            );
            continue;
        };
        let cert = c.path(&cert);
        let keyf = c.path(&keyf);
        match std::fs::read(&cert) {
            Err(e) => c.add(
                format!("{k}.cert"),
                format!("cannot read {}: {e}", cert.display()),
            ),
            Ok(bytes) => {
                let n = rustls_pemfile::certs(&mut bytes.as_slice())
                    .filter(|r| r.is_ok())
                    .count();
                if n == 0 {
                    c.add(
                        format!("{k}.cert"),
                        format!(
                            "{} holds no PEM certificate (expected -----BEGIN CERTIFICATE-----)",
                            cert.display()
                        ),
                    );
                }
            }
        }
        match std::fs::read(&keyf) {
            Err(e) => c.add(
                format!("{k}.key"),
                format!("cannot read {}: {e}", keyf.display()),
            ),
            Ok(bytes) => {
                if !matches!(
                    rustls_pemfile::private_key(&mut bytes.as_slice()),
                    Ok(Some(_))
                ) {
                    c.add(
                        format!("{k}.key"),
                        format!(
                            "{} holds no PEM private key (expected PKCS#8, PKCS#1 or SEC1)",
                            keyf.display()
                        ),
                    );
                }
            }
        }
        certificates.push(CertPair { cert, key: keyf });
    }
    Tls {
        certificates,
        h2: t.h2.unwrap_or(true),
        client_auth,
    }
}

/// `client_ca`, `verify` and `crl` of a listener's `tls`.
fn client_auth(c: &mut ConfigCheck, key: &str, t: &RawTls) -> Option<ClientAuth> {
    let required = match t.verify.as_deref() {
        None | Some("none") => {
            if t.verify.is_none() && t.client_ca.is_some() {
                c.add(
                    format!("{key}.tls.verify"),
                    "missing: client_ca is set (expected \"required\" or \"optional\")",
                );
            }
            for (k, set) in [
                ("client_ca", t.client_ca.is_some()),
                ("crl", t.crl.is_some()),
            ] {
                if set && t.verify.is_some() {
                    c.add(format!("{key}.tls.{k}"), "not used with verify = \"none\"");
                }
            }
            return None;
        }
        Some("required") => true,
        Some("optional") => false,
        Some(v) => {
            c.add(
                format!("{key}.tls.verify"),
                format!(
                    "`{v}` is not a verify mode (expected \"required\", \"optional\" or \"none\")"
                ),
            );
            return None;
        }
    };
    let Some(ca) = t.client_ca.as_deref().map(|p| c.path(p)) else {
        c.add(
            format!("{key}.tls.client_ca"),
            "missing: verify needs the CA file client certificates must chain to",
        );
        return None;
    };
    let pem_count = |path: &std::path::Path, crl: bool| -> Result<usize, String> {
        let bytes =
            std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        Ok(if crl {
            rustls_pemfile::crls(&mut bytes.as_slice())
                .filter(|r| r.is_ok())
                .count()
        } else {
            rustls_pemfile::certs(&mut bytes.as_slice())
                .filter(|r| r.is_ok())
                .count()
        })
    };
    match pem_count(&ca, false) {
        Ok(0) => c.add(
            format!("{key}.tls.client_ca"),
            format!("{} holds no PEM certificate", ca.display()),
        ),
        Err(e) => c.add(format!("{key}.tls.client_ca"), e),
        Ok(_) => {}
    }
    let crl = t.crl.as_deref().map(|p| c.path(p));
    if let Some(crl) = &crl {
        match pem_count(crl, true) {
            Ok(0) => c.add(
                format!("{key}.tls.crl"),
                format!("{} holds no PEM X509 CRL", crl.display()),
            ),
            Err(e) => c.add(format!("{key}.tls.crl"), e),
            Ok(_) => {}
        }
    }
    Some(ClientAuth { ca, required, crl })
}

pub(super) fn node_window(c: &mut ConfigCheck, key: &str, n: &RawNode) -> Option<WindowEndpoint> {
    match (n.transport.as_deref(), n.sidecar.as_deref()) {
        (None, None) => None,
        (None, Some(_)) => {
            c.add(
                format!("{key}.transport"),
                format!(
                    "missing: `sidecar` is set (expected {})",
                    TransportKind::ACCEPTED
                ),
            );
            None
        }
        (Some(t), None) => {
            c.add(
                format!("{key}.sidecar"),
                format!("missing: transport = \"{t}\" needs the sidecar's endpoint (shm: a /dev/shm file path; tcp/verbs: host:port)"),
            );
            None
        }
        (Some(t), Some(at)) => window_endpoint(
            c,
            WindowAt {
                key,
                at_key: "sidecar",
                example: "/dev/shm/rdmalb-n1",
            },
            t,
            at,
            n.device.as_ref(),
        ),
    }
}

/// Where a window endpoint is written, for messages: the section's key
/// path, the key holding the address and an example window file.
pub(in crate::config) struct WindowAt<'a> {
    pub key: &'a str,
    pub at_key: &'a str,
    pub example: &'a str,
}

/// The endpoint of a window reached over `transport` at `at` (the window
/// file for shm, host:port otherwise), with `device` for verbs: the one
/// place a transport word and an address become a [`WindowEndpoint`] (a
/// node's `transport` + `sidecar`, a peer proxy's `transport` + `window`).
pub(in crate::config) fn window_endpoint(
    c: &mut ConfigCheck,
    w: WindowAt<'_>,
    transport: &str,
    at: &str,
    device: Option<&String>,
) -> Option<WindowEndpoint> {
    let Ok(kind) = transport.parse::<TransportKind>() else {
        c.add(
            format!("{}.transport", w.key),
            format!(
                "`{transport}` is not a window transport (expected {})",
                TransportKind::ACCEPTED
            ),
        );
        return None;
    };
    let at_key = format!("{}.{}", w.key, w.at_key);
    Some(match kind {
        TransportKind::Shm if !at.starts_with('/') => {
            c.add(
                at_key,
                format!(
                    "`{at}` is not an absolute path (expected the window file, e.g. \"{}\")",
                    w.example
                ),
            );
            return None;
        }
        TransportKind::Shm => WindowEndpoint::Shm {
            path: PathBuf::from(at),
        },
        TransportKind::Tcp => WindowEndpoint::Tcp {
            addr: c.socket_addr(&at_key, Some(at))?,
        },
        TransportKind::Verbs => WindowEndpoint::Verbs {
            control: c.socket_addr(&at_key, Some(at))?,
            device: device.cloned(),
        },
    })
}
