//! The process's one Prometheus recorder. The proxy and the sidecar record
//! through the `metrics` facade; whichever starts first installs the
//! recorder, and every later caller gets the same handle, so one process
//! (a test binary, an embedding program) can hold both and `/metrics`
//! renders everything either recorded.

use std::sync::OnceLock;
use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// Histogram buckets (seconds) of every `*_seconds` histogram: fine where a
/// proxied request or a role switch usually lands (1-250 ms).
pub const DURATION_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// How often histogram samples are drained into their buckets. Without it
/// samples pile up between scrapes (or forever with no admin listener).
const UPKEEP_EVERY: Duration = Duration::from_secs(5);

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Installs the Prometheus recorder as the global `metrics` recorder (once
/// per process) and returns the handle that renders it; `None` when a
/// recorder of someone else's was installed first (an embedding program):
/// then `/metrics` says so instead of serving partial data.
pub fn prometheus() -> Option<&'static PrometheusHandle> {
    HANDLE
        .get_or_init(|| {
            let builder = PrometheusBuilder::new();
            // Only fails for an empty bucket list, which DURATION_BUCKETS is not.
            let builder = match builder
                .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), DURATION_BUCKETS)
            {
                Ok(b) => b,
                Err(e) => {
                    tracing::warn!(error = %e, "histogram buckets rejected; durations exported as summaries");
                    PrometheusBuilder::new()
                }
            };
            let recorder = builder.build_recorder();
            let handle = recorder.handle();
            if let Err(e) = metrics::set_global_recorder(recorder) {
                tracing::warn!(error = %e, "another metrics recorder is installed; /metrics is unavailable");
                return None;
            }
            let upkeep = handle.clone();
            let spawned = std::thread::Builder::new()
                .name("metrics-upkeep".into())
                .spawn(move || loop {
                    std::thread::sleep(UPKEEP_EVERY);
                    upkeep.run_upkeep();
                });
            if let Err(e) = spawned {
                // Rendering still drains histograms; only memory between
                // scrapes is affected.
                tracing::warn!(error = %e, "cannot start the metrics upkeep thread");
            }
            Some(handle)
        })
        .as_ref()
}
