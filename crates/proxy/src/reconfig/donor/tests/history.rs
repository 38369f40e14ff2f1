//! Moves back and the history behind them: loans going home, a donor
//! judged over T rather than one round, and the take-back of a node a site
//! just gave away (issue 16).

use super::*;

#[test]
fn a_loan_of_the_hot_site_goes_home_first() {
    // Site 1 (best effort) serves nodes 1..=3; nodes 2 and 3 are site 0's
    // on loan. Site 0 is short: it may pull busy nodes of lower priority.
    let views = vec![
        node(0, site(0), 1.5),
        node(1, site(1), 0.9),
        node(2, site(1), 1.0),
        node(3, site(1), 1.1),
    ];
    let short = [qos(1500.0, 300.0, 1200.0), qos(0.0, 0.0, 0.0)];
    let case = DonorQuery {
        priorities: &[10, 0],
        qos: &short,
        ..query(0, &views)
    };
    // Without homes: the lowest load.
    assert_eq!(case.pick(0, &|_| false), Some(1));
    // With homes: site 0's own node on loan, the lowest load of those.
    let homes = [Some(0), Some(1), Some(0), Some(0)];
    let home = DonorQuery {
        homes: &homes,
        ..case
    };
    assert_eq!(home.pick(0, &|_| false), Some(2));
}

/// Experiment 5's Zipf run (issue 16): web (site 0) on nodes 0 and 1, app
/// (site 1) on nodes 2 and 3, both loaded. In one round web's work dips so
/// that it fits on one node (node 1's sample is idle): this view alone
/// would let node 1 go, the history says web was not spare over T.
#[test]
fn a_site_whose_work_dipped_for_a_round_gives_nothing() {
    let dip = vec![
        node(0, site(0), 0.3),
        node(1, site(0), 0.05),
        node(2, site(1), 1.8),
        node(3, site(1), 1.8),
    ];
    let q = |spare: &[bool]| {
        choose_donor(&DonorQuery {
            spare,
            ..query(1, &dip)
        })
    };
    // Judged on this view alone (no history), node 1 would go.
    assert_eq!(q(&[]), Some(1));
    // Web's work did not fit on one node in some round of T: nothing.
    assert_eq!(q(&[false, false]), None);
    // It fitted in every round of T: node 1 is spare.
    assert_eq!(q(&[true, false]), Some(1));
    // The history never overrides this view: a loaded view gives nothing.
    let loaded = vec![
        node(0, site(0), 0.9),
        node(1, site(0), 0.05),
        node(2, site(1), 1.8),
        node(3, site(1), 1.8),
    ];
    let q = DonorQuery {
        spare: &[true, true],
        ..query(1, &loaded)
    };
    assert_eq!(choose_donor(&q), None);
    assert_eq!(fits_one_fewer(&q), vec![false, false, true]);
    assert_eq!(
        fits_one_fewer(&DonorQuery { views: &dip, ..q }),
        vec![true, false, true]
    );
}

/// The rest of that run: web gave node 1 to app; when web is hot again it
/// takes node 1 back, not app's least loaded node 3, while node 1 is a
/// legal donor; when it is not (cooling, busy at app, or app not spare),
/// the rules decide as before.
#[test]
fn a_site_that_gave_a_node_gets_it_back_first() {
    let views = vec![
        node(0, site(0), 1.2),
        node(1, site(1), 0.1),
        node(2, site(1), 0.3),
        node(3, site(1), 0.02),
    ];
    let given = [None, Some(0), None, None];
    let q = |given: &[Option<usize>], cooling: &dyn Fn(usize) -> bool, spare: &[bool]| {
        choose_donor(&DonorQuery {
            cooling,
            spare,
            given,
            ..query(0, &views)
        })
    };
    // Without the take-back: app's least loaded node.
    assert_eq!(q(&[], &|_| false, &[true, true]), Some(3));
    // Web gave node 1 away: node 1 comes back.
    assert_eq!(q(&given, &|_| false, &[true, true]), Some(1));
    // Another site's gift is no claim of web's.
    assert_eq!(
        q(&[None, Some(1), None, None], &|_| false, &[true, true]),
        Some(3)
    );
    // Node 1 still cooling down: the rules pick among the others.
    assert_eq!(q(&given, &|i| i == 1, &[true, true]), Some(3));
    // App not spare over T (its work fits on one node fewer in this view
    // only): none of app's own nodes goes, but node 1, going back where it
    // came from, is judged on this view alone.
    assert_eq!(q(&[], &|_| false, &[true, false]), None);
    assert_eq!(q(&given, &|_| false, &[true, false]), Some(1));
    // Node 1 busy at app: not a legal donor, not taken back.
    let busy = vec![
        node(0, site(0), 1.2),
        node(1, site(1), 0.5),
        node(2, site(1), 0.1),
        node(3, site(1), 0.02),
    ];
    let q = DonorQuery {
        spare: &[true, true],
        given: &given,
        ..query(0, &busy)
    };
    assert_eq!(choose_donor(&q), Some(3));
    // The take-back goes before the idle pool and before a loan of the hot
    // site's own home.
    let pooled = vec![
        node(0, site(0), 1.2),
        node(1, site(1), 0.1),
        node(2, site(1), 0.3),
        node(3, site(1), 0.02),
        node(4, SiteSlot::Idle, 0.0),
    ];
    let homes = [Some(0), Some(1), Some(0), Some(1), None];
    let given = [None, Some(0), None, None, None];
    let q = DonorQuery {
        views: &pooled,
        homes: &homes,
        given: &given,
        ..q
    };
    assert_eq!(choose_donor(&q), Some(1));
    assert_eq!(choose_donor(&DonorQuery { given: &[], ..q }), Some(4));
}

/// A short site's take-back never makes it take a busy node while an idle
/// one is legal: the idle node disturbs no request.
#[test]
fn take_back_of_a_busy_node_waits_behind_an_idle_one() {
    // Site 0 (priority 5, guarantee 500) is served 300 of its 800 rps; it
    // gave node 3 to site 2 (priority 1), where node 3 is busy now, and
    // site 2 also has idle node 4.
    let views = vec![
        node(0, site(0), 1.2),
        node(1, site(1), 0.9),
        node(2, site(1), 0.9),
        node(3, site(2), 0.7),
        node(4, site(2), 0.05),
        node(5, site(2), 0.3),
    ];
    let short = [
        qos(800.0, 300.0, 500.0),
        qos(0.0, 0.0, 0.0),
        qos(0.0, 0.0, 0.0),
    ];
    let given = [None, None, None, Some(0), None, None];
    let case = DonorQuery {
        priorities: &[5, 5, 1],
        qos: &short,
        spare: &[true, true, true],
        given: &given,
        ..query(0, &views)
    };
    assert!(short[0].short());
    assert_eq!(
        case.pick(0, &|_| false),
        Some(4),
        "idle before a busy take-back"
    );
    // No idle node left to take: of the busy ones, the node it gave comes
    // back first (node 5 has the lower load).
    assert_eq!(case.pick(0, &|i| i == 4), Some(3));
    let case = DonorQuery { given: &[], ..case };
    assert_eq!(case.pick(0, &|i| i == 4), Some(5));
}

/// A node going home is judged on the view alone: the borrower need not
/// have been spare over T (experiment 5's world-cup runs alternate faster
/// than T, and a node that left home must be able to come back), but its
/// work must fit on one node fewer now.
#[test]
fn a_loan_goes_home_on_the_view_alone() {
    // Node 1 is site 0's, on loan to site 1, which has cooled.
    let views = vec![
        node(0, site(0), 0.5),
        node(1, site(1), 0.05),
        node(2, site(1), 0.3),
    ];
    let homes = [Some(0), Some(0), Some(1)];
    let r = ReturnQuery {
        homes: &homes,
        shares: &[2, 1],
        cool: &|_| true,
    };
    let q = |spare: &[bool]| {
        choose_return(
            &DonorQuery {
                homes: &homes,
                spare,
                ..query(0, &views)
            },
            &r,
        )
    };
    assert_eq!(q(&[true, true]), Some(1));
    assert_eq!(q(&[true, false]), Some(1));
    // A hot home claims its own node on the same terms.
    let home = |spare: &[bool]| {
        choose_donor(&DonorQuery {
            homes: &homes,
            spare,
            ..query(0, &views)
        })
    };
    assert_eq!(home(&[true, false]), Some(1));
    // Not when the borrower's work does not fit on one node fewer now.
    let loaded = vec![
        node(0, site(0), 0.5),
        node(1, site(1), 0.05),
        node(2, site(1), 0.9),
    ];
    let r = choose_return(
        &DonorQuery {
            homes: &homes,
            spare: &[true, true],
            ..query(0, &loaded)
        },
        &ReturnQuery {
            homes: &homes,
            shares: &[2, 1],
            cool: &|_| true,
        },
    );
    assert_eq!(r, None);
}
