use super::*;

fn options(retry_on: Option<Vec<String>>) -> Options {
    Options {
        seed: 1,
        duration: Duration::from_secs(1),
        transport: WindowTransport::Tcp,
        gap: Duration::from_secs(1),
        settle: Duration::from_secs(1),
        retry_on,
        out: PathBuf::from("/nonexistent"),
    }
}

#[test]
fn retry_on_reaches_every_proxy_config_both_conditions_by_default() {
    let out = Path::new("/nonexistent");
    let s = spec(&options(None), out).unwrap();
    let on = s.proxy["global"]["retry_on"].as_array().unwrap();
    assert_eq!(on.len(), 2);
    let s = spec(&options(Some(vec!["conn-failure".into()])), out).unwrap();
    let on = s.proxy["global"]["retry_on"].as_array().unwrap();
    assert_eq!(on, &vec![toml::Value::String("conn-failure".into())]);
    // The reconfiguration settings stay.
    assert!(s.proxy.get("reconfig").is_some());
}
