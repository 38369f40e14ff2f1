//! The state file on its own: round trip, first start, restart past the
//! gap, refusals.

use super::*;

const SITES: [&str; 3] = ["shop", "blog", "news"];

fn sites() -> Vec<String> {
    SITES.iter().map(|s| s.to_string()).collect()
}

fn file(dir: &tempfile::TempDir) -> StateFile {
    StateFile::new(dir.path().join("n1.state"), "n1")
}

#[test]
fn a_first_start_is_the_configured_site_at_epoch_1() {
    let dir = tempfile::tempdir().unwrap();
    let s = file(&dir)
        .start(SiteSlot::Site(0), |n| site_slot(&sites(), n))
        .unwrap();
    assert_eq!(
        s,
        Start {
            epoch: 1,
            target: SiteSlot::Site(0),
            serving: None,
            restarted: false
        }
    );
}

#[test]
fn a_restart_resumes_the_recorded_site_past_the_gap() {
    let dir = tempfile::tempdir().unwrap();
    let f = file(&dir);
    let p = Persisted {
        node: "n1".into(),
        epoch: 7,
        serving: "blog".into(),
        applying: None,
    };
    f.store(&p).unwrap();
    assert_eq!(f.load().unwrap(), Some(p));
    let s = f
        .start(SiteSlot::Site(0), |n| site_slot(&sites(), n))
        .unwrap();
    assert_eq!(s.epoch, 7 + RESTART_GAP);
    assert_eq!(s.target, SiteSlot::Site(1));
    assert_eq!(s.serving, Some(SiteSlot::Site(1)));
    assert!(s.restarted);
}

#[test]
fn a_restart_mid_apply_finishes_the_apply() {
    let dir = tempfile::tempdir().unwrap();
    let f = file(&dir);
    f.store(&Persisted {
        node: "n1".into(),
        epoch: 9,
        serving: "idle".into(),
        applying: Some("news".into()),
    })
    .unwrap();
    let s = f
        .start(SiteSlot::Site(0), |n| site_slot(&sites(), n))
        .unwrap();
    assert_eq!(
        (s.target, s.serving),
        (SiteSlot::Site(2), Some(SiteSlot::Idle))
    );
}

#[test]
fn a_site_gone_from_the_table_falls_back_to_the_configured_one() {
    let dir = tempfile::tempdir().unwrap();
    let f = file(&dir);
    f.store(&Persisted {
        node: "n1".into(),
        epoch: 3,
        serving: "old-site".into(),
        applying: None,
    })
    .unwrap();
    let s = f
        .start(SiteSlot::Site(0), |n| site_slot(&sites(), n))
        .unwrap();
    assert_eq!((s.target, s.serving), (SiteSlot::Site(0), None));
    assert_eq!(s.epoch, 3 + RESTART_GAP, "the epoch floor still holds");
}

#[test]
fn a_corrupt_or_foreign_file_is_refused_with_its_name() {
    let dir = tempfile::tempdir().unwrap();
    let f = file(&dir);
    std::fs::write(f.path(), "epoch = \"many\"\n").unwrap();
    let e = f.start(SiteSlot::Idle, |_| None).unwrap_err().to_string();
    assert!(
        e.contains("n1.state") && e.contains("not one this sidecar wrote"),
        "{e}"
    );
    f.store(&Persisted {
        node: "n2".into(),
        epoch: 3,
        serving: "idle".into(),
        applying: None,
    })
    .unwrap();
    let e = f.start(SiteSlot::Idle, |_| None).unwrap_err().to_string();
    assert!(e.contains("belongs to node `n2`"), "{e}");
}

#[test]
fn an_exhausted_epoch_space_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let f = file(&dir);
    f.store(&Persisted {
        node: "n1".into(),
        epoch: MAX_EPOCH - 5,
        serving: "idle".into(),
        applying: None,
    })
    .unwrap();
    assert!(matches!(
        f.start(SiteSlot::Idle, |_| None),
        Err(StateError::EpochExhausted { .. })
    ));
}

#[test]
fn site_names_round_trip() {
    for slot in [SiteSlot::Idle, SiteSlot::Site(0), SiteSlot::Site(2)] {
        assert_eq!(site_slot(&sites(), &site_name(&sites(), slot)), Some(slot));
    }
    assert_eq!(site_slot(&sites(), "nope"), None);
}
