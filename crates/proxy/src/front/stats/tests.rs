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
