use super::*;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A wrapped stream under test, its shared state, the slot a parked
/// stream goes to, and the client's two halves.
struct Conn {
    io: ConnIo<tokio::io::DuplexStream>,
    shared: Arc<ConnShared>,
    slot: Parked<tokio::io::DuplexStream>,
    cr: tokio::io::ReadHalf<tokio::io::DuplexStream>,
    cw: tokio::io::WriteHalf<tokio::io::DuplexStream>,
}

/// A connection speaking `protocol`, without parking.
fn conn(protocol: Protocol) -> Conn {
    let (client, server) = tokio::io::duplex(1 << 20);
    let shared = Arc::new(ConnShared::new(Instant::now()));
    let io = ConnIo::new(server, Arc::clone(&shared), timeouts(), protocol);
    let (cr, cw) = tokio::io::split(client);
    Conn {
        io,
        shared,
        slot: Arc::default(),
        cr,
        cw,
    }
}

/// [`conn`] that parks after 1 s between requests.
fn parked_conn(protocol: Protocol) -> Conn {
    let c = conn(protocol);
    Conn {
        io: c.io.parking(Duration::from_secs(1), Arc::clone(&c.slot)),
        ..c
    }
}

fn timeouts() -> IoTimeouts {
    IoTimeouts {
        http_request: Duration::from_secs(5),
        keep_alive: Duration::from_secs(60),
        client: Duration::from_secs(30),
    }
}

#[tokio::test(start_paused = true)]
async fn partial_head_gets_408_after_http_request() {
    let Conn {
        mut io,
        shared,
        mut cr,
        mut cw,
        ..
    } = conn(Protocol::Detect);
    // "P" alone must not be taken for the HTTP/2 preface.
    cw.write_all(b"P").await.unwrap();
    let mut buf = [0u8; 64];
    assert_eq!(io.read(&mut buf).await.unwrap(), 1);
    cw.write_all(b"OST / HTTP/1.1\r\nHost: a").await.unwrap();
    assert!(io.read(&mut buf).await.unwrap() > 0);
    // No more bytes: after http_request the wrapper answers 408 and
    // reports end-of-stream.
    assert_eq!(io.read(&mut buf).await.unwrap(), 0);
    assert!(shared.timed_out.load(Ordering::Relaxed));
    let mut reply = vec![0u8; REQUEST_TIMEOUT_REPLY.len()];
    cr.read_exact(&mut reply).await.unwrap();
    assert!(reply.starts_with(b"HTTP/1.1 408"));
    assert!(!shared.h2.load(Ordering::Relaxed));
}

#[tokio::test(start_paused = true)]
async fn h2_preface_in_pieces_disables_head_timers() {
    let Conn {
        mut io,
        shared,
        cr: _cr,
        mut cw,
        ..
    } = conn(Protocol::Detect);
    let mut buf = [0u8; 64];
    cw.write_all(&H2_PREFACE[..5]).await.unwrap();
    assert_eq!(io.read(&mut buf).await.unwrap(), 5);
    cw.write_all(&H2_PREFACE[5..]).await.unwrap();
    assert_eq!(io.read(&mut buf).await.unwrap(), H2_PREFACE.len() - 5);
    assert!(shared.h2.load(Ordering::Relaxed));
    // Silence far beyond http_request: still open (HTTP/2 idles are
    // handled by the connection driver, not by this wrapper).
    let r = tokio::time::timeout(Duration::from_secs(120), io.read(&mut buf)).await;
    assert!(r.is_err(), "an HTTP/2 connection was cut by the head timer");
    assert!(!shared.timed_out.load(Ordering::Relaxed));
}

#[tokio::test(start_paused = true)]
async fn idle_keep_alive_closes_quietly() {
    let Conn {
        mut io,
        shared,
        cr: _cr,
        cw: _cw,
        ..
    } = conn(Protocol::Detect);
    // One request came and went.
    shared.request_started();
    shared.request_finished();
    let mut buf = [0u8; 16];
    assert_eq!(io.read(&mut buf).await.unwrap(), 0);
    assert!(!shared.timed_out.load(Ordering::Relaxed));
}

#[tokio::test(start_paused = true)]
async fn h2_preface_on_an_http1_connection_gets_400_and_never_reaches_hyper() {
    let Conn {
        mut io,
        shared,
        mut cr,
        mut cw,
        ..
    } = conn(Protocol::Http1);
    let mut buf = [0u8; 64];
    cw.write_all(&H2_PREFACE[..18]).await.unwrap();
    assert_eq!(io.read(&mut buf).await.unwrap(), 18);
    cw.write_all(&H2_PREFACE[18..]).await.unwrap();
    // The rest is withheld; the stream ends after the wrapper's 400.
    assert_eq!(io.read(&mut buf).await.unwrap(), 0);
    assert!(shared.bad_preface.load(Ordering::Relaxed));
    assert!(!shared.h2.load(Ordering::Relaxed));
    assert!(
        io.write_all(b"HTTP/1.1 400").await.is_err(),
        "a second answer"
    );
    drop(io);
    let mut reply = Vec::new();
    cr.read_to_end(&mut reply).await.unwrap();
    assert_eq!(reply, H2_ON_HTTP1_REPLY);
    let text = String::from_utf8_lossy(&reply);
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    assert!(
        head.contains(&format!("content-length: {}", body.len())),
        "{text}"
    );
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
            } = conn(Protocol::Http1);
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

/// HTTP/1.1 connections are not held: a write reaches the peer at once.
#[tokio::test(start_paused = true)]
async fn http1_writes_pass_through() {
    let Conn {
        mut io,
        shared: _,
        mut cr,
        cw: _cw,
        ..
    } = conn(Protocol::Http1);
    io.write_all(b"HTTP/1.1 200 OK\r\n").await.unwrap();
    let mut buf = [0u8; 64];
    let n = tokio::time::timeout(Duration::from_millis(50), cr.read(&mut buf))
        .await
        .expect("an HTTP/1.1 write was held")
        .unwrap();
    assert_eq!(&buf[..n], b"HTTP/1.1 200 OK\r\n");
}

/// Between requests an HTTP/1 connection parks after the parking delay:
/// hyper reads end-of-stream and the stream, still open, is in the slot.
#[tokio::test(start_paused = true)]
async fn idle_http1_connection_parks_and_keeps_its_stream() {
    let Conn {
        mut io,
        shared,
        slot,
        mut cr,
        mut cw,
    } = parked_conn(Protocol::Http1);
    cw.write_all(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 64];
    assert!(io.read(&mut buf).await.unwrap() > 0);
    shared.request_started();
    io.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
        .await
        .unwrap();
    shared.request_finished();
    let before = tokio::time::Instant::now();
    assert_eq!(
        io.read(&mut buf).await.unwrap(),
        0,
        "parking reads as end of stream"
    );
    assert!(before.elapsed() >= Duration::from_secs(1));
    assert!(shared.parked.load(Ordering::Relaxed));
    // hyper's shutdown of its side does not close the parked socket.
    io.shutdown().await.unwrap();
    drop(io);
    let mut stream = slot
        .lock()
        .unwrap()
        .take()
        .expect("the stream is in the slot");
    let mut head = vec![0u8; 38];
    cr.read_exact(&mut head).await.unwrap();
    cw.write_all(b"GET /next HTTP/1.1\r\n").await.unwrap();
    let n = stream.read(&mut buf).await.unwrap();
    assert_eq!(&buf[..n], b"GET /next HTTP/1.1\r\n");
}

/// A connection in the middle of a request head does not park: the head
/// timer answers 408 as before.
#[tokio::test(start_paused = true)]
async fn partial_head_does_not_park() {
    let Conn {
        mut io,
        shared,
        slot,
        cr: _cr,
        mut cw,
    } = parked_conn(Protocol::Http1);
    cw.write_all(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 64];
    assert!(io.read(&mut buf).await.unwrap() > 0);
    shared.request_started();
    shared.request_finished();
    cw.write_all(b"GET /slow HT").await.unwrap();
    assert!(io.read(&mut buf).await.unwrap() > 0);
    assert_eq!(io.read(&mut buf).await.unwrap(), 0);
    assert!(shared.timed_out.load(Ordering::Relaxed), "408, not parked");
    assert!(!shared.parked.load(Ordering::Relaxed));
    assert!(slot.lock().unwrap().is_none());
}

/// HTTP/2 connections never park (they multiplex; their idle limit is the
/// GOAWAY after `timeouts.keep_alive`).
#[tokio::test(start_paused = true)]
async fn h2_connection_does_not_park() {
    let Conn {
        mut io,
        shared,
        slot,
        cr: _cr,
        mut cw,
    } = parked_conn(Protocol::Http2);
    cw.write_all(H2_PREFACE).await.unwrap();
    let mut buf = [0u8; 64];
    assert!(io.read(&mut buf).await.unwrap() > 0);
    shared.request_started();
    shared.request_finished();
    let idle = tokio::time::timeout(Duration::from_secs(5), io.read(&mut buf)).await;
    assert!(idle.is_err(), "an idle HTTP/2 connection stays with hyper");
    assert!(!shared.parked.load(Ordering::Relaxed));
    assert!(slot.lock().unwrap().is_none());
}

/// A stream that counts the reads that returned bytes (each one a system
/// call on a socket).
struct CountingReads {
    inner: tokio::io::DuplexStream,
    reads: Arc<AtomicUsize>,
}

impl AsyncRead for CountingReads {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let res = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(res, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.reads.fetch_add(1, Ordering::Relaxed);
        }
        res
    }
}

impl AsyncWrite for CountingReads {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// hyper-util's protocol detection reads 24 bytes first: the wrapper takes
/// the whole head from the stream in that one read and gives the rest to
/// the next reads, byte for byte.
#[tokio::test(start_paused = true)]
async fn first_short_read_takes_the_whole_head_in_one_read() {
    let (client, server) = tokio::io::duplex(1 << 20);
    let reads = Arc::new(AtomicUsize::new(0));
    let shared = Arc::new(ConnShared::new(Instant::now()));
    let mut io = ConnIo::new(
        CountingReads {
            inner: server,
            reads: Arc::clone(&reads),
        },
        Arc::clone(&shared),
        timeouts(),
        Protocol::Detect,
    );
    let (_cr, mut cw) = tokio::io::split(client);
    let head = b"GET /some/longer/path HTTP/1.1\r\nHost: bench.localhost\r\nUser-Agent: t\r\n\r\n";
    cw.write_all(head).await.unwrap();
    let mut first = [0u8; 24];
    assert_eq!(io.read(&mut first).await.unwrap(), 24);
    assert_eq!(&first, &head[..24]);
    let mut rest = vec![0u8; 8192];
    let n = io.read(&mut rest).await.unwrap();
    assert_eq!(&rest[..n], &head[24..]);
    assert_eq!(reads.load(Ordering::Relaxed), 1, "one read of the stream");
    assert!(!shared.h2.load(Ordering::Relaxed));
    // Later bytes come from the stream again.
    cw.write_all(b"GET /2 HTTP/1.1\r\n").await.unwrap();
    let n = io.read(&mut rest).await.unwrap();
    assert_eq!(&rest[..n], b"GET /2 HTTP/1.1\r\n");
    assert_eq!(reads.load(Ordering::Relaxed), 2);
}

/// The read-ahead keeps the HTTP/2 preface detection: a preface read in
/// one go, 24 bytes asked at a time, is still HTTP/2 (no head timers).
#[tokio::test(start_paused = true)]
async fn read_ahead_keeps_the_h2_preface_detection() {
    let Conn {
        mut io,
        shared,
        cr: _cr,
        mut cw,
        ..
    } = conn(Protocol::Detect);
    let mut bytes = H2_PREFACE.to_vec();
    bytes.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]); // an empty SETTINGS frame
    cw.write_all(&bytes).await.unwrap();
    let mut first = [0u8; 24];
    assert_eq!(io.read(&mut first).await.unwrap(), 24);
    assert!(shared.h2.load(Ordering::Relaxed));
    let mut rest = [0u8; 64];
    assert_eq!(io.read(&mut rest).await.unwrap(), 9);
    assert_eq!(&rest[..9], &bytes[24..]);
}

/// A response after which hyper closes the connection (`closing`) arms no
/// idle timer in the flush that ends it; a keep-alive one does.
#[tokio::test(start_paused = true)]
async fn closing_response_arms_no_idle_timer() {
    for closing in [false, true] {
        let Conn {
            mut io,
            shared,
            cr: _cr,
            mut cw,
            ..
        } = parked_conn(Protocol::Http1);
        cw.write_all(b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut buf = [0u8; 128];
        assert!(io.read(&mut buf).await.unwrap() > 0);
        shared.request_started();
        shared.closing.store(closing, Ordering::Relaxed);
        // hyper reads on while the response is produced (nothing comes).
        let pending = tokio::time::timeout(Duration::ZERO, io.read(&mut buf)).await;
        assert!(pending.is_err());
        assert!(!io.read_armed);
        io.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
            .await
            .unwrap();
        shared.request_finished();
        io.flush().await.unwrap();
        assert_eq!(io.read_armed, !closing, "closing = {closing}");
    }
}
