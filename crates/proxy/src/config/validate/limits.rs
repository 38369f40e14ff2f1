//! `[timeouts]` and `[limits]`: how long the proxy waits for each side and
//! how much it accepts, with their defaults (documented in
//! `conf/rdmalb.toml`).

use std::time::Duration;

use super::super::raw::{RawLimits, RawTimeouts};
use super::super::types::{Limits, Timeouts};
use rdmalb_base::problems::ConfigCheck;

pub(super) fn timeouts(c: &mut ConfigCheck, raw_timeouts: &RawTimeouts) -> Timeouts {
    Timeouts {
        connect: c.duration(
            "timeouts.connect",
            raw_timeouts.connect.as_deref(),
            Duration::from_secs(2),
        ),
        client: c.duration(
            "timeouts.client",
            raw_timeouts.client.as_deref(),
            Duration::from_secs(30),
        ),
        server: c.duration(
            "timeouts.server",
            raw_timeouts.server.as_deref(),
            Duration::from_secs(30),
        ),
        http_request: c.duration(
            "timeouts.http_request",
            raw_timeouts.http_request.as_deref(),
            Duration::from_secs(10),
        ),
        keep_alive: c.duration(
            "timeouts.keep_alive",
            raw_timeouts.keep_alive.as_deref(),
            Duration::from_secs(60),
        ),
        queue: c.duration(
            "timeouts.queue",
            raw_timeouts.queue.as_deref(),
            Duration::from_secs(5),
        ),
    }
}

pub(super) fn limits(c: &mut ConfigCheck, raw_limits: &RawLimits) -> Limits {
    Limits {
        max_header_bytes: c.int(
            "limits.max_header_bytes",
            raw_limits.max_header_bytes,
            16 * 1024,
            1024,
            1024 * 1024,
        ) as usize,
        max_headers: c.int("limits.max_headers", raw_limits.max_headers, 100, 8, 1000) as usize,
        max_connections: c.int(
            "limits.max_connections",
            raw_limits.max_connections,
            10_000,
            1,
            1_000_000,
        ) as usize,
        max_inflight_per_node: c.int(
            "limits.max_inflight_per_node",
            raw_limits.max_inflight_per_node,
            0,
            0,
            1_000_000,
        ) as usize,
        pool_idle_per_node: c.int(
            "limits.pool_idle_per_node",
            raw_limits.pool_idle_per_node,
            1024,
            0,
            100_000,
        ) as usize,
    }
}
