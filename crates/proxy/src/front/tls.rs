//! TLS termination: a rustls server config per listener whose certificate
//! is chosen by SNI among one or more cert/key pairs (the first is the
//! default for clients that send no name or an unknown one), with ALPN
//! `h2` and `http/1.1`. With `[acme]` the resolver first looks up the
//! certificates the proxy ordered ([`crate::acme::Acme::served`], swapped
//! at run time), and answers a tls-alpn-01 handshake (ALPN `acme-tls/1`,
//! RFC 8737) with the challenge certificate only.

use std::fmt;
use std::sync::Arc;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use tokio::net::TcpStream;

use super::error::ProxyError;
use crate::acme::challenge::ACME_TLS_ALPN;
use crate::acme::Acme;
use crate::config::{ClientAuth, Tls};

/// Picks the first certificate valid for the client's server name (exact or
/// wildcard SAN, as webpki checks it), else the first one.
struct SniResolver {
    keys: Vec<Arc<CertifiedKey>>,
    acme: Option<Arc<Acme>>,
}

impl fmt::Debug for SniResolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SniResolver")
            .field("certificates", &self.keys.len())
            .finish()
    }
}

impl SniResolver {
    fn choose(&self, name: Option<&str>) -> Option<Arc<CertifiedKey>> {
        if let Some(name) = name {
            if self.keys.len() > 1 {
                if let Ok(server_name) = ServerName::try_from(name) {
                    for key in &self.keys {
                        let Some(der) = key.cert.first() else {
                            continue;
                        };
                        let valid = webpki::EndEntityCert::try_from(der)
                            .map(|c| c.verify_is_valid_for_subject_name(&server_name).is_ok())
                            .unwrap_or(false);
                        if valid {
                            return Some(Arc::clone(key));
                        }
                    }
                }
            }
        }
        self.keys.first().cloned()
    }
}

impl ResolvesServerCert for SniResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        if let Some(acme) = &self.acme {
            let name = hello.server_name().map(str::to_ascii_lowercase);
            let challenge = hello
                .alpn()
                .is_some_and(|mut p| p.any(|p| p == ACME_TLS_ALPN));
            if challenge {
                // RFC 8737 section 3: only the challenge certificate.
                return acme.challenges.alpn(name.as_deref()?);
            }
            if let Some(key) = name.as_deref().and_then(|n| acme.served(n)) {
                return Some(key);
            }
        }
        self.choose(hello.server_name())
    }
}

/// The verifier of client certificates (HAProxy's `ca-file`, `verify`,
/// `crl-file`): they must chain to the CA and not be revoked; with
/// `verify optional` a client may send none.
fn client_verifier(
    auth: &ClientAuth,
    provider: Arc<rustls::crypto::CryptoProvider>,
) -> Result<Arc<dyn rustls::server::danger::ClientCertVerifier>, String> {
    let pem = |p: &std::path::Path| {
        std::fs::read(p).map_err(|e| format!("cannot read {}: {e}", p.display()))
    };
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pemfile::certs(&mut pem(&auth.ca)?.as_slice()) {
        let cert = cert.map_err(|e| format!("{}: bad PEM: {e}", auth.ca.display()))?;
        roots
            .add(cert)
            .map_err(|e| format!("{}: {e}", auth.ca.display()))?;
    }
    let mut b = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
    if let Some(crl) = &auth.crl {
        let crls = rustls_pemfile::crls(&mut pem(crl)?.as_slice())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("{}: bad PEM: {e}", crl.display()))?;
        b = b.with_crls(crls);
    }
    if !auth.required {
        b = b.allow_unauthenticated();
    }
    b.build().map_err(|e| e.to_string())
}

/// A certificate chain and its private key from PEM (one buffer may hold
/// both, as HAProxy's `crt` files do), checked to match.
pub fn certified_key(chain_pem: &[u8], key_pem: &[u8]) -> Result<CertifiedKey, String> {
    let ck = unchecked_key(chain_pem, key_pem)?;
    ck.keys_match()
        .map_err(|e| format!("the key does not match the certificate: {e}"))?;
    Ok(ck)
}

/// [`certified_key`] without the match check, which parses the leaf with
/// webpki: a tls-alpn-01 certificate's critical acmeIdentifier extension
/// is unknown to it (the proxy made that pair itself).
pub fn unchecked_key(chain_pem: &[u8], key_pem: &[u8]) -> Result<CertifiedKey, String> {
    let chain: Vec<CertificateDer<'static>> = rustls_pemfile::certs(&mut &*chain_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("bad PEM: {e}"))?;
    if chain.is_empty() {
        return Err("holds no certificate".into());
    }
    let key: PrivateKeyDer<'static> = rustls_pemfile::private_key(&mut &*key_pem)
        .map_err(|e| format!("bad PEM: {e}"))?
        .ok_or("holds no private key")?;
    let signing = rustls::crypto::ring::default_provider()
        .key_provider
        .load_private_key(key)
        .map_err(|e| format!("unusable private key: {e}"))?;
    Ok(CertifiedKey::new(chain, signing))
}

/// Loads the listener's certificates and builds its TLS acceptor config;
/// with `acme`, the certificates it orders are served too.
pub fn server_config(
    listener: &str,
    tls: &Tls,
    acme: Option<&Arc<Acme>>,
) -> Result<Arc<rustls::ServerConfig>, ProxyError> {
    let err = |message: String| ProxyError::Tls {
        listener: listener.to_string(),
        message,
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut keys = Vec::new();
    for pair in &tls.certificates {
        let read = |p: &std::path::Path| {
            std::fs::read(p).map_err(|e| err(format!("cannot read {}: {e}", p.display())))
        };
        let ck = certified_key(&read(&pair.cert)?, &read(&pair.key)?).map_err(|e| {
            err(format!(
                "{} / {}: {e}",
                pair.cert.display(),
                pair.key.display()
            ))
        })?;
        keys.push(Arc::new(ck));
    }
    if keys.is_empty() && acme.is_none() {
        return Err(err("no certificate configured".into()));
    }
    let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| err(e.to_string()))?;
    let builder = match &tls.client_auth {
        None => builder.with_no_client_auth(),
        Some(auth) => {
            builder.with_client_cert_verifier(client_verifier(auth, provider).map_err(err)?)
        }
    };
    let mut config = builder.with_cert_resolver(Arc::new(SniResolver {
        keys,
        acme: acme.cloned(),
    }));
    config.alpn_protocols = if tls.h2 {
        vec![b"h2".to_vec(), b"http/1.1".to_vec()]
    } else {
        vec![b"http/1.1".to_vec()]
    };
    if acme.is_some() {
        // Chosen only by a client offering nothing else: the ACME
        // server's validation. The listener closes such a connection
        // after the handshake.
        config.alpn_protocols.push(ACME_TLS_ALPN.to_vec());
    }
    Ok(Arc::new(config))
}

/// A TLS listener's handshake: its config and, with `[acme]`, the
/// on-demand step before it.
pub struct Acceptor {
    pub config: Arc<rustls::ServerConfig>,
    pub acme: Option<Arc<Acme>>,
}

impl Acceptor {
    /// The handshake. `None`: a tls-alpn-01 validation, done once the
    /// handshake is (RFC 8737 section 3: no application data follows).
    /// With on-demand TLS the client hello is read first, and a name
    /// without a certificate waits for its order (bounded by
    /// `acme.on_demand.wait`, within the caller's handshake timeout).
    pub async fn accept(
        &self,
        stream: TcpStream,
    ) -> std::io::Result<Option<tokio_rustls::server::TlsStream<TcpStream>>> {
        let on_demand = self.acme.as_ref().filter(|a| a.on_demand.is_some());
        let tls = match on_demand {
            None => {
                tokio_rustls::TlsAcceptor::from(Arc::clone(&self.config))
                    .accept(stream)
                    .await?
            }
            Some(acme) => {
                let acceptor = rustls::server::Acceptor::default();
                let start = tokio_rustls::LazyConfigAcceptor::new(acceptor, stream).await?;
                let hello = start.client_hello();
                let challenge = hello
                    .alpn()
                    .is_some_and(|mut p| p.any(|p| p == ACME_TLS_ALPN));
                if let (Some(name), false) = (hello.server_name(), challenge) {
                    let name = name.to_string();
                    acme.on_demand(&name).await;
                }
                start.into_stream(Arc::clone(&self.config)).await?
            }
        };
        if tls.get_ref().1.alpn_protocol() == Some(ACME_TLS_ALPN) {
            return Ok(None);
        }
        Ok(Some(tls))
    }
}

/// A certificate file a TLS listener serves (`tls.certificates`), read
/// when the listeners were bound: listener certificates change only with
/// a restart, so this is what is served until then (`tls_files` in
/// `/status`, the stats page's certificates).
#[derive(Debug, Clone)]
pub struct FileCert {
    pub listener: String,
    pub file: std::path::PathBuf,
    pub leaf: Result<crate::acme::Leaf, String>,
}

/// The certificate files of `config`'s TLS listeners, each with its leaf.
pub fn file_certificates(config: &crate::config::Config) -> Vec<FileCert> {
    let leaf = |path: &std::path::Path| {
        let pem = std::fs::read(path).map_err(|e| e.to_string())?;
        let first = rustls_pemfile::certs(&mut &*pem)
            .next()
            .ok_or("holds no certificate")?
            .map_err(|e| format!("bad PEM: {e}"))?;
        crate::acme::Leaf::parse(&first)
    };
    let mut out = Vec::new();
    for l in &config.listeners {
        for pair in l.tls.iter().flat_map(|t| &t.certificates) {
            out.push(FileCert {
                listener: l.name.clone(),
                file: pair.cert.clone(),
                leaf: leaf(&pair.cert),
            });
        }
    }
    out
}

/// `rdmalb_cert_expiry_seconds{host}` for the names of the files' leaves
/// that no ACME certificate covers (an ordered certificate is served first
/// for its names; among files, the first listed for a name).
pub fn publish_expiry(certs: &[FileCert], acme: Option<&Arc<Acme>>) {
    let mut seen: std::collections::HashSet<String> = acme
        .map(|a| a.snapshot().into_iter().flat_map(|m| m.names).collect())
        .unwrap_or_default();
    for leaf in certs.iter().filter_map(|c| c.leaf.as_ref().ok()) {
        let expiry = rdmalb_base::time::unix_secs(leaf.not_after) as f64;
        for name in &leaf.names {
            if seen.insert(name.clone()) {
                metrics::gauge!(crate::acme::CERT_EXPIRY, "host" => name.clone()).set(expiry);
            }
        }
    }
}

/// One certificate file in `/status` (`tls_files`).
#[derive(Debug, serde::Serialize)]
pub struct FileCertStatus {
    pub listener: String,
    pub file: String,
    pub names: Vec<String>,
    pub issuer: Option<String>,
    pub serial: Option<String>,
    pub not_after_unix: Option<u64>,
    pub expires_in_seconds: Option<u64>,
    /// Why the file's leaf could not be read.
    pub error: Option<String>,
}

impl FileCert {
    pub fn status(&self, now: std::time::SystemTime) -> FileCertStatus {
        let leaf = self.leaf.as_ref().ok();
        FileCertStatus {
            listener: self.listener.clone(),
            file: self.file.display().to_string(),
            names: leaf.map(|l| l.names.clone()).unwrap_or_default(),
            issuer: leaf.map(|l| l.issuer.clone()),
            serial: leaf.map(|l| l.serial.clone()),
            not_after_unix: leaf.map(|l| rdmalb_base::time::unix_secs(l.not_after)),
            expires_in_seconds: leaf.map(|l| {
                l.not_after
                    .duration_since(now)
                    .unwrap_or_default()
                    .as_secs()
            }),
            error: self.leaf.as_ref().err().cloned(),
        }
    }
}
