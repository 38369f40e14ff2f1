//! The relay against a real echo server on loopback.

use super::*;

async fn echo() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = l.accept().await else {
                continue;
            };
            tokio::spawn(async move {
                let mut b = [0u8; 1024];
                while let Ok(n) = s.read(&mut b).await {
                    if n == 0 || s.write_all(&b[..n]).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

/// Sends `msg` and waits up to `wait` for the echo.
async fn round_trip(s: &mut TcpStream, msg: &[u8], wait: Duration) -> Option<Vec<u8>> {
    s.write_all(msg).await.ok()?;
    let mut b = vec![0u8; msg.len()];
    match tokio::time::timeout(wait, s.read_exact(&mut b)).await {
        Ok(Ok(_)) => Some(b),
        _ => None,
    }
}

#[tokio::test]
async fn forwards_drops_half_opens_heals_and_cuts() {
    let relay = Relay::start(echo().await).await.unwrap();
    let mut s = TcpStream::connect(relay.addr()).await.unwrap();
    let long = Duration::from_secs(5);
    let short = Duration::from_millis(300);
    assert_eq!(
        round_trip(&mut s, b"one", long).await.as_deref(),
        Some(&b"one"[..])
    );

    relay.set(LinkFault::Drop);
    assert_eq!(round_trip(&mut s, b"two", short).await, None, "dropped");
    relay.set(LinkFault::HalfOpen);
    assert_eq!(round_trip(&mut s, b"3", short).await, None, "reply lost");
    relay.set(LinkFault::Healthy);
    // What half-open let through was echoed and dropped; the link works.
    assert_eq!(
        round_trip(&mut s, b"four", long).await.as_deref(),
        Some(&b"four"[..])
    );

    relay.set(LinkFault::Delay(Duration::from_millis(50)));
    assert_eq!(
        round_trip(&mut s, b"five", long).await.as_deref(),
        Some(&b"five"[..])
    );

    relay.set(LinkFault::Cut);
    let mut b = [0u8; 1];
    let n = tokio::time::timeout(long, s.read(&mut b)).await.unwrap();
    assert!(matches!(n, Ok(0) | Err(_)), "cut closes the connection");
    relay.set(LinkFault::Healthy);
    let mut s = TcpStream::connect(relay.addr()).await.unwrap();
    assert_eq!(
        round_trip(&mut s, b"six", long).await.as_deref(),
        Some(&b"six"[..])
    );
}
