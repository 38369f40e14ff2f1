use super::*;
use proptest::prelude::*;

fn with_tag(frame: &Frame) -> Vec<u8> {
    let mut v = Vec::new();
    encode_unsealed(frame, &mut v);
    v.extend_from_slice(&[0xAB; TAG_LEN]);
    v
}

fn message() -> impl Strategy<Value = Message> {
    prop_oneof![
        Just(Message::Request(Request::Read)),
        any::<u32>().prop_map(|word| Message::Request(Request::ReadWord { word })),
        (any::<u32>(), any::<u64>(), any::<u64>()).prop_map(|(word, expected, new)| {
            Message::Request(Request::Cas {
                word,
                expected,
                new,
            })
        }),
        (any::<u32>(), any::<u64>())
            .prop_map(|(word, delta)| Message::Request(Request::Faa { word, delta })),
        proptest::array::uniform32(any::<u64>()).prop_map(|w| Message::Reply(Reply::Block(w))),
        any::<u64>().prop_map(|v| Message::Reply(Reply::Word(v))),
        (1u16..=3, any::<u32>()).prop_map(|(c, word)| Message::Reply(Reply::Error {
            code: ErrorCode::from_wire(c),
            word
        })),
    ]
}

proptest! {
    #[test]
    fn round_trip(id in any::<u32>(), msg in message()) {
        let f = Frame { id, msg };
        let bytes = with_tag(&f);
        let d = decode(&bytes).unwrap().unwrap();
        prop_assert_eq!(d.frame, f);
        prop_assert_eq!(d.consumed, bytes.len());
        prop_assert_eq!(d.tag, &[0xAB; TAG_LEN][..]);
        prop_assert_eq!(d.authenticated.len(), bytes.len() - TAG_LEN);
        // Every strict prefix asks for more bytes, never errors or panics.
        for cut in 0..bytes.len() {
            prop_assert_eq!(decode(&bytes[..cut]), Ok(None));
        }
    }

    /// The never-panic property, also covered by the fuzz target.
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        if let Ok(Some(d)) = decode(&bytes) {
            prop_assert!(d.consumed <= bytes.len());
            prop_assert_eq!(d.tag.len(), TAG_LEN);
        }
    }

    /// Random bytes behind a plausible header (a valid length and kind)
    /// reach the body parser too.
    #[test]
    fn random_bodies_never_panic(kind in prop_oneof![Just(1u8), Just(2), Just(3), Just(4), Just(0x81), Just(0x82), Just(0xE0), any::<u8>()],
                                 len in 0u32..300, tail in proptest::collection::vec(any::<u8>(), 0..300)) {
        let mut bytes = len.to_le_bytes().to_vec();
        bytes.push(kind);
        bytes.extend_from_slice(&tail);
        let _ = decode(&bytes);
    }
}

#[test]
fn rejects_bad_lengths_and_kinds() {
    assert_eq!(decode(&[]), Ok(None));
    assert_eq!(
        decode(&0u32.to_le_bytes()),
        Err(FrameError::LengthOutOfRange(0))
    );
    assert_eq!(
        decode(&u32::MAX.to_le_bytes()),
        Err(FrameError::LengthOutOfRange(u32::MAX))
    );
    let mut b = 21u32.to_le_bytes().to_vec();
    b.push(0x77);
    assert_eq!(decode(&b), Err(FrameError::UnknownKind(0x77)));
    let mut b = 22u32.to_le_bytes().to_vec();
    b.push(K_READ);
    assert!(matches!(decode(&b), Err(FrameError::BadLength { .. })));
    // An HTTP request is garbage, rejected from its first bytes.
    assert!(decode(b"GET / HTTP/1.1\r\n\r\n").is_err());
}

#[test]
fn two_frames_back_to_back() {
    let a = Frame {
        id: 1,
        msg: Message::Request(Request::Read),
    };
    let b = Frame {
        id: 2,
        msg: Message::Request(Request::Faa {
            word: 130,
            delta: 1,
        }),
    };
    let mut bytes = with_tag(&a);
    bytes.extend_from_slice(&with_tag(&b));
    let d = decode(&bytes).unwrap().unwrap();
    assert_eq!(d.frame, a);
    let d2 = decode(&bytes[d.consumed..]).unwrap().unwrap();
    assert_eq!(d2.frame, b);
}
