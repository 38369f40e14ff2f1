//! The agent-check responder: the weight mapping, the words for each role
//! and app state, the line format, and serving real connections (with and
//! without `agent-send` text, beyond the connection bound).

use rdmalb_window::SiteSlot;

use super::*;
use crate::collect::CollectError;

fn sample(cpu_ppm: u64, busy: u64, queue: u64, capacity: u64) -> LoadSample {
    LoadSample {
        cpu_util_ppm: cpu_ppm,
        app_busy: busy,
        app_queue_len: queue,
        app_capacity: capacity,
        ..LoadSample::default()
    }
}

#[test]
fn the_weight_falls_with_load() {
    assert_eq!(weight_percent(&LoadSample::default()), 100, "idle");
    assert_eq!(weight_percent(&sample(250_000, 0, 0, 0)), 75, "cpu 25 %");
    assert_eq!(weight_percent(&sample(0, 2, 0, 8)), 75, "app 2 of 8 busy");
    assert_eq!(weight_percent(&sample(0, 4, 2, 8)), 25, "queue counts");
    assert_eq!(
        weight_percent(&sample(100_000, 6, 0, 8)),
        25,
        "the larger wins"
    );
    assert_eq!(weight_percent(&sample(900_000, 1, 0, 8)), 10);
    assert_eq!(
        weight_percent(&sample(0, 8, 0, 8)),
        MIN_PERCENT,
        "saturated"
    );
    assert_eq!(
        weight_percent(&sample(0, 50, 90, 8)),
        MIN_PERCENT,
        "overloaded"
    );
    assert_eq!(weight_percent(&sample(2_000_000, 0, 0, 0)), MIN_PERCENT);
    assert_eq!(
        weight_percent(&sample(0, 5, 0, 0)),
        100,
        "busy without a capacity says nothing"
    );
    assert_eq!(
        weight_percent(&sample(0, u64::MAX, u64::MAX, 8)),
        MIN_PERCENT
    );
    // Monotone: more load never raises the weight.
    let mut last = 100;
    for busy in 0..=10 {
        let w = weight_percent(&sample(0, busy, 0, 10));
        assert!(w <= last, "busy {busy}: {w} > {last}");
        last = w;
    }
}

fn sites() -> Vec<String> {
    vec!["shop".into(), "blog".into()]
}

fn role(site: SiteSlot, state: RoleState, epoch: u64) -> Option<RoleWord> {
    Some(RoleWord { site, state, epoch })
}

#[test]
fn ready_only_while_serving_an_applied_site() {
    let s = sample(0, 1, 0, 4);
    let a = answer(
        &s,
        role(SiteSlot::Site(0), RoleState::Active, 3),
        3,
        None,
        &sites(),
    );
    assert_eq!(a.to_string(), "up ready 75%");

    let cases = [
        (
            role(SiteSlot::Site(1), RoleState::Switching, 4),
            3,
            "up drain 75% # switching to blog",
        ),
        (
            role(SiteSlot::Site(1), RoleState::Active, 4),
            3,
            "up drain 75% # switching to blog",
        ),
        (
            role(SiteSlot::Idle, RoleState::Active, 4),
            4,
            "up drain 75% # idle pool",
        ),
        (
            role(SiteSlot::Site(0), RoleState::Failed, 5),
            4,
            "up drain 75% # role failed for shop",
        ),
        (
            role(SiteSlot::Site(0), RoleState::Draining, 5),
            5,
            "up drain 75% # role draining for shop",
        ),
        (None, 0, "up drain 75% # role word unreadable"),
    ];
    for (r, applied, want) in cases {
        assert_eq!(answer(&s, r, applied, None, &sites()).to_string(), want);
    }
}

#[test]
fn a_failing_app_probe_says_down() {
    let a = answer(
        &LoadSample::default(),
        role(SiteSlot::Site(0), RoleState::Active, 1),
        1,
        Some("status#1: status page http://127.0.0.1:8/: refused\r\nx".into()),
        &sites(),
    );
    assert!(!a.up);
    assert!(a.ready);
    assert_eq!(
        a.to_string(),
        "down ready 100% # app down: status#1: status page http://127.0.0.1:8/: refused  x",
        "control characters never end the line early"
    );
    let long = answer(
        &LoadSample::default(),
        None,
        0,
        Some("e".repeat(5000)),
        &sites(),
    );
    assert!(long.to_string().len() < 300);
}

/// A view of a real (anonymous) window with the role `site`, applied, and
/// a `status` collector slot the test can fail.
fn view(site: SiteSlot, load: LoadSample) -> (NodeView, Arc<Slot>) {
    let memory = Arc::new(WindowMemory::anonymous(7, 0).unwrap());
    memory.words()[word::ROLE].store(
        RoleWord {
            site,
            state: RoleState::Active,
            epoch: 1,
        }
        .encode(),
        std::sync::atomic::Ordering::Release,
    );
    memory.words()[word::ROLE_APPLIED].store(1, std::sync::atomic::Ordering::Release);
    rdmalb_window::publish(&memory, &load);
    let probe = Slot::new("status#0".into(), "n1".into());
    let v = NodeView {
        memory,
        app_probes: vec![Arc::clone(&probe)],
        sites: sites(),
    };
    (v, probe)
}

#[test]
fn the_view_reads_the_window_and_the_probes() {
    let (v, probe) = view(SiteSlot::Site(1), sample(0, 3, 0, 4));
    assert_eq!(v.answer().to_string(), "up ready 25%");
    probe.record_error(&CollectError::Http {
        url: "http://127.0.0.1:8/".into(),
        detail: "connection refused".into(),
    });
    assert_eq!(
        v.answer().to_string(),
        "down ready 25% # app down: status#0: status page http://127.0.0.1:8/: connection refused"
    );
    let (idle, _) = view(SiteSlot::Idle, LoadSample::default());
    assert_eq!(idle.answer().to_string(), "up drain 100% # idle pool");
}

async fn serve(v: NodeView) -> (SocketAddr, watch::Sender<bool>, tokio::task::JoinHandle<()>) {
    serve_with(v, CONNECTION_DEADLINE).await
}

async fn serve_with(
    v: NodeView,
    deadline: Duration,
) -> (SocketAddr, watch::Sender<bool>, tokio::task::JoinHandle<()>) {
    let mut server = Server::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    server.deadline = deadline;
    let addr = server.local_addr().unwrap();
    let (tx, rx) = watch::channel(false);
    let task = tokio::spawn(server.run(v, "n1".into(), rx));
    (addr, tx, task)
}

async fn read_all(stream: &mut TcpStream) -> String {
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut out))
        .await
        .expect("the responder closes")
        .unwrap();
    String::from_utf8(out).unwrap()
}

#[tokio::test]
async fn each_connection_gets_one_line_and_eof() {
    let (v, _probe) = view(SiteSlot::Site(0), sample(500_000, 0, 0, 0));
    let (addr, stop, task) = serve(v).await;
    for _ in 0..3 {
        let mut s = TcpStream::connect(addr).await.unwrap();
        assert_eq!(read_all(&mut s).await, "up ready 50%\n");
    }
    // HAProxy's agent-send: text first, never needed for the reply.
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(b"shop backend hello\n").await.unwrap();
    assert_eq!(read_all(&mut s).await, "up ready 50%\n");
    // A peer that keeps the connection open after reading still gets its
    // line at once; its agent-send text (even a lot) does not block it.
    let mut s = TcpStream::connect(addr).await.unwrap();
    let mut line = [0u8; 13];
    tokio::time::timeout(Duration::from_secs(10), s.read_exact(&mut line))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&line, b"up ready 50%\n");
    s.write_all(&[b'x'; 10_000]).await.unwrap_or(());
    stop.send(true).unwrap();
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("stops on shutdown")
        .unwrap();
}

#[tokio::test]
async fn connections_beyond_the_bound_are_closed_without_a_reply() {
    let (v, _probe) = view(SiteSlot::Site(0), LoadSample::default());
    // A deadline no test run reaches: the held connections keep their slots.
    let (addr, stop, task) = serve_with(v, Duration::from_secs(3600)).await;
    // Hold MAX_CONNECTIONS connections open (they send nothing and never
    // close, so each keeps its slot until its deadline).
    let mut held = Vec::new();
    for _ in 0..MAX_CONNECTIONS {
        let mut s = TcpStream::connect(addr).await.unwrap();
        let mut line = [0u8; 14];
        s.read_exact(&mut line).await.unwrap();
        assert_eq!(&line, b"up ready 100%\n");
        held.push(s);
    }
    let mut extra = TcpStream::connect(addr).await.unwrap();
    assert_eq!(read_all(&mut extra).await, "", "refused: closed at once");
    drop(held);
    stop.send(true).unwrap();
    task.await.unwrap();
}
