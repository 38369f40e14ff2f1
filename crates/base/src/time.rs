//! Wall-clock time as the window and the protocols carry it: integers since
//! the Unix epoch. A clock set before 1970 reads as 0 rather than failing;
//! every reader treats 0 as "unknown".

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Time since the Unix epoch of `t` (zero before it).
pub fn since_epoch(t: SystemTime) -> Duration {
    t.duration_since(UNIX_EPOCH).unwrap_or_default()
}

/// Now, in nanoseconds since the Unix epoch (the load block's `updated_at`).
pub fn unix_now_ns() -> u64 {
    unix_ns(SystemTime::now())
}

/// The environment variable that offsets this process's [`unix_now_ms`] by
/// a signed number of milliseconds: clock skew for the fault-injection
/// campaign (`rdmalb-testbed chaos`), never for production.
pub const CLOCK_OFFSET_ENV: &str = "RDMALB_CLOCK_OFFSET_MS";

fn clock_offset_ms() -> i64 {
    static OFFSET: std::sync::OnceLock<i64> = std::sync::OnceLock::new();
    *OFFSET.get_or_init(|| {
        std::env::var(CLOCK_OFFSET_ENV)
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    })
}

/// Now, in milliseconds since the Unix epoch (leases, claim records),
/// offset by [`CLOCK_OFFSET_ENV`] when set.
pub fn unix_now_ms() -> u64 {
    let ms = since_epoch(SystemTime::now()).as_millis() as u64;
    ms.saturating_add_signed(clock_offset_ms())
}

/// Now, in whole seconds since the Unix epoch.
pub fn unix_now_secs() -> u64 {
    since_epoch(SystemTime::now()).as_secs()
}

/// `t` in milliseconds since the Unix epoch.
pub fn unix_ms(t: SystemTime) -> u64 {
    since_epoch(t).as_millis() as u64
}

/// `t` in whole seconds since the Unix epoch.
pub fn unix_secs(t: SystemTime) -> u64 {
    since_epoch(t).as_secs()
}

/// `t` in nanoseconds since the Unix epoch (`u64::MAX` past the year 2554).
pub fn unix_ns(t: SystemTime) -> u64 {
    u64::try_from(since_epoch(t).as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests;
