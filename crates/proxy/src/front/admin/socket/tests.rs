//! The stats socket's protocol on in-memory streams and on a real UNIX
//! socket: one command per connection, `;` and pipelined commands,
//! `prompt`, levels, and the bounds (long lines, binary data, thousands of
//! commands, silent and slow clients).

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;
use crate::balance::AdminState as NodeAdmin;
use crate::config::Level;
use crate::front::admin::runtime::tests::admin;

/// Sends `input` (then closes the sending half when `close`), and returns
/// everything the connection answered until it closed.
async fn exchange(input: &[u8], level: Level) -> String {
    let state = admin();
    let (mut client, server) = tokio::io::duplex(1 << 20);
    let serving =
        tokio::spawn(async move { connection(server, &state, Session::new(level)).await });
    client.write_all(input).await.unwrap();
    client.shutdown().await.unwrap();
    let mut out = Vec::new();
    client.read_to_end(&mut out).await.unwrap();
    serving.await.unwrap().unwrap();
    String::from_utf8(out).unwrap()
}

#[tokio::test]
async fn one_command_per_connection_then_an_empty_line() {
    assert_eq!(
        exchange(b"show backend\n", Level::Admin).await,
        "# name\nshop\nblog\n\n"
    );
    // `\r\n` ends a command too; the connection closes after the answer.
    assert_eq!(
        exchange(b"get weight shop/a\r\n", Level::User).await,
        "4 (initial 4)\n\n"
    );
}

#[tokio::test]
async fn semicolons_and_pipelined_commands_each_get_their_answer() {
    assert_eq!(
        exchange(
            b"get weight shop/a;get weight blog/c\nshow cli level\n",
            Level::Operator
        )
        .await,
        "4 (initial 4)\n\n1 (initial 1)\n\noperator\n\n"
    );
}

#[tokio::test]
async fn prompt_mode_keeps_the_session_until_quit() {
    assert_eq!(
        exchange(
            b"prompt\nshow cli level\nuser\nshow cli level\nquit\nshow backend\n",
            Level::Admin
        )
        .await,
        "\n> admin\n\n> \n> user\n\n> "
    );
}

#[tokio::test]
async fn levels_refuse_as_haproxy_does() {
    let state = admin();
    let (mut client, server) = tokio::io::duplex(1 << 16);
    let serving = {
        let state = state.clone();
        tokio::spawn(async move { connection(server, &state, Session::new(Level::User)).await })
    };
    client
        .write_all(
            b"prompt\ndisable server shop/a\noperator\nset weight shop/a 1\nshow stat\nquit\n",
        )
        .await
        .unwrap();
    let mut out = Vec::new();
    client.read_to_end(&mut out).await.unwrap();
    serving.await.unwrap().unwrap();
    let out = String::from_utf8(out).unwrap();
    assert!(
        out.starts_with("\n> Permission denied\n\n> Permission denied\n\n> Permission denied\n\n> # pxname,svname,"),
        "{out}"
    );
    let a = state.backends.load();
    let a = a.nodes().iter().find(|n| n.name == "a").unwrap();
    assert_eq!(a.admin_state(), NodeAdmin::Ready);
    assert_eq!(a.weight(), 4);
    // The same command at the admin level runs.
    assert_eq!(
        exchange(b"disable server shop/a\n", Level::Admin).await,
        "\n"
    );
}

#[tokio::test]
async fn unknown_commands_and_binary_data_get_haproxys_usage() {
    let empty = exchange(b"\x00\x01\xff\n", Level::Admin).await;
    assert!(
        empty.starts_with(
            "Unknown command. Please enter one of the following commands only:\n  acme renew"
        ),
        "{empty}"
    );
    assert!(
        empty.ends_with("  quit                                    : disconnect\n\n"),
        "{empty}"
    );
    let garbage = exchange(b"\xff\xfe\x07 stat\n", Level::Admin).await;
    assert!(
        garbage.starts_with(
            "Unknown command, but maybe one of the following ones is a better match:\n"
        ),
        "{garbage}"
    );
}

#[tokio::test]
async fn a_line_longer_than_the_buffer_closes_unanswered() {
    let mut long = vec![b'x'; MAX_LINE + 10];
    long.push(b'\n');
    assert_eq!(exchange(&long, Level::Admin).await, "");
    // So does a command the client never ends.
    assert_eq!(exchange(b"show backend", Level::Admin).await, "");
}

#[tokio::test]
async fn thousands_of_commands_on_one_connection_are_all_answered() {
    let n = 5000;
    let input = "get weight shop/a;".repeat(n - 1) + "get weight shop/a\n";
    let out = exchange(input.as_bytes(), Level::Admin).await;
    assert_eq!(out.matches("4 (initial 4)\n\n").count(), n);
    assert_eq!(out.len(), n * "4 (initial 4)\n\n".len());
}

#[tokio::test(start_paused = true)]
async fn a_silent_client_is_closed_after_the_idle_timeout() {
    let state = admin();
    let (_client, server) = tokio::io::duplex(1024);
    let started = tokio::time::Instant::now();
    connection(server, &state, Session::new(Level::Admin))
        .await
        .unwrap();
    assert!(started.elapsed() >= IDLE);
}

/// `[[stats_socket]] timeout` (HAProxy's `stats timeout`): a silent
/// client is closed after the socket's timeout, not the default one.
#[tokio::test(start_paused = true)]
async fn a_silent_client_is_closed_after_the_sockets_timeout() {
    let state = admin();
    let (_client, server) = tokio::io::duplex(1024);
    let session = Session {
        timeout: Duration::from_secs(3),
        ..Session::new(Level::User)
    };
    let started = tokio::time::Instant::now();
    connection(server, &state, session).await.unwrap();
    let took = started.elapsed();
    assert!(took >= Duration::from_secs(3) && took < IDLE, "{took:?}");
}

#[tokio::test(start_paused = true)]
async fn set_timeout_cli_changes_the_sessions_idle_timeout() {
    let state = admin();
    let (mut client, server) = tokio::io::duplex(1024);
    client
        .write_all(b"prompt\nset timeout cli 60\nset timeout cli 0\n")
        .await
        .unwrap();
    let started = tokio::time::Instant::now();
    let serving =
        tokio::spawn(async move { connection(server, &state, Session::new(Level::User)).await });
    let mut answer = [0u8; 64];
    let mut got = 0;
    while !answer[..got].ends_with(b"Invalid timeout value.\n\n> ") {
        got += client.read(&mut answer[got..]).await.unwrap();
    }
    assert_eq!(&answer[..got], b"\n> \n> Invalid timeout value.\n\n> ");
    serving.await.unwrap().unwrap();
    assert!(started.elapsed() >= Duration::from_secs(60));
}

#[tokio::test(start_paused = true)]
async fn a_client_that_never_reads_is_closed_after_the_idle_timeout() {
    let state = admin();
    // A tiny pipe the client never drains: the answers cannot all go out.
    let (mut client, server) = tokio::io::duplex(256);
    client.write_all(&b"show stat;".repeat(20)).await.unwrap();
    client.write_all(b"\n").await.unwrap();
    let started = tokio::time::Instant::now();
    connection(server, &state, Session::new(Level::Admin))
        .await
        .unwrap();
    assert!(started.elapsed() >= IDLE);
}

#[tokio::test]
async fn a_unix_socket_gets_its_mode_and_is_removed_on_shutdown() {
    use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("admin.sock");
    // The owner this process may give: its own (the temp dir's).
    let own = std::fs::metadata(dir.path()).unwrap();
    let socket = StatsSocket {
        endpoint: StatsEndpoint::Unix(path.clone()),
        mode: Some(0o600),
        uid: Some(own.uid()),
        gid: Some(own.gid()),
        level: Level::User,
        timeout: Duration::from_secs(3),
    };
    let bound = bind(&socket, &mut crate::front::restart::Inherited::default()).unwrap();
    // A connection's session starts at the socket's level and timeout.
    assert_eq!(
        (bound.session.level, bound.session.timeout),
        (Level::User, Duration::from_secs(3))
    );
    let meta = std::fs::metadata(&path).unwrap();
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert_eq!((meta.uid(), meta.gid()), (own.uid(), own.gid()));
    // Nothing is left under the temporary name.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    let (stop, stopped) = watch::channel(false);
    let serving = tokio::spawn(serve(bound, admin(), stopped));
    let mut s = tokio::net::UnixStream::connect(&path).await.unwrap();
    s.write_all(b"show cli level\n").await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    assert_eq!(out, "user\n\n");
    stop.send(true).unwrap();
    tokio::time::timeout(Duration::from_secs(10), serving)
        .await
        .unwrap()
        .unwrap();
    assert!(!path.exists());
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// Any bytes: the connection ends once the client closes its side;
    /// input with no command ended gets no answer; input whose last
    /// command is ended (no `prompt`, no `quit`, no escape) gets its
    /// answer and the empty line after it.
    #[test]
    fn any_input_ends_and_ended_commands_are_answered(
        input in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..4096),
        level in 0u8..3,
    ) {
        let level = [Level::User, Level::Operator, Level::Admin][usize::from(level)];
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let out = rt.block_on(exchange(&input, level));
        let text = String::from_utf8_lossy(&input);
        if !input.iter().any(|&b| b == b'\n' || b == b';') {
            proptest::prop_assert_eq!(out, "");
        } else if input.ends_with(b"\n")
            && !input.contains(&b'\\')
            && !text.contains("prompt")
            && !text.contains("quit")
        {
            proptest::prop_assert!(out.ends_with('\n'), "{:?}", out);
        }
    }
}
