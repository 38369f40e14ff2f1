//! Reading the admin listener's answers.

use super::*;

#[test]
fn an_answer_with_a_length() {
    let a =
        parse(b"HTTP/1.1 404 Not Found\r\ncontent-length: 6\r\nx: y\r\n\r\nno n\n\nextra").unwrap();
    assert_eq!(a.status, 404);
    assert_eq!(a.body, "no n\n\n");
}

#[test]
fn an_answer_read_to_the_end() {
    let a = parse(b"HTTP/1.1 200 OK\r\n\r\nall of it").unwrap();
    assert_eq!((a.status, a.body.as_str()), (200, "all of it"));
}

#[test]
fn not_http_is_refused() {
    assert!(parse(b"SSH-2.0-OpenSSH\r\n\r\n").is_none());
    assert!(parse(b"HTTP/1.1 200 OK\r\ncontent-length: 99\r\n\r\nshort").is_none());
    assert!(parse(b"HTTP/1.1 200 OK").is_none());
}
