use super::*;

fn config(sites: &[&str]) -> Config {
    let mut text = String::from("[[listener]]\nname = \"web\"\nlisten = \"127.0.0.1:0\"\n\n");
    for s in sites {
        text.push_str(&crate::fixtures::site(s, &[&format!("{s}.test")]));
    }
    crate::fixtures::config(&text)
}

#[test]
fn qos_counters_outlive_reloads_and_follow_site_names() {
    let first = Stats::build(&config(&["a", "b"]), None);
    first.sites[1].arrived();
    if let Some(d) = &first.sites[1].demand {
        d.answered(true);
        d.answered(false);
    }
    // A reload reorders the sites and adds one the agent does not know.
    let second = Stats::build(&config(&["b", "new", "a"]), Some(&first));
    assert!(Arc::ptr_eq(&first.demand, &second.demand));
    second.sites[0].arrived();
    assert!(second.sites[1].demand.is_none());
    second.sites[1].arrived(); // counted nowhere, and no panic
    assert_eq!(second.demand.totals(), [(0, 0), (2, 1)]);
}

#[test]
fn in_flight_counts_follow_site_names_across_reloads() {
    use std::sync::atomic::Ordering;
    let first = Stats::build(&config(&["a", "b"]), None);
    first.sites[1].active.fetch_add(2, Ordering::Relaxed);
    let second = Stats::build(&config(&["b", "new"]), Some(&first));
    // A request that started before the reload settles after it.
    second.sites[0].active.fetch_sub(1, Ordering::Relaxed);
    assert_eq!(first.sites[1].active.load(Ordering::Relaxed), 1);
    assert_eq!(second.sites[1].active.load(Ordering::Relaxed), 0);
    assert_eq!(first.sites[0].active.load(Ordering::Relaxed), 0);
}
