use super::*;

#[test]
fn only_connect_failures_are_retry_safe_and_broken_connections_for_idempotent_requests() {
    let all = [
        ErrorKind::BadRequest,
        ErrorKind::BadHost,
        ErrorKind::HostMismatch,
        ErrorKind::UnknownTransferCoding,
        ErrorKind::HeadTooLarge,
        ErrorKind::RequestTimeout,
        ErrorKind::ClientTimeout,
        ErrorKind::ClientAborted,
        ErrorKind::NoSite,
        ErrorKind::AllDown,
        ErrorKind::NoNodes,
        ErrorKind::QueueTimeout,
        ErrorKind::QosQueueFull,
        ErrorKind::QosTimeout,
        ErrorKind::ConnectFailed,
        ErrorKind::ConnectTimeout,
        ErrorKind::UpstreamTimeout,
        ErrorKind::UpstreamProtocol,
    ];
    for k in all {
        let safe = matches!(k, ErrorKind::ConnectFailed | ErrorKind::ConnectTimeout);
        assert_eq!(k.retry() == RetryType::Safe, safe, "{k:?}");
        let idempotent = k == ErrorKind::UpstreamProtocol;
        assert_eq!(k.retry() == RetryType::Idempotent, idempotent, "{k:?}");
        assert_eq!(k.termination().len(), 2);
    }
    assert_eq!(
        ErrorKind::UpstreamTimeout.status(),
        StatusCode::GATEWAY_TIMEOUT
    );
    assert_eq!(ErrorKind::ConnectFailed.status(), StatusCode::BAD_GATEWAY);
    assert_eq!(ErrorKind::HeadTooLarge.status().as_u16(), 431);
    assert_eq!(ErrorKind::ConnectFailed.source(), ErrorSource::Upstream);
    assert_eq!(ErrorKind::RequestTimeout.source(), ErrorSource::Client);
}
