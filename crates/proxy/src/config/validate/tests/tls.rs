//! Client certificates on a TLS listener: `tls.verify`, `tls.client_ca`,
//! `tls.crl`.

use super::*;

#[test]
fn tls_client_certificates_need_a_mode_and_a_ca() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (dir.path().join("c.pem"), dir.path().join("c.key"));
    let ck = rcgen::generate_simple_self_signed(vec!["a.example.com".to_string()]).unwrap();
    std::fs::write(&cert, ck.cert.pem()).unwrap();
    std::fs::write(&key, ck.signing_key.serialize_pem()).unwrap();
    let tls = |extra: &str| {
        with(&format!(
            "[[listener]]\nlisten = \"127.0.0.1:8443\"\ntls = {{ {extra}certificates = [{{ cert = \"{}\", key = \"{}\" }}] }}",
            cert.display(),
            key.display()
        ))
    };
    rejects(
        &tls("verify = \"sometimes\", "),
        "listener[1].tls.verify",
        "\"required\", \"optional\" or \"none\"",
    );
    rejects(
        &tls("verify = \"required\", "),
        "listener[1].tls.client_ca",
        "missing",
    );
    rejects(
        &tls(&format!("client_ca = \"{}\", ", cert.display())),
        "listener[1].tls.verify",
        "missing",
    );
    rejects(
        &tls("verify = \"optional\", client_ca = \"/nonexistent.pem\", "),
        "listener[1].tls.client_ca",
        "cannot read",
    );
    rejects(
        &tls(&format!(
            "verify = \"required\", client_ca = \"{}\", crl = \"{}\", ",
            cert.display(),
            cert.display()
        )),
        "listener[1].tls.crl",
        "no PEM X509 CRL",
    );
    let c = ok(&tls(&format!(
        "verify = \"optional\", client_ca = \"{}\", ",
        cert.display()
    )));
    let auth = c.listeners[1]
        .tls
        .as_ref()
        .unwrap()
        .client_auth
        .clone()
        .unwrap();
    assert!(!auth.required);
}
