//! Validation of `[qos]` (raw → typed [`Qos`]): the proxy-wide in-flight
//! limit, the dispatch order of its queue and the best-effort floor.
//! Defaults are those of [`Qos::default`], documented in `conf/rdmalb.toml`.

use super::raw::RawQos;
use super::types::{Dispatch, Qos};
use rdmalb_base::problems::ConfigCheck;

/// Largest best-effort floor accepted (requests/s).
const MAX_FLOOR: f64 = 1e7;

pub(super) fn validate(c: &mut ConfigCheck, raw: RawQos) -> Qos {
    let d = Qos::default();
    let dispatch = match raw.dispatch.as_deref() {
        None => d.dispatch,
        Some("virtualclock") => Dispatch::VirtualClock,
        Some("fifo") => Dispatch::Fifo,
        Some(other) => {
            c.add(
                "qos.dispatch",
                format!(
                    "`{other}` is not a dispatch order (expected {})",
                    Dispatch::ACCEPTED
                ),
            );
            d.dispatch
        }
    };
    let best_effort_floor = match raw.best_effort_floor {
        None => d.best_effort_floor,
        Some(f) if f.is_finite() && f > 0.0 && f <= MAX_FLOOR => f,
        Some(f) => {
            c.add(
                "qos.best_effort_floor",
                format!("{f} is out of range (expected requests/s above 0 and at most {MAX_FLOOR}; a best-effort site must keep some share)"),
            );
            d.best_effort_floor
        }
    };
    Qos {
        max_inflight: c.int("qos.max_inflight", raw.max_inflight, 0, 0, 1_000_000) as usize,
        dispatch,
        best_effort_floor,
        max_queue: c.int(
            "qos.max_queue",
            raw.max_queue,
            d.max_queue as u64,
            1,
            1_000_000,
        ) as usize,
    }
}
