//! `rdmalb ctl`: sends runtime commands ([`super::runtime`]) to a running
//! proxy's admin listener and prints the answer.
//!
//! Where to send them and with which token comes from the proxy's own
//! config (`-c`: `[admin] listen` and `token_file`), or from `--admin` and
//! `--token-file` (or the environment: `RDMALB_ADMIN`,
//! `RDMALB_TOKEN_FILE`). A plain blocking HTTP/1.1 exchange: one request,
//! `Connection: close`, bounded by timeouts, so a stuck proxy never hangs
//! the command.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::Duration;

use super::runtime::PATH;
use crate::config::files;

/// Time to connect to the admin listener.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Time for the whole answer (a move waits for the site lock and a CAS).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(60);
/// Largest answer read.
const MAX_ANSWER: u64 = 64 * 1024 * 1024;

/// The content type of the commands: not one a browser sends cross-origin
/// without a preflight, so the admin guard lets it through.
pub const CONTENT_TYPE: &str = "application/x-rdmalb-commands";

/// Where and how to reach the admin listener.
#[derive(Debug, Clone)]
pub struct Target {
    pub admin: SocketAddr,
    pub token: String,
}

impl Target {
    /// From the proxy's config file: its `[admin] listen` and `token_file`.
    pub fn from_config(path: &Path) -> Result<Target, String> {
        let config = crate::config::load(path).map_err(|e| e.to_string())?;
        let Some(admin) = config.admin else {
            return Err(format!(
                "`{}` has no [admin] section: the runtime API is served on the admin listener",
                path.display()
            ));
        };
        let Some(token_file) = admin.token_file else {
            return Err(format!(
                "`{}`: [admin] has no token_file; the runtime API needs the admin token",
                path.display()
            ));
        };
        Self::new(admin.listen, &token_file)
    }

    /// From an address and a token file.
    pub fn new(admin: SocketAddr, token_file: &Path) -> Result<Target, String> {
        let token = files::admin_token(token_file)?;
        Ok(Target { admin, token })
    }
}

/// An answer: the HTTP status and the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub status: u16,
    pub body: String,
}

/// Sends `commands` (separated by `;` or new lines) and returns the answer.
pub fn send(target: &Target, commands: &str) -> Result<Answer, String> {
    let addr = target.admin;
    let mut stream = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT)
        .map_err(|e| format!("cannot connect to the admin listener at {addr}: {e}"))?;
    stream
        .set_read_timeout(Some(ANSWER_TIMEOUT))
        .and_then(|_| stream.set_write_timeout(Some(ANSWER_TIMEOUT)))
        .map_err(|e| format!("{addr}: {e}"))?;
    let request = format!(
        "POST {PATH} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\n\
         Content-Type: {CONTENT_TYPE}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{commands}",
        target.token,
        commands.len()
    );
    stream
        .write_all(request.as_bytes())
        .map_err(|e| format!("cannot send to {addr}: {e}"))?;
    let mut raw = Vec::new();
    stream
        .take(MAX_ANSWER)
        .read_to_end(&mut raw)
        .map_err(|e| format!("no answer from {addr}: {e}"))?;
    parse(&raw).ok_or_else(|| {
        format!(
            "{addr} did not answer with HTTP (is it the admin listener?): {:?}",
            String::from_utf8_lossy(&raw[..raw.len().min(80)])
        )
    })
}

/// Status and body of a `Connection: close` HTTP/1.1 answer with a
/// `Content-Length` (what the admin listener sends) or read to the end.
fn parse(raw: &[u8]) -> Option<Answer> {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&raw[..split]).ok()?;
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()?
        .strip_prefix("HTTP/1.1 ")?
        .get(..3)?
        .parse()
        .ok()?;
    let mut body = &raw[split + 4..];
    for line in lines {
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                let len: usize = value.trim().parse().ok()?;
                body = body.get(..len)?;
            }
        }
    }
    Some(Answer {
        status,
        body: String::from_utf8_lossy(body).into_owned(),
    })
}

#[cfg(test)]
mod tests;
