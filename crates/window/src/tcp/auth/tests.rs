use super::*;
use crate::tcp::frame::{decode, Message, Request};
use std::os::unix::fs::PermissionsExt;

fn key(s: &str) -> Psk {
    Psk::new(s).unwrap()
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
    let k = key("0123456789abcdef-shared");
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
    let r = handshake(&key("client-key-0123456789"), &key("server-key-0123456789"));
    assert_eq!(r.err(), Some(AuthError::ServerProof));
}

#[test]
fn forged_finish_is_refused_by_the_server() {
    let k = key("0123456789abcdef");
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
    let k = key("0123456789abcdef");
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
    std::fs::write(&p, "0123456789abcdef\n").unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
    let e = Psk::from_file(&p).unwrap_err().to_string();
    assert!(e.contains("chmod 600"), "{e}");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
    assert!(Psk::from_file(&p).is_ok());
    std::fs::write(&p, "short\n").unwrap();
    let e = Psk::from_file(&p).unwrap_err().to_string();
    assert!(e.contains("at least 16"), "{e}");
    assert!(Psk::from_file(dir.path().join("missing")).is_err());
    assert_eq!(format!("{:?}", key("0123456789abcdef")), "Psk(<redacted>)");
}
