//! HAProxy 3.2's `acme` and `crt-store` sections, and `crt DIR`.

use super::*;

#[test]
fn acme_section_and_crt_store_become_acme_and_sites_with_acme_true() {
    let i = imported(&format!(
        "{HEAD}acme LE\n    directory https://acme-staging-v02.api.letsencrypt.org/directory\n\
         \x20   account-key /etc/haproxy/le.account.key\n    contact ops@example.com\n\
         \x20   challenge HTTP-01\n    keytype RSA\n    map virt@acme\n\
         crt-store le\n    load crt shop.pem acme LE domains \"shop.example.com,lost.example.com\"\n\
         frontend web\n    bind :80\n    use_backend shop if {{ hdr(host) -i shop.example.com }}\n\
         \x20   use_backend blog if {{ hdr(host) -i blog.example.com }}\n\
         backend shop\n    server a 10.0.0.1:80\nbackend blog\n    server b 10.0.0.2:80\n"
    ));
    let c = parsed(&i);
    let acme = c.acme.as_ref().expect("[acme]");
    assert_eq!(
        acme.directory,
        "https://acme-staging-v02.api.letsencrypt.org/directory"
    );
    assert_eq!(acme.contact, ["mailto:ops@example.com"]);
    assert_eq!(acme.challenge, crate::config::acme::ChallengeKind::Http01);
    let shop = c.site_by_name("shop").unwrap();
    assert_eq!(shop.acme_names, ["shop.example.com"]);
    assert!(c.site_by_name("blog").unwrap().acme_names.is_empty());
    assert!(
        has_note(&i, 6, "rdmalb creates its account"),
        "{:?}",
        notes(&i)
    );
    assert!(has_note(&i, 9, "P-256"), "{:?}", notes(&i));
    assert!(
        i.notes
            .iter()
            .any(|n| n.why.contains("`lost.example.com` is ordered with ACME")),
        "{:?}",
        notes(&i)
    );
}

/// `crt DIR`: every certificate file of the directory (HAProxy skips
/// `.key`, `.ocsp`, `.issuer`, `.sctl`), each with its key in the file or
/// in `<file>.key` beside it.
#[test]
fn crt_directory_loads_one_pair_per_file() {
    let dir = tempfile::tempdir().unwrap();
    let certs = dir.path().join("certs");
    std::fs::create_dir(&certs).unwrap();
    for (name, separate_key) in [("a.example", false), ("b.example", true)] {
        let ck = rcgen::generate_simple_self_signed(vec![name.to_string()]).unwrap();
        let (cert, key) = (ck.cert.pem(), ck.signing_key.serialize_pem());
        let file = certs.join(format!("{name}.pem"));
        if separate_key {
            std::fs::write(&file, cert).unwrap();
            std::fs::write(certs.join(format!("{name}.pem.key")), key).unwrap();
        } else {
            std::fs::write(&file, format!("{cert}{key}")).unwrap();
        }
    }
    std::fs::write(certs.join("a.example.pem.ocsp"), b"ignored").unwrap();
    let i = import(
        &format!("{HEAD}frontend web\n    bind :443 ssl crt certs/\n    default_backend app\nbackend app\n    server a 10.0.0.1:80\n"),
        dir.path(),
    );
    assert!(
        i.toml
            .contains("{ cert = \"certs/a.example.pem\", key = \"certs/a.example.pem\" }"),
        "{}",
        i.toml
    );
    assert!(
        i.toml
            .contains("{ cert = \"certs/b.example.pem\", key = \"certs/b.example.pem.key\" }"),
        "{}",
        i.toml
    );
    assert!(!i.toml.contains(".ocsp"), "{}", i.toml);
    let c = crate::config::parse(&i.toml, &dir.path().join("imported.toml"))
        .unwrap_or_else(|e| panic!("{e}\n{}", i.toml));
    let tls = c.listeners[0].tls.as_ref().unwrap();
    assert_eq!(tls.certificates.len(), 2);
    crate::front::tls::server_config("web", tls, None).expect("both pairs load");
}
