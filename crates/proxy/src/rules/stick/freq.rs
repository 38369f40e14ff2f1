//! Event rates over a period, as HAProxy's `freq_ctr` counts them
//! (`src/freq_ctr.c`, `include/haproxy/freq_ctr.h`), re-implemented so the
//! same sequence of events read at the same times gives the same rate,
//! hence the same 429s.
//!
//! A counter holds the events of the current period (`curr`, which began
//! at `tick`) and of the one before (`prev`). An event in a period that is
//! over rotates first: `prev` takes `curr` (or 0 when more than one whole
//! period passed, and then the current period starts now, not on the old
//! period's grid). A read is `curr + prev × (share of the period still to
//! run)`, with HAProxy's correction for very low rates (no event yet in
//! this period and at most one in the last: that one is reported whole).
//!
//! Times are HAProxy-style ticks: milliseconds on a wrapping 32-bit clock
//! ([`now_ms`]), compared by wrapping differences. The low bit of `tick`
//! is always clear (HAProxy uses it as a rotation lock; the value is kept
//! so rotations land on the same milliseconds).

use std::sync::OnceLock;
use std::time::Instant;

/// The process clock in ticks. It starts 20 s before wrapping, as
/// HAProxy's `now_ms` does, so that wrapping is exercised early and a
/// fresh counter (tick 0) is always in a period long past.
pub fn now_ms() -> u32 {
    ms_at(Instant::now())
}

/// The tick of instant `t` (a request's start, already read: the request
/// path reads the clock once, as HAProxy's `now_ms` is read once per
/// polling loop). An instant before the clock's start is its start.
pub fn ms_at(t: Instant) -> u32 {
    static START: OnceLock<Instant> = OnceLock::new();
    let d = t.saturating_duration_since(*START.get_or_init(Instant::now));
    // Whole seconds and milliseconds: no 128-bit arithmetic.
    (d.as_secs() as u32)
        .wrapping_mul(1000)
        .wrapping_add(d.subsec_millis())
        .wrapping_sub(20_000)
}

/// One rate counter (12 bytes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Freq {
    /// When the current period began (low bit clear).
    tick: u32,
    curr: u32,
    prev: u32,
}

impl Freq {
    /// Counts `inc` events at `now` for a counter read over `period` ms
    /// (HAProxy's `update_freq_ctr_period`).
    pub fn add(&mut self, now: u32, period: u32, inc: u32) {
        if now.wrapping_sub(self.tick) < period {
            self.curr = self.curr.wrapping_add(inc);
            return;
        }
        self.prev = self.curr;
        self.curr = inc;
        let mut tick = self.tick.wrapping_add(period);
        if now.wrapping_sub(tick) >= period {
            // At least two periods went by: nothing of the last one.
            self.prev = 0;
            tick = now;
        }
        self.tick = tick & !1;
    }

    /// The events over the last `period` ms at `now`, scaled by the
    /// period (HAProxy's `freq_ctr_total` with its low-rate correction).
    fn total(&self, now: u32, period: u32) -> u64 {
        let (mut past, mut curr) = (u64::from(self.prev), u64::from(self.curr));
        // A wrapping difference read as signed, as HAProxy's `int remain`.
        let mut remain = self.tick.wrapping_add(period).wrapping_sub(now) as i32 as i64;
        if remain < 0 {
            remain += i64::from(period);
            past = if remain >= 0 { curr } else { 0 };
            curr = 0;
        }
        if curr == 0 && past <= 1 {
            return past * u64::from(period);
        }
        (past as i64 * remain) as u64 + curr * u64::from(period)
    }

    /// The rate: events per `period` at `now` (HAProxy's
    /// `read_freq_ctr_period`).
    pub fn read(&self, now: u32, period: u32) -> u32 {
        if period == 0 {
            return 0;
        }
        (self.total(now, period) / u64::from(period)) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: u32 = 10_000;

    #[test]
    fn a_fresh_counter_starts_its_period_at_the_first_event() {
        let mut f = Freq::default();
        let t0 = 4_000_000_001u32;
        f.add(t0, P, 1);
        assert_eq!(f.tick, t0 & !1);
        assert_eq!((f.curr, f.prev), (1, 0));
        assert_eq!(f.read(t0, P), 1);
    }

    #[test]
    fn the_last_period_counts_for_the_share_still_to_run() {
        let mut f = Freq::default();
        let t0 = 1_000_000;
        for _ in 0..40 {
            f.add(t0, P, 1);
        }
        assert_eq!(f.read(t0 + 9_999, P), 40);
        // Next period: 40 of the past, weighted by what is left of it.
        f.add(t0 + P, P, 1);
        assert_eq!((f.curr, f.prev), (1, 40));
        assert_eq!(f.read(t0 + P, P), 41);
        assert_eq!(f.read(t0 + P + 2_500, P), 1 + 30);
        assert_eq!(f.read(t0 + P + 5_000, P), 1 + 20);
        // Two periods on, the old events are gone; the last lone event
        // is reported whole up to the end of the period after its own.
        assert_eq!(f.read(t0 + 2 * P, P), 1);
        assert_eq!(f.read(t0 + 3 * P, P), 1);
        assert_eq!(f.read(t0 + 3 * P + 1, P), 0);
    }

    #[test]
    fn a_gap_of_two_periods_restarts_the_grid_now() {
        let mut f = Freq::default();
        f.add(1_000, P, 5);
        f.add(1_000 + 2 * P + 123, P, 1);
        assert_eq!((f.curr, f.prev), (1, 0));
        assert_eq!(f.tick, (1_000 + 2 * P + 123) & !1);
    }

    #[test]
    fn one_event_is_reported_whole_until_it_is_two_periods_old() {
        // HAProxy's flapping correction: past <= 1 and nothing new.
        let mut f = Freq::default();
        f.add(0, P, 1);
        assert_eq!(f.read(P + 9_000, P), 1);
        assert_eq!(f.read(2 * P, P), 1);
        assert_eq!(f.read(2 * P + 1, P), 0);
    }

    #[test]
    fn the_clock_wraps_without_losing_the_period() {
        let mut f = Freq::default();
        let t0 = u32::MAX - 100;
        f.add(t0, P, 3);
        f.add(t0.wrapping_add(200), P, 2);
        assert_eq!(f.read(t0.wrapping_add(300), P), 5);
    }
}
