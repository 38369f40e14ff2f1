use super::*;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A wrapped stream under test, its shared state, and the client's two
/// halves.
struct Conn {
    io: ConnIo<tokio::io::DuplexStream>,
    shared: Arc<ConnShared>,
    cr: tokio::io::ReadHalf<tokio::io::DuplexStream>,
    cw: tokio::io::WriteHalf<tokio::io::DuplexStream>,
}

/// A connection speaking `protocol`.
fn conn(protocol: Protocol) -> Conn {
    let (client, server) = tokio::io::duplex(1 << 20);
    let shared = Arc::new(ConnShared::new(Instant::now()));
    let io = ConnIo::new(server, Arc::clone(&shared), timeouts(), protocol);
    let (cr, cw) = tokio::io::split(client);
    Conn { io, shared, cr, cw }
}

fn timeouts() -> IoTimeouts {
    IoTimeouts {
        http_request: Duration::from_secs(5),
        keep_alive: Duration::from_secs(60),
        client: Duration::from_secs(30),
    }
}

#[tokio::test(start_paused = true)]
async fn http1_on_an_h2_connection_is_refused_before_hyper_reads_it() {
    let Conn {
        mut io,
        shared,
        cr: _cr,
        mut cw,
        ..
    } = conn(Protocol::Http2);
    assert!(shared.h2.load(Ordering::Relaxed));
    let mut buf = [0u8; 64];
    cw.write_all(b"GET / HTTP/1.1\r\n").await.unwrap();
    let err = io.read(&mut buf).await.unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
    assert!(shared.bad_preface.load(Ordering::Relaxed));
    // The preface itself is let through.
    let Conn {
        mut io,
        shared,
        cr: _cr,
        mut cw,
        ..
    } = conn(Protocol::Http2);
    cw.write_all(H2_PREFACE).await.unwrap();
    assert_eq!(io.read(&mut buf).await.unwrap(), H2_PREFACE.len());
    assert!(!shared.bad_preface.load(Ordering::Relaxed));
}

/// Nothing written on an HTTP/2 connection reaches the peer before a flush;
/// the flush passes every held write on at once.
#[tokio::test(start_paused = true)]
async fn h2_writes_are_held_until_flush() {
    let Conn {
        mut io,
        shared: _,
        mut cr,
        cw: _cw,
        ..
    } = conn(Protocol::Http2);
    io.write_all(b"frame one;").await.unwrap();
    io.write_all(b"frame two").await.unwrap();
    let mut buf = [0u8; 64];
    let early = tokio::time::timeout(Duration::from_millis(50), cr.read(&mut buf)).await;
    assert!(early.is_err(), "held bytes reached the peer before a flush");
    io.flush().await.unwrap();
    let n = cr.read(&mut buf).await.unwrap();
    assert_eq!(&buf[..n], b"frame one;frame two");
}

/// A current-thread runtime set up as a worker's: it ends the hold epoch
/// before it parks.
fn worker_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .on_thread_park(flush_held)
        .build()
        .unwrap()
}

/// Whether `cr` has nothing to read right now.
async fn nothing_to_read(cr: &mut tokio::io::ReadHalf<tokio::io::DuplexStream>) -> bool {
    let mut buf = [0u8; 64];
    std::future::poll_fn(|cx| {
        let mut rb = ReadBuf::new(&mut buf);
        Poll::Ready(Pin::new(&mut *cr).poll_read(cx, &mut rb).is_pending())
    })
    .await
}

/// What hyper's HTTP/2 connection does: flush each time its task is woken,
/// until nothing is held.
async fn flush_until_written(io: &mut ConnIo<tokio::io::DuplexStream>) {
    std::future::poll_fn(|cx| {
        if let Poll::Ready(Err(e)) = Pin::new(&mut *io).poll_flush(cx) {
            panic!("flush failed: {e}");
        }
        if io.out.is_empty() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await
}

/// On a worker, flushes with held bytes return at once and nothing leaves
/// while the worker has tasks to run; when it runs out of them, everything
/// held leaves in one write.
#[test]
fn h2_flush_waits_until_the_worker_runs_out_of_tasks() {
    worker_runtime().block_on(async {
        hold_writes_until_park();
        let Conn {
            mut io,
            mut cr,
            cw: _cw,
            ..
        } = conn(Protocol::Http2);
        io.write_all(b"one;").await.unwrap();
        io.flush().await.unwrap();
        // A scheduler round passes without the worker running out of
        // tasks (a yield keeps it from parking): still held.
        tokio::task::yield_now().await;
        io.write_all(b"two").await.unwrap();
        io.flush().await.unwrap();
        assert!(
            nothing_to_read(&mut cr).await,
            "held bytes left before the worker ran out of tasks"
        );
        flush_until_written(&mut io).await;
        let mut buf = [0u8; 64];
        let n = cr.read(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"one;two");
        // Nothing held: a flush writes through at once.
        io.flush().await.unwrap();
    });
}

/// A worker that never runs out of tasks still writes held bytes: the
/// epoch ends after `MAX_HOLD`, seen by its other connections' reads.
#[test]
fn h2_held_writes_leave_on_a_busy_worker() {
    worker_runtime().block_on(async {
        hold_writes_until_park();
        let Conn {
            mut io,
            mut cr,
            cw: _cw,
            ..
        } = conn(Protocol::Http2);
        let got = Arc::new(AtomicBool::new(false));
        // Busy: yields (which never lets the runtime park) and polls another
        // connection's read, until the bytes arrived (or 30 s passed, so a
        // failure cannot hang the test).
        let flag = Arc::clone(&got);
        let busy = tokio::spawn(async move {
            let Conn {
                io: mut other,
                cw: _ocw,
                ..
            } = conn(Protocol::Detect);
            let start = Instant::now();
            while !flag.load(Ordering::SeqCst) && start.elapsed() < Duration::from_secs(30) {
                let mut buf = [0u8; 16];
                std::future::poll_fn(|cx| {
                    let mut rb = ReadBuf::new(&mut buf);
                    let _ = Pin::new(&mut other).poll_read(cx, &mut rb);
                    Poll::Ready(())
                })
                .await;
                tokio::task::yield_now().await;
            }
            flag.load(Ordering::SeqCst)
        });
        io.write_all(b"response").await.unwrap();
        io.flush().await.unwrap();
        flush_until_written(&mut io).await;
        let mut buf = [0u8; 16];
        let n = cr.read(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"response");
        got.store(true, Ordering::SeqCst);
        assert!(
            busy.await.unwrap(),
            "the held bytes waited for the busy task to give up"
        );
    });
}

/// Off a worker (no hook ends the epoch), an HTTP/2 flush writes at once.
#[tokio::test]
async fn h2_flush_off_a_worker_writes_at_once() {
    let Conn {
        mut io,
        mut cr,
        cw: _cw,
        ..
    } = conn(Protocol::Http2);
    io.write_all(b"response").await.unwrap();
    io.flush().await.unwrap();
    let mut buf = [0u8; 16];
    let n = cr.read(&mut buf).await.unwrap();
    assert_eq!(&buf[..n], b"response");
}

/// The held bytes' buffer is kept from one write to the next while a
/// request is in progress, and freed when the connection has none.
#[tokio::test]
async fn h2_held_buffer_is_kept_only_while_a_request_is_active() {
    let Conn {
        mut io,
        shared,
        mut cr,
        cw: _cw,
        ..
    } = conn(Protocol::Http2);
    shared.request_started();
    io.write_all(b"headers;").await.unwrap();
    io.flush().await.unwrap();
    assert!(io.out.is_empty() && io.out.capacity() >= OUT_FIRST);
    shared.request_finished();
    io.write_all(b"end").await.unwrap();
    io.flush().await.unwrap();
    assert_eq!(io.out.capacity(), 0, "an idle connection kept its buffer");
    let mut buf = [0u8; 11];
    cr.read_exact(&mut buf).await.unwrap();
    assert_eq!(&buf, b"headers;end");
}

/// More than the holding limit in one go arrives whole and in order, and a
/// shutdown passes held bytes on first.
#[tokio::test(start_paused = true)]
async fn h2_large_writes_arrive_in_order() {
    let Conn {
        mut io,
        shared: _,
        mut cr,
        cw: _cw,
        ..
    } = conn(Protocol::Http2);
    let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    let reader = tokio::spawn(async move {
        let mut got = Vec::new();
        cr.read_to_end(&mut got).await.unwrap();
        got
    });
    for chunk in data.chunks(7_000) {
        io.write_all(chunk).await.unwrap();
    }
    io.write_all(b"tail").await.unwrap();
    io.shutdown().await.unwrap();
    drop(io);
    let got = reader.await.unwrap();
    assert_eq!(got.len(), data.len() + 4);
    assert_eq!(&got[..data.len()], &data[..]);
    assert_eq!(&got[data.len()..], b"tail");
}
