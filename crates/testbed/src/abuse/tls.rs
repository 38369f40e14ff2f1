//! The attack client's TLS side: a rustls client that offers ALPN `h2` or
//! `http/1.1`, never resumes a session (every handshake is a full one, the
//! expensive kind for the server), and does not check the certificate (the
//! target is a proxy of our own on loopback, with a certificate made for
//! the run; handshake signatures are still verified). And the handshake
//! flood: connect, complete the handshake, close, at `--rate`.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use super::{AbuseError, Pacer, Run};

/// TLS client configurations of one run, by ALPN.
pub struct Connector {
    h2: TlsConnector,
    http1: TlsConnector,
    name: ServerName<'static>,
}

impl Connector {
    /// Clients for SNI `host`.
    pub fn new(host: &str) -> Result<Connector, AbuseError> {
        let name = ServerName::try_from(host.to_string())
            .map_err(|e| AbuseError::Tls(format!("--host {host}: {e}")))?;
        let config = |alpn: &[u8]| -> Result<TlsConnector, AbuseError> {
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let mut c = ClientConfig::builder_with_provider(Arc::clone(&provider))
                .with_safe_default_protocol_versions()
                .map_err(|e| AbuseError::Tls(e.to_string()))?
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
                .with_no_client_auth();
            c.alpn_protocols = vec![alpn.to_vec()];
            c.resumption = rustls::client::Resumption::disabled();
            Ok(TlsConnector::from(Arc::new(c)))
        };
        Ok(Connector {
            h2: config(b"h2")?,
            http1: config(b"http/1.1")?,
            name,
        })
    }

    /// A full handshake over `tcp`.
    pub async fn handshake(
        &self,
        tcp: TcpStream,
        h2: bool,
    ) -> std::io::Result<TlsStream<TcpStream>> {
        let c = if h2 { &self.h2 } else { &self.http1 };
        c.connect(self.name.clone(), tcp).await
    }
}

/// Accepts any certificate; checks the handshake's signatures with the
/// provider's algorithms.
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// The handshake flood: full handshakes, each connection closed (with a
/// close_notify) as soon as it is up; one handshake is one operation.
pub async fn handshake_flood(r: &Run) {
    let mut pacer = Pacer::new(r);
    while pacer.wait(r, 1).await {
        if r.take(1) == 0 {
            return;
        }
        let Some(mut s) = r.connect_stream(false).await else {
            continue;
        };
        let _ = s.shutdown().await;
    }
}
