use std::path::Path;
use std::time::Duration;

use super::*;

fn check() -> ConfigCheck {
    ConfigCheck::new(Path::new("/etc/rdmalb/test.toml"))
}

fn keys(c: ConfigCheck) -> Vec<String> {
    c.into_errors()
        .problems
        .into_iter()
        .map(|p| p.key)
        .collect()
}

#[test]
fn every_problem_is_kept_and_finish_reports_them_all() {
    let mut c = check();
    assert_eq!(c.count(), 0);
    c.add("a", "first");
    c.add("b.c", "second");
    assert!(c.has_problem_under("b"));
    assert!(!c.has_problem_under("z"));
    let err = c.finish(()).unwrap_err();
    assert_eq!(err.problems.len(), 2);
    let text = err.to_string();
    assert!(
        text.starts_with("/etc/rdmalb/test.toml: 2 problems in config"),
        "{text}"
    );
    assert!(text.contains("/etc/rdmalb/test.toml: a: first"), "{text}");
    assert!(
        text.contains("/etc/rdmalb/test.toml: b.c: second"),
        "{text}"
    );
    assert_eq!(check().finish(7).unwrap(), 7);
}

#[test]
fn paths_are_relative_to_the_file() {
    let c = check();
    assert_eq!(c.path("k.psk"), Path::new("/etc/rdmalb/k.psk"));
    assert_eq!(c.path("/abs/k.psk"), Path::new("/abs/k.psk"));
    let bare = ConfigCheck::new(Path::new("t.toml"));
    assert_eq!(bare.path("k.psk"), Path::new("k.psk"));
}

#[test]
fn durations() {
    let mut c = check();
    let d = Duration::from_secs(3);
    assert_eq!(c.duration("t", None, d), d);
    assert_eq!(
        c.duration("t", Some("250ms"), d),
        Duration::from_millis(250)
    );
    assert_eq!(c.duration("zero", Some("0s"), d), d);
    assert_eq!(c.duration("bad", Some("soon"), d), d);
    let (min, max) = (Duration::from_millis(1), Duration::from_secs(1));
    assert_eq!(
        c.duration_within("w", Some("2ms"), d, min, max),
        Duration::from_millis(2)
    );
    assert_eq!(c.duration_within("high", Some("2s"), d, min, max), d);
    let err = c.into_errors();
    assert_eq!(
        err.problems
            .iter()
            .map(|p| p.key.as_str())
            .collect::<Vec<_>>(),
        ["zero", "bad", "high"]
    );
    assert!(err.problems[0].message.contains("greater than zero"));
    assert!(err.problems[2]
        .message
        .contains("out of range (accepted: 1ms to 1s)"));
}

#[test]
fn integers() {
    let mut c = check();
    assert_eq!(c.int("n", None, 5, 1, 10), 5);
    assert_eq!(c.int("n", Some(10), 5, 1, 10), 10);
    assert_eq!(c.int("low", Some(0), 5, 1, 10), 5);
    assert_eq!(c.int("negative", Some(-1), 5, 0, 10), 5);
    assert_eq!(c.int("high", Some(11), 5, 1, 10), 5);
    let err = c.into_errors();
    assert_eq!(err.problems.len(), 3);
    assert_eq!(
        err.problems[2].message,
        "11 is out of range (expected an integer from 1 to 10)"
    );
}

#[test]
fn addresses() {
    let mut c = check();
    assert_eq!(
        c.socket_addr("a", Some("127.0.0.1:80")),
        Some("127.0.0.1:80".parse().unwrap())
    );
    assert!(c.socket_addr("b", Some("localhost:80")).is_some());
    assert!(c.socket_addr("c", Some("nowhere")).is_none());
    assert!(c.socket_addr("d", None).is_none());
    assert!(c.ip_socket_addr("e", Some("[::1]:7101")).is_some());
    assert!(c.ip_socket_addr("f", Some("localhost:7101")).is_none());
    assert!(c.ip_socket_addr("g", None).is_none());
    assert_eq!(keys(c), ["c", "d", "f", "g"]);
}

#[derive(Debug, Default, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Section {
    n: Option<i64>,
}

#[test]
fn sections_fields_and_entries() {
    let table: toml::Table = r#"
good = { n = 1 }
bad = { m = 2 }
text = "x"
list = [{ n = 1 }, { n = "two" }, { n = 3 }]
notlist = 4
"#
    .parse()
    .unwrap();
    let mut c = check();
    assert_eq!(c.section::<Section>(&table, "good"), Section { n: Some(1) });
    assert_eq!(c.section::<Section>(&table, "absent"), Section::default());
    assert_eq!(c.section::<Section>(&table, "bad"), Section::default());
    assert_eq!(
        c.field::<String>("text", table.get("text"), "a string"),
        Some("x".into())
    );
    assert_eq!(
        c.field::<i64>("text", table.get("text"), "an integer"),
        None
    );
    assert_eq!(
        c.field::<i64>("absent", table.get("absent"), "an integer"),
        None
    );
    let list: Vec<Option<Section>> = c.entries(&table, "list");
    assert_eq!(
        list,
        [
            Some(Section { n: Some(1) }),
            None,
            Some(Section { n: Some(3) })
        ]
    );
    assert!(c.entries::<Section>(&table, "notlist").is_empty());
    let err = c.into_errors();
    let keys: Vec<&str> = err.problems.iter().map(|p| p.key.as_str()).collect();
    assert_eq!(keys, ["bad", "text", "list[1]", "notlist"]);
    assert_eq!(err.problems[1].message, "expected an integer, found string");
    assert!(err.problems[3].message.contains("[[notlist]]"));
}

#[test]
fn an_unreadable_file_is_one_problem() {
    let err = read(Path::new("/nonexistent/rdmalb.toml")).unwrap_err();
    assert_eq!(err.problems.len(), 1);
    assert!(err.problems[0].message.starts_with("cannot read file:"));
}
