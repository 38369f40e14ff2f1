use super::*;

fn header() -> [u64; 32] {
    let mut h = [0u64; 32];
    h[0] = layout::MAGIC;
    h[1] = 1;
    h[2] = 5;
    h[3] = 0xABCD;
    h[4] = 4096;
    h
}

#[test]
fn header_checks() {
    let h = header();
    assert!(Expect::ANY.check("p", &h).is_ok());
    let e = Expect {
        node_id: Some(5),
        site_hash: Some(0xABCD),
    };
    assert!(e.check("p", &h).is_ok());

    let mut bad = h;
    bad[0] = 1;
    assert!(matches!(
        e.check("p", &bad),
        Err(WindowError::BadMagic { found: 1, .. })
    ));
    let mut bad = h;
    bad[1] = 2;
    assert!(matches!(
        e.check("p", &bad),
        Err(WindowError::BadVersion { found: 2, .. })
    ));
    let mut bad = h;
    bad[4] = 8192;
    assert!(matches!(
        e.check("p", &bad),
        Err(WindowError::BadSize { found: 8192, .. })
    ));
    let err = Expect {
        node_id: None,
        site_hash: Some(1),
    }
    .check("/dev/shm/x", &h)
    .unwrap_err();
    assert!(matches!(
        err,
        WindowError::SiteTableMismatch {
            ours: 1,
            theirs: 0xABCD,
            ..
        }
    ));
    assert!(err.to_string().contains("/dev/shm/x"));
    assert!(matches!(
        Expect {
            node_id: Some(6),
            site_hash: None
        }
        .check("p", &h),
        Err(WindowError::NodeIdMismatch {
            expected: 6,
            found: 5,
            ..
        })
    ));
    assert!(matches!(
        Expect::ANY.check("p", &[]),
        Err(WindowError::BadMagic { .. })
    ));
}

#[test]
fn atomic_word_bounds() {
    assert!(check_atomic_word("p", 31).is_err());
    assert!(check_atomic_word("p", 32).is_ok());
    assert!(check_atomic_word("p", 191).is_ok());
    assert!(matches!(
        check_atomic_word("p", 192),
        Err(WindowError::Refused { word: 192, .. })
    ));
    assert!(check_atomic_word("p", usize::MAX).is_err());
}
