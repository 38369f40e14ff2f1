use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::AsyncReadExt;

use super::*;

fn opts(target: SocketAddr, attack: Attack) -> Options {
    Options {
        target,
        source: None,
        attack,
        duration: Duration::from_millis(600),
        connections: 4,
        ramp: 1000,
        interval: Duration::from_millis(50),
        rate: 1000,
        max_ops: 1_000_000,
        tls: false,
        host: "bench.localhost".into(),
        large_path: "/big".into(),
        post_path: "/post".into(),
    }
}

#[test]
fn only_loopback_targets_and_sources() {
    let o = opts("192.0.2.1:80".parse().unwrap(), Attack::Slowloris);
    assert!(matches!(
        o.check(),
        Err(AbuseError::NotLoopback { what: "target", .. })
    ));
    let mut o = opts("127.0.0.1:80".parse().unwrap(), Attack::Slowloris);
    o.check().unwrap();
    o.source = Some("10.0.0.1".parse().unwrap());
    assert!(matches!(
        o.check(),
        Err(AbuseError::NotLoopback { what: "source", .. })
    ));
    o.source = Some("127.0.0.2".parse().unwrap());
    o.check().unwrap();
    o.connections = 0;
    assert!(o.check().is_err());
}

#[test]
fn attack_names_round_trip() {
    for a in Attack::ALL {
        assert_eq!(Attack::parse(a.name()).unwrap(), a);
    }
    let e = Attack::parse("teardrop").unwrap_err().to_string();
    assert!(e.contains("slowloris") && e.contains("window-stall"), "{e}");
}

#[tokio::test]
async fn slowloris_counts_the_server_closing() {
    // A server that reads a little and closes every connection.
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 64];
                let _ = s.read(&mut buf).await;
            });
        }
    });
    let out = run(opts(addr, Attack::Slowloris)).await.unwrap();
    assert!(out.connected >= 4, "{out:?}");
    assert!(out.closed_by_server >= 1, "{out:?}");
    assert_eq!(out.ops_unit, "bytes trickled");
}

#[tokio::test]
async fn the_operation_budget_bounds_a_flood() {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = l.accept().await {
            held.push(s);
        }
    });
    let mut o = opts(addr, Attack::PingFlood);
    o.max_ops = 10;
    o.rate = 0;
    let out = run(o).await.unwrap();
    assert_eq!(out.ops, 10, "{out:?}");
}
