//! Pushes a testsrv node's modelled load to its sidecar.
//!
//! Uses the sidecar's push protocol ([`rdmalb_sidecar::collect::push`]):
//! `busy`, `queue`, `capacity`, `requests_total`. A push goes out after
//! every change of the counters, coalesced to at most one per
//! `publish_interval` (default 1 ms, the fine granularity of seed 002
//! §4), plus a keep-alive every [`KEEPALIVE`] so the sidecar's `expire`
//! never drops the numbers of an idle node. When the sidecar is down the
//! node keeps serving and reconnects with a capped backoff.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::capacity::{Capacity, Usage};
use rdmalb_sidecar::collect::push::{Client, PushSample};
use rdmalb_sidecar::config::PushListen;

/// Longest silence between two pushes.
pub const KEEPALIVE: Duration = Duration::from_millis(250);
/// Backoff bounds when the sidecar cannot be reached.
const RETRY_MIN: Duration = Duration::from_millis(50);
const RETRY_MAX: Duration = Duration::from_secs(1);

fn sample(u: Usage) -> PushSample {
    PushSample {
        busy: Some(u.busy),
        capacity: Some(u.capacity),
        queue: Some(u.queue),
        requests_total: Some(u.requests_total),
        connections: None,
        latency_us: (u.latency_us > 0).then_some(u.latency_us),
        queue_limit: Some(u.queue_limit),
    }
}

/// Publishes until `shutdown` turns true.
pub async fn run(
    to: PushListen,
    node: String,
    capacity: Arc<Capacity>,
    every: Duration,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut retry = RETRY_MIN;
    let mut down_logged = false;
    loop {
        let client = tokio::select! {
            _ = shutdown.changed() => return,
            c = Client::connect(&to) => c,
        };
        let mut client = match client {
            Ok(c) => {
                tracing::info!(node = %node, sidecar = %to, "pushing load to the sidecar");
                retry = RETRY_MIN;
                down_logged = false;
                c
            }
            Err(e) => {
                if !down_logged {
                    tracing::warn!(node = %node, sidecar = %to, error = %e, "cannot reach the sidecar; serving on and retrying");
                    down_logged = true;
                }
                tokio::select! {
                    _ = shutdown.changed() => return,
                    _ = tokio::time::sleep(retry) => {}
                }
                retry = (retry * 2).min(RETRY_MAX);
                continue;
            }
        };
        let mut last = None;
        loop {
            let usage = capacity.usage();
            if last != Some(usage) {
                if let Err(e) = client.push(&sample(usage)).await {
                    tracing::warn!(node = %node, sidecar = %to, error = %e, "push failed; reconnecting");
                    break;
                }
                last = Some(usage);
            }
            // Coalesce: at most one push per `every`, then wait for a change.
            tokio::time::sleep(every).await;
            tokio::select! {
                _ = shutdown.changed() => return,
                _ = capacity.changed.notified() => {}
                _ = tokio::time::sleep(KEEPALIVE) => last = None,
            }
        }
    }
}
