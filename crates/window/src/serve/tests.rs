use std::sync::Arc;

use tokio::sync::watch;

use super::*;
use crate::link::{Link, Peer};
use crate::{site_table_hash, Expect};

#[tokio::test]
async fn a_tcp_listen_serves_the_memory_shows_its_peer_and_stops() {
    let hash = site_table_hash(&["shop"]);
    let mem = Arc::new(WindowMemory::anonymous(3, hash).unwrap());
    let psk = Psk::generate();
    let (_stop_tx, stop_rx) = watch::channel(false);
    let listen = Listen::Tcp {
        addr: "127.0.0.1:0".parse().unwrap(),
    };
    assert_eq!(listen.transport(), TransportKind::Tcp);
    assert!(listen.transport().needs_key());
    listen.check_available().unwrap();
    let mut server = listen
        .start(Arc::clone(&mem), psk.clone(), stop_rx)
        .unwrap();
    assert_eq!(server.kind(), TransportKind::Tcp);
    assert!(server.peers().is_empty(), "nobody connected yet");
    assert_eq!(server.atomics_endpoint(), None, "tcp peers use CPU atomics");

    let endpoint = Endpoint::Tcp {
        addr: server.local_addr(),
    };
    let expect = Expect {
        node_id: Some(3),
        site_hash: Some(hash),
    };
    let link = Link::connect(Peer {
        endpoint: &endpoint,
        expect: &expect,
        psk: Some(&psk),
        id: 9,
    })
    .await
    .unwrap();
    let w = link.window();
    let word = crate::layout::REMOTE_ATOMIC.start;
    assert_eq!(w.fetch_add(word, 5).await.unwrap(), 0);
    assert_eq!(mem.load(word), Some(5), "served over the memory itself");
    let peers = server.peers();
    assert_eq!(peers.len(), 1, "{peers:?}");
    assert_eq!(peers[0]["connections"], 1);

    server.shutdown();
    server.shutdown();
    let _ = w.read_raw().await;
    assert!(!link.is_alive(), "shut down: the connection closed");
}

#[test]
fn an_unusable_verbs_listen_fails_at_start_naming_the_alternatives() {
    let listen = Listen::Verbs {
        control: "127.0.0.1:0".parse().unwrap(),
        device: Some("no-such-rdma-device".into()),
    };
    assert_eq!(listen.what(), "verbs server");
    let err = listen.check_available().unwrap_err();
    assert!(matches!(err, WindowError::NoDevice { .. }), "{err:?}");
    assert!(err.to_string().contains("\"tcp\""), "{err}");
    let mem = Arc::new(WindowMemory::anonymous(3, 0).unwrap());
    let (_tx, rx) = watch::channel(false);
    let err = listen.start(mem, Psk::generate(), rx).unwrap_err();
    assert!(matches!(err, WindowError::NoDevice { .. }), "{err:?}");
}
