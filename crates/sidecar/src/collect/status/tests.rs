use super::*;

pub(crate) const NGINX: &str = "Active connections: 291 \nserver accepts handled requests\n 16630948 16630948 31070465 \nReading: 6 Writing: 179 Waiting: 106 \n";
pub(crate) const APACHE: &str = "localhost\nServerVersion: Apache/2.4.62\nTotal Accesses: 1234\nTotal kBytes: 5678\nUptime: 100\nBusyWorkers: 3\nIdleWorkers: 47\nConnsTotal: 5\nScoreboard: __W_K___\n";

#[test]
fn nginx_stub_status() {
    let s = parse_nginx(NGINX).unwrap();
    assert_eq!(
        (s.active, s.requests, s.reading, s.writing, s.waiting),
        (291, 31070465, 6, 179, 106)
    );
    let r = reading_from_body(StatusFormat::Nginx, NGINX, Some(512)).unwrap();
    assert_eq!(r.get(Field::Connections), Some(290));
    assert_eq!(r.get(Field::AppBusy), Some(184));
    assert_eq!(r.get(Field::AppCapacity), Some(512));
    assert_eq!(r.get(Field::RequestsTotal), Some(31070465));
}

#[test]
fn apache_auto() {
    let r = reading_from_body(StatusFormat::Apache, APACHE, None).unwrap();
    assert_eq!(r.get(Field::AppBusy), Some(2));
    assert_eq!(r.get(Field::AppCapacity), Some(50));
    assert_eq!(r.get(Field::RequestsTotal), Some(1234));
    assert_eq!(r.get(Field::Connections), Some(4));
}

#[test]
fn odd_bodies_are_errors_not_panics() {
    for body in ["", "Active connections:", "<html>hi</html>", "Reading: 1 Writing:", "server accepts handled requests\n", "BusyWorkers: x\nIdleWorkers: 1", "Active connections: 1\nserver accepts handled requests\n1 2\nReading: 1 Writing: 2 Waiting: 3"] {
        assert!(reading_from_body(StatusFormat::Nginx, body, None).is_err(), "{body:?}");
        assert!(reading_from_body(StatusFormat::Apache, body, None).is_err(), "{body:?}");
    }
    for cut in 0..NGINX.len() {
        let _ = parse_nginx(&NGINX[..cut]);
    }
    for cut in 0..APACHE.len() {
        let _ = parse_apache(&APACHE[..cut]);
    }
}

proptest::proptest! {
    #[test]
    fn status_parsers_never_panic(text in "\\PC*", lines in proptest::collection::vec("(Active connections: [0-9]{1,22}|server accepts handled requests| [0-9 ]{0,40}|Reading: [0-9x]{0,3} Writing: [0-9]{0,21} Waiting: [0-9]{0,3}|BusyWorkers: [0-9]{0,21}|IdleWorkers: [0-9]{0,21}|Total Accesses: [0-9]{0,21}|ConnsTotal: [0-9]{0,21})", 0..8)) {
        let built = lines.join("\n");
        for t in [text.as_str(), built.as_str()] {
            let _ = reading_from_body(StatusFormat::Nginx, t, Some(1));
            let _ = reading_from_body(StatusFormat::Apache, t, None);
        }
    }
}
