//! The second stream of the differential test: malformed and abusive
//! requests, and a few valid ones the proxies may treat differently, one
//! per connection, each with what RFC 9110/9112 allow a
//! proxy to do with it, and the differences between rdmalb and HAProxy
//! that are both allowed (with the section that allows them).

/// What became of one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The proxy answered this status and no whole request reached the
    /// node. (A streaming proxy may have sent the head of a request whose
    /// body turns out invalid; whether it had is a matter of timing, so a
    /// head without its body counts as not forwarded.)
    Refused(u16),
    /// The node received it whole; the client got this status.
    Forwarded(u16),
    /// The node received bytes that are not valid HTTP (a field value with
    /// a NUL, a bare CR); the client got this status (0: none).
    Garbled(u16),
    /// No response and nothing forwarded: the connection just closed.
    Closed,
}

use Outcome::*;

/// Cases whose connection is read to its end: a request smuggled behind
/// them would be answered (and recorded by the node) before the close.
pub const READ_TO_CLOSE: &[&str] = &["cl-te-smuggle"];

/// One malformed request.
pub struct Case {
    pub name: &'static str,
    pub bytes: Vec<u8>,
    /// Every outcome the RFC allows; rdmalb's must be one of them.
    pub accept: &'static [Outcome],
    /// Where the RFC says so.
    pub rfc: &'static str,
}

/// A difference between rdmalb and HAProxy that the RFCs allow.
pub struct Allowed {
    pub case: &'static str,
    pub rdmalb: Outcome,
    pub haproxy: Outcome,
    pub why: &'static str,
}

/// The allowed differences, found with HAProxy 2.6.12 (Debian 12).
/// Anything else that differs fails the test.
pub const ALLOWED: &[Allowed] = &[
    Allowed {
        case: "te-identity-chunked",
        rdmalb: Refused(501),
        haproxy: Refused(422),
        why: "both refuse; RFC 9112 6.1 says 501 for a coding the server does not understand (rdmalb), HAProxy picks 422",
    },
    Allowed {
        case: "te-obs-fold",
        rdmalb: Refused(400),
        haproxy: Forwarded(200),
        why: "RFC 9112 5.2: obs-fold is rejected (rdmalb) or replaced by SP (HAProxy, which then frames by chunked)",
    },
    Allowed {
        case: "obs-fold",
        rdmalb: Refused(400),
        haproxy: Forwarded(200),
        why: "RFC 9112 5.2: obs-fold is rejected (rdmalb) or replaced by SP (HAProxy)",
    },
    Allowed {
        case: "te-http10",
        rdmalb: Refused(400),
        haproxy: Forwarded(200),
        why: "RFC 9112 6.1: faulty framing; rdmalb (hyper) rejects it, HAProxy processes it and closes",
    },
    Allowed {
        case: "nul-in-value",
        rdmalb: Refused(400),
        haproxy: Garbled(502),
        why: "RFC 9110 5.5: a NUL MUST be rejected or replaced; rdmalb rejects, HAProxy 2.6 forwards it (HAProxy's deviation)",
    },
    Allowed {
        case: "oversized-field",
        rdmalb: Refused(431),
        haproxy: Refused(400),
        why: "RFC 6585 5: 431 is the precise status, 400 is as valid",
    },
    Allowed {
        case: "too-many-fields",
        rdmalb: Refused(431),
        haproxy: Refused(400),
        why: "RFC 6585 5: 431 is the precise status, 400 is as valid",
    },
    Allowed {
        case: "uri-too-long",
        rdmalb: Refused(431),
        haproxy: Refused(400),
        why: "the head exceeds both buffers; RFC 9110 15.5.15's 414 would be more precise, 400 and 431 refuse it as well",
    },
    Allowed {
        case: "no-host",
        rdmalb: Refused(400),
        haproxy: Forwarded(200),
        why: "RFC 9112 3.2 MUST answer 400 (rdmalb); HAProxy 2.6 forwards it (HAProxy's deviation)",
    },
    Allowed {
        case: "double-space-in-request-line",
        rdmalb: Refused(400),
        haproxy: Forwarded(200),
        why: "RFC 9112 3: a recipient MAY split the request line on any whitespace (HAProxy) or hold to single SP (rdmalb)",
    },
    Allowed {
        case: "http10-get-with-body",
        rdmalb: Forwarded(200),
        haproxy: Refused(413),
        why: "RFC 9110 9.3.1/9.3.5: GET and DELETE content has no defined semantics; HAProxy 2.6 refuses it from HTTP/1.0 clients, rdmalb forwards it framed by its Content-Length",
    },
    Allowed {
        case: "absolute-form-host-mismatch",
        rdmalb: Forwarded(200),
        haproxy: Refused(400),
        why: "RFC 9112 3.2.2: the authority wins over Host, and a proxy MUST send a Host from it (rdmalb); HAProxy 2.6 refuses the mismatch",
    },
];

const HEAD: &str = "Host: www.example.com\r\n";

/// `POST /m/<name>` with the id header, then `rest` (more header lines,
/// the empty line, a body).
fn post(name: &str, rest: &str) -> Vec<u8> {
    format!("POST /m/{name} HTTP/1.1\r\n{HEAD}X-Diff-Id: m-{name}\r\n{rest}").into_bytes()
}

/// The malformed requests, in sending order.
pub fn cases() -> Vec<Case> {
    let big = "a".repeat(20_000);
    let mut many = String::new();
    for i in 0..150 {
        many.push_str(&format!("X-Many-{i}: v\r\n"));
    }
    let rfc_te = "RFC 9112 6.3 (4): chunked not the final coding of a request: 400 and close";
    let rfc_cl = "RFC 9110 8.6, RFC 9112 6.3 (5): Content-Length = 1*DIGIT; an invalid one is 400";
    let rfc_field = "RFC 9112 5, RFC 9110 5.1/5.6.2: a field name is a token, no whitespace before the colon: 400";
    vec![
        Case {
            name: "cl-and-te",
            bytes: post(
                "cl-and-te",
                "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
            ),
            accept: &[Refused(400), Forwarded(200)],
            rfc: "RFC 9112 6.1/6.3 (3): reject, or forward by Transfer-Encoding alone with Content-Length removed, and close",
        },
        Case {
            name: "cl-te-smuggle",
            // By Content-Length the body is `0\r\n\r\n`; by chunked the
            // smuggled request follows it and must never reach the node:
            // the connection closes after such a request.
            bytes: post(
                "cl-te-smuggle",
                "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: www.example.com\r\nX-Diff-Id: m-cl-te-smuggle-smuggled\r\n\r\n",
            ),
            accept: &[Refused(400), Forwarded(200)],
            rfc: "RFC 9112 6.1: the server MUST close the connection after such a request",
        },
        Case {
            name: "cl-two-different",
            bytes: post("cl-two-different", "Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!"),
            accept: &[Refused(400)],
            rfc: rfc_cl,
        },
        Case {
            name: "cl-list-different",
            bytes: post("cl-list-different", "Content-Length: 5, 6\r\n\r\nhello!"),
            accept: &[Refused(400)],
            rfc: rfc_cl,
        },
        Case {
            name: "cl-negative",
            bytes: post("cl-negative", "Content-Length: -5\r\n\r\nhello"),
            accept: &[Refused(400)],
            rfc: rfc_cl,
        },
        Case {
            name: "cl-plus",
            bytes: post("cl-plus", "Content-Length: +5\r\n\r\nhello"),
            accept: &[Refused(400)],
            rfc: rfc_cl,
        },
        Case {
            name: "cl-hex",
            bytes: post("cl-hex", "Content-Length: 0x5\r\n\r\nhello"),
            accept: &[Refused(400)],
            rfc: rfc_cl,
        },
        Case {
            name: "cl-overflow",
            bytes: post("cl-overflow", "Content-Length: 99999999999999999999999\r\n\r\nhello"),
            accept: &[Refused(400), Refused(413)],
            rfc: rfc_cl,
        },
        Case {
            name: "te-chunked-identity",
            bytes: post(
                "te-chunked-identity",
                "Transfer-Encoding: chunked, identity\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
            ),
            accept: &[Refused(400)],
            rfc: rfc_te,
        },
        Case {
            name: "te-xchunked",
            bytes: post("te-xchunked", "Transfer-Encoding: xchunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"),
            accept: &[Refused(400)],
            rfc: rfc_te,
        },
        Case {
            name: "te-identity-chunked",
            bytes: post(
                "te-identity-chunked",
                "Transfer-Encoding: identity, chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
            ),
            accept: &[Refused(501), Refused(400)],
            rfc: "RFC 9112 6.1: a transfer coding the server does not understand: 501 (identity is no longer a coding, RFC 9112 12.3)",
        },
        Case {
            name: "te-chunked-twice",
            bytes: post(
                "te-chunked-twice",
                "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
            ),
            accept: &[Refused(400)],
            rfc: "RFC 9112 6.1: chunked MUST NOT be applied more than once; the framing is invalid",
        },
        Case {
            name: "te-space-before-colon",
            bytes: post(
                "te-space-before-colon",
                "Transfer-Encoding : chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
            ),
            accept: &[Refused(400)],
            rfc: "RFC 9112 5.1: whitespace between a field name and the colon MUST be rejected with 400",
        },
        Case {
            name: "te-obs-fold",
            bytes: post(
                "te-obs-fold",
                "Transfer-Encoding:\r\n chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
            ),
            accept: &[Refused(400), Forwarded(200)],
            rfc: "RFC 9112 5.2: obs-fold is rejected with 400 or replaced by SP",
        },
        Case {
            name: "te-vertical-tab",
            bytes: post(
                "te-vertical-tab",
                "Transfer-Encoding: \x0bchunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
            ),
            accept: &[Refused(400), Refused(501)],
            rfc: "RFC 9110 5.5: VT is not field-vchar (400); as a coding it is unknown (501)",
        },
        Case {
            name: "te-http10",
            bytes: b"POST /m/te-http10 HTTP/1.0\r\nHost: www.example.com\r\nX-Diff-Id: m-te-http10\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n".to_vec(),
            accept: &[Refused(400), Forwarded(200)],
            rfc: "RFC 9112 6.1: Transfer-Encoding in HTTP/1.0 is faulty framing: reject, or process and close",
        },
        Case {
            name: "name-with-space",
            bytes: post("name-with-space", "Bad Header: x\r\n\r\n"),
            accept: &[Refused(400)],
            rfc: rfc_field,
        },
        Case {
            name: "name-with-at",
            bytes: post("name-with-at", "X-Fo@o: x\r\n\r\n"),
            accept: &[Refused(400)],
            rfc: rfc_field,
        },
        Case {
            name: "space-before-colon",
            bytes: post("space-before-colon", "X-A : b\r\n\r\n"),
            accept: &[Refused(400)],
            rfc: rfc_field,
        },
        Case {
            name: "no-colon",
            bytes: post("no-colon", "NoColonHere\r\n\r\n"),
            accept: &[Refused(400)],
            rfc: rfc_field,
        },
        Case {
            name: "nul-in-value",
            bytes: post("nul-in-value", "X-A: a\0b\r\n\r\n"),
            accept: &[Refused(400)],
            rfc: "RFC 9110 5.5: NUL in a field value MUST be rejected or replaced by SP",
        },
        Case {
            name: "bare-cr-in-value",
            bytes: post("bare-cr-in-value", "X-A: a\rb\r\n\r\n"),
            accept: &[Refused(400)],
            rfc: "RFC 9112 2.2: a bare CR is rejected or replaced by SP (the node may not see it)",
        },
        Case {
            name: "bare-lf",
            bytes: b"GET /m/bare-lf HTTP/1.1\nHost: www.example.com\nX-Diff-Id: m-bare-lf\n\n".to_vec(),
            accept: &[Refused(400), Forwarded(200)],
            rfc: "RFC 9112 2.2: a recipient MAY take a bare LF as a line end",
        },
        Case {
            name: "obs-fold",
            bytes: post("obs-fold", "X-A: a\r\n b\r\n\r\n"),
            accept: &[Refused(400), Forwarded(200)],
            rfc: "RFC 9112 5.2: obs-fold is rejected with 400 or replaced by SP",
        },
        Case {
            name: "whitespace-before-first-field",
            bytes: b"GET /m/whitespace-before-first-field HTTP/1.1\r\n Host: evil.example\r\nHost: www.example.com\r\nX-Diff-Id: m-whitespace-before-first-field\r\n\r\n".to_vec(),
            accept: &[Refused(400), Forwarded(200)],
            rfc: "RFC 9112 2.2: reject, or ignore every whitespace-preceded line",
        },
        Case {
            name: "oversized-field",
            bytes: post("oversized-field", &format!("X-Big: {big}\r\n\r\n")),
            accept: &[Refused(431), Refused(400)],
            rfc: "RFC 6585 5: 431 (MAY; 400 is as valid)",
        },
        Case {
            name: "too-many-fields",
            bytes: post("too-many-fields", &format!("{many}\r\n")),
            accept: &[Refused(431), Refused(400)],
            rfc: "RFC 6585 5: 431 (MAY; 400 is as valid)",
        },
        Case {
            name: "uri-too-long",
            bytes: format!("GET /m/{big} HTTP/1.1\r\n{HEAD}X-Diff-Id: m-uri-too-long\r\n\r\n")
                .into_bytes(),
            accept: &[Refused(414), Refused(400), Refused(431)],
            rfc: "RFC 9110 15.5.15: 414 (SHOULD-level; a too large head is 400/431 too)",
        },
        Case {
            name: "no-host",
            bytes: b"GET /m/no-host HTTP/1.1\r\nX-Diff-Id: m-no-host\r\n\r\n".to_vec(),
            accept: &[Refused(400)],
            rfc: "RFC 9112 3.2: an HTTP/1.1 request without Host MUST get 400",
        },
        Case {
            name: "two-hosts",
            bytes: post("two-hosts", "Host: evil.example\r\n\r\n"),
            accept: &[Refused(400)],
            rfc: "RFC 9112 3.2: more than one Host MUST get 400",
        },
        Case {
            name: "cl-same-twice",
            bytes: post("cl-same-twice", "Content-Length: 5\r\nContent-Length: 5\r\n\r\nhello"),
            accept: &[Refused(400), Forwarded(200)],
            rfc: "RFC 9110 8.6: identical Content-Length lines MAY be taken as one value or rejected",
        },
        Case {
            name: "absolute-form-host-mismatch",
            bytes: b"GET http://www.example.com/m/abs HTTP/1.1\r\nHost: other.example\r\nX-Diff-Id: m-absolute-form-host-mismatch\r\n\r\n".to_vec(),
            accept: &[Forwarded(200), Refused(400)],
            rfc: "RFC 9112 3.2.2: the target's authority wins over Host; a proxy sends a Host made from it",
        },
        Case {
            name: "http10-get-with-body",
            bytes: b"GET /m/http10-get-with-body HTTP/1.0\r\nHost: www.example.com\r\nX-Diff-Id: m-http10-get-with-body\r\nContent-Length: 5\r\n\r\nhello".to_vec(),
            accept: &[Forwarded(200), Refused(413), Refused(400)],
            rfc: "RFC 9110 9.3.1: content in a GET has no defined semantics; it may be forwarded or refused",
        },
        Case {
            name: "double-space-in-request-line",
            bytes: b"GET  /m/double-space HTTP/1.1\r\nHost: www.example.com\r\nX-Diff-Id: m-double-space-in-request-line\r\n\r\n".to_vec(),
            accept: &[Refused(400), Forwarded(200)],
            rfc: "RFC 9112 3: single SP, though a recipient MAY split on any whitespace",
        },
        Case {
            name: "bad-version",
            bytes: b"GET /m/bad-version HTTP/1.x\r\nHost: www.example.com\r\nX-Diff-Id: m-bad-version\r\n\r\n".to_vec(),
            accept: &[Refused(400)],
            rfc: "RFC 9112 2.3: HTTP-version = HTTP/DIGIT.DIGIT",
        },
        Case {
            name: "bad-method-char",
            bytes: b"GE(T /m/bad-method-char HTTP/1.1\r\nHost: www.example.com\r\nX-Diff-Id: m-bad-method-char\r\n\r\n".to_vec(),
            accept: &[Refused(400)],
            rfc: "RFC 9110 9.1: method = token",
        },
        Case {
            name: "bad-chunk-size",
            bytes: post("bad-chunk-size", "Transfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n"),
            accept: &[Refused(400)],
            rfc: "RFC 9112 7.1: chunk-size = 1*HEXDIG",
        },
        Case {
            name: "chunk-size-overflow",
            bytes: post(
                "chunk-size-overflow",
                "Transfer-Encoding: chunked\r\n\r\nfffffffffffffffffff1\r\nhello\r\n0\r\n\r\n",
            ),
            accept: &[Refused(400), Refused(413)],
            rfc: "RFC 9112 7.1: a chunk size the recipient cannot hold is an error",
        },
    ]
}
