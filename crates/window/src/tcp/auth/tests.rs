use super::*;
use crate::tcp::frame::{decode, Message, Request};
use std::os::unix::fs::PermissionsExt;

fn key() -> Psk {
    Psk::generate()
}

fn handshake(client_psk: &Psk, server_psk: &Psk) -> Result<(SessionKeys, SessionKeys), AuthError> {
    let (c, hello) = ClientHandshake::start(client_psk, 7);
    let (s, challenge) = ServerHandshake::respond(server_psk, &hello)?;
    let (fin, ck) = c.finish(&challenge)?;
    let (id, sk) = s.finish(&fin)?;
    assert_eq!(id, 7);
    Ok((ck, sk))
}

#[test]
fn matching_keys_authenticate_and_tag_frames() {
    let k = key();
    let (mut c, mut s) = handshake(&k, &k).unwrap();
    let f = Frame {
        id: 3,
        msg: Message::Request(Request::Cas {
            word: 32,
            expected: 0,
            new: 1,
        }),
    };
    let mut wire = Vec::new();
    c.send.seal(&f, &mut wire);
    c.send.seal(&f, &mut wire);
    let d = decode(&wire).unwrap().unwrap();
    assert_eq!(s.recv.open(&d).unwrap(), f);
    // Replaying the first frame fails: the counter moved on.
    assert_eq!(s.recv.open(&d), Err(AuthError::FrameTag));

    // A flipped bit in the body fails.
    let mut wire = Vec::new();
    s.send.seal(&f, &mut wire);
    wire[10] ^= 1;
    let d = decode(&wire).unwrap().unwrap();
    assert_eq!(c.recv.open(&d), Err(AuthError::FrameTag));
}

#[test]
fn wrong_key_is_detected_by_the_client() {
    let r = handshake(&key(), &key());
    assert_eq!(r.err(), Some(AuthError::ServerProof));
}

#[test]
fn forged_finish_is_refused_by_the_server() {
    let k = key();
    let (_c, hello) = ClientHandshake::start(&k, 1);
    let (s, _challenge) = ServerHandshake::respond(&k, &hello).unwrap();
    assert_eq!(s.finish(&[0u8; 32]).err(), Some(AuthError::ClientProof));
    let mut bad = hello;
    bad[0] = b'X';
    assert_eq!(
        ServerHandshake::respond(&k, &bad).err(),
        Some(AuthError::BadMagic)
    );
}

#[test]
fn reflected_server_proof_is_not_a_client_proof() {
    let k = key();
    let (_c, hello) = ClientHandshake::start(&k, 1);
    let (s, challenge) = ServerHandshake::respond(&k, &hello).unwrap();
    let mut fin = [0u8; 32];
    fin.copy_from_slice(&challenge[40..]);
    assert_eq!(s.finish(&fin).err(), Some(AuthError::ClientProof));
}

#[test]
fn psk_file_checks() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("psk");
    std::fs::write(&p, format!("{}\n", key().to_text())).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
    let e = Psk::from_file(&p).unwrap_err().to_string();
    assert!(e.contains("chmod 600"), "{e}");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
    assert!(Psk::from_file(&p).is_ok());
    std::fs::write(&p, "rdmalb-psk-v1:00112233445566778899aabbccddeeff\n").unwrap();
    let e = Psk::from_file(&p).unwrap_err().to_string();
    assert!(e.contains("holds 128 bits, at least 256"), "{e}");
    assert!(Psk::from_file(dir.path().join("missing")).is_err());
    assert_eq!(format!("{:?}", key()), "Psk(<redacted>)");
}

#[test]
fn generated_keys_round_trip_through_their_text_and_files() {
    let k = key();
    let text = k.to_text();
    assert!(text.starts_with(PSK_PREFIX), "{text}");
    assert_eq!(text.len(), PSK_PREFIX.len() + 2 * PSK_LEN);
    assert!(Psk::new(&text).unwrap().same_as(&k));
    // Bare hex (`openssl rand -hex 32`), upper case and a newline work too.
    let bare = format!("{}\n", text[PSK_PREFIX.len()..].to_uppercase());
    assert!(Psk::new(bare).unwrap().same_as(&k));
    assert!(!key().same_as(&k));

    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("new.psk");
    k.write_new_file(&p).unwrap();
    let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert!(Psk::from_file(&p).unwrap().same_as(&k));
    let e = key().write_new_file(&p).unwrap_err().to_string();
    assert!(e.contains("already exists"), "{e}");
    assert!(Psk::from_file(&p).unwrap().same_as(&k));
}

/// A key file must hold 256 random bits in the generated encoding; the
/// error names the file and says how to make a key.
#[test]
fn weak_key_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("cluster.psk");
    for weak in [
        "correct horse battery staple\n",
        "the-right-key-0123456789abcdef0123456789",
        &"a".repeat(64),
        &"0123456789abcdef".repeat(4),
        "rdmalb-psk-v1:0123456789abcdef",
    ] {
        std::fs::write(&p, weak).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        let e = match Psk::from_file(&p) {
            Ok(_) => panic!("accepted a weak key: {weak:?}"),
            Err(e) => e.to_string(),
        };
        assert!(e.contains(&p.display().to_string()), "{e}");
        assert!(e.contains("rdmalb psk"), "{e}");
    }
    // Raw bytes from /dev/urandom are strong but not in a key encoding.
    let raw: Vec<u8> = (0u8..32).map(|i| i.wrapping_mul(97) ^ 0x5a).collect();
    std::fs::write(&p, raw).unwrap();
    assert!(Psk::from_file(&p).is_err());
}

#[test]
fn datagram_tags_verify_only_under_the_same_key_label_and_parts() {
    let k = key();
    let d = DatagramKey::new(&k, b"purpose a");
    let tag = d.tag(&[b"from", b"payload"]);
    assert!(d.verify(&[b"from", b"payload"], &tag).is_ok());
    // Another payload, another split of the same bytes, another label,
    // another key, a cut tag: all refused.
    assert!(d.verify(&[b"from", b"payloaD"], &tag).is_err());
    assert!(d.verify(&[b"fromp", b"ayload"], &tag).is_err());
    assert!(DatagramKey::new(&k, b"purpose b")
        .verify(&[b"from", b"payload"], &tag)
        .is_err());
    assert!(DatagramKey::new(&key(), b"purpose a")
        .verify(&[b"from", b"payload"], &tag)
        .is_err());
    assert!(d.verify(&[b"from", b"payload"], &tag[..8]).is_err());
}
