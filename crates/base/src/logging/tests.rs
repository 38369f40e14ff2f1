use super::*;
use std::sync::{Arc, Mutex};

/// Log lines written while `emit` runs under `filter(spec)`.
fn logged(spec: Option<&str>, emit: impl FnOnce()) -> String {
    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Buffer {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let buffer = Buffer::default();
    let writer = buffer.clone();
    let subscriber = tracing_subscriber::registry().with(
        tracing_subscriber::fmt::layer()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .with_filter(filter(spec)),
    );
    tracing::subscriber::with_default(subscriber, emit);
    let bytes = buffer.0.lock().unwrap().clone();
    String::from_utf8(bytes).unwrap()
}

fn unsolicited_ack() {
    tracing::warn!(target: "h2::proto::ping_pong", "recv PING ack that we never sent: {:?}", [1u8; 8]);
}

#[test]
fn quieted_events_are_left_out_unless_their_crate_is_named() {
    assert_eq!(logged(None, unsolicited_ack), "");
    assert_eq!(logged(Some("info"), unsolicited_ack), "");
    assert_eq!(logged(Some("debug,rdmalb=trace"), unsolicited_ack), "");
    for named in ["info,h2=debug", "h2::proto=warn", "info,h2[x]=info"] {
        let text = logged(Some(named), unsolicited_ack);
        assert!(
            text.contains("recv PING ack that we never sent"),
            "{named}: {text:?}"
        );
    }
    // Other events of the crate and module are untouched.
    let text = logged(None, || {
        tracing::warn!(target: "h2::proto::streams", "something else");
        tracing::error!(target: "h2::proto::ping_pong", "worse");
    });
    assert!(
        text.contains("something else") && text.contains("worse"),
        "{text:?}"
    );
}

#[test]
fn names_crate_looks_at_directive_targets_only() {
    assert!(names_crate("info,h2=debug", "h2"));
    assert!(names_crate("h2", "h2"));
    assert!(names_crate("h2::proto::ping_pong=trace", "h2"));
    assert!(!names_crate("info,h2o=debug", "h2"));
    assert!(!names_crate("debug", "h2"));
    assert!(!names_crate("hyper=debug,rdmalb=h2", "h2"));
}

#[test]
fn every_quieted_event_has_an_rdmalb_counter() {
    for q in QUIETED {
        assert!(q.metric.starts_with("rdmalb_") && q.metric.ends_with("_total"));
        assert!(q.target.contains("::") && !q.message.is_empty());
    }
}
