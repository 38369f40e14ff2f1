//! The answers to the challenges of orders in progress: `http-01` key
//! authorizations by token, and `tls-alpn-01` certificates by name (RFC
//! 8737: self-signed, the name as its only SAN, the SHA-256 digest of the
//! key authorization in the critical acmeIdentifier extension). Kept in
//! memory for this proxy's orders and written to the shared storage
//! folder, where the other proxies find the answers to orders they did not
//! place.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rustls::sign::CertifiedKey;

use super::store::{write_private, Store};

/// The path prefix of http-01 challenges (RFC 8555 section 8.3).
pub const HTTP_PREFIX: &str = "/.well-known/acme-challenge/";

/// The ALPN protocol of tls-alpn-01 handshakes (RFC 8737 section 6.2).
pub const ACME_TLS_ALPN: &[u8] = b"acme-tls/1";

#[derive(Debug)]
pub struct Challenges {
    store: Store,
    http: Mutex<HashMap<String, String>>,
    alpn: Mutex<HashMap<String, Arc<CertifiedKey>>>,
}

impl Challenges {
    pub fn new(store: Store) -> Challenges {
        Challenges {
            store,
            http: Mutex::default(),
            alpn: Mutex::default(),
        }
    }

    /// Publishes the http-01 answer for `token`.
    pub fn put_http(&self, token: &str, key_authorization: &str) -> std::io::Result<()> {
        if !token_ok(token) {
            return Err(std::io::Error::other(format!(
                "the server sent a token that is not base64url: {token:?}"
            )));
        }
        write_private(&self.store.http_token(token), key_authorization.as_bytes())?;
        lock(&self.http).insert(token.to_string(), key_authorization.to_string());
        Ok(())
    }

    /// The http-01 answer for `token`: this proxy's, else one another
    /// proxy wrote to the shared folder.
    pub fn http(&self, token: &str) -> Option<String> {
        if !token_ok(token) {
            return None;
        }
        if let Some(answer) = lock(&self.http).get(token) {
            return Some(answer.clone());
        }
        std::fs::read_to_string(self.store.http_token(token)).ok()
    }

    /// Publishes the tls-alpn-01 certificate for `name`.
    pub fn put_alpn(&self, name: &str, digest: &[u8]) -> Result<(), String> {
        let key = rcgen::KeyPair::generate().map_err(|e| e.to_string())?;
        let mut params =
            rcgen::CertificateParams::new(vec![name.to_string()]).map_err(|e| e.to_string())?;
        params.custom_extensions = vec![rcgen::CustomExtension::new_acme_identifier(digest)];
        let cert = params.self_signed(&key).map_err(|e| e.to_string())?;
        let pem = format!("{}{}", cert.pem(), key.serialize_pem());
        write_private(&self.store.alpn_cert(name), pem.as_bytes()).map_err(|e| e.to_string())?;
        let certified = crate::front::tls::unchecked_key(pem.as_bytes(), pem.as_bytes())?;
        lock(&self.alpn).insert(name.to_string(), Arc::new(certified));
        Ok(())
    }

    /// The tls-alpn-01 certificate for `name`, this proxy's or another's.
    pub fn alpn(&self, name: &str) -> Option<Arc<CertifiedKey>> {
        if let Some(k) = lock(&self.alpn).get(name) {
            return Some(Arc::clone(k));
        }
        if name.contains('/') || name.starts_with('.') {
            return None;
        }
        // Another proxy's order: a handshake that only the ACME server
        // makes, rare enough to read the file in it.
        let pem = std::fs::read(self.store.alpn_cert(name)).ok()?;
        crate::front::tls::unchecked_key(&pem, &pem)
            .ok()
            .map(Arc::new)
    }

    /// Forgets the answers of a finished order.
    pub fn remove(&self, tokens: &[String], names: &[String]) {
        for t in tokens {
            lock(&self.http).remove(t);
            let _ = std::fs::remove_file(self.store.http_token(t));
        }
        for n in names {
            lock(&self.alpn).remove(n);
            let _ = std::fs::remove_file(self.store.alpn_cert(n));
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// RFC 8555 section 8.1: a token is base64url (so never a path).
fn token_ok(token: &str) -> bool {
    !token.is_empty()
        && token.len() <= 256
        && token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_come_from_memory_or_the_shared_folder() {
        let dir = tempfile::tempdir().unwrap();
        let ours = Challenges::new(Store::open(dir.path()).unwrap());
        let theirs = Challenges::new(Store::open(dir.path()).unwrap());
        ours.put_http("tok_1-A", "tok_1-A.thumb").unwrap();
        assert_eq!(ours.http("tok_1-A").as_deref(), Some("tok_1-A.thumb"));
        assert_eq!(theirs.http("tok_1-A").as_deref(), Some("tok_1-A.thumb"));
        assert!(theirs.http("../account.json").is_none());
        assert!(ours.put_http("../x", "y").is_err());
        ours.put_alpn("a.example", &[7; 32]).unwrap();
        let cert = theirs.alpn("a.example").expect("read from the folder");
        assert_eq!(cert.cert.len(), 1);
        ours.remove(&["tok_1-A".into()], &["a.example".into()]);
        assert!(theirs.http("tok_1-A").is_none());
        assert!(theirs.alpn("a.example").is_none());
    }
}
