use std::sync::Arc;

use tokio::sync::watch;

use super::*;
use crate::memory::DEFAULT_MODE;
use crate::{site_table_hash, WindowMemory};

fn hash() -> u64 {
    site_table_hash(&["shop", "blog"])
}

fn expect(node: u64) -> Expect {
    Expect {
        node_id: Some(node),
        site_hash: Some(hash()),
    }
}

#[tokio::test]
async fn shm_link_breaks_when_the_owner_recreates_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w");
    let mem = WindowMemory::create_shm(&path, DEFAULT_MODE, 5, hash()).unwrap();
    let endpoint = Endpoint::Shm { path: path.clone() };
    let e = expect(5);
    let peer = Peer {
        endpoint: &endpoint,
        expect: &e,
        psk: None,
        id: 1,
    };
    let link = Link::connect(peer).await.unwrap();
    assert!(link.is_alive());
    assert!(link.shm().is_some());
    assert_eq!(link.window().kind(), TransportKind::Shm);
    assert_eq!(endpoint.transport_name(), "shm");

    // The owner restarts: a new file under the same name.
    drop(mem);
    let _ = std::fs::remove_file(&path);
    assert!(!link.is_alive(), "a removed file is a broken link");
    let _mem = WindowMemory::create_shm(&path, DEFAULT_MODE, 5, hash()).unwrap();
    assert!(!link.is_alive(), "a recreated file is another window");
    let again = Link::connect(peer).await.unwrap();
    assert!(again.is_alive());

    // A window of another node is refused.
    let other = expect(6);
    let err = Link::connect(Peer {
        expect: &other,
        ..peer
    })
    .await
    .unwrap_err();
    assert!(err.to_string().contains('6'), "{err}");
}

#[tokio::test]
async fn tcp_link_needs_the_key_and_breaks_when_the_responder_stops() {
    let mem = Arc::new(WindowMemory::anonymous(7, hash()).unwrap());
    let psk = Psk::generate();
    let (stop_tx, stop_rx) = watch::channel(false);
    let server = crate::tcp::serve(
        Arc::clone(&mem),
        "127.0.0.1:0".parse().unwrap(),
        psk.clone(),
        stop_rx,
    )
    .unwrap();
    let endpoint = Endpoint::Tcp {
        addr: server.local_addr(),
    };
    let e = expect(7);
    let peer = Peer {
        endpoint: &endpoint,
        expect: &e,
        psk: None,
        id: 2,
    };
    let err = Link::connect(peer).await.unwrap_err();
    assert!(matches!(err, WindowError::Psk { .. }), "{err:?}");
    assert!(err.to_string().contains("cluster.psk_file"), "{err}");

    let link = Link::connect(Peer {
        psk: Some(&psk),
        ..peer
    })
    .await
    .unwrap();
    assert!(link.is_alive());
    assert!(link.shm().is_none());
    assert_eq!(link.window().kind(), TransportKind::Tcp);
    link.window().read_raw().await.unwrap();

    stop_tx.send(true).unwrap();
    server.stop();
    // The closed connection shows at the next operation.
    let _ = link.window().read_raw().await;
    assert!(!link.is_alive());
}

#[cfg(not(feature = "verbs"))]
#[tokio::test]
async fn verbs_is_refused_when_not_compiled_in() {
    let endpoint = Endpoint::Verbs {
        control: "127.0.0.1:7201".parse().unwrap(),
        device: None,
    };
    let e = expect(1);
    let err = Link::connect(Peer {
        endpoint: &endpoint,
        expect: &e,
        psk: None,
        id: 1,
    })
    .await
    .unwrap_err();
    assert!(err.to_string().contains("not compiled"), "{err}");
}
