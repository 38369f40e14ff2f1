//! The decoder against the examples of HAProxy's `proxy-protocol.txt`,
//! round trips of the encoder, and malformed input of every kind: every
//! prefix of a valid header asks for more, every corruption is refused,
//! and nothing panics.

use super::*;
use crate::config::SendProxy;

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

fn proxied(src: &str, dst: &str) -> Header {
    Header::Proxied {
        source: addr(src),
        destination: addr(dst),
    }
}

#[test]
fn v1_tcp4_tcp6_and_unknown() {
    let line = b"PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\nGET / HTTP/1.1\r\n";
    assert_eq!(
        parse(line).unwrap(),
        Some((proxied("192.168.0.1:56324", "192.168.0.11:443"), 47))
    );
    let line = b"PROXY TCP6 ffff:f...f:ffff ffff:f...f:ffff 65535 65535\r\n";
    assert!(matches!(parse(line), Err(HeaderError::V1Address(_))));
    let line = b"PROXY TCP6 2001:db8::1 ::1 65535 0\r\n";
    assert_eq!(
        parse(line).unwrap(),
        Some((proxied("[2001:db8::1]:65535", "[::1]:0"), line.len()))
    );
    assert_eq!(
        parse(b"PROXY UNKNOWN\r\n").unwrap(),
        Some((Header::Local, 15))
    );
    // UNKNOWN: the rest of the line is ignored.
    let line = b"PROXY UNKNOWN ffff:f...f:ffff ffff:f...f:ffff 65535 65535\r\n";
    assert_eq!(parse(line).unwrap(), Some((Header::Local, line.len())));
}

#[test]
fn v1_longest_line_is_accepted_and_one_more_byte_refused() {
    let longest = format!(
        "PROXY UNKNOWN {}\r\n",
        "x".repeat(V1_MAX - "PROXY UNKNOWN \r\n".len())
    );
    assert_eq!(longest.len(), V1_MAX);
    assert_eq!(
        parse(longest.as_bytes()).unwrap(),
        Some((Header::Local, V1_MAX))
    );
    let too_long = format!(
        "PROXY UNKNOWN {}\r\n",
        "x".repeat(V1_MAX + 1 - "PROXY UNKNOWN \r\n".len())
    );
    assert_eq!(parse(too_long.as_bytes()), Err(HeaderError::V1TooLong));
    // Refused as soon as 107 bytes without a line end are in.
    assert_eq!(
        parse(&[b"PROXY ".as_slice(), &[b'1'; V1_MAX]].concat()),
        Err(HeaderError::V1TooLong)
    );
}

#[test]
fn v1_malformed_lines_are_refused() {
    let cases: &[(&[u8], HeaderError)] = &[
        (b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n", HeaderError::V1BareLf),
        (
            b"PROXY TCP5 1.2.3.4 5.6.7.8 1 2\r\n",
            HeaderError::V1Protocol("TCP5".into()),
        ),
        (
            b"PROXY tcp4 1.2.3.4 5.6.7.8 1 2\r\n",
            HeaderError::V1Protocol("tcp4".into()),
        ),
        (
            b"PROXY  TCP4 1.2.3.4 5.6.7.8 1 2\r\n",
            HeaderError::V1Protocol("".into()),
        ),
        (
            b"PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n",
            HeaderError::V1Fields(3),
        ),
        (
            b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2 3\r\n",
            HeaderError::V1Fields(5),
        ),
        (
            b"PROXY TCP4 1.2.3.4  5.6.7.8 1 2\r\n",
            HeaderError::V1Fields(5),
        ),
        (
            b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2 \r\n",
            HeaderError::V1Fields(5),
        ),
        (
            b"PROXY TCP4 ::1 5.6.7.8 1 2\r\n",
            HeaderError::V1Address("::1".into()),
        ),
        (
            b"PROXY TCP6 1.2.3.4 ::1 1 2\r\n",
            HeaderError::V1Address("1.2.3.4".into()),
        ),
        (
            b"PROXY TCP4 1.2.3.256 5.6.7.8 1 2\r\n",
            HeaderError::V1Address("1.2.3.256".into()),
        ),
        (
            b"PROXY TCP4 01.2.3.4 5.6.7.8 1 2\r\n",
            HeaderError::V1Address("01.2.3.4".into()),
        ),
        (
            b"PROXY TCP4 1.2.3.4 5.6.7.8 65536 2\r\n",
            HeaderError::V1Port("65536".into()),
        ),
        (
            b"PROXY TCP4 1.2.3.4 5.6.7.8 080 2\r\n",
            HeaderError::V1Port("080".into()),
        ),
        (
            b"PROXY TCP4 1.2.3.4 5.6.7.8 -1 2\r\n",
            HeaderError::V1Port("-1".into()),
        ),
        (
            b"PROXY TCP4 1.2.3.4 5.6.7.8 +1 2\r\n",
            HeaderError::V1Port("+1".into()),
        ),
        (
            b"PROXY TCP4 1.2.3.4 5.6.7.8 1 \r\n",
            HeaderError::V1Port("".into()),
        ),
        (
            b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r\r\n",
            HeaderError::V1NotAscii,
        ),
        (
            b"PROXY TCP4 1.2.3.4 5.6.7.8 1\t2\r\n",
            HeaderError::V1NotAscii,
        ),
        (
            "PROXY TCP4 1.2.3.4 5.6.7.8 1 \u{e9}\r\n".as_bytes(),
            HeaderError::V1NotAscii,
        ),
        (b"PROXY \0", HeaderError::V1NotAscii),
        (b"PROXY \xff", HeaderError::V1NotAscii),
        (
            b"proxy TCP4 1.2.3.4 5.6.7.8 1 2\r\n",
            HeaderError::Signature,
        ),
        (b"GET / HTTP/1.1\r\nHost: a\r\n\r\n", HeaderError::Signature),
        (b"\x16\x03\x01\x02\x00", HeaderError::Signature),
        (b"PRI * HTTP/2.0\r\n", HeaderError::Signature),
    ];
    for (input, want) in cases {
        assert_eq!(
            parse(input).as_ref(),
            Err(want),
            "{:?}",
            String::from_utf8_lossy(input)
        );
    }
}

fn v2(ver_cmd: u8, family: u8, block: &[u8]) -> Vec<u8> {
    let mut out = V2_SIGNATURE.to_vec();
    out.push(ver_cmd);
    out.push(family);
    out.extend_from_slice(&u16::try_from(block.len()).unwrap().to_be_bytes());
    out.extend_from_slice(block);
    out
}

#[test]
fn v2_inet_inet6_local_unspec_unix_and_tlvs() {
    let block = [127, 0, 0, 2, 127, 0, 0, 1, 0x30, 0x39, 0x01, 0xbb];
    let h = v2(0x21, 0x11, &block);
    assert_eq!(
        parse(&h).unwrap(),
        Some((proxied("127.0.0.2:12345", "127.0.0.1:443"), 28))
    );
    // TLVs after the addresses are skipped; the bytes after are not ours.
    let mut with_tlv = block.to_vec();
    with_tlv.extend_from_slice(&[0x04, 0x00, 0x02, 0xab, 0xcd]);
    let mut h = v2(0x21, 0x11, &with_tlv);
    h.extend_from_slice(b"GET / HTTP/1.1\r\n");
    assert_eq!(
        parse(&h).unwrap(),
        Some((proxied("127.0.0.2:12345", "127.0.0.1:443"), 16 + 17))
    );
    let mut block6 = Vec::new();
    block6.extend_from_slice(&"2001:db8::7".parse::<Ipv6Addr>().unwrap().octets());
    block6.extend_from_slice(&Ipv6Addr::LOCALHOST.octets());
    block6.extend_from_slice(&[0xff, 0xff, 0x00, 0x50]);
    assert_eq!(
        parse(&v2(0x21, 0x21, &block6)).unwrap(),
        Some((proxied("[2001:db8::7]:65535", "[::1]:80"), 52))
    );
    // LOCAL: addresses ignored, whatever the family says.
    assert_eq!(
        parse(&v2(0x20, 0x11, &block)).unwrap(),
        Some((Header::Local, 28))
    );
    assert_eq!(
        parse(&v2(0x20, 0x00, &[])).unwrap(),
        Some((Header::Local, 16))
    );
    // PROXY over AF_UNSPEC or AF_UNIX: the real peer stands.
    assert_eq!(
        parse(&v2(0x21, 0x00, &[])).unwrap(),
        Some((Header::Local, 16))
    );
    assert_eq!(
        parse(&v2(0x21, 0x31, &[0; 216])).unwrap(),
        Some((Header::Local, 232))
    );
}

#[test]
fn v2_malformed_headers_are_refused() {
    let block = [1, 2, 3, 4, 5, 6, 7, 8, 0, 1, 0, 2];
    let cases: Vec<(Vec<u8>, HeaderError)> = vec![
        (v2(0x11, 0x11, &block), HeaderError::V2Version(1)),
        (v2(0x31, 0x11, &block), HeaderError::V2Version(3)),
        (v2(0x22, 0x11, &block), HeaderError::V2Command(2)),
        (v2(0x2f, 0x11, &block), HeaderError::V2Command(15)),
        (v2(0x21, 0x12, &block), HeaderError::V2Family(0x12)),
        (v2(0x21, 0x41, &block), HeaderError::V2Family(0x41)),
        (
            v2(0x21, 0x11, &block[..11]),
            HeaderError::V2Short {
                length: 11,
                needed: 12,
            },
        ),
        (
            v2(0x21, 0x21, &block),
            HeaderError::V2Short {
                length: 12,
                needed: 36,
            },
        ),
        (
            v2(0x21, 0x31, &block),
            HeaderError::V2Short {
                length: 12,
                needed: 216,
            },
        ),
        (
            v2(0x21, 0x11, &[0; V2_MAX_BLOCK + 1]),
            HeaderError::V2TooLong(V2_MAX_BLOCK + 1),
        ),
        // A length field of 65535 is refused before waiting for the bytes.
        (
            [V2_SIGNATURE.as_slice(), &[0x21, 0x11, 0xff, 0xff]].concat(),
            HeaderError::V2TooLong(65535),
        ),
        // Signature with one byte wrong.
        (
            [
                b"\r\n\r\n\0\r\nQUIT\r".as_slice(),
                &[0x21, 0x11, 0, 12],
                &block,
            ]
            .concat(),
            HeaderError::Signature,
        ),
    ];
    for (input, want) in cases {
        assert_eq!(parse(&input), Err(want.clone()), "{input:02x?}");
    }
    // The version byte is checked as soon as it arrives.
    assert_eq!(
        parse(&[V2_SIGNATURE.as_slice(), &[0x10]].concat()),
        Err(HeaderError::V2Version(1))
    );
}

#[test]
fn every_prefix_of_a_valid_header_asks_for_more() {
    let headers: Vec<Vec<u8>> = vec![
        b"PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\n".to_vec(),
        b"PROXY UNKNOWN\r\n".to_vec(),
        encode(SendProxy::V2, addr("10.0.0.1:1"), addr("10.0.0.2:2")),
        encode(SendProxy::V2, addr("[::1]:1"), addr("[::2]:2")),
    ];
    for h in headers {
        for cut in 0..h.len() {
            assert_eq!(parse(&h[..cut]), Ok(None), "{:?} cut at {cut}", &h[..cut]);
        }
        assert!(matches!(parse(&h), Ok(Some((_, n))) if n == h.len()));
    }
}

#[test]
fn local_headers_parse_as_local() {
    for v in [SendProxy::V1, SendProxy::V2] {
        let h = encode_local(v);
        assert_eq!(parse(h).unwrap(), Some((Header::Local, h.len())), "{v:?}");
    }
}

#[test]
fn encode_round_trips_both_versions_and_families() {
    let pairs = [
        ("127.0.0.2:40000", "127.0.0.1:8080"),
        ("[2001:db8::1]:1", "[::1]:443"),
        ("0.0.0.0:0", "255.255.255.255:65535"),
    ];
    for (src, dst) in pairs {
        for version in [SendProxy::V1, SendProxy::V2] {
            let bytes = encode(version, addr(src), addr(dst));
            assert_eq!(
                parse(&bytes).unwrap(),
                Some((proxied(src, dst), bytes.len())),
                "{version:?} {src} {dst}"
            );
        }
    }
    assert_eq!(
        encode(SendProxy::V1, addr("127.0.0.2:5"), addr("127.0.0.1:6")),
        b"PROXY TCP4 127.0.0.2 127.0.0.1 5 6\r\n"
    );
    // Mixed families go as IPv6; a mapped address next to IPv4 as IPv4.
    assert_eq!(
        encode(SendProxy::V1, addr("1.2.3.4:5"), addr("[::1]:6")),
        b"PROXY TCP6 ::ffff:1.2.3.4 ::1 5 6\r\n"
    );
    assert_eq!(
        encode(SendProxy::V1, addr("[::ffff:1.2.3.4]:5"), addr("5.6.7.8:6")),
        b"PROXY TCP4 1.2.3.4 5.6.7.8 5 6\r\n"
    );
}

/// A cheap fuzz: corrupt, truncate and extend valid headers with a seeded
/// generator; the decoder must never panic, and a header it accepts must
/// fit in what it was given.
#[test]
fn random_corruptions_never_panic() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(13);
    let seeds: Vec<Vec<u8>> = vec![
        b"PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\n".to_vec(),
        b"PROXY TCP6 2001:db8::1 ::1 65535 0\r\n".to_vec(),
        encode(SendProxy::V2, addr("10.0.0.1:1"), addr("10.0.0.2:2")),
        encode(SendProxy::V2, addr("[::1]:1"), addr("[::2]:2")),
        v2(0x21, 0x31, &[0; 216]),
    ];
    for _ in 0..20_000 {
        let mut h = seeds[rng.gen_range(0..seeds.len())].clone();
        for _ in 0..rng.gen_range(1..4) {
            match rng.gen_range(0..4) {
                0 if !h.is_empty() => {
                    let i = rng.gen_range(0..h.len());
                    h[i] = rng.gen();
                }
                1 => h.truncate(rng.gen_range(0..=h.len())),
                2 => h.extend((0..rng.gen_range(0..200)).map(|_| rng.gen::<u8>())),
                _ => {
                    let i = rng.gen_range(0..=h.len());
                    h.insert(i, rng.gen());
                }
            }
        }
        if let Ok(Some((_, n))) = parse(&h) {
            assert!(n <= h.len());
        }
    }
}
