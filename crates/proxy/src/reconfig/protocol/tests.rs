use std::sync::Arc;

use super::*;
use crate::reconfig::peers::LocalWindow;
use rdmalb_window::{RoleState, SiteSlot, WindowMemory};

fn window() -> LocalWindow {
    LocalWindow::new(Arc::new(WindowMemory::anonymous(1, 0).unwrap()))
}

#[tokio::test]
async fn lock_is_exclusive_until_released() {
    let home = window();
    let lease = Duration::from_secs(60);
    let LockAttempt::Acquired(held) = try_lock(&home, 3, 1, lease, Duration::ZERO).await.unwrap()
    else {
        panic!("free lock not acquired")
    };
    assert_eq!(
        try_lock(&home, 3, 2, lease, Duration::ZERO).await.unwrap(),
        LockAttempt::Busy { owner: 1 }
    );
    // Another site's lock is independent.
    assert!(matches!(
        try_lock(&home, 4, 2, lease, Duration::ZERO).await.unwrap(),
        LockAttempt::Acquired(_)
    ));
    assert!(unlock(&home, held).await.unwrap());
    assert!(
        !unlock(&home, held).await.unwrap(),
        "double release is refused"
    );
    assert!(matches!(
        try_lock(&home, 3, 2, lease, Duration::ZERO).await.unwrap(),
        LockAttempt::Acquired(_)
    ));
}

#[tokio::test]
async fn an_expired_lease_is_stolen_only_after_the_skew() {
    let home = window();
    let w = site_lock_word(0).unwrap();
    let deadline = rdmalb_base::time::unix_now_ms() - 1_000;
    let dead = SiteLock::held(7, deadline).unwrap().encode();
    home.compare_swap(w, 0, dead).await.unwrap();
    // Lease ran out 1 s ago; a 1 h skew allowance still protects it.
    assert_eq!(
        try_lock(
            &home,
            0,
            2,
            Duration::from_secs(1),
            Duration::from_secs(3600)
        )
        .await
        .unwrap(),
        LockAttempt::Busy { owner: 7 }
    );
    let LockAttempt::Stolen { held, from } = try_lock(
        &home,
        0,
        2,
        Duration::from_secs(1),
        Duration::from_millis(10),
    )
    .await
    .unwrap() else {
        panic!("expired lock not stolen")
    };
    assert_eq!(from, 7);
    // The robbed holder's release must not free the thief's lock.
    let stale = HeldLock {
        site: 0,
        raw: dead,
        deadline_ms: deadline,
        generation: held.generation,
    };
    assert!(!unlock(&home, stale).await.unwrap());
    assert!(unlock(&home, held).await.unwrap());
}

#[tokio::test]
async fn claim_cas_fails_on_a_stale_view() {
    let node = window();
    let start = RoleWord {
        site: SiteSlot::Site(0),
        state: RoleState::Active,
        epoch: 1,
    };
    node.compare_swap(word::ROLE, 0, start.encode())
        .await
        .unwrap();
    let to_blog = start.next(SiteSlot::Site(1), RoleState::Switching);
    let to_news = start.next(SiteSlot::Site(2), RoleState::Switching);
    assert!(claim(&node, start.encode(), to_blog).await.unwrap());
    assert!(!claim(&node, start.encode(), to_news).await.unwrap());
    assert_eq!(node.read_word(word::ROLE).await.unwrap(), to_blog.encode());
    write_claim_record(&node, 3, to_blog.epoch).await.unwrap();
    assert_eq!(node.read_word(word::CLAIM_PROXY).await.unwrap(), 3);
    assert_eq!(node.read_word(word::CLAIM_EPOCH).await.unwrap(), 2);
    assert_eq!(bump_counter(&node, 5).await.unwrap(), 1);
    assert_eq!(bump_counter(&node, 5).await.unwrap(), 2);
    assert!(matches!(
        bump_counter(&node, 64).await,
        Err(ProtocolError::NoSuchSite(64))
    ));
}
