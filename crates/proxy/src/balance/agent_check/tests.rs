//! The agent-check client: the reply parser word by word, line framing,
//! applying a reply to a node, and the loop against real agents (TCP
//! listeners on loopback writing a line, as HAProxy agents do).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

use super::*;
use crate::config::Config;
use crate::fixtures::eventually;

fn weight(w: Weight) -> Reply {
    Reply {
        weight: Some(w),
        ..Reply::default()
    }
}

#[test]
fn every_word_alone() {
    let cases: Vec<(&str, Reply)> = vec![
        ("75%", weight(Weight::Percent(75))),
        ("0%", weight(Weight::Percent(0))),
        ("weight:40%", weight(Weight::Percent(40))),
        ("weight:12", weight(Weight::Absolute(12))),
        ("weight:0", weight(Weight::Absolute(0))),
        (
            "ready",
            Reply {
                admin: Some(AdminState::Ready),
                ..Reply::default()
            },
        ),
        (
            "drain",
            Reply {
                admin: Some(AdminState::Drain),
                ..Reply::default()
            },
        ),
        (
            "maint",
            Reply {
                admin: Some(AdminState::Maint),
                ..Reply::default()
            },
        ),
        (
            "up",
            Reply {
                health: Some(Health::Up),
                ..Reply::default()
            },
        ),
        (
            "down",
            Reply {
                health: Some(Health::Down(DownWord::Down)),
                ..Reply::default()
            },
        ),
        (
            "fail",
            Reply {
                health: Some(Health::Down(DownWord::Fail)),
                ..Reply::default()
            },
        ),
        (
            "stopped",
            Reply {
                health: Some(Health::Down(DownWord::Stopped)),
                ..Reply::default()
            },
        ),
        (
            "maxconn:30",
            Reply {
                max_inflight: Some(Some(30)),
                ..Reply::default()
            },
        ),
        (
            "maxconn:0",
            Reply {
                max_inflight: Some(None),
                ..Reply::default()
            },
        ),
        ("", Reply::default()),
        (" \t, ", Reply::default()),
    ];
    for (line, want) in cases {
        assert_eq!(parse(line), want, "line {line:?}");
    }
}

#[test]
fn words_are_case_insensitive() {
    let r = parse("UP Drain MaxConn:5 WEIGHT:7");
    assert_eq!(r.health, Some(Health::Up));
    assert_eq!(r.admin, Some(AdminState::Drain));
    assert_eq!(r.max_inflight, Some(Some(5)));
    assert_eq!(r.weight, Some(Weight::Absolute(7)));
    assert!(r.problems.is_empty(), "{:?}", r.problems);
}

#[test]
fn a_mix_in_any_order_with_every_separator() {
    let r = parse("50%,drain\tdown  maxconn:10 # going away for a while ");
    assert_eq!(r.weight, Some(Weight::Percent(50)));
    assert_eq!(r.admin, Some(AdminState::Drain));
    assert_eq!(r.health, Some(Health::Down(DownWord::Down)));
    assert_eq!(r.max_inflight, Some(Some(10)));
    assert_eq!(r.description.as_deref(), Some("going away for a while"));
    assert!(r.problems.is_empty());
}

#[test]
fn the_last_word_of_a_kind_wins() {
    let r = parse("drain ready 10% 20% down up maxconn:1 maxconn:2");
    assert_eq!(r.admin, Some(AdminState::Ready));
    assert_eq!(r.weight, Some(Weight::Percent(20)));
    assert_eq!(r.health, Some(Health::Up));
    assert_eq!(r.max_inflight, Some(Some(2)));
}

#[test]
fn a_description_ends_the_words() {
    let r = parse("up #drain 5% maint");
    assert_eq!(r.health, Some(Health::Up));
    assert_eq!(r.admin, None, "words after # are description");
    assert_eq!(r.description.as_deref(), Some("drain 5% maint"));
    // A # inside a word is part of that word.
    let r = parse("up#x");
    assert_eq!(r.problems, vec![WordError::Unknown("up#x".into())]);
    assert_eq!(parse("#").description, None);
}

#[test]
fn large_percentages_saturate() {
    assert_eq!(parse("300%").weight, Some(Weight::Percent(300)));
    assert_eq!(parse("99999%").weight, Some(Weight::Percent(25_600)));
    assert_eq!(
        parse("99999999999999999999999999%").weight,
        Some(Weight::Percent(25_600))
    );
}

#[test]
fn garbage_is_reported_and_the_rest_applies() {
    let r = parse("hello up 50% x");
    assert_eq!(r.health, Some(Health::Up));
    assert_eq!(r.weight, Some(Weight::Percent(50)));
    assert_eq!(
        r.problems,
        vec![
            WordError::Unknown("hello".into()),
            WordError::Unknown("x".into())
        ]
    );
    let shown = r.problems[0].to_string();
    assert!(shown.contains("unknown word `hello`"), "{shown}");
    assert!(shown.contains("expected N%"), "{shown}");
}

#[test]
fn malformed_weights_and_caps_name_the_problem() {
    let bad: &[(&str, &str)] = &[
        ("5%x", "trailing characters after %"),
        ("5%%", "expected a non-negative integer"),
        ("weight:", "expected N% or N"),
        ("weight:abc", "expected a non-negative integer"),
        ("weight:-3", "expected a non-negative integer"),
        ("weight:257", "0..=256"),
        ("weight:%", "expected a non-negative integer"),
    ];
    for (word, why) in bad {
        let r = parse(word);
        assert_eq!(r.weight, None, "{word}");
        assert_eq!(r.problems.len(), 1, "{word}: {:?}", r.problems);
        let shown = r.problems[0].to_string();
        assert!(shown.contains(&format!("bad weight `{word}`")), "{shown}");
        assert!(shown.contains(why), "{word}: {shown}");
    }
    for word in ["maxconn:", "maxconn:-1", "maxconn:x1", "maxconn:1.5"] {
        let r = parse(word);
        assert_eq!(r.max_inflight, None, "{word}");
        let shown = r.problems[0].to_string();
        assert!(shown.contains(&format!("bad maxconn `{word}`")), "{shown}");
        assert!(shown.contains("non-negative integer"), "{shown}");
    }
    let r = parse("maxconn:99999999999999999999999");
    assert!(r.problems[0].to_string().contains("too large"));
    // Not a weight at all: a percent sign without a leading digit.
    assert_eq!(
        parse("%50").problems,
        vec![WordError::Unknown("%50".into())]
    );
}

#[test]
fn framing_takes_the_first_line() {
    assert_eq!(frame(b"up 50%\n", false), Ok(Some("up 50%")));
    assert_eq!(frame(b"up\r\n", true), Ok(Some("up")));
    assert_eq!(frame(b"drain\rup\n", true), Ok(Some("drain")));
    assert_eq!(frame(b"\n", true), Ok(Some("")));
    assert_eq!(frame(b"up 5", false), Ok(None), "wait for the rest");
}

#[test]
fn framing_rejects_what_is_not_one_line() {
    assert_eq!(frame(b"up 50%", true), Err(ReplyError::Incomplete));
    assert_eq!(frame(b"", true), Err(ReplyError::Incomplete));
    assert_eq!(frame(b"up\0\n", true), Err(ReplyError::Nul));
    assert_eq!(frame(b"up \xff\n", true), Err(ReplyError::NotText));
    let long = vec![b'a'; MAX_REPLY];
    assert_eq!(
        frame(&long, false),
        Err(ReplyError::TooLong { limit: MAX_REPLY })
    );
    let mut just_fits = vec![b'a'; MAX_REPLY - 1];
    just_fits.push(b'\n');
    assert!(matches!(frame(&just_fits, true), Ok(Some(l)) if l.len() == MAX_REPLY - 1));
    let mut one_over = vec![b'a'; MAX_REPLY];
    one_over.push(b'\n');
    assert_eq!(
        frame(&one_over, true),
        Err(ReplyError::TooLong { limit: MAX_REPLY })
    );
    assert!(ReplyError::Incomplete.to_string().contains("CR or LF"));
}

fn config(agent: Option<SocketAddr>, weight: u32) -> Config {
    let mut text = String::from(
        "[health]\ninterval = \"1h\"\ntimeout = \"2s\"\n\n[[listener]]\nlisten = \"127.0.0.1:8080\"\n",
    );
    text.push_str(&crate::fixtures::site("shop", &["shop.test"]));
    text.push_str(&crate::fixtures::node("n1", "127.0.0.1:9", "shop"));
    text.push_str(&format!("check = false\nweight = {weight}\n"));
    if let Some(a) = agent {
        text.push_str(&format!(
            "agent_port = {}\nagent_address = \"{}\"\nagent_interval = \"100ms\"\n",
            a.port(),
            a.ip()
        ));
    }
    crate::fixtures::config(&text)
}

fn one_node(weight: u32) -> Arc<NodeState> {
    let b = Backends::build(&config(None, weight), None);
    Arc::clone(&b.nodes()[0])
}

#[test]
fn applying_changes_only_what_the_agent_said() {
    let node = one_node(10);
    assert!(parse("50%").apply(&node));
    let c = node.control();
    assert_eq!((c.weight, c.weight_source), (5, ControlSource::Agent));
    assert_eq!(
        (c.admin_state, c.admin_source),
        (AdminState::Ready, ControlSource::Config),
        "no admin word: the state stays as the config set it"
    );

    assert!(parse("drain").apply(&node));
    assert!(!node.admits(), "drained");
    assert_eq!(node.control().admin_source, ControlSource::Agent);
    assert_eq!(node.weight(), 5, "no weight word: the weight stays");

    assert!(parse("ready down").apply(&node));
    assert!(node.control().agent_down);
    assert!(!node.admits(), "the agent's down");
    assert!(parse("up").apply(&node));
    assert!(node.admits());

    parse("maxconn:3").apply(&node);
    assert_eq!(node.own_max_inflight(), Some(3));
    parse("maxconn:0").apply(&node);
    assert_eq!(node.own_max_inflight(), None);

    assert!(parse("weight:0").apply(&node));
    assert!(!node.admits(), "weight 0 takes no new requests");
    assert!(parse("maint 100%").apply(&node));
    assert_eq!(node.admin_state(), AdminState::Maint);
    assert_eq!(node.weight(), 10);
    assert!(!parse("").apply(&node), "an empty line changes nothing");
    assert!(!parse("hello").apply(&node), "garbage changes nothing");
}

/// A real agent: answers every connection with the current `line` and
/// closes, counting connections.
struct Agent {
    addr: SocketAddr,
    line: Arc<Mutex<Vec<u8>>>,
    served: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn agent(line: &[u8]) -> Agent {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let line = Arc::new(Mutex::new(line.to_vec()));
    let served = Arc::new(AtomicUsize::new(0));
    let (l, s) = (Arc::clone(&line), Arc::clone(&served));
    let task = tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let bytes = l.lock().unwrap().clone();
            s.fetch_add(1, Ordering::SeqCst);
            let _ = stream.write_all(&bytes).await;
            let _ = stream.shutdown().await;
        }
    });
    Agent {
        addr,
        line,
        served,
        task,
    }
}

#[tokio::test]
async fn ask_reads_one_line() {
    let a = agent(b"up 60% # fine\nignored second line\n").await;
    let r = ask(a.addr, Duration::from_secs(5)).await.unwrap();
    assert_eq!(r.health, Some(Health::Up));
    assert_eq!(r.weight, Some(Weight::Percent(60)));
    assert_eq!(r.description.as_deref(), Some("fine"));
    assert_eq!(CheckResult::of(&Ok(r)).label(), "ok");
}

#[tokio::test]
async fn ask_reports_each_failure() {
    let a = agent(b"up 50%").await;
    let r = ask(a.addr, Duration::from_secs(5)).await;
    assert!(
        matches!(
            r,
            Err(AgentError::Reply {
                source: ReplyError::Incomplete,
                ..
            })
        ),
        "{r:?}"
    );
    assert_eq!(CheckResult::of(&r), CheckResult::BadReply);

    *a.line.lock().unwrap() = vec![b'x'; 5000];
    let r = ask(a.addr, Duration::from_secs(5)).await;
    assert!(matches!(
        r,
        Err(AgentError::Reply {
            source: ReplyError::TooLong { .. },
            ..
        })
    ));

    let silent = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let r = ask(silent.local_addr().unwrap(), Duration::from_millis(50)).await;
    assert!(matches!(r, Err(AgentError::Timeout { .. })), "{r:?}");
    assert_eq!(CheckResult::of(&r).label(), "timeout");
    assert!(r.unwrap_err().to_string().contains("within 50ms"));

    let closed = silent.local_addr().unwrap();
    drop(silent);
    let r = ask(closed, Duration::from_secs(5)).await;
    assert_eq!(CheckResult::of(&r).label(), "connect_failed");
}

#[tokio::test]
async fn the_loop_follows_the_agent_and_reloads() {
    let a = agent(b"drain 50%\n").await;
    let backends = Arc::new(ArcSwap::from_pointee(Backends::build(
        &config(Some(a.addr), 10),
        None,
    )));
    let node = Arc::clone(&backends.load().nodes()[0]);
    let (stop, rx) = watch::channel(false);
    let checks = super::super::health::spawn_checks(Arc::clone(&backends), rx);

    eventually("the agent's drain and weight applied", || {
        node.admin_state() == AdminState::Drain && node.weight() == 5
    })
    .await;
    *a.line.lock().unwrap() = b"ready,down,maxconn:7\n".to_vec();
    eventually("the agent's ready, down and cap applied", || {
        node.admin_state() == AdminState::Ready
            && node.control().agent_down
            && node.own_max_inflight() == Some(7)
    })
    .await;
    assert_eq!(node.weight(), 5, "no weight word: the weight stays");

    // An agent that stops answering changes nothing.
    *a.line.lock().unwrap() = b"no line end".to_vec();
    let served = a.served.load(Ordering::SeqCst);
    eventually("two more checks", || {
        a.served.load(Ordering::SeqCst) >= served + 2
    })
    .await;
    assert!(node.control().agent_down);
    assert_eq!(node.admin_state(), AdminState::Ready);

    // A reload without agent_port: the loop stops and the agent's down and
    // cap go (nothing could undo them any more).
    let next = Backends::build(&config(None, 10), Some(&backends.load()));
    backends.store(Arc::new(next));
    checks.resync();
    eventually("the agent's down cleared", || !node.control().agent_down).await;
    assert_eq!(node.own_max_inflight(), None);
    let served = a.served.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        a.served.load(Ordering::SeqCst),
        served,
        "no agent-check after agent_port was removed"
    );

    stop.send(true).unwrap();
    checks.join().await;
}
