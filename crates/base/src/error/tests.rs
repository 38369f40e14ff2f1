use super::chain;

#[derive(Debug, thiserror::Error)]
enum Outer {
    #[error("node n1: verbs server: {0}")]
    Embeds(#[source] Inner),
    #[error("request failed")]
    Hides(#[source] Inner),
}

#[derive(Debug, thiserror::Error)]
#[error("no device")]
struct Inner;

#[test]
fn sources_are_joined_once() {
    assert_eq!(
        chain(&Outer::Embeds(Inner)),
        "node n1: verbs server: no device"
    );
    assert_eq!(chain(&Outer::Hides(Inner)), "request failed: no device");
}
