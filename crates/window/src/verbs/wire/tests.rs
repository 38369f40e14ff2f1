use super::*;
use proptest::prelude::*;

fn endpoint(seed: u8) -> QpEndpoint {
    QpEndpoint {
        qpn: 0x11 + u32::from(seed),
        psn: 0xabcdef,
        lid: 7,
        mtu: 3,
        gid_index: 1,
        rd_atomic: 16,
        gid: [seed; 16],
    }
}

#[test]
fn request_round_trip() {
    let r = ConnectRequest {
        proxy_id: 42,
        qp: endpoint(9),
    };
    assert_eq!(ConnectRequest::decode(&r.encode()), Ok(r));
}

#[test]
fn reply_round_trip() {
    let r = ConnectReply {
        qp: endpoint(3),
        read_region: RegionInfo {
            addr: 0x7f00_0000_1000,
            rkey: 0x1234,
            len: 256,
        },
        atomic_region: RegionInfo {
            addr: 0x7f00_0000_1100,
            rkey: 0x5678,
            len: 1280,
        },
    };
    assert_eq!(Answer::decode(&r.encode()), Ok(Answer::Reply(r)));
}

#[test]
fn refusal_round_trip_and_truncation() {
    let r = Refusal {
        reason: "too many queue pairs".into(),
    };
    assert_eq!(Answer::decode(&r.encode()), Ok(Answer::Refused(r)));
    let long = Refusal {
        reason: "é".repeat(2000),
    };
    let enc = long.encode();
    assert!(enc.len() <= MAX_PAYLOAD);
    match Answer::decode(&enc) {
        Ok(Answer::Refused(r)) => {
            assert!(r.reason.len() < 2000 && r.reason.chars().all(|c| c == 'é'))
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn rejects_bad_magic_version_type_and_truncation() {
    let good = ConnectRequest {
        proxy_id: 1,
        qp: endpoint(1),
    }
    .encode();
    let mut bad = good.clone();
    bad[0] = b'X';
    assert!(matches!(
        ConnectRequest::decode(&bad),
        Err(WireError::BadMagic(_))
    ));
    let mut bad = good.clone();
    bad[4] = 9;
    assert_eq!(ConnectRequest::decode(&bad), Err(WireError::Version(9)));
    assert_eq!(Answer::decode(&good), Err(WireError::Type(TYPE_REQUEST)));
    for n in 0..good.len() {
        assert!(
            ConnectRequest::decode(&good[..n]).is_err(),
            "prefix {n} accepted"
        );
    }
}

#[test]
fn frames_round_trip_and_reject_bad_lengths() {
    let mut buf = Vec::new();
    write_frame(&mut buf, b"hello").unwrap();
    assert_eq!(read_frame(&mut &buf[..]).unwrap(), b"hello");
    assert!(read_frame(&mut &[0u8, 0][..]).is_err());
    assert!(read_frame(&mut &[0xffu8, 0xff][..]).is_err());
    assert!(write_frame(&mut Vec::new(), &[]).is_err());
    assert!(write_frame(&mut Vec::new(), &[0; MAX_PAYLOAD + 1]).is_err());
}

proptest! {
    #[test]
    fn decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = ConnectRequest::decode(&bytes);
        let _ = Answer::decode(&bytes);
        let _ = read_frame(&mut &bytes[..]);
    }

    #[test]
    fn decoders_never_panic_with_valid_header(tail in proptest::collection::vec(any::<u8>(), 0..120), kind in 0u8..5) {
        let mut v = header(kind);
        v.extend_from_slice(&tail);
        let _ = ConnectRequest::decode(&v);
        let _ = Answer::decode(&v);
    }
}
