//! Against a real backend application: Debian's nginx, started by the test
//! with its own config in a temp dir on an ephemeral port.

use std::process::{Command, Stdio};

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxies_to_real_nginx() {
    if !nginx_available("proxies_to_real_nginx") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    let www = dir.path().join("www");
    std::fs::create_dir_all(&www).unwrap();
    std::fs::write(www.join("index.html"), "<h1>hello from nginx</h1>\n").unwrap();
    let big: Vec<u8> = (0..2_000_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(www.join("big.bin"), &big).unwrap();
    let port = free_port();
    std::fs::write(
        dir.path().join("nginx.conf"),
        format!(
            r#"# One process: the guard's SIGKILL must not orphan worker processes.
master_process off;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log;
events {{ worker_connections 128; }}
http {{
    access_log off;
    client_body_temp_path {d}/client_body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    keepalive_requests 10000;
    server {{
        listen 127.0.0.1:{port};
        server_name www.example.com;
        root {d}/www;
        location = /headers {{
            default_type text/plain;
            return 200 "xff=$http_x_forwarded_for|fwd=$http_forwarded|via=$http_via|host=$http_host|proto=$http_x_forwarded_proto\n";
        }}
    }}
}}
"#
        ),
    )
    .unwrap();
    let nginx = Command::new(NGINX)
        .arg("-p")
        .arg(dir.path())
        .arg("-c")
        .arg(dir.path().join("nginx.conf"))
        .arg("-g")
        .arg("daemon off;")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start nginx");
    let _nginx = ChildGuard { child: nginx };
    let nginx_addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let mut up = false;
    for _ in 0..400 {
        if std::net::TcpStream::connect(nginx_addr).is_ok() {
            up = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    assert!(
        up,
        "nginx did not start: {}",
        std::fs::read_to_string(dir.path().join("error.log")).unwrap_or_default()
    );

    let (listen, addr, _) = listener_toml();
    let config = format!(
        "{listen}[global]\naccess_log = \"off\"\n\n[health]\npath = \"/index.html\"\n\n[[site]]\nname = \"www\"\nhosts = [\"www.example.com\"]\n\n{}",
        node_toml("nginx", nginx_addr, "www")
    );
    let _proxy = Proxy::start(&config, &[addr]);
    let c = client();
    let get = |path: &str| {
        c.get(format!("http://{addr}{path}"))
            .header("host", "www.example.com")
            .send()
    };
    for _ in 0..50 {
        let resp = get("/").await.unwrap();
        assert_eq!(resp.status().as_u16(), 200);
        assert_eq!(
            resp.headers()["server"].to_str().unwrap().split('/').next(),
            Some("nginx")
        );
        assert_eq!(resp.headers()["via"], "1.1 rdmalb");
        assert_eq!(resp.text().await.unwrap(), "<h1>hello from nginx</h1>\n");
    }
    let resp = get("/big.bin").await.unwrap();
    assert_eq!(resp.content_length(), Some(big.len() as u64));
    assert!(
        resp.bytes().await.unwrap() == big,
        "static file corrupted through the proxy"
    );
    let resp = get("/missing").await.unwrap();
    assert_eq!(resp.status().as_u16(), 404);
    let text = get("/headers").await.unwrap().text().await.unwrap();
    assert_eq!(
        text,
        "xff=127.0.0.1|fwd=for=127.0.0.1;proto=http;host=www.example.com|via=1.1 rdmalb|host=www.example.com|proto=http\n"
    );
}

/// The skip of a test whose dependency is missing, run in a child process
/// of this test binary (`skip_child`): under `CI=true` it fails the test,
/// elsewhere it passes and records the skip for `scripts/test.sh`.
#[test]
fn a_missing_dependency_fails_under_ci_and_is_recorded_elsewhere() {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("skips.txt");
    let run = |ci: Option<&str>| {
        let mut c = std::process::Command::new(std::env::current_exe().unwrap());
        c.args(["--ignored", "--exact", "proxy::nginx::skip_child"])
            .env("RDMALB_TEST_SKIPS", &record)
            .env_remove("CI")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        if let Some(v) = ci {
            c.env("CI", v);
        }
        c.status().unwrap()
    };
    assert!(!run(Some("true")).success(), "under CI=true a skip fails");
    assert!(!record.exists(), "a failure is not recorded as a skip");
    assert!(run(None).success(), "elsewhere a skip passes");
    let text = std::fs::read_to_string(&record).unwrap();
    assert_eq!(text, "skip_child: the dependency is missing\n");
}

#[test]
#[ignore = "child process of a_missing_dependency_fails_under_ci_and_is_recorded_elsewhere"]
fn skip_child() {
    skip("skip_child", "the dependency is missing");
}
