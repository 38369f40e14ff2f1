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
//!
//! The server's CHALLENGE is an HMAC under the key that anyone who connects
//! gets before proving anything, so the key must resist offline guessing:
//! it is 256 random bits, written as text in one encoding ([`PSK_PREFIX`]
//! and 64 hex digits, what `rdmalb psk` prints), and anything that looks
//! like a passphrase or is short or repetitive is refused with a message
//! that says how to make a key. See `docs/window.md`, "Keys".

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
/// What opens a key in its text form (`rdmalb-psk-v1:` and hex digits).
pub const PSK_PREFIX: &str = "rdmalb-psk-v1:";
/// Bytes of a generated key, and the fewest a key may have (256 bits).
pub const PSK_LEN: usize = 32;
/// Fewest distinct byte values a key may have: 32 random bytes have about
/// 30 (fewer than 16 has a probability far below 2^-64), while repeated
/// patterns such as `0123456789abcdef` × 4 have 8 or fewer.
const MIN_DISTINCT_BYTES: usize = 16;
/// How to make a key, for every refusal.
const MAKE_ONE: &str =
    "make one with `rdmalb psk --out FILE` (or `rdmalb psk > FILE` and `chmod 600 FILE`)";

/// A pre-shared key: 256 or more random bits. `Debug` does not print it.
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

    /// A fresh random key of [`PSK_LEN`] bytes from the OS generator.
    pub fn generate() -> Psk {
        let mut k = vec![0u8; PSK_LEN];
        rand::rngs::OsRng.fill_bytes(&mut k);
        Psk(k)
    }

    /// The key's text form, as key files hold it: [`PSK_PREFIX`] and the
    /// key in lowercase hex. It is the secret itself: never log it.
    pub fn to_text(&self) -> String {
        let mut t = String::with_capacity(PSK_PREFIX.len() + 2 * self.0.len());
        t.push_str(PSK_PREFIX);
        for b in &self.0 {
            t.push_str(&format!("{b:02x}"));
        }
        t
    }

    /// Write the key's text form and a newline to a new file at `path`,
    /// created with mode 0600; an existing file is never overwritten.
    pub fn write_new_file(&self, path: impl AsRef<Path>) -> Result<(), WindowError> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let path = path.as_ref();
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .and_then(|mut f| {
                f.write_all(format!("{}\n", self.to_text()).as_bytes())?;
                f.sync_all()
            })
            .map_err(|e| WindowError::Psk {
                path: path.display().to_string(),
                reason: if e.kind() == std::io::ErrorKind::AlreadyExists {
                    "already exists; not overwriting a key (remove it first to replace it)".into()
                } else {
                    format!("cannot write it: {e}")
                },
            })
    }

    /// Read a key file. The file must not be accessible to other users (no
    /// "other" permission bits) and must hold a key in text form (see
    /// [`Psk::new`]).
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

    /// A key from its text form: [`PSK_PREFIX`] (optional) and at least 64
    /// hex digits, whitespace around it ignored. Passphrases, binary data,
    /// fewer than 256 bits and repetitive keys (fewer than 16 distinct byte
    /// values) are refused.
    pub fn new(bytes: impl AsRef<[u8]>) -> Result<Psk, WindowError> {
        Psk::from_bytes(bytes.as_ref()).map_err(|reason| WindowError::Psk {
            path: "<inline>".into(),
            reason,
        })
    }

    fn from_bytes(bytes: &[u8]) -> Result<Psk, String> {
        let Ok(text) = std::str::from_utf8(bytes) else {
            return Err(format!(
                "holds binary data, not a key in text form ({PSK_PREFIX} and 64 hex digits); {MAKE_ONE}"
            ));
        };
        let text = text.trim();
        let hex = text.strip_prefix(PSK_PREFIX).unwrap_or(text);
        if hex.is_empty() || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!(
                "not a generated key (passphrases are refused: the handshake lets anyone \
                 who connects test guesses offline); expected `{PSK_PREFIX}` and at least \
                 64 hex digits (256 random bits); {MAKE_ONE}"
            ));
        }
        if hex.len() % 2 != 0 {
            return Err(format!(
                "has an odd number of hex digits ({}); {MAKE_ONE}",
                hex.len()
            ));
        }
        let key: Vec<u8> = (0..hex.len())
            .step_by(2)
            .filter_map(|i| u8::from_str_radix(&hex[i..i + 2], 16).ok())
            .collect();
        if key.len() < PSK_LEN {
            return Err(format!(
                "holds {} bits, at least {} random bits are required; {MAKE_ONE}",
                key.len() * 8,
                PSK_LEN * 8
            ));
        }
        let mut seen = [false; 256];
        for b in &key {
            seen[usize::from(*b)] = true;
        }
        let distinct = seen.iter().filter(|s| **s).count();
        if distinct < MIN_DISTINCT_BYTES {
            return Err(format!(
                "does not look random ({distinct} distinct byte values; a generated key \
                 has about 30); {MAKE_ONE}"
            ));
        }
        Ok(Psk(key))
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

/// Tags for self-contained datagrams under a pre-shared key (the proxies'
/// stick-table share, `docs/rate-limits.md`): a key derived from the PSK
/// under a purpose `label`, then the same 16-byte truncated HMAC-SHA256
/// tag as a frame's over the caller's parts (which carry their own
/// sequence number: a datagram has no connection to count on).
#[derive(Clone)]
pub struct DatagramKey {
    mac: HmacSha256,
}

impl std::fmt::Debug for DatagramKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DatagramKey(<redacted>)")
    }
}

impl DatagramKey {
    /// The key of `psk` for datagrams of purpose `label` (a key for one
    /// purpose tags nothing of another).
    pub fn new(psk: &Psk, label: &[u8]) -> DatagramKey {
        let mut m = HmacSha256::new_from_slice(&psk.0).expect("HMAC takes any key length");
        m.update(label);
        let k = m.finalize().into_bytes();
        DatagramKey {
            mac: HmacSha256::new_from_slice(&k).expect("HMAC takes any key length"),
        }
    }

    fn over(&self, parts: &[&[u8]]) -> HmacSha256 {
        let mut m = self.mac.clone();
        for p in parts {
            m.update(&(p.len() as u32).to_le_bytes());
            m.update(p);
        }
        m
    }

    /// The tag of `parts` (each length-prefixed, so parts cannot shift).
    pub fn tag(&self, parts: &[&[u8]]) -> [u8; TAG_LEN] {
        let t = self.over(parts).finalize().into_bytes();
        let mut out = [0u8; TAG_LEN];
        out.copy_from_slice(&t[..TAG_LEN]);
        out
    }

    /// Checks `tag` over `parts` (in constant time).
    pub fn verify(&self, parts: &[&[u8]], tag: &[u8]) -> Result<(), AuthError> {
        if tag.len() != TAG_LEN {
            return Err(AuthError::FrameTag);
        }
        self.over(parts)
            .verify_truncated_left(tag)
            .map_err(|_| AuthError::FrameTag)
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
