//! Administrative state and weight: config, runtime and agent, across
//! reloads.

use super::*;

fn configured(weight: u32, disabled: bool) -> Configured {
    Configured {
        weight,
        disabled,
        ..Configured::default()
    }
}

#[test]
fn the_config_sets_the_starting_point() {
    let c = Control::new();
    c.apply_config(configured(3, true));
    assert_eq!(c.admin(), AdminState::Maint);
    assert_eq!(c.weight(), 3);
    assert!(!c.admits(), "maintenance takes no requests");
    c.set_admin(AdminState::Ready, Source::Runtime);
    assert!(c.admits());
}

#[test]
fn a_reload_keeps_runtime_changes_the_config_did_not_touch() {
    let c = Control::new();
    c.apply_config(configured(2, false));
    c.set_admin(AdminState::Drain, Source::Runtime);
    c.set_weight(7, Source::Runtime);
    // The same config again: the drain and the weight stay.
    assert!(!c.apply_config(configured(2, false)));
    assert_eq!(c.admin(), AdminState::Drain);
    assert_eq!(c.weight(), 7);
    // A new configured weight replaces the runtime one.
    c.apply_config(configured(4, false));
    assert_eq!(c.weight(), 4);
    assert_eq!(
        c.admin(),
        AdminState::Drain,
        "enabling in the config does not end a runtime drain"
    );
}

#[test]
fn enabling_in_the_config_ends_the_config_maintenance() {
    let c = Control::new();
    c.apply_config(configured(1, true));
    assert_eq!(c.admin(), AdminState::Maint);
    c.apply_config(configured(1, false));
    assert_eq!(c.admin(), AdminState::Ready);
}

#[test]
fn an_agent_percentage_is_of_the_configured_weight() {
    let c = Control::new();
    c.apply_config(configured(10, false));
    c.set_weight_percent(50, Source::Agent);
    assert_eq!(c.weight(), 5);
    // Rounded up: a small share never becomes 0.
    c.set_weight_percent(1, Source::Agent);
    assert_eq!(c.weight(), 1);
    c.set_weight_percent(0, Source::Agent);
    assert_eq!(c.weight(), 0);
    assert!(!c.admits(), "weight 0 takes no new requests");
    // Above 100 % is allowed up to the weight limit.
    c.set_weight_percent(10_000, Source::Agent);
    assert_eq!(c.weight(), Node::MAX_WEIGHT);
}

#[test]
fn an_agent_down_and_its_maxconn() {
    let c = Control::new();
    c.apply_config(Configured {
        max_inflight: Some(8),
        ..Configured::default()
    });
    assert_eq!(c.max_inflight(), Some(8));
    c.set_agent_max_inflight(Some(3));
    assert_eq!(c.max_inflight(), Some(3), "the agent's maxconn wins");
    c.set_agent_max_inflight(None);
    assert_eq!(c.max_inflight(), Some(8));
    assert!(c.set_agent_down(true));
    assert!(!c.admits());
    assert!(c.set_agent_down(false));
    assert!(c.admits());
}
