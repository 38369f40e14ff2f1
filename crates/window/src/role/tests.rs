use super::*;
use proptest::prelude::*;

fn state() -> impl Strategy<Value = RoleState> {
    prop_oneof![
        Just(RoleState::Unset),
        Just(RoleState::Active),
        Just(RoleState::Switching),
        Just(RoleState::Failed),
        Just(RoleState::Draining),
    ]
}

fn slot() -> impl Strategy<Value = SiteSlot> {
    prop_oneof![
        Just(SiteSlot::Idle),
        (0u16..0xFFFF).prop_map(SiteSlot::Site)
    ]
}

fn status_code() -> impl Strategy<Value = RoleStatusCode> {
    (0u8..=5).prop_map(|c| RoleStatusCode::from_code(c).unwrap())
}

proptest! {
    #[test]
    fn role_status_round_trips(epoch in 0..=MAX_EPOCH, serving in slot(), code in status_code()) {
        let s = RoleStatus { epoch, serving, code };
        prop_assert_eq!(RoleStatus::decode(s.encode()), Ok(s));
        prop_assert_eq!(code.is_failure(), code.code() >= 2);
    }

    #[test]
    fn role_status_decode_encode_is_identity_for_valid_words(raw in any::<u64>()) {
        match RoleStatus::decode(raw) {
            Ok(s) => prop_assert_eq!(s.encode(), raw),
            Err(ControlWordError::UnknownRoleStatus { code, .. }) => {
                prop_assert!(code > 5);
                prop_assert_eq!(u64::from(code), raw & 0xFF);
            }
            Err(e) => prop_assert!(false, "unexpected error {e}"),
        }
    }

    #[test]
    fn role_word_round_trips(site in slot(), state in state(), epoch in 0..=MAX_EPOCH) {
        let w = RoleWord { site, state, epoch };
        prop_assert_eq!(RoleWord::decode(w.encode()), Ok(w));
    }

    #[test]
    fn role_decode_encode_is_identity_for_valid_words(raw in any::<u64>()) {
        if let Ok(w) = RoleWord::decode(raw) {
            prop_assert_eq!(w.encode(), raw);
        } else {
            prop_assert!(((raw >> 16) & 0xFF) > 4);
        }
    }

    #[test]
    fn next_always_changes_the_raw_word(site in slot(), state in state(), epoch in 0..MAX_EPOCH, s2 in slot(), st2 in state()) {
        let w = RoleWord { site, state, epoch };
        let n = w.next(s2, st2);
        prop_assert_eq!(n.epoch, epoch + 1);
        prop_assert_ne!(n.encode(), w.encode());
    }

    #[test]
    fn site_lock_round_trips(owner in 1u16.., deadline in 0..=MAX_LEASE_MS) {
        let l = SiteLock::held(owner, deadline).unwrap();
        prop_assert_ne!(l.encode(), 0);
        prop_assert_eq!(SiteLock::decode(l.encode()), Ok(l));
    }

    #[test]
    fn site_lock_decode_encode_is_identity(raw in any::<u64>()) {
        match SiteLock::decode(raw) {
            Ok(l) => prop_assert_eq!(l.encode(), raw),
            Err(_) => prop_assert_eq!(raw & 0xFFFF, 0),
        }
    }
}

#[test]
fn role_word_bit_positions() {
    let w = RoleWord {
        site: SiteSlot::Site(3),
        state: RoleState::Switching,
        epoch: 5,
    };
    assert_eq!(w.encode(), 3 | (2 << 16) | (5 << 24));
    let idle = RoleWord {
        site: SiteSlot::Idle,
        state: RoleState::Active,
        epoch: MAX_EPOCH,
    };
    assert_eq!(idle.encode(), 0xFFFF | (1 << 16) | (MAX_EPOCH << 24));
    assert_eq!(RoleWord::decode(0), Ok(RoleWord::UNSET));
    assert!(matches!(
        RoleWord::decode(9 << 16),
        Err(ControlWordError::UnknownRoleState { code: 9, .. })
    ));
}

#[test]
fn role_status_bit_positions() {
    let s = RoleStatus {
        epoch: 7,
        serving: SiteSlot::Site(2),
        code: RoleStatusCode::VerifyFailed,
    };
    assert_eq!(s.encode(), 4 | (2 << 8) | (7 << 24));
    let idle = RoleStatus {
        epoch: MAX_EPOCH,
        serving: SiteSlot::Idle,
        code: RoleStatusCode::NoTemplate,
    };
    assert_eq!(idle.encode(), 5 | (0xFFFF << 8) | (MAX_EPOCH << 24));
    assert_eq!(RoleStatus::decode(0), Ok(RoleStatus::UNSET));
    assert_eq!(
        RoleStatus::decode(6),
        Err(ControlWordError::UnknownRoleStatus { raw: 6, code: 6 })
    );
    let names: Vec<&str> = (0..=5)
        .map(|c| RoleStatusCode::from_code(c).unwrap().as_str())
        .collect();
    assert_eq!(
        names,
        [
            "ok",
            "applying",
            "render_failed",
            "reload_failed",
            "verify_failed",
            "no_template"
        ]
    );
}

#[test]
fn epoch_wraps_within_40_bits() {
    let w = RoleWord {
        site: SiteSlot::Idle,
        state: RoleState::Active,
        epoch: MAX_EPOCH,
    };
    assert_eq!(w.next(SiteSlot::Site(1), RoleState::Switching).epoch, 0);
}

#[test]
fn site_lock_encoding_and_expiry() {
    assert_eq!(SiteLock::Free.encode(), 0);
    let l = SiteLock::held(7, 1_000).unwrap();
    assert_eq!(l.encode(), 7 | (1_000 << 16));
    assert_eq!(l.owner(), Some(7));
    assert!(!l.is_expired(1_000, 0));
    assert!(l.is_expired(1_001, 0));
    assert!(!l.is_expired(1_200, 200));
    assert!(l.is_expired(1_201, 200));
    assert!(SiteLock::Free.is_expired(0, 0));
    assert_eq!(SiteLock::held(0, 5), Err(ControlWordError::ZeroOwner));
    assert!(SiteLock::held(1, MAX_LEASE_MS + 1).is_err());
    assert_eq!(
        SiteLock::decode(5 << 16),
        Err(ControlWordError::LockWithoutOwner { raw: 5 << 16 })
    );
    assert!(!SiteLock::held(1, MAX_LEASE_MS)
        .unwrap()
        .is_expired(u64::MAX, u64::MAX));
}

proptest! {
    #[test]
    fn pin_word_round_trips(raw in any::<u64>()) {
        prop_assert_eq!(PinWord::decode(raw).encode(), raw);
    }
}

#[test]
fn pin_word_holds_until_its_deadline() {
    let p = PinWord::new(3, 10_000);
    assert_eq!(p.encode(), 10_000 | (3 << 48));
    assert!(p.holds_at(9_999));
    assert!(!p.holds_at(10_000));
    assert!(!PinWord::NONE.holds_at(0));
    assert_eq!(PinWord::decode(0), PinWord::NONE);
    assert_eq!(PinWord::new(1, u64::MAX).until_ms, MAX_LEASE_MS);
}
