use super::*;

#[test]
fn classes_and_their_service_times() {
    let m = Model {
        cpu_fraction: 0.25,
        ..Model::default()
    };
    assert_eq!(classify(&m, "/health", None), Ok(Class::Health));
    assert_eq!(
        classify(&m, "/static/4k", Some("file=3")),
        Ok(Class::Static { size: 4096 })
    );
    let d = classify(&m, "/dynamic/cgi", Some("cost=20ms&size=2k&x=1")).unwrap();
    assert_eq!(
        d,
        Class::Dynamic {
            size: 2048,
            cost: Duration::from_millis(20)
        }
    );
    assert_eq!(
        d.service(&m),
        Service {
            spin: Duration::from_millis(5),
            sleep: Duration::from_millis(15)
        }
    );
    assert_eq!(
        classify(&m, "/dynamic/x", None),
        Ok(Class::Dynamic {
            size: m.dynamic_size,
            cost: m.dynamic_cost
        })
    );
    assert_eq!(
        classify(&m, "/static/x", None).unwrap_err().0,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        classify(&m, "/static/1g", None).unwrap_err().0,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        classify(&m, "/dynamic/x", Some("cost=5s")).unwrap_err().0,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        classify(&m, "/dynamic/x", Some("size=1g")).unwrap_err().0,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        classify(&m, "/", None).unwrap_err().0,
        StatusCode::NOT_FOUND
    );
    let s = Class::Static { size: 1 << 20 }.service(&m);
    assert_eq!(s.spin, Duration::ZERO);
    assert_eq!(
        s.sleep,
        m.static_base + Duration::from_millis(10),
        "1 MiB at 100 MiB/s"
    );
}
