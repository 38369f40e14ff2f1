use super::*;
use rdmalb_window::RoleStatusCode;

#[test]
fn effective_state_follows_the_contract() {
    let mut v = test_view(SiteSlot::Site(1), 4, 4, 0.1);
    assert_eq!(v.effective(), Effective::Active);
    assert_eq!(v.serving(), Some(SiteSlot::Site(1)));
    v.applied = 3;
    assert_eq!(v.effective(), Effective::Switching);
    assert_eq!(v.serving(), None);
    v.status = Some(RoleStatus {
        epoch: 3,
        serving: SiteSlot::Site(0),
        code: RoleStatusCode::VerifyFailed,
    });
    assert_eq!(
        v.effective(),
        Effective::Switching,
        "failure of an older epoch"
    );
    v.status = Some(RoleStatus {
        epoch: 4,
        serving: SiteSlot::Site(0),
        code: RoleStatusCode::Applying,
    });
    assert_eq!(v.effective(), Effective::Switching);
    v.status = Some(RoleStatus {
        epoch: 4,
        serving: SiteSlot::Site(0),
        code: RoleStatusCode::ReloadFailed,
    });
    assert_eq!(v.effective(), Effective::Failed);
    v.role.state = RoleState::Unset;
    assert_eq!(v.effective(), Effective::Unset);
}

#[test]
fn node_load_prefers_the_application() {
    let s = LoadSample {
        cpu_util_ppm: 900_000,
        app_busy: 3,
        app_queue_len: 1,
        app_capacity: 8,
        ..LoadSample::default()
    };
    assert_eq!(node_load(&s), 0.5);
    let s = LoadSample {
        cpu_util_ppm: 250_000,
        ..LoadSample::default()
    };
    assert_eq!(node_load(&s), 0.25);
}

#[test]
fn site_load_is_the_mean_of_active_live_nodes() {
    let mut views = vec![
        test_view(SiteSlot::Site(0), 1, 1, 0.9),
        test_view(SiteSlot::Site(0), 1, 1, 0.7),
        test_view(SiteSlot::Site(0), 2, 1, 0.0), // switching: not counted
        test_view(SiteSlot::Site(1), 1, 1, 0.1),
    ];
    views[1].freshness = Freshness::Fresh;
    assert!((site_load(&views, 0).unwrap() - 0.8).abs() < 1e-9);
    views[0].load = None; // stale sidecar
    assert!((site_load(&views, 0).unwrap() - 0.7).abs() < 1e-9);
    assert_eq!(site_load(&views, 2), None);
}
