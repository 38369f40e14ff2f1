//! tcp-specific refusals: peers without the pre-shared key get nothing
//! (wrong key, no handshake, garbage, forged frames), the responder enforces
//! the remote-atomic area itself (not only the client), stopping the
//! responder closes its connections, and unauthenticated connections can
//! neither hold a slot past the handshake deadline nor keep a real client out.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rdmalb_window::layout::word;
use rdmalb_window::seqlock::snapshot;
use rdmalb_window::tcp::auth::{ClientHandshake, SessionKeys, SERVER_CHALLENGE_LEN};
use rdmalb_window::tcp::frame::{self, ErrorCode, Frame, Message, Reply, Request};
use rdmalb_window::tcp::{self, Psk, ServeOptions, TcpServerHandle};
use rdmalb_window::{
    publish, Expect, LoadSample, RemoteWindow, TcpWindow, WindowError, WindowMemory,
};

struct Server {
    mem: Arc<WindowMemory>,
    handle: TcpServerHandle,
    psk: Psk,
    _stop: tokio::sync::watch::Sender<bool>,
}

fn server() -> Server {
    let mem = Arc::new(WindowMemory::anonymous(3, 77).unwrap());
    publish(
        &mem,
        &LoadSample {
            cpu_util_ppm: 123,
            ..Default::default()
        },
    );
    let psk = Psk::generate();
    let (tx, rx) = tokio::sync::watch::channel(false);
    let handle = tcp::serve(mem.clone(), "127.0.0.1:0".parse().unwrap(), psk.clone(), rx).unwrap();
    Server {
        mem,
        handle,
        psk,
        _stop: tx,
    }
}

fn raw_connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    // Bounds every read below; the responder closes far sooner.
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

/// Read until EOF; returns what the responder sent before closing.
fn drain_until_closed(s: &mut TcpStream) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return got,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return got,
            Err(e) => panic!("responder neither answered nor closed: {e}"),
        }
    }
}

/// Authenticate with the real handshake over a blocking socket.
fn authenticate(addr: SocketAddr, psk: &Psk) -> (TcpStream, SessionKeys) {
    let mut s = raw_connect(addr);
    let (hs, hello) = ClientHandshake::start(psk, 9);
    s.write_all(&hello).unwrap();
    let mut ch = [0u8; SERVER_CHALLENGE_LEN];
    s.read_exact(&mut ch).unwrap();
    let (fin, keys) = hs.finish(&ch).unwrap();
    s.write_all(&fin).unwrap();
    (s, keys)
}

/// Read the next reply; `pending` keeps bytes of later frames between calls.
fn read_reply(s: &mut TcpStream, keys: &mut SessionKeys, pending: &mut Vec<u8>) -> Frame {
    let mut chunk = [0u8; 512];
    loop {
        if let Some(d) = frame::decode(pending).unwrap() {
            let f = keys.recv.open(&d).unwrap();
            let used = d.consumed;
            pending.drain(..used);
            return f;
        }
        let n = s.read(&mut chunk).unwrap();
        assert!(n > 0, "responder closed instead of replying");
        pending.extend_from_slice(&chunk[..n]);
    }
}

#[tokio::test]
async fn wrong_psk_is_refused() {
    let srv = server();
    let wrong = Psk::generate();
    let err = TcpWindow::connect(srv.handle.local_addr(), &wrong, 1, &Expect::ANY)
        .await
        .unwrap_err();
    assert!(matches!(err, WindowError::Auth { .. }), "{err}");
    assert!(err.to_string().contains("pre-shared key"), "{err}");
    // The right key works on the same responder.
    let ok = TcpWindow::connect(srv.handle.local_addr(), &srv.psk, 1, &Expect::ANY)
        .await
        .unwrap();
    assert_eq!(ok.read_word(word::ROLE).await.unwrap(), 0);
}

#[test]
fn request_without_handshake_gets_nothing() {
    let srv = server();
    let before = snapshot(&srv.mem);
    let mut s = raw_connect(srv.handle.local_addr());
    // A well-formed CAS frame with a made-up tag, sent where HELLO belongs,
    // padded to HELLO length so the responder reads it all.
    let mut bytes = Vec::new();
    frame::encode_unsealed(
        &Frame {
            id: 1,
            msg: Message::Request(Request::Cas {
                word: word::ROLE as u32,
                expected: 0,
                new: 0xDEAD,
            }),
        },
        &mut bytes,
    );
    bytes.resize(48, 0);
    s.write_all(&bytes).unwrap();
    let got = drain_until_closed(&mut s);
    assert!(got.is_empty(), "responder sent {} bytes", got.len());
    assert_eq!(srv.mem.load(word::ROLE), Some(0));
    assert_eq!(snapshot(&srv.mem), before);
}

#[test]
fn garbage_is_refused_without_reply() {
    let srv = server();
    let mut s = raw_connect(srv.handle.local_addr());
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n0123456789012345678901")
        .unwrap();
    assert!(drain_until_closed(&mut s).is_empty());
}

#[test]
fn forged_finish_is_refused() {
    let srv = server();
    let mut s = raw_connect(srv.handle.local_addr());
    let (_hs, hello) = ClientHandshake::start(&srv.psk, 9);
    s.write_all(&hello).unwrap();
    let mut ch = [0u8; SERVER_CHALLENGE_LEN];
    s.read_exact(&mut ch).unwrap();
    // Echo the server's own proof back as ours.
    s.write_all(&ch[40..]).unwrap();
    let mut bytes = Vec::new();
    frame::encode_unsealed(
        &Frame {
            id: 1,
            msg: Message::Request(Request::Read),
        },
        &mut bytes,
    );
    bytes.extend_from_slice(&[0u8; 16]);
    let _ = s.write_all(&bytes);
    assert!(drain_until_closed(&mut s).is_empty());
}

#[test]
fn responder_enforces_the_atomic_area_itself() {
    let srv = server();
    let before = snapshot(&srv.mem);
    let (mut s, mut keys) = authenticate(srv.handle.local_addr(), &srv.psk);
    // Pipeline several requests in one write, bypassing the client's checks.
    let reqs = [
        Request::Cas {
            word: word::CPU_UTIL as u32,
            expected: 123,
            new: 0,
        },
        Request::Faa {
            word: word::SEQ_BEGIN as u32,
            delta: 1,
        },
        Request::Cas {
            word: word::MAGIC as u32,
            expected: before[0],
            new: 0,
        },
        Request::ReadWord { word: 600 },
        Request::Faa {
            word: word::ROLE as u32,
            delta: 5,
        },
        Request::Read,
    ];
    let mut out = Vec::new();
    for (i, r) in reqs.iter().enumerate() {
        keys.send.seal(
            &Frame {
                id: i as u32 + 10,
                msg: Message::Request(*r),
            },
            &mut out,
        );
    }
    s.write_all(&out).unwrap();
    let mut pending = Vec::new();
    let replies: Vec<Frame> = (0..reqs.len())
        .map(|_| read_reply(&mut s, &mut keys, &mut pending))
        .collect();
    for (i, f) in replies.iter().enumerate().take(4) {
        assert_eq!(f.id, i as u32 + 10);
        assert!(
            matches!(
                f.msg,
                Message::Reply(Reply::Error {
                    code: ErrorCode::Refused,
                    ..
                })
            ),
            "{f:?}"
        );
    }
    assert_eq!(replies[4].msg, Message::Reply(Reply::Word(0)));
    assert_eq!(replies[5].msg, Message::Reply(Reply::Block(before)));
    assert_eq!(
        snapshot(&srv.mem),
        before,
        "header and load block unchanged"
    );
    assert_eq!(srv.mem.load(word::ROLE), Some(5));
}

#[test]
fn tampered_frame_closes_the_connection() {
    let srv = server();
    let (mut s, mut keys) = authenticate(srv.handle.local_addr(), &srv.psk);
    let mut out = Vec::new();
    keys.send.seal(
        &Frame {
            id: 1,
            msg: Message::Request(Request::Faa {
                word: word::ROLE as u32,
                delta: 1,
            }),
        },
        &mut out,
    );
    out[12] ^= 0x40; // change the word index under the tag
    s.write_all(&out).unwrap();
    assert!(drain_until_closed(&mut s).is_empty());
    assert_eq!(srv.mem.load(word::ROLE), Some(0));
}

#[tokio::test]
async fn shutdown_signal_stops_the_responder_and_closes_clients() {
    let mem = Arc::new(WindowMemory::anonymous(1, 1).unwrap());
    let psk = Psk::generate();
    let (tx, rx) = tokio::sync::watch::channel(false);
    let handle = tcp::serve(mem, "127.0.0.1:0".parse().unwrap(), psk.clone(), rx).unwrap();
    let addr = handle.local_addr();
    let w = TcpWindow::connect(addr, &psk, 1, &Expect::ANY)
        .await
        .unwrap();
    assert_eq!(handle.connections(), 1);
    tx.send(true).unwrap();
    // Wait (bounded) for the client to see the close.
    let mut closed = false;
    for _ in 0..200 {
        if w.read_word(32).await.is_err() {
            closed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(closed, "client still served after shutdown");
    assert!(matches!(
        w.read_raw().await,
        Err(WindowError::Closed { .. })
    ));
    tokio::task::spawn_blocking(move || handle.stop())
        .await
        .unwrap();
    assert!(TcpWindow::connect(addr, &psk, 1, &Expect::ANY)
        .await
        .is_err());
}

#[test]
fn bind_errors_surface_at_start() {
    let first = server();
    let (_tx, rx) = tokio::sync::watch::channel(false);
    let err = tcp::serve(
        first.mem.clone(),
        first.handle.local_addr(),
        first.psk.clone(),
        rx,
    )
    .unwrap_err();
    assert!(matches!(err, WindowError::Io { .. }), "{err}");
    assert!(err
        .to_string()
        .contains(&first.handle.local_addr().to_string()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_requests_in_flight_on_one_connection() {
    let srv = server();
    let w = TcpWindow::connect(srv.handle.local_addr(), &srv.psk, 1, &Expect::ANY)
        .await
        .unwrap();
    const N: u64 = 1_000;
    // All issued before any reply is awaited: the replies are matched to
    // their callers by request id.
    let adds = (0..N).map(|_| w.fetch_add(word::ROLE + 1, 1));
    let reads = (0..N / 10).map(|_| w.read_raw());
    let (olds, blocks) = tokio::join!(
        futures_util::future::join_all(adds),
        futures_util::future::join_all(reads)
    );
    let mut olds: Vec<u64> = olds.into_iter().map(Result::unwrap).collect();
    olds.sort_unstable();
    assert_eq!(olds, (0..N).collect::<Vec<_>>());
    for b in blocks {
        assert_eq!(b.unwrap()[word::CPU_UTIL], 123);
    }
    assert_eq!(srv.mem.load(word::ROLE + 1), Some(N));
    assert!(srv.handle.requests_served() >= N + N / 10);
}

/// A client sending its HELLO one byte a second never lets a single read
/// wait long, yet it is cut at the whole-handshake deadline.
#[test]
fn trickled_handshake_is_cut_at_the_deadline() {
    let mem = Arc::new(WindowMemory::anonymous(1, 1).unwrap());
    let psk = Psk::generate();
    let (_tx, rx) = tokio::sync::watch::channel(false);
    let opts = ServeOptions {
        handshake_deadline: Duration::from_secs(2),
        ..ServeOptions::default()
    };
    let handle =
        tcp::serve_with(mem, "127.0.0.1:0".parse().unwrap(), psk.clone(), rx, opts).unwrap();
    let mut s = TcpStream::connect(handle.local_addr()).unwrap();
    let (_hs, hello) = ClientHandshake::start(&psk, 9);
    let mut writer = s.try_clone().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let trickle = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            for b in hello {
                if stop.load(Ordering::SeqCst) || writer.write_all(&[b]).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_secs(1));
            }
        })
    };
    // A generous bound on waiting, still far short of the 48 s the whole
    // HELLO takes at this pace (after which the responder would answer).
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let got = s.read(&mut [0u8; 1]);
    stop.store(true, Ordering::SeqCst);
    trickle.join().unwrap();
    let closed = match &got {
        Ok(0) => true,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        Ok(_) => false,
    };
    assert!(
        closed,
        "responder still holds a trickling handshake: {got:?}"
    );
}

/// Connections that never say anything fill every slot a connection in the
/// handshake can have; a client with the key still connects and is served.
#[tokio::test]
async fn silent_connections_do_not_keep_a_real_client_out() {
    let srv = server();
    let addr = srv.handle.local_addr();
    let silent: Vec<TcpStream> = (0..tcp::MAX_CONNECTIONS)
        .map(|_| TcpStream::connect(addr).unwrap())
        .collect();
    // The responder accepts in order, so this one comes after all of them.
    let w = TcpWindow::connect(addr, &srv.psk, 1, &Expect::ANY)
        .await
        .unwrap();
    assert_eq!(w.read_word(word::ROLE).await.unwrap(), 0);
    assert!(srv.handle.refusals().handshakes_evicted > 0);
    drop(silent);
}

/// Sessions have a limit of their own: a client authenticating beyond it is
/// closed and counted, and the sessions already open keep being served.
#[tokio::test]
async fn sessions_beyond_the_limit_are_refused() {
    let mem = Arc::new(WindowMemory::anonymous(1, 1).unwrap());
    let psk = Psk::generate();
    let (_tx, rx) = tokio::sync::watch::channel(false);
    let opts = ServeOptions {
        max_sessions: 1,
        ..ServeOptions::default()
    };
    let handle =
        tcp::serve_with(mem, "127.0.0.1:0".parse().unwrap(), psk.clone(), rx, opts).unwrap();
    let first = TcpWindow::connect(handle.local_addr(), &psk, 1, &Expect::ANY)
        .await
        .unwrap();
    let second = TcpWindow::connect(handle.local_addr(), &psk, 2, &Expect::ANY).await;
    assert!(second.is_err(), "a second session was served");
    assert_eq!(handle.refusals().sessions_full, 1);
    assert_eq!(first.read_word(word::ROLE).await.unwrap(), 0);
}
