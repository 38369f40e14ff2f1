use super::*;

#[test]
fn head_size_counts_request_line_and_headers() {
    let req = Request::get("/abc?x=1")
        .header("host", "example.com")
        .body(())
        .unwrap();
    // "GET /abc?x=1 HTTP/1.1\r\n" + "host: example.com\r\n" + "\r\n"
    assert_eq!(head_size(&req), 3 + 8 + 12 + (4 + 11 + 4) + 2);
}

#[test]
fn origin_form_keeps_path_and_query_only() {
    let cases = [
        ("https://example.com:8443/a/b?x=1&y=%20", "/a/b?x=1&y=%20"),
        ("http://user@example.com/", "/"),
        ("http://example.com", "/"),
        ("example.com:443", "/"),
    ];
    for (from, want) in cases {
        let uri: Uri = from.parse().unwrap();
        let got = origin_form(&uri);
        assert_eq!(got.to_string(), want, "{from}");
        assert!(got.scheme().is_none() && got.authority().is_none());
    }
}
