//! Debian's `pebble` (Let's Encrypt's test ACME server) on loopback, with
//! `pebble-challtestsrv` as its DNS server (every name resolves to
//! 127.0.0.1, offline), its HTTPS certificate from a CA made here, and
//! the ports it validates challenges on (`httpPort`, `tlsPort`) chosen by
//! the test so the proxy under test listens there.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use super::{free_port, ChildGuard};

pub const PEBBLE: &str = "/usr/bin/pebble";
pub const CHALLTESTSRV: &str = "/usr/bin/pebble-challtestsrv";

pub struct Pebble {
    _dns: ChildGuard,
    _pebble: ChildGuard,
    /// `https://127.0.0.1:<port>/dir`
    pub directory: String,
    /// The CA of pebble's own HTTPS certificate (the proxy's `ca_root`).
    pub ca: PathBuf,
    /// challtestsrv's management address (`/add-a`, …).
    pub dns_admin: SocketAddr,
    management: SocketAddr,
    pub log: PathBuf,
    /// Where the proxy's plain and TLS listeners must be.
    pub http: SocketAddr,
    pub tls: SocketAddr,
}

/// Whether pebble is installed; prints why the test is skipped when not.
pub fn available(test: &str) -> bool {
    let ok = Path::new(PEBBLE).is_file() && Path::new(CHALLTESTSRV).is_file();
    if !ok {
        eprintln!("{test}: SKIPPED: {PEBBLE} or {CHALLTESTSRV} missing (scripts/setup.sh installs Debian's pebble)");
    }
    ok
}

fn wait_listening(addr: SocketAddr, what: &str, log: &Path) {
    for _ in 0..400 {
        if std::net::TcpStream::connect(addr).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    panic!(
        "{what} does not listen on {addr}:\n{}",
        std::fs::read_to_string(log).unwrap_or_default()
    );
}

impl Pebble {
    /// Starts challtestsrv and pebble in `dir`; certificates pebble issues
    /// are valid `validity` seconds.
    pub fn start(dir: &Path, validity: u64) -> Pebble {
        let ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        let mut ca = ca;
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let ca_cert = ca.self_signed(&ca_key).unwrap();
        let issuer = rcgen::Issuer::new(ca, ca_key);
        let leaf =
            rcgen::CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
        let leaf_key = rcgen::KeyPair::generate().unwrap();
        let leaf_cert = leaf.signed_by(&leaf_key, &issuer).unwrap();
        let ca_path = dir.join("pebble-ca.pem");
        std::fs::write(&ca_path, ca_cert.pem()).unwrap();
        std::fs::write(dir.join("pebble-cert.pem"), leaf_cert.pem()).unwrap();
        std::fs::write(dir.join("pebble-key.pem"), leaf_key.serialize_pem()).unwrap();

        let (dns, dns_admin) = (free_port(), free_port());
        let log = dir.join("pebble.log");
        let dns_log = dir.join("challtestsrv.log");
        let dns_child = Command::new(CHALLTESTSRV)
            .args(["-defaultIPv4", "127.0.0.1", "-defaultIPv6", ""])
            .args(["-dns01", &format!("127.0.0.1:{dns}")])
            .args(["-http01", "", "-https01", "", "-tlsalpn01", ""])
            .args(["-management", &format!("127.0.0.1:{dns_admin}")])
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&dns_log).unwrap())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn pebble-challtestsrv");
        let dns_guard = ChildGuard { child: dns_child };
        let dns_admin: SocketAddr = format!("127.0.0.1:{dns_admin}").parse().unwrap();
        wait_listening(dns_admin, "pebble-challtestsrv", &dns_log);

        let (listen, management) = (free_port(), free_port());
        let http: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let tls: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let config = serde_json::json!({
            "pebble": {
                "listenAddress": format!("127.0.0.1:{listen}"),
                "managementListenAddress": format!("127.0.0.1:{management}"),
                "certificate": dir.join("pebble-cert.pem"),
                "privateKey": dir.join("pebble-key.pem"),
                "httpPort": http.port(),
                "tlsPort": tls.port(),
                "ocspResponderURL": "",
                "externalAccountBindingRequired": false,
                "certificateValidityPeriod": validity,
            }
        });
        let config_path = dir.join("pebble-config.json");
        std::fs::write(&config_path, config.to_string()).unwrap();
        let child = Command::new(PEBBLE)
            .arg("-config")
            .arg(&config_path)
            .args(["-dnsserver", &format!("127.0.0.1:{dns}"), "-strict=false"])
            // Validate at once; every order validates afresh (no reused
            // authorizations); no spurious bad-nonce errors.
            .env("PEBBLE_VA_NOSLEEP", "1")
            .env("PEBBLE_VA_ALWAYS_VALID", "0")
            .env("PEBBLE_AUTHZREUSE", "0")
            .env("PEBBLE_WFE_NONCEREJECT", "0")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::create(dir.join("pebble.err")).unwrap())
            .spawn()
            .expect("spawn pebble");
        let guard = ChildGuard { child };
        let listen_addr: SocketAddr = format!("127.0.0.1:{listen}").parse().unwrap();
        wait_listening(listen_addr, "pebble", &log);
        Pebble {
            _dns: dns_guard,
            _pebble: guard,
            directory: format!("https://127.0.0.1:{listen}/dir"),
            ca: ca_path,
            dns_admin,
            management: format!("127.0.0.1:{management}").parse().unwrap(),
            log,
            http,
            tls,
        }
    }

    /// The root pebble's issued chains end at (`/roots/0` on its
    /// management interface), PEM.
    pub async fn root(&self) -> String {
        let ca = reqwest::Certificate::from_pem(&std::fs::read(&self.ca).unwrap()).unwrap();
        let c = reqwest::Client::builder()
            .no_proxy()
            .add_root_certificate(ca)
            .build()
            .unwrap();
        c.get(format!("https://{}/roots/0", self.management))
            .send()
            .await
            .expect("pebble /roots/0")
            .text()
            .await
            .unwrap()
    }

    /// Points `name` at `ip` in challtestsrv's DNS (so pebble's
    /// validation goes there).
    pub async fn resolve(&self, name: &str, ip: &str) {
        let r = reqwest::Client::builder()
            .no_proxy()
            .build()
            .unwrap()
            .post(format!("http://{}/add-a", self.dns_admin))
            .body(serde_json::json!({ "host": name, "addresses": [ip] }).to_string())
            .send()
            .await
            .expect("challtestsrv /add-a");
        assert!(r.status().is_success(), "/add-a: {}", r.status());
    }
}

/// A TLS connection (HTTP/1.1 by ALPN) to `addr` for `name`, verified
/// against `root`; also returns the leaf it was served.
pub async fn connect(
    addr: SocketAddr,
    name: &str,
    root: &str,
) -> Result<
    (
        Vec<u8>,
        tokio_rustls::client::TlsStream<tokio::net::TcpStream>,
    ),
    String,
> {
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls_pemfile::certs(&mut root.as_bytes()) {
        roots
            .add(c.map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    }
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| e.to_string())?;
    let server_name = rustls::pki_types::ServerName::try_from(name.to_string()).unwrap();
    let tls = tokio::time::timeout(
        Duration::from_secs(20),
        tokio_rustls::TlsConnector::from(Arc::new(config)).connect(server_name, tcp),
    )
    .await
    .map_err(|_| "handshake timed out".to_string())?
    .map_err(|e| e.to_string())?;
    let leaf = tls
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|c| c.first())
        .map(|c| c.to_vec())
        .unwrap_or_default();
    Ok((leaf, tls))
}

/// One HTTP/1.1 keep-alive request on an open stream; the status code.
pub async fn request<S>(stream: &mut S, host: &str) -> Result<u16, String>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    stream
        .write_all(format!("GET / HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = tokio::time::timeout(Duration::from_secs(20), stream.read(&mut chunk))
            .await
            .map_err(|_| "no answer".to_string())?
            .map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("connection closed".into());
        }
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf);
        if let Some(end) = text.find("\r\n\r\n") {
            let head = &text[..end];
            let len: usize = head
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse().ok())?
                })
                .unwrap_or(0);
            if buf.len() >= end + 4 + len {
                let code = head
                    .split_whitespace()
                    .nth(1)
                    .and_then(|c| c.parse().ok())
                    .ok_or("no status")?;
                return Ok(code);
            }
        }
    }
}
