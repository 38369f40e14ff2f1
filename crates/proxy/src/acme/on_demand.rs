//! On-demand TLS (`[acme.on_demand]`): a handshake for a name the proxy
//! has no certificate for orders one when the allowlist says yes, and
//! waits for it up to `wait` (then fails; the next handshake after the
//! order ends is served). The allowlist is a file of names, or an `ask`
//! URL (`GET <ask>?domain=<name>`: 200 allows) whose answers are cached
//! for `ask_cache`; an `ask` that fails or times out refuses that name
//! only, for that handshake. New names (asked or ordered) are limited to
//! `rate` a minute, so a flood of made-up names neither floods the `ask`
//! endpoint nor the ACME server.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::Acme;
use crate::config::acme::OnDemand;

/// How long an `ask` may take.
const ASK_TIMEOUT: Duration = Duration::from_secs(2);

#[derive(Debug)]
pub struct Gate {
    settings: OnDemand,
    allowed: HashSet<String>,
    answers: Mutex<HashMap<String, (bool, Instant)>>,
    /// The current minute's start and the new names seen in it.
    budget: Mutex<(Instant, u32)>,
}

impl Gate {
    pub fn new(settings: &OnDemand) -> Gate {
        let allowed = settings
            .allow_file
            .as_ref()
            .and_then(|f| std::fs::read_to_string(f).ok())
            .map(|text| parse_names(&text))
            .unwrap_or_default();
        Gate {
            settings: settings.clone(),
            allowed,
            answers: Mutex::default(),
            budget: Mutex::new((Instant::now(), 0)),
        }
    }

    /// Takes one new name out of this minute's budget.
    fn spend(&self) -> bool {
        let mut b = self.budget.lock().unwrap_or_else(|e| e.into_inner());
        if b.0.elapsed() >= Duration::from_secs(60) {
            *b = (Instant::now(), 0);
        }
        if b.1 >= self.settings.rate {
            return false;
        }
        b.1 += 1;
        true
    }

    /// Whether `name` may get a certificate.
    async fn allows(&self, name: &str) -> bool {
        if self.allowed.contains(name) {
            return true;
        }
        let Some(ask) = &self.settings.ask else {
            return false;
        };
        if let Some((yes, at)) = self
            .answers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
        {
            if at.elapsed() < self.settings.ask_cache {
                return *yes;
            }
        }
        if !self.spend() {
            tracing::warn!(
                name,
                "on-demand TLS: rate limit reached; name refused for now"
            );
            return false;
        }
        match tokio::time::timeout(ASK_TIMEOUT, ask_once(ask, name)).await {
            Ok(Ok(yes)) => {
                self.answers
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(name.to_string(), (yes, Instant::now()));
                yes
            }
            Ok(Err(e)) => {
                tracing::warn!(name, ask = %ask, error = %e, "on-demand TLS: ask failed; name refused");
                false
            }
            Err(_) => {
                tracing::warn!(name, ask = %ask, "on-demand TLS: ask timed out; name refused");
                false
            }
        }
    }
}

/// The names of an allow file: one a line, `#` starts a comment.
fn parse_names(text: &str) -> HashSet<String> {
    text.lines()
        .map(|l| {
            l.split('#')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .filter(|l| !l.is_empty())
        .collect()
}

/// `GET <ask>?domain=<name>` over HTTP/1.1: whether it answered 200.
async fn ask_once(ask: &str, name: &str) -> std::io::Result<bool> {
    let uri: http::Uri = ask.parse().map_err(std::io::Error::other)?;
    let authority = uri
        .authority()
        .ok_or_else(|| std::io::Error::other("no host"))?;
    let port = authority.port_u16().unwrap_or(80);
    let mut stream = tokio::net::TcpStream::connect((authority.host(), port)).await?;
    let target = match uri.query() {
        Some(q) => format!("{}?{q}&domain={name}", uri.path()),
        None => format!("{}?domain={name}", uri.path()),
    };
    let request = format!(
        "GET {target} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\nUser-Agent: rdmalb\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await?;
    let mut head = [0u8; 64];
    let mut n = 0;
    while n < 12 {
        let read = stream.read(&mut head[n..]).await?;
        if read == 0 {
            break;
        }
        n += read;
    }
    let line = String::from_utf8_lossy(&head[..n]);
    Ok(line.starts_with("HTTP/1.1 200") || line.starts_with("HTTP/1.0 200"))
}

impl Acme {
    /// Before a handshake for `name`: when on-demand TLS applies (no
    /// certificate yet, the name allowed), orders one and waits for it up
    /// to `wait`. `false`: the handshake goes on without it.
    pub async fn on_demand(&self, name: &str) -> bool {
        let Some(gate) = &self.on_demand else {
            return false;
        };
        let name = name.to_ascii_lowercase();
        if self.served(&name).is_some() {
            return true;
        }
        let known = self.snapshot().iter().any(|m| m.names.contains(&name));
        if !known {
            if !gate.allows(&name).await {
                return false;
            }
            // A name from the allow file is not asked: it spends here.
            if gate.allowed.contains(&name) && !gate.spend() {
                tracing::warn!(
                    name,
                    "on-demand TLS: rate limit reached; name refused for now"
                );
                return false;
            }
            tracing::info!(name, "on-demand TLS: ordering a certificate");
            self.add_on_demand(&name);
        }
        self.wait_served(&name, gate.settings.wait).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allow_file_names_and_the_budget() {
        assert_eq!(
            parse_names("# names\nA.example  # one\n\nb.example\n"),
            HashSet::from(["a.example".to_string(), "b.example".to_string()])
        );
        let gate = Gate::new(&OnDemand {
            allow_file: None,
            ask: None,
            ask_cache: Duration::from_secs(1),
            rate: 2,
            wait: Duration::from_secs(1),
        });
        assert!(gate.spend() && gate.spend());
        assert!(!gate.spend());
    }
}
