//! Authentication of the tcp transport: the pre-shared key, a mutual
//! challenge-response handshake, and per-frame tags.
//!
//! Handshake (all sizes fixed; see `docs/window.md`):
//!
//! ```text
//! client → server  HELLO   "RDMALBT1" | proxy_id u64 LE | nonce_c [32]
//! server → client  CHALLENGE "RDMALBT1" | nonce_s [32] | HMAC(psk, "rdmalb-tcp-v1 server" | proxy_id | nonce_c | nonce_s)
//! client → server  FINISH  HMAC(psk, "rdmalb-tcp-v1 client" | proxy_id | nonce_c | nonce_s)
//! ```
//!
//! Each side proves knowledge of the key over a nonce the other side chose,
//! so neither proof can be replayed; the labels keep a server proof from
//! being reflected as a client proof. The server serves nothing before it
//! has checked FINISH. Afterwards every frame carries a 16-byte truncated
//! HMAC-SHA256 tag under a per-direction session key
//! `HMAC(psk, "rdmalb-tcp-v1 c2s" | proxy_id | nonce_c | nonce_s)` (and `s2c`)
//! over a per-direction frame counter and the frame bytes, so frames cannot
//! be injected, altered, replayed or reordered by someone on the path.
//! Frames are not encrypted: load figures and control words are not secret.

use std::path::Path;

use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::Sha256;

use super::frame::{self, Decoded, Frame, TAG_LEN};
use crate::WindowError;

type HmacSha256 = Hmac<Sha256>;

/// Magic opening both hello messages.
pub const HANDSHAKE_MAGIC: [u8; 8] = *b"RDMALBT1";
/// Client HELLO length.
pub const CLIENT_HELLO_LEN: usize = 8 + 8 + 32;
/// Server CHALLENGE length.
pub const SERVER_CHALLENGE_LEN: usize = 8 + 32 + 32;
/// Client FINISH length.
pub const CLIENT_FINISH_LEN: usize = 32;
/// Shortest accepted pre-shared key.
pub const MIN_PSK_LEN: usize = 16;

/// A pre-shared key. `Debug` does not print it.
#[derive(Clone)]
pub struct Psk(Vec<u8>);

impl std::fmt::Debug for Psk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Psk(<redacted>)")
    }
}

impl Psk {
    /// Whether `other` is the same key (for telling whether connections
    /// authenticated with one must be re-made after a reload).
    pub fn same_as(&self, other: &Psk) -> bool {
        self.0 == other.0
    }

    /// Read a key file. The file must not be accessible to other users (no
    /// "other" permission bits) and must hold at least 16 bytes after
    /// trailing whitespace is removed (so `echo KEY > file` works).
    pub fn from_file(path: impl AsRef<Path>) -> Result<Psk, WindowError> {
        use std::os::unix::fs::PermissionsExt;
        let path = path.as_ref();
        let shown = path.display().to_string();
        let err = |reason: String| WindowError::Psk {
            path: shown.clone(),
            reason,
        };
        let meta = std::fs::metadata(path).map_err(|e| err(format!("cannot read it: {e}")))?;
        if !meta.is_file() {
            return Err(err("not a regular file".into()));
        }
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o007 != 0 {
            return Err(err(format!(
                "mode {mode:04o} lets other users access the key; run `chmod 600 {shown}`"
            )));
        }
        let bytes = std::fs::read(path).map_err(|e| err(format!("cannot read it: {e}")))?;
        Psk::from_bytes(&bytes).map_err(err)
    }

    /// A key from bytes (trailing whitespace removed), at least 16 bytes.
    pub fn new(bytes: impl AsRef<[u8]>) -> Result<Psk, WindowError> {
        Psk::from_bytes(bytes.as_ref()).map_err(|reason| WindowError::Psk {
            path: "<inline>".into(),
            reason,
        })
    }

    fn from_bytes(bytes: &[u8]) -> Result<Psk, String> {
        let end = bytes
            .iter()
            .rposition(|b| !b.is_ascii_whitespace())
            .map_or(0, |i| i + 1);
        let key = &bytes[..end];
        if key.len() < MIN_PSK_LEN {
            return Err(format!(
                "key is {} bytes, at least {MIN_PSK_LEN} are required",
                key.len()
            ));
        }
        Ok(Psk(key.to_vec()))
    }

    fn mac(&self, label: &[u8], proxy_id: u64, nc: &[u8; 32], ns: &[u8; 32]) -> HmacSha256 {
        // new_from_slice accepts keys of any length for HMAC.
        let mut m = HmacSha256::new_from_slice(&self.0).expect("HMAC takes any key length");
        m.update(label);
        m.update(&proxy_id.to_le_bytes());
        m.update(nc);
        m.update(ns);
        m
    }
}

/// Why a handshake or a frame tag failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// The peer does not speak this protocol.
    #[error("peer did not open with the rdmalb tcp handshake magic")]
    BadMagic,
    /// The responder's proof did not verify.
    #[error("the responder did not prove knowledge of the pre-shared key (the keys differ)")]
    ServerProof,
    /// The client's proof did not verify.
    #[error("the client did not prove knowledge of the pre-shared key")]
    ClientProof,
    /// A frame's tag did not verify.
    #[error("frame tag did not verify (tampered, replayed or reordered frame)")]
    FrameTag,
}

/// Keyed tag state for one direction of a connection.
pub struct FrameKey {
    mac: HmacSha256,
    seq: u64,
}

impl FrameKey {
    fn new(key: HmacSha256) -> FrameKey {
        let k = key.finalize().into_bytes();
        FrameKey {
            mac: HmacSha256::new_from_slice(&k).expect("HMAC takes any key length"),
            seq: 0,
        }
    }

    /// Append `frame` with its tag to `out`.
    pub fn seal(&mut self, frame: &Frame, out: &mut Vec<u8>) {
        let start = frame::encode_unsealed(frame, out);
        let mut m = self.mac.clone();
        m.update(&self.seq.to_le_bytes());
        m.update(&out[start..]);
        let tag = m.finalize().into_bytes();
        out.extend_from_slice(&tag[..TAG_LEN]);
        self.seq = self.seq.wrapping_add(1);
    }

    /// Check the tag of a decoded frame (the next one in this direction).
    pub fn open(&mut self, d: &Decoded<'_>) -> Result<Frame, AuthError> {
        let mut m = self.mac.clone();
        m.update(&self.seq.to_le_bytes());
        m.update(d.authenticated);
        m.verify_truncated_left(d.tag)
            .map_err(|_| AuthError::FrameTag)?;
        self.seq = self.seq.wrapping_add(1);
        Ok(d.frame)
    }
}

/// Tag keys for both directions of an authenticated connection.
pub struct SessionKeys {
    /// Tags frames we send.
    pub send: FrameKey,
    /// Checks frames we receive.
    pub recv: FrameKey,
}

fn session(psk: &Psk, proxy_id: u64, nc: &[u8; 32], ns: &[u8; 32], client: bool) -> SessionKeys {
    let c2s = FrameKey::new(psk.mac(b"rdmalb-tcp-v1 c2s", proxy_id, nc, ns));
    let s2c = FrameKey::new(psk.mac(b"rdmalb-tcp-v1 s2c", proxy_id, nc, ns));
    if client {
        SessionKeys {
            send: c2s,
            recv: s2c,
        }
    } else {
        SessionKeys {
            send: s2c,
            recv: c2s,
        }
    }
}

fn nonce() -> [u8; 32] {
    let mut n = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut n);
    n
}

/// Client side of the handshake, between HELLO and FINISH.
pub struct ClientHandshake {
    psk: Psk,
    proxy_id: u64,
    nc: [u8; 32],
}

impl ClientHandshake {
    /// Start: returns the state and the HELLO to send.
    pub fn start(psk: &Psk, proxy_id: u64) -> (ClientHandshake, [u8; CLIENT_HELLO_LEN]) {
        let nc = nonce();
        let mut hello = [0u8; CLIENT_HELLO_LEN];
        hello[..8].copy_from_slice(&HANDSHAKE_MAGIC);
        hello[8..16].copy_from_slice(&proxy_id.to_le_bytes());
        hello[16..].copy_from_slice(&nc);
        (
            ClientHandshake {
                psk: psk.clone(),
                proxy_id,
                nc,
            },
            hello,
        )
    }

    /// Check the server's CHALLENGE; returns the FINISH to send and the
    /// session keys.
    pub fn finish(
        self,
        challenge: &[u8; SERVER_CHALLENGE_LEN],
    ) -> Result<([u8; CLIENT_FINISH_LEN], SessionKeys), AuthError> {
        if challenge[..8] != HANDSHAKE_MAGIC {
            return Err(AuthError::BadMagic);
        }
        let mut ns = [0u8; 32];
        ns.copy_from_slice(&challenge[8..40]);
        self.psk
            .mac(b"rdmalb-tcp-v1 server", self.proxy_id, &self.nc, &ns)
            .verify_slice(&challenge[40..])
            .map_err(|_| AuthError::ServerProof)?;
        let proof = self
            .psk
            .mac(b"rdmalb-tcp-v1 client", self.proxy_id, &self.nc, &ns)
            .finalize()
            .into_bytes();
        let mut fin = [0u8; CLIENT_FINISH_LEN];
        fin.copy_from_slice(&proof);
        Ok((fin, session(&self.psk, self.proxy_id, &self.nc, &ns, true)))
    }
}

/// Server side of the handshake, between CHALLENGE and FINISH.
pub struct ServerHandshake {
    psk: Psk,
    proxy_id: u64,
    nc: [u8; 32],
    ns: [u8; 32],
}

impl ServerHandshake {
    /// Answer a HELLO: returns the state and the CHALLENGE to send.
    pub fn respond(
        psk: &Psk,
        hello: &[u8; CLIENT_HELLO_LEN],
    ) -> Result<(ServerHandshake, [u8; SERVER_CHALLENGE_LEN]), AuthError> {
        if hello[..8] != HANDSHAKE_MAGIC {
            return Err(AuthError::BadMagic);
        }
        let mut id = [0u8; 8];
        id.copy_from_slice(&hello[8..16]);
        let proxy_id = u64::from_le_bytes(id);
        let mut nc = [0u8; 32];
        nc.copy_from_slice(&hello[16..]);
        let ns = nonce();
        let proof = psk
            .mac(b"rdmalb-tcp-v1 server", proxy_id, &nc, &ns)
            .finalize()
            .into_bytes();
        let mut challenge = [0u8; SERVER_CHALLENGE_LEN];
        challenge[..8].copy_from_slice(&HANDSHAKE_MAGIC);
        challenge[8..40].copy_from_slice(&ns);
        challenge[40..].copy_from_slice(&proof);
        Ok((
            ServerHandshake {
                psk: psk.clone(),
                proxy_id,
                nc,
                ns,
            },
            challenge,
        ))
    }

    /// Check the client's FINISH; returns the client's proxy id and the
    /// session keys.
    pub fn finish(self, fin: &[u8; CLIENT_FINISH_LEN]) -> Result<(u64, SessionKeys), AuthError> {
        self.psk
            .mac(b"rdmalb-tcp-v1 client", self.proxy_id, &self.nc, &self.ns)
            .verify_slice(fin)
            .map_err(|_| AuthError::ClientProof)?;
        Ok((
            self.proxy_id,
            session(&self.psk, self.proxy_id, &self.nc, &self.ns, false),
        ))
    }
}

#[cfg(test)]
mod tests;
