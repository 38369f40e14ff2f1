use std::time::Duration;

use tokio::sync::watch;

use super::requested;

#[tokio::test(start_paused = true)]
async fn resolves_on_true_and_on_a_dropped_sender_not_before() {
    let (tx, mut rx) = watch::channel(false);
    let waiting = tokio::time::timeout(Duration::from_secs(60), requested(&mut rx)).await;
    assert!(waiting.is_err(), "false must keep it waiting");
    tx.send(true).unwrap();
    requested(&mut rx).await;
    // Already true: resolves at once, again.
    requested(&mut rx).await;

    let (tx, mut rx) = watch::channel(false);
    drop(tx);
    requested(&mut rx).await;
}
