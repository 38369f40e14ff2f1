//! TLS termination: a rustls server config per listener whose certificate
//! is chosen by SNI among one or more cert/key pairs (the first is the
//! default for clients that send no name or an unknown one), with ALPN
//! `h2` and `http/1.1`.

use std::fmt;
use std::sync::Arc;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;

use super::error::ProxyError;
use crate::config::{ClientAuth, Tls};

/// Picks the first certificate valid for the client's server name (exact or
/// wildcard SAN, as webpki checks it), else the first one.
struct SniResolver {
    keys: Vec<Arc<CertifiedKey>>,
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

/// Loads the listener's certificates and builds its TLS acceptor config.
pub fn server_config(listener: &str, tls: &Tls) -> Result<Arc<rustls::ServerConfig>, ProxyError> {
    let err = |message: String| ProxyError::Tls {
        listener: listener.to_string(),
        message,
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut keys = Vec::new();
    for pair in &tls.certificates {
        let cert_pem = std::fs::read(&pair.cert)
            .map_err(|e| err(format!("cannot read {}: {e}", pair.cert.display())))?;
        let chain: Vec<CertificateDer<'static>> = rustls_pemfile::certs(&mut cert_pem.as_slice())
            .collect::<Result<_, _>>()
            .map_err(|e| err(format!("{}: bad PEM: {e}", pair.cert.display())))?;
        if chain.is_empty() {
            return Err(err(format!("{} holds no certificate", pair.cert.display())));
        }
        let key_pem = std::fs::read(&pair.key)
            .map_err(|e| err(format!("cannot read {}: {e}", pair.key.display())))?;
        let key: PrivateKeyDer<'static> = rustls_pemfile::private_key(&mut key_pem.as_slice())
            .map_err(|e| err(format!("{}: bad PEM: {e}", pair.key.display())))?
            .ok_or_else(|| err(format!("{} holds no private key", pair.key.display())))?;
        let signing = provider
            .key_provider
            .load_private_key(key)
            .map_err(|e| err(format!("{}: unusable private key: {e}", pair.key.display())))?;
        let ck = CertifiedKey::new(chain, signing);
        ck.keys_match().map_err(|e| {
            err(format!(
                "{} does not match {}: {e}",
                pair.key.display(),
                pair.cert.display()
            ))
        })?;
        keys.push(Arc::new(ck));
    }
    if keys.is_empty() {
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
    let mut config = builder.with_cert_resolver(Arc::new(SniResolver { keys }));
    config.alpn_protocols = if tls.h2 {
        vec![b"h2".to_vec(), b"http/1.1".to_vec()]
    } else {
        vec![b"http/1.1".to_vec()]
    };
    Ok(Arc::new(config))
}
