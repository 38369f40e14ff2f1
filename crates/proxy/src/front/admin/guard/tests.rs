use super::*;

fn req(headers: &[(&str, &str)]) -> Request<()> {
    let mut b = Request::post("/reconfig/move?node=a&site=b");
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    b.body(()).unwrap()
}

#[test]
fn own_origin_is_the_address_the_connection_came_in_on() {
    let local: SocketAddr = "127.0.0.1:9100".parse().unwrap();
    assert!(own_origin(b"http://127.0.0.1:9100", local));
    assert!(own_origin(b"http://localhost:9100", local));
    assert!(!own_origin(b"http://localhost:9101", local));
    assert!(!own_origin(b"https://127.0.0.1:9100", local));
    assert!(!own_origin(b"null", local));
    let v6: SocketAddr = "[::1]:9100".parse().unwrap();
    assert!(own_origin(b"http://[::1]:9100", v6));
    let public: SocketAddr = "192.0.2.7:9100".parse().unwrap();
    assert!(!own_origin(b"http://localhost:9100", public));
}

#[test]
fn browser_signals_of_another_site_are_refused() {
    let local: SocketAddr = "127.0.0.1:9100".parse().unwrap();
    assert!(cross_origin(&req(&[]), local).is_none());
    assert!(cross_origin(&req(&[("sec-fetch-site", "same-origin")]), local).is_none());
    assert!(cross_origin(&req(&[("sec-fetch-site", "none")]), local).is_none());
    assert!(cross_origin(&req(&[("content-type", "application/json")]), local).is_none());
    for bad in [
        ("origin", "http://evil.example"),
        ("sec-fetch-site", "cross-site"),
        ("sec-fetch-site", "same-site"),
        ("content-type", "multipart/form-data; boundary=x"),
        ("content-type", "Text/Plain;charset=utf-8"),
    ] {
        assert!(cross_origin(&req(&[bad]), local).is_some(), "{bad:?}");
    }
}

#[test]
fn bearer_credentials_and_constant_time_comparison() {
    assert_eq!(
        bearer(&req(&[("authorization", "Bearer abc")])),
        Some(&b"abc"[..])
    );
    assert_eq!(
        bearer(&req(&[("authorization", "bearer  abc ")])),
        Some(&b"abc"[..])
    );
    assert_eq!(bearer(&req(&[("authorization", "Basic abc")])), None);
    assert_eq!(bearer(&req(&[("authorization", "Bearer ")])), None);
    assert_eq!(bearer(&req(&[])), None);
    assert!(same_secret(b"token-1", b"token-1"));
    assert!(!same_secret(b"token-1", b"token-2"));
    assert!(!same_secret(b"token-1", b"token-12"));
    assert!(!same_secret(b"", b"x"));
}
