use super::*;
use std::io::Read;

fn hv(s: &'static str) -> HeaderValue {
    HeaderValue::from_static(s)
}

const ALL: [Coding; 3] = [Coding::Zstd, Coding::Brotli, Coding::Gzip];

fn neg(values: &[&'static str], offered: &[Coding]) -> Option<Coding> {
    let v: Vec<HeaderValue> = values.iter().map(|s| hv(s)).collect();
    negotiate(v.iter(), offered)
}

#[test]
fn negotiation_follows_q_values_then_the_servers_order() {
    assert_eq!(neg(&["gzip, deflate, br, zstd"], &ALL), Some(Coding::Zstd));
    assert_eq!(neg(&["gzip, deflate, br"], &ALL), Some(Coding::Brotli));
    assert_eq!(neg(&["gzip;q=1.0, br;q=0.5"], &ALL), Some(Coding::Gzip));
    assert_eq!(neg(&["br;q=0.9", "gzip;Q=0.95"], &ALL), Some(Coding::Gzip));
    assert_eq!(neg(&["x-gzip"], &ALL), Some(Coding::Gzip));
    assert_eq!(neg(&["GZIP"], &[Coding::Gzip]), Some(Coding::Gzip));
    // `*` covers what is not listed; q=0 refuses.
    assert_eq!(neg(&["*"], &ALL), Some(Coding::Zstd));
    assert_eq!(neg(&["*;q=0.5, zstd;q=0"], &ALL), Some(Coding::Brotli));
    assert_eq!(neg(&["gzip;q=0, *;q=0"], &ALL), None);
    assert_eq!(neg(&["identity"], &ALL), None);
    assert_eq!(neg(&[""], &ALL), None);
    assert_eq!(neg(&[], &ALL), None);
    // Only what the site offers.
    assert_eq!(neg(&["br, zstd"], &[Coding::Gzip]), None);
    // A malformed weight drops the element (RFC 9110's qvalue grammar).
    assert_eq!(neg(&["zstd;q=2, gzip"], &ALL), Some(Coding::Gzip));
    assert_eq!(
        neg(&["zstd;q=0.1234, gzip;q=0.001"], &ALL),
        Some(Coding::Gzip)
    );
    assert_eq!(
        neg(&["zstd;q=1.001, br;q=1.000"], &ALL),
        Some(Coding::Brotli)
    );
}

#[test]
fn qvalues() {
    assert_eq!(qvalue(b"0"), Some(0));
    assert_eq!(qvalue(b"0.5"), Some(500));
    assert_eq!(qvalue(b"0.125"), Some(125));
    assert_eq!(qvalue(b"1"), Some(1000));
    assert_eq!(qvalue(b"1.0"), Some(1000));
    for bad in [&b"1.5"[..], b"2", b"0.1234", b"", b".5", b"0.x", b"01"] {
        assert_eq!(qvalue(bad), None, "{:?}", String::from_utf8_lossy(bad));
    }
}

fn conf() -> Compression {
    Compression {
        codings: ALL.to_vec(),
        types: vec![
            "text/html".into(),
            "application/json".into(),
            "text/*".into(),
        ],
        min_size: 100,
        level: 3,
        offload: false,
    }
}

fn head(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.append(*k, hv(v));
    }
    h
}

fn gets_zstd() -> Offer {
    let req = head(&[("accept-encoding", "gzip, zstd")]);
    offer(&conf(), &Method::GET, Version::HTTP_11, &req)
}

#[test]
fn a_compressible_response_is_rewritten_for_its_coding() {
    let mut h = head(&[
        ("content-type", "Text/HTML; charset=utf-8"),
        ("content-length", "5000"),
        ("accept-ranges", "bytes"),
        ("etag", "\"abc\""),
        ("vary", "Cookie"),
    ]);
    let d = choose(&conf(), gets_zstd(), false, StatusCode::OK, &mut h);
    assert_eq!(d, Decision::Encode(Coding::Zstd));
    assert_eq!(h["content-encoding"], "zstd");
    assert!(!h.contains_key("content-length") && !h.contains_key("accept-ranges"));
    assert_eq!(h["etag"], "W/\"abc\"");
    let vary: Vec<_> = h.get_all("vary").iter().collect();
    assert_eq!(vary, [&hv("Cookie"), &hv("Accept-Encoding")]);
}

#[test]
fn what_is_never_compressed() {
    let c = conf();
    type Pairs = &'static [(&'static str, &'static str)];
    let cases: [(&str, StatusCode, Pairs); 8] = [
        (
            "206",
            StatusCode::PARTIAL_CONTENT,
            &[("content-type", "text/html")],
        ),
        (
            "304",
            StatusCode::NOT_MODIFIED,
            &[("content-type", "text/html")],
        ),
        (
            "encoded",
            StatusCode::OK,
            &[("content-type", "text/html"), ("content-encoding", "br")],
        ),
        (
            "no-transform",
            StatusCode::OK,
            &[
                ("content-type", "text/html"),
                ("cache-control", "public, No-Transform"),
            ],
        ),
        (
            "short",
            StatusCode::OK,
            &[("content-type", "text/html"), ("content-length", "99")],
        ),
        ("image", StatusCode::OK, &[("content-type", "image/png")]),
        ("no type", StatusCode::OK, &[]),
        ("texts/x", StatusCode::OK, &[("content-type", "texts/x")]),
    ];
    for (what, status, pairs) in cases {
        let mut h = head(pairs);
        assert_eq!(
            choose(&c, gets_zstd(), false, status, &mut h),
            Decision::No,
            "{what}"
        );
        assert!(!h.contains_key("vary"), "{what}");
    }
    // HEAD and HTTP/1.0 requests.
    let req = head(&[("accept-encoding", "gzip")]);
    for (m, v) in [
        (Method::HEAD, Version::HTTP_11),
        (Method::GET, Version::HTTP_10),
    ] {
        let o = offer(&c, &m, v, &req);
        let mut h = head(&[("content-type", "text/html")]);
        assert_eq!(choose(&c, o, false, StatusCode::OK, &mut h), Decision::No);
    }
}

#[test]
fn star_lists_every_type_but_multipart() {
    let c = Compression {
        types: vec!["*/*".into()],
        ..conf()
    };
    for pairs in [&[("content-type", "image/png")][..], &[]] {
        let mut h = head(pairs);
        assert_eq!(
            choose(&c, gets_zstd(), false, StatusCode::OK, &mut h),
            Decision::Encode(Coding::Zstd),
            "{pairs:?}"
        );
    }
    let mut h = head(&[("content-type", "Multipart/byteranges; boundary=x")]);
    assert_eq!(
        choose(&c, gets_zstd(), false, StatusCode::OK, &mut h),
        Decision::No
    );
}

#[test]
fn a_candidate_sent_as_it_is_still_varies() {
    let c = conf();
    let plain = offer(&c, &Method::GET, Version::HTTP_11, &HeaderMap::new());
    let mut h = head(&[("content-type", "text/plain"), ("content-length", "5000")]);
    assert_eq!(
        choose(&c, plain, false, StatusCode::OK, &mut h),
        Decision::Identity
    );
    assert_eq!(h["vary"], "Accept-Encoding");
    assert_eq!(h["content-length"], "5000");
    // Over the CPU cap: the same, for a client that accepts a coding.
    let mut h = head(&[("content-type", "text/plain"), ("vary", "accept-encoding")]);
    assert_eq!(
        choose(&c, gets_zstd(), true, StatusCode::OK, &mut h),
        Decision::Identity
    );
    assert_eq!(h.get_all("vary").iter().count(), 1);
}

fn decode(coding: Coding, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    match coding {
        Coding::Gzip => {
            flate2::read::GzDecoder::new(data)
                .read_to_end(&mut out)
                .unwrap();
        }
        Coding::Brotli => {
            brotli::Decompressor::new(data, 4096)
                .read_to_end(&mut out)
                .unwrap();
        }
        Coding::Zstd => {
            out = zstd::stream::decode_all(data).unwrap();
        }
    }
    out
}

#[test]
fn every_coding_round_trips_in_pieces_with_flushes() {
    let text: Vec<u8> = (0..200_000u32)
        .flat_map(|i| format!("line {i} of a text that compresses\n").into_bytes())
        .take(300_000)
        .collect();
    for coding in ALL {
        for level in [1, 3, 9] {
            let mut e = Encoder::new(coding, level).unwrap();
            let mut out = Vec::new();
            for (i, piece) in text.chunks(7_919).enumerate() {
                out.extend_from_slice(&e.write(piece).unwrap());
                if i % 5 == 0 {
                    assert!(e.unflushed());
                    let flushed = e.flush().unwrap();
                    out.extend_from_slice(&flushed);
                    // What was flushed decodes to a prefix of the input.
                    assert!(!e.unflushed());
                }
            }
            out.extend_from_slice(&e.finish().unwrap());
            assert_eq!(decode(coding, &out), text, "{coding:?} level {level}");
            assert_eq!(e.bytes_in, text.len() as u64);
            assert_eq!(e.bytes_out, out.len() as u64);
            assert!(
                out.len() < text.len() / 4,
                "{coding:?} level {level}: {}",
                out.len()
            );
        }
    }
}

#[test]
fn an_empty_body_is_a_valid_stream() {
    for coding in ALL {
        let mut e = Encoder::new(coding, 3).unwrap();
        let out = e.finish().unwrap();
        assert_eq!(decode(coding, &out), b"");
        assert!(e.write(b"x").is_err());
    }
}

#[test]
fn pooled_states_start_clean() {
    for coding in [Coding::Gzip, Coding::Zstd] {
        // One cut mid-stream, then two whole ones: each decodes alone.
        let mut cut = Encoder::new(coding, 2).unwrap();
        cut.write(&[b'a'; 5000]).unwrap();
        drop(cut);
        for text in [&b"first"[..], b"the second response, longer"] {
            let mut e = Encoder::new(coding, 2).unwrap();
            let mut out = e.write(text).unwrap().to_vec();
            out.extend_from_slice(&e.flush().unwrap());
            out.extend_from_slice(&e.finish().unwrap());
            assert_eq!(decode(coding, &out), text, "{coding:?}");
        }
        let pooled = POOL.with(|p| {
            p.borrow()
                .iter()
                .filter(|(c, l, _)| *c == coding && *l == 2)
                .count()
        });
        assert_eq!(pooled, 1, "{coding:?}");
    }
}
