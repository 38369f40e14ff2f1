//! ACME (`[acme]`, docs/tls.md) against the real pebble: issuance with
//! http-01 and with tls-alpn-01, the served chain verified against
//! pebble's root; renewal at two thirds of a short lifetime without
//! dropping an open connection; a refused order keeps the certificate in
//! force and shows its error and backoff; proxies sharing the storage
//! folder place one order and answer each other's challenges; on-demand
//! TLS for allowed names only.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use crate::support::pebble::{self, Pebble};
use crate::support::*;

/// A proxy config for ACME: a plain listener at `http` (if any), a TLS
/// listener at `tls` without certificates of its own, the admin listener,
/// `[acme]` on pebble, and site `www` (`www.acme.test`, `acme = site_acme`).
struct Setup<'a> {
    pebble: &'a Pebble,
    http: Option<SocketAddr>,
    tls: SocketAddr,
    admin: SocketAddr,
    storage: &'a Path,
    challenge: &'a str,
    site_acme: bool,
    extra: &'a str,
}

impl<'a> Setup<'a> {
    /// The common case: both listeners where pebble validates, http-01,
    /// `acme = true` on the site.
    fn http01(pebble: &'a Pebble, admin: SocketAddr, storage: &'a Path) -> Self {
        Setup {
            pebble,
            http: Some(pebble.http),
            tls: pebble.tls,
            admin,
            storage,
            challenge: "http-01",
            site_acme: true,
            extra: "",
        }
    }

    fn toml(&self, backend: SocketAddr) -> String {
        let plain = self
            .http
            .map(|a| format!("[[listener]]\nname = \"plain\"\nlisten = \"{a}\"\n\n"))
            .unwrap_or_default();
        format!(
            "{plain}[[listener]]\nname = \"tls\"\nlisten = \"{tls}\"\n[listener.tls]\n\n\
             [admin]\nlisten = \"{admin}\"\ntoken_file = \"{token}\"\n\n[global]\naccess_log = \"off\"\n\n\
             [acme]\ndirectory = \"{dir}\"\nca_root = \"{ca}\"\nstorage = \"{storage}\"\n\
             contact = [\"ops@acme.test\"]\nchallenge = \"{challenge}\"\ncheck_interval = \"1s\"\n\
             retry_min = \"30s\"\n{extra}\n\
             [[site]]\nname = \"www\"\nhosts = [\"www.acme.test\"]\nacme = {site_acme}\n\n{node}",
            tls = self.tls,
            admin = self.admin,
            token = token_file(self.storage).display(),
            dir = self.pebble.directory,
            ca = self.pebble.ca.display(),
            storage = self.storage.display(),
            challenge = self.challenge,
            extra = self.extra,
            site_acme = self.site_acme,
            node = node_toml("n1", backend, "www"),
        )
    }
}

/// The first certificate of `/status`'s `acme` list once it has a serial.
async fn issued(admin: SocketAddr) -> serde_json::Value {
    let s = status_until(admin, "an ACME certificate issued", |s| {
        s["acme"][0]["serial"].is_string()
    })
    .await;
    s["acme"][0].clone()
}

/// The admin token of the proxies here (`[admin] token_file`).
const TOKEN: &str = "acme-test-admin-token-5b0d2e7c91f4a3e6d8c0b1a2";

/// The token file, beside the storage folder (written once, 0600).
fn token_file(storage: &Path) -> std::path::PathBuf {
    let path = storage.with_file_name("admin.token");
    if !path.exists() {
        std::fs::write(&path, format!("{TOKEN}\n")).unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .unwrap();
    }
    path
}

async fn runtime(admin: SocketAddr, command: &str) -> String {
    client()
        .post(format!("http://{admin}/runtime"))
        .header("authorization", format!("Bearer {TOKEN}"))
        .body(command.to_string())
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acme_http01_issues_a_chain_that_verifies_against_pebbles_root() {
    let test = "acme_http01_issues_a_chain_that_verifies_against_pebbles_root";
    if !pebble::available(test) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pebble = Pebble::start(dir.path(), 3600);
    let backend = Backend::start("app").await;
    let admin = free_addr();
    let storage = dir.path().join("acme");
    let setup = Setup::http01(&pebble, admin, &storage);
    let proxy = Proxy::start(&setup.toml(backend.addr), &[pebble.tls, admin]);
    let cert = issued(admin).await;
    assert_eq!(cert["names"], serde_json::json!(["www.acme.test"]));
    assert!(cert["last_error"].is_null(), "{cert:#}");
    let root = pebble.root().await;
    // A real client verifies the chain against pebble's root and reaches
    // the site through it.
    let c = reqwest::Client::builder()
        .no_proxy()
        .add_root_certificate(reqwest::Certificate::from_pem(root.as_bytes()).unwrap())
        .resolve("www.acme.test", pebble.tls)
        .build()
        .unwrap();
    let r = c
        .get(format!("https://www.acme.test:{}/", pebble.tls.port()))
        .send()
        .await
        .unwrap_or_else(|e| panic!("HTTPS with pebble's root: {e}\n{}", proxy.stderr_text()));
    assert_eq!(r.status(), 200);
    // Private files, whole.
    use std::os::unix::fs::PermissionsExt;
    for f in ["account.json", "certs/www.acme.test.pem"] {
        let mode = std::fs::metadata(storage.join(f))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{f}");
    }
    // The challenge path is the proxy's before any rule or site: an
    // unknown token is 404 and the node never sees it.
    let before = backend.requests();
    let r = get_host(
        &client(),
        pebble.http,
        "www.acme.test",
        "/.well-known/acme-challenge/nosuchtoken",
    )
    .await;
    assert_eq!(r.status(), 404);
    assert_eq!(backend.requests(), before);
    // Expiry in the metrics, the status command as HAProxy 3.2's.
    let expiry = cert["not_after_unix"].as_u64().unwrap() as f64;
    let metrics = admin_text(admin, "/metrics").await;
    assert_eq!(
        metric(
            &metrics,
            "rdmalb_cert_expiry_seconds{host=\"www.acme.test\"}"
        ),
        expiry,
        "{metrics}"
    );
    let text = runtime(admin, "acme status").await;
    assert!(
        text.starts_with("# certificate\tsection\tstate\texpiration date (UTC)\texpires in\tscheduled date (UTC)\tscheduled in"),
        "{text}"
    );
    assert!(
        text.contains("\nwww.acme.test\tsite:www\tScheduled\t"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acme_tls_alpn01_issues_without_a_plain_listener() {
    let test = "acme_tls_alpn01_issues_without_a_plain_listener";
    if !pebble::available(test) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pebble = Pebble::start(dir.path(), 3600);
    let backend = Backend::start("app").await;
    let admin = free_addr();
    let storage = dir.path().join("acme");
    let setup = Setup {
        pebble: &pebble,
        http: None,
        tls: pebble.tls,
        admin,
        storage: &storage,
        challenge: "tls-alpn-01",
        site_acme: true,
        extra: "",
    };
    let proxy = Proxy::start(&setup.toml(backend.addr), &[pebble.tls, admin]);
    let cert = issued(admin).await;
    let root = pebble.root().await;
    let (leaf, mut conn) = pebble::connect(pebble.tls, "www.acme.test", &root)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", proxy.stderr_text()));
    assert!(!leaf.is_empty());
    assert_eq!(pebble::request(&mut conn, "www.acme.test").await, Ok(200));
    assert!(cert["last_error"].is_null(), "{cert:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acme_renewal_serves_the_new_certificate_without_dropping_connections() {
    let test = "acme_renewal_serves_the_new_certificate_without_dropping_connections";
    if !pebble::available(test) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // 18 s certificates: renewed two thirds in, at 11 to 12 s.
    let pebble = Pebble::start(dir.path(), 18);
    let backend = Backend::start("app").await;
    let admin = free_addr();
    let storage = dir.path().join("acme");
    let setup = Setup::http01(&pebble, admin, &storage);
    let proxy = Proxy::start(&setup.toml(backend.addr), &[pebble.tls, admin]);
    let first = issued(admin).await;
    let root = pebble.root().await;
    let (leaf, mut open) = pebble::connect(pebble.tls, "www.acme.test", &root)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", proxy.stderr_text()));
    assert_eq!(pebble::request(&mut open, "www.acme.test").await, Ok(200));
    let renewed = eventually(
        "a renewed certificate served",
        Duration::from_secs(40),
        || {
            let (root, leaf) = (&root, &leaf);
            async move {
                let (new, _) = pebble::connect(pebble.tls, "www.acme.test", root).await?;
                if new != *leaf {
                    Ok(new)
                } else {
                    Err("the first certificate is still served".to_string())
                }
            }
        },
    )
    .await;
    assert!(!renewed.is_empty());
    // The connection opened on the old certificate is still served.
    assert_eq!(pebble::request(&mut open, "www.acme.test").await, Ok(200));
    let now = admin_status(admin).await;
    assert_ne!(now["acme"][0]["serial"], first["serial"], "{now:#}");
    assert_eq!(now["acme"][0]["failures"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acme_refused_order_keeps_the_old_certificate_and_backs_off() {
    let test = "acme_refused_order_keeps_the_old_certificate_and_backs_off";
    if !pebble::available(test) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pebble = Pebble::start(dir.path(), 3600);
    let backend = Backend::start("app").await;
    let admin = free_addr();
    let storage = dir.path().join("acme");
    let setup = Setup::http01(&pebble, admin, &storage);
    let proxy = Proxy::start(&setup.toml(backend.addr), &[pebble.tls, admin]);
    let first = issued(admin).await;
    let root = pebble.root().await;
    let (leaf, _) = pebble::connect(pebble.tls, "www.acme.test", &root)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", proxy.stderr_text()));
    // Pebble now validates www.acme.test at an address nobody listens on.
    pebble.resolve("www.acme.test", "127.0.0.2").await;
    let answer = runtime(admin, "acme renew www.acme.test").await;
    assert!(
        answer.contains("Renewal of 'www.acme.test' scheduled."),
        "{answer}"
    );
    let failed = status_until(admin, "the renewal refused", |s| {
        s["acme"][0]["failures"].as_u64() == Some(1)
    })
    .await;
    let cert = &failed["acme"][0];
    let error = cert["last_error"].as_str().unwrap_or_default();
    assert!(error.starts_with("order refused"), "{cert:#}");
    // Backoff: the next try no sooner than retry_min.
    let retry = cert["retry_at_unix"].as_u64().unwrap();
    let attempt = cert["last_attempt_unix"].as_u64().unwrap();
    assert!(retry >= attempt + 29, "{cert:#}");
    assert_eq!(cert["serial"], first["serial"]);
    // The certificate in force keeps serving.
    let (still, _) = pebble::connect(pebble.tls, "www.acme.test", &root)
        .await
        .unwrap();
    assert_eq!(still, leaf);
    let text = runtime(admin, "acme status").await;
    assert!(
        text.contains("\tScheduled\t") && text.contains("\t1\torder refused"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acme_proxies_sharing_storage_place_one_order_and_answer_each_others_challenges() {
    let test = "acme_proxies_sharing_storage_place_one_order_and_answer_each_others_challenges";
    if !pebble::available(test) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pebble = Pebble::start(dir.path(), 3600);
    let backend = Backend::start("app").await;
    let storage = dir.path().join("acme");
    // The proxy pebble validates against orders nothing itself: every
    // answer it gives is another proxy's.
    let answering_admin = free_addr();
    let answering = Setup {
        pebble: &pebble,
        http: Some(pebble.http),
        tls: pebble.tls,
        admin: answering_admin,
        storage: &storage,
        challenge: "http-01",
        site_acme: false,
        extra: "",
    };
    let _answering = Proxy::start(&answering.toml(backend.addr), &[pebble.http]);
    // Two proxies that want the certificate, started together.
    let ordering: Vec<(Proxy, SocketAddr, SocketAddr)> = (0..2)
        .map(|_| {
            let (tls, admin) = (free_addr(), free_addr());
            let setup = Setup {
                pebble: &pebble,
                http: Some(free_addr()),
                tls,
                admin,
                storage: &storage,
                challenge: "http-01",
                site_acme: true,
                extra: "",
            };
            (Proxy::start(&setup.toml(backend.addr), &[tls]), tls, admin)
        })
        .collect();
    let root = pebble.root().await;
    let mut leaves = Vec::new();
    for (proxy, tls, admin) in &ordering {
        issued(*admin).await;
        let (leaf, _) = pebble::connect(*tls, "www.acme.test", &root)
            .await
            .unwrap_or_else(|e| panic!("{e}\n{}", proxy.stderr_text()));
        leaves.push(leaf);
    }
    assert_eq!(leaves[0], leaves[1], "both serve the one certificate");
    let orders: usize = ordering
        .iter()
        .map(|(p, _, _)| {
            p.stderr_text()
                .matches("ordering an ACME certificate")
                .count()
        })
        .sum();
    assert_eq!(orders, 1, "exactly one order among the proxies");
    let issued_by_pebble = std::fs::read_to_string(&pebble.log)
        .unwrap()
        .matches("Issued certificate serial")
        .count();
    assert_eq!(issued_by_pebble, 1, "pebble issued one certificate");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acme_on_demand_issues_for_allowed_names_only() {
    let test = "acme_on_demand_issues_for_allowed_names_only";
    if !pebble::available(test) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pebble = Pebble::start(dir.path(), 3600);
    let backend = Backend::start("app").await;
    let asked = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let ask = ask_server(std::sync::Arc::clone(&asked)).await;
    std::fs::write(
        dir.path().join("allow.txt"),
        "# on-demand names\nlisted.acme.test\n",
    )
    .unwrap();
    let admin = free_addr();
    let storage = dir.path().join("acme");
    let extra = format!(
        "[acme.on_demand]\nallow_file = \"{}\"\nask = \"http://{ask}/check\"\nwait = \"8s\"\nrate = 5\n",
        dir.path().join("allow.txt").display()
    );
    let setup = Setup {
        pebble: &pebble,
        http: Some(pebble.http),
        tls: pebble.tls,
        admin,
        storage: &storage,
        challenge: "http-01",
        site_acme: false,
        extra: &extra,
    };
    let proxy = Proxy::start(&setup.toml(backend.addr), &[pebble.tls, admin]);
    let root = pebble.root().await;
    // From the allow file, and from the ask endpoint: the first handshake
    // waits for the order and gets a certificate pebble issued.
    for name in ["listed.acme.test", "asked.acme.test"] {
        let (leaf, mut conn) = pebble::connect(pebble.tls, name, &root)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}\n{}", proxy.stderr_text()));
        assert!(!leaf.is_empty());
        assert_eq!(pebble::request(&mut conn, "www.acme.test").await, Ok(200));
    }
    // Refused by the endpoint: no certificate, twice, asked once (cached).
    for _ in 0..2 {
        let refused = pebble::connect(pebble.tls, "refused.acme.test", &root).await;
        assert!(refused.is_err(), "refused.acme.test got a certificate");
    }
    let calls = asked.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(
        calls, 2,
        "asked once for asked.acme.test, once for refused.acme.test"
    );
    let status = admin_status(admin).await;
    let names: Vec<&str> = status["acme"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["certificate"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["listed.acme.test", "asked.acme.test"], "{status:#}");
}

/// The stats page's certificates table in real Chromium
/// (`tests/browser/stats_certs.py`): a certificate pebble issued (its
/// issuer, expiry and renewal), one whose order fails (its error, the
/// retry) and the TLS listener's certificate file, each as `/status` has
/// it; the file's expiry in `rdmalb_cert_expiry_seconds` as well.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acme_stats_page_shows_the_certificates_in_chromium() {
    let test = "proxy::acme::acme_stats_page_shows_the_certificates_in_chromium";
    if !pebble::available(test) || !super::stats_page::browser_available(test) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pebble = Pebble::start(dir.path(), 3600);
    // bad.acme.test is validated where nothing listens: its orders fail.
    pebble.resolve("bad.acme.test", "127.0.0.2").await;
    let backend = Backend::start("app").await;
    let admin = free_addr();
    let storage = dir.path().join("acme");
    let (file, key, _) = certificate(dir.path(), "files", &["files.acme.test"]);
    let setup = Setup::http01(&pebble, admin, &storage);
    let toml = setup.toml(backend.addr).replace(
        "[listener.tls]\n",
        &format!(
            "[listener.tls]\ncertificates = [{{ cert = \"{}\", key = \"{}\" }}]\n",
            file.display(),
            key.display()
        ),
    ) + "[[site]]\nname = \"bad\"\nhosts = [\"bad.acme.test\"]\nacme = true\n\n"
        + &node_toml("n2", backend.addr, "bad");
    let _proxy = Proxy::start(&toml, &[pebble.tls, admin]);
    let status = status_until(admin, "one certificate issued, one order failed", |s| {
        let cert = |name: &str| {
            s["acme"]
                .as_array()
                .and_then(|a| a.iter().find(|c| c["certificate"] == name))
                .cloned()
                .unwrap_or_default()
        };
        cert("www.acme.test")["serial"].is_string()
            && cert("bad.acme.test")["last_error"].is_string()
    })
    .await;
    let acme = status["acme"].as_array().unwrap();
    let cert = |name: &str| acme.iter().find(|c| c["certificate"] == name).unwrap();
    let (good, bad, tls_file) = (
        cert("www.acme.test"),
        cert("bad.acme.test"),
        &status["tls_files"][0],
    );
    let file_path = file.display().to_string();
    assert_eq!(tls_file["file"], file_path.as_str(), "{status:#}");
    assert_eq!(tls_file["names"], serde_json::json!(["files.acme.test"]));
    assert_eq!(tls_file["issuer"], "rcgen self signed cert");
    let issuer = good["issuer"].as_str().unwrap_or_default();
    assert!(issuer.starts_with("Pebble Intermediate CA"), "{good:#}");

    let report = super::stats_page::browser_report(
        dir.path(),
        "stats_certs.py",
        &[
            format!("http://{admin}/stats"),
            "www.acme.test".into(),
            "bad.acme.test".into(),
            file_path.clone(),
        ],
    );
    assert_eq!(report["ok"], true, "{report:#}");
    assert_eq!(report["problems"], serde_json::json!([]), "{report:#}");
    let row = |key: &str| report["page"]["certs"][key].clone();
    let text = |row: &serde_json::Value, field: &str| row[field].as_str().unwrap_or("").to_string();
    let date = |unix: &serde_json::Value| utc(unix.as_u64().unwrap());

    let www = row("www.acme.test");
    assert_eq!(text(&www, "names"), "www.acme.test", "{www:#}");
    assert!(text(&www, "source").starts_with("acmesite:www"), "{www:#}");
    assert_eq!(text(&www, "issuer"), issuer);
    assert_eq!(text(&www, "state"), "Scheduled");
    assert!(
        text(&www, "not_after").starts_with(&date(&good["not_after_unix"])),
        "{www:#}"
    );
    assert!(
        text(&www, "renewal").starts_with(&date(&good["renew_at_unix"])),
        "{www:#}"
    );
    assert_eq!(text(&www, "error"), "none");

    let failing = row("bad.acme.test");
    assert_eq!(text(&failing, "state"), "Stopped", "{failing:#}");
    assert_eq!(text(&failing, "not_after"), "–", "{failing:#}");
    assert!(
        text(&failing, "renewal").starts_with(&format!("retry {}", date(&bad["retry_at_unix"]))),
        "{failing:#}"
    );
    let error = bad["last_error"].as_str().unwrap();
    assert!(error.starts_with("order refused"), "{bad:#}");
    assert!(
        text(&failing, "error").starts_with(&error[..40]),
        "{failing:#}"
    );

    let on_file = row(&file_path);
    assert_eq!(text(&on_file, "names"), "files.acme.test", "{on_file:#}");
    assert_eq!(text(&on_file, "source"), "filelistener tls");
    assert_eq!(text(&on_file, "issuer"), "rcgen self signed cert");
    assert_eq!(text(&on_file, "state"), "static");
    assert!(
        text(&on_file, "not_after").starts_with(&date(&tls_file["not_after_unix"])),
        "{on_file:#}"
    );
    // The file's expiry is a metric too, as the ordered certificate's.
    let metrics = admin_text(admin, "/metrics").await;
    for (host, cert) in [("files.acme.test", tls_file), ("www.acme.test", good)] {
        let series = format!("rdmalb_cert_expiry_seconds{{host=\"{host}\"}}");
        assert_eq!(
            metric(&metrics, &series),
            cert["not_after_unix"].as_u64().unwrap() as f64,
            "{metrics}"
        );
    }
}

/// `unix` as the stats page writes a date: `2027-02-26 17:38:59` (UTC),
/// by the civil-from-days algorithm (H. Hinnant), not by the page's code.
fn utc(unix: u64) -> String {
    let (days, secs) = ((unix / 86400) as i64, unix % 86400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

#[test]
fn utc_dates_match_known_instants() {
    assert_eq!(utc(0), "1970-01-01 00:00:00");
    assert_eq!(utc(951_782_400), "2000-02-29 00:00:00");
    assert_eq!(utc(1_803_663_537), "2027-02-26 17:38:57");
}

/// An `ask` endpoint: 200 for `asked.acme.test`, 403 for any other name;
/// counts the requests.
async fn ask_server(count: std::sync::Arc<std::sync::atomic::AtomicUsize>) -> SocketAddr {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let mut buf = vec![0u8; 4096];
            let n = s.read(&mut buf).await.unwrap_or(0);
            let head = String::from_utf8_lossy(&buf[..n]);
            let line = head.lines().next().unwrap_or("");
            let status = if line.starts_with("GET /check?domain=asked.acme.test ") {
                "200 OK"
            } else {
                "403 Forbidden"
            };
            let _ = s
                .write_all(
                    format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                        .as_bytes(),
                )
                .await;
        }
    });
    addr
}
