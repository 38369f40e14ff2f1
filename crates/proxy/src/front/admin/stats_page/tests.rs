use super::*;

#[test]
fn base64_matches_rfc_4648_vectors() {
    for (raw, enc) in [
        ("", ""),
        ("f", "Zg=="),
        ("fo", "Zm8="),
        ("foo", "Zm9v"),
        ("foob", "Zm9vYg=="),
        ("fooba", "Zm9vYmE="),
        ("foobar", "Zm9vYmFy"),
    ] {
        assert_eq!(base64(raw.as_bytes()), enc, "{raw:?}");
    }
}

#[test]
fn the_policy_names_each_inline_block_by_its_hash() {
    let page = "<style>p{}</style><script>alert(1)</script><p>x</p><script>b()</script>";
    let csp = content_security_policy(page);
    // sha256("alert(1)"), as a browser computes it.
    assert!(
        csp.contains("script-src 'sha256-bhHHL3z2vDgxUt0W3dWQOrprscmda2Y5pLsLg4GF+pI=' 'sha256-"),
        "{csp}"
    );
    assert!(csp.starts_with("default-src 'none';"), "{csp}");
    assert!(csp.contains("connect-src 'self';"), "{csp}");
    assert!(!csp.contains("unsafe"), "{csp}");
    assert_eq!(inline_blocks(page, "script"), ["alert(1)", "b()"]);
    assert_eq!(inline_blocks(page, "style"), ["p{}"]);
}

#[test]
fn the_page_is_self_contained() {
    assert_eq!(inline_blocks(PAGE, "script").len(), 1);
    assert_eq!(inline_blocks(PAGE, "style").len(), 1);
    // Every <script> and <style> is a bare tag whose block is hashed: one
    // with attributes (src=, a nonce) would not match the policy.
    assert_eq!(PAGE.matches("<script").count(), 1);
    assert_eq!(PAGE.matches("<style").count(), 1);
    for external in [
        "http://",
        "https://",
        "src=",
        "@import",
        "url(",
        "@font-face",
    ] {
        assert!(!PAGE.contains(external), "the page refers to `{external}`");
    }
    // Links only to the admin listener's own paths, and the inline icon.
    for href in PAGE.split("href=\"").skip(1) {
        let target = href.split('"').next().unwrap_or("");
        assert!(
            ["data:,", "/status", "/metrics"].contains(&target),
            "link to {target}"
        );
    }
    // Polls /status (what it shows is the JSON).
    assert!(PAGE.contains("fetch(\"/status\""));
}

#[test]
fn the_response_is_html_never_cached_with_the_policy() {
    let r = page();
    let h = r.headers();
    assert_eq!(h[header::CONTENT_TYPE], "text/html; charset=utf-8");
    assert_eq!(h[header::CACHE_CONTROL], "no-store");
    assert_eq!(h[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
    assert_eq!(
        h[header::CONTENT_SECURITY_POLICY].to_str().unwrap(),
        content_security_policy(PAGE)
    );
}
