use std::time::{Duration, UNIX_EPOCH};

use super::*;

#[test]
fn nanoseconds_of_the_epoch_and_after() {
    assert_eq!(unix_ns(UNIX_EPOCH), 0);
    assert_eq!(unix_ns(UNIX_EPOCH + Duration::from_nanos(1_500)), 1_500);
    assert_eq!(unix_ns(UNIX_EPOCH - Duration::from_secs(1)), 0);
}

#[test]
fn units_agree_and_before_the_epoch_is_zero() {
    let t = UNIX_EPOCH + Duration::from_millis(1_795_265_200_123);
    assert_eq!(unix_ms(t), 1_795_265_200_123);
    assert_eq!(unix_secs(t), 1_795_265_200);
    assert_eq!(
        since_epoch(UNIX_EPOCH - Duration::from_secs(1)),
        Duration::ZERO
    );
    let (ns, ms, s) = (unix_now_ns(), unix_now_ms(), unix_now_secs());
    assert!(ns / 1_000_000 >= ms.saturating_sub(1000) && ms / 1000 >= s.saturating_sub(1));
}
