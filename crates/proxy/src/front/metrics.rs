//! The process-wide Prometheus recorder and the list of metric names.
//!
//! [`install`] installs a `metrics-exporter-prometheus` recorder as the
//! global `metrics` recorder once per process (later calls return the same
//! handle), sets the request-duration histogram buckets, describes every
//! metric (the `# HELP` lines), and starts the upkeep thread that drains
//! histogram samples into their buckets. The admin listener renders the
//! handle on `GET /metrics`.
//!
//! Call it before building the first snapshot: metric handles registered
//! before a recorder exists are no-ops.

use std::sync::Once;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

/// `rdmalb_requests_total{site,node,code_class}` counter; `code_class` is
/// `1xx`..`5xx` or `err` (no complete response reached the client).
pub const REQUESTS_TOTAL: &str = "rdmalb_requests_total";
/// `rdmalb_request_duration_seconds{site}` histogram, request received to
/// response end.
pub const REQUEST_DURATION: &str = "rdmalb_request_duration_seconds";
/// `rdmalb_inflight{node}` gauge: requests in flight to the node.
pub const INFLIGHT: &str = "rdmalb_inflight";
/// `rdmalb_node_up{node,site}` gauge: 1 up, 0 down.
pub const NODE_UP: &str = crate::balance::health::NODE_UP;
/// `rdmalb_upstream_errors_total{node,kind}` counter; kind = connect,
/// timeout, protocol, 5xx.
pub const UPSTREAM_ERRORS: &str = "rdmalb_upstream_errors_total";
/// `rdmalb_client_errors_total{kind}` counter (400, 408, 431, …).
pub const CLIENT_ERRORS: &str = "rdmalb_client_errors_total";
/// `rdmalb_h2_unsolicited_ping_acks_total` counter: HTTP/2 PING ACKs from
/// clients that answer no PING the proxy sent (counted from h2's own log
/// event, which the logging set-up keeps out of the log:
/// [`rdmalb_base::logging`]).
pub const H2_UNSOLICITED_PING_ACKS: &str = rdmalb_base::logging::H2_UNSOLICITED_PING_ACKS;
/// `rdmalb_retries_total{site,reason}` counter; reason = conn-failure,
/// empty-response, misdirected.
pub const RETRIES: &str = "rdmalb_retries_total";
/// `rdmalb_sticky_moves_total{site,reason}` counter: sessions that left
/// the node their cookie named; reason = down, drain, load, moved
/// (`balance::sticky`).
pub const STICKY_MOVES: &str = "rdmalb_sticky_moves_total";
/// `rdmalb_connections{listener}` gauge: open client connections.
pub const CONNECTIONS: &str = "rdmalb_connections";
/// `rdmalb_config_reloads_total{result}` counter; result = ok, failed.
pub const CONFIG_RELOADS: &str = "rdmalb_config_reloads_total";
/// `rdmalb_health_checks_total{node,result}` counter; result = pass, fail.
pub const HEALTH_CHECKS: &str = crate::balance::health::HEALTH_CHECKS;

/// `rdmalb_load_reads_total{node,transport}` counter: load reads used by
/// `weighted-least-load` decisions.
pub const LOAD_READS: &str = crate::balance::node_windows::LOAD_READS;
/// `rdmalb_load_unknown_total{node,reason}` counter: decisions that scored
/// the node from local information only (stale, torn, timeout, unreadable,
/// disconnected, unpublished).
pub const LOAD_UNKNOWN: &str = crate::balance::node_windows::LOAD_UNKNOWN;
/// `rdmalb_qos_inflight` gauge: requests holding a `[qos]` admission slot.
pub const QOS_INFLIGHT: &str = crate::qos::admission::INFLIGHT;
/// `rdmalb_qos_queued{site}` gauge: requests waiting for an admission slot.
pub const QOS_QUEUED: &str = crate::qos::admission::QUEUED;
/// `rdmalb_qos_admitted_total{site,path}` counter; path = direct, queued.
pub const QOS_ADMITTED: &str = crate::qos::admission::ADMITTED;
/// `rdmalb_qos_rejected_total{site,reason}` counter; reason = queue_full,
/// queue_timeout (both answered 503 with `Retry-After`).
pub const QOS_REJECTED: &str = crate::qos::admission::REJECTED;
/// `rdmalb_stick_table_entries{table}`: entries held (at most its `size`).
pub const STICK_ENTRIES: &str = "rdmalb_stick_table_entries";
/// `rdmalb_stick_table_entry_bytes{table}`: memory one entry takes.
pub const STICK_ENTRY_BYTES: &str = "rdmalb_stick_table_entry_bytes";
/// `rdmalb_stick_share_*`: the `[stick_share]` datagrams and keys.
pub use super::share::{
    DROPPED as SHARE_DROPPED, KEYS_REFUSED as SHARE_KEYS_REFUSED, RECEIVED as SHARE_RECEIVED,
    SENT as SHARE_SENT,
};

/// Buckets of [`REQUEST_DURATION`] in seconds (every `*_seconds`
/// histogram shares them).
pub use rdmalb_base::metrics::DURATION_BUCKETS;

/// Installs the process's Prometheus recorder (once, shared with a sidecar
/// in the same process; [`rdmalb_base::metrics`]), describes the proxy's
/// metrics, and returns the handle that renders them.
///
/// If another recorder was installed first (an embedding program), the
/// returned handle renders nothing; that is logged, not fatal.
pub fn install() -> PrometheusHandle {
    static DESCRIBED: Once = Once::new();
    let handle = rdmalb_base::metrics::prometheus()
        .cloned()
        .unwrap_or_else(|| PrometheusBuilder::new().build_recorder().handle());
    DESCRIBED.call_once(describe);
    handle
}

/// `# HELP` text for every metric the proxy records.
fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    describe_counter!(
        REQUESTS_TOTAL,
        "Requests answered, by site, node and status class (err: cut before a complete response)"
    );
    describe_histogram!(
        REQUEST_DURATION,
        Unit::Seconds,
        "Time from request received to response end, by site"
    );
    describe_gauge!(INFLIGHT, "Requests in flight to the node from this proxy");
    describe_gauge!(
        crate::acme::CERT_EXPIRY,
        Unit::Seconds,
        "When the certificate served for the host (ordered by ACME, or a listener's file) expires (Unix time)"
    );
    describe_gauge!(
        NODE_UP,
        "Node health: 1 up, 0 down (or removed from its site)"
    );
    describe_counter!(
        UPSTREAM_ERRORS,
        "Failed upstream attempts, by node and kind (connect, timeout, protocol, 5xx)"
    );
    describe_counter!(
        CLIENT_ERRORS,
        "Requests rejected for client errors, by status"
    );
    describe_counter!(
        H2_UNSOLICITED_PING_ACKS,
        "HTTP/2 PING frames with the ACK flag from clients that answer no PING the proxy sent (ignored, RFC 9113 section 6.7)"
    );
    // Shown at 0 from the start: an operator can alert on its rate.
    metrics::counter!(H2_UNSOLICITED_PING_ACKS).increment(0);
    describe_counter!(
        RETRIES,
        "Requests retried on another node after a connect failure"
    );
    describe_gauge!(CONNECTIONS, "Open client connections, by listener");
    describe_counter!(
        CONFIG_RELOADS,
        "Configuration reloads, by result (ok, failed)"
    );
    describe_counter!(
        HEALTH_CHECKS,
        "Active health checks, by node and result (pass, fail)"
    );
    describe_counter!(
        LOAD_READS,
        "Node load reads used by weighted-least-load decisions, by node and transport"
    );
    describe_counter!(
        LOAD_UNKNOWN,
        "Decisions that scored the node from in-flight only, by node and reason (stale, torn, timeout, unreadable, disconnected, unpublished)"
    );
    describe_gauge!(
        QOS_INFLIGHT,
        "Requests holding a [qos] admission slot (at most qos.max_inflight)"
    );
    describe_gauge!(
        QOS_QUEUED,
        "Requests waiting for a [qos] admission slot, by site"
    );
    describe_counter!(
        QOS_ADMITTED,
        "Requests given a [qos] admission slot, by site and path (direct: a slot was free; queued: waited, VirtualClock order)"
    );
    describe_gauge!(
        STICK_ENTRIES,
        "Entries in a [[stick_table]] (at most its size), by table"
    );
    describe_gauge!(
        STICK_ENTRY_BYTES,
        Unit::Bytes,
        "Memory one entry of a [[stick_table]] takes (map slot, counters, key text), by table"
    );
    describe_counter!(
        SHARE_SENT,
        "[stick_share] datagrams sent to the other proxies (one a peer)"
    );
    describe_counter!(
        SHARE_RECEIVED,
        "[stick_share] datagrams taken from the other proxies"
    );
    describe_counter!(
        SHARE_DROPPED,
        "[stick_share] datagrams dropped, by reason (unknown_peer, not_share, bad_tag, malformed, replay, unknown_table, send_error)"
    );
    describe_counter!(
        SHARE_KEYS_REFUSED,
        "[stick_share] keys whose increments were not shared (pending_full) or not added (table_full, wrong_key), by table"
    );
    describe_counter!(
        QOS_REJECTED,
        "Requests shed with 503 by the [qos] admission queue, by site and reason (queue_full, queue_timeout)"
    );
}
