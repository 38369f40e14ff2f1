use super::*;

#[test]
fn parses_units() {
    assert_eq!(parse("250ms").unwrap(), Duration::from_millis(250));
    assert_eq!(parse("2s").unwrap(), Duration::from_secs(2));
    assert_eq!(parse("1.5s").unwrap(), Duration::from_millis(1500));
    assert_eq!(parse("3m").unwrap(), Duration::from_secs(180));
    assert_eq!(parse("500us").unwrap(), Duration::from_micros(500));
}

#[test]
fn rejects_garbage_with_a_hint() {
    assert!(parse("fast").unwrap_err().contains("expected"));
    assert!(parse("10").unwrap_err().contains("no unit"));
    assert!(parse("10 parsecs").unwrap_err().contains("unknown unit"));
}

#[test]
fn format_round_trips() {
    for d in ["2s", "250ms", "500us", "7ns"] {
        assert_eq!(format(parse(d).unwrap()), d);
    }
}
