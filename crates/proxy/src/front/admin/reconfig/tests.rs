use super::params;

#[test]
fn query_parameters() {
    assert_eq!(
        params(Some("node=n1&site=blog")),
        Ok(("n1".into(), "blog".into()))
    );
    assert!(params(Some("node=n1")).is_err());
    assert!(params(None).is_err());
    assert!(params(Some("node=n%201&site=a")).is_err());
    assert!(params(Some("node=n1&site=a&force=1")).is_err());
}
