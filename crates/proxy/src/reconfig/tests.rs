//! Property test of the role-word state machine (issue 6): arbitrary
//! interleavings of proxies' claims and rollbacks (each a CAS from the value
//! that proxy last read, possibly stale) and the sidecar's answers (apply or
//! fail the current epoch), on a real window word.
//!
//! Invariants: every successful CAS moves the epoch by exactly one; a CAS
//! prepared from a stale read never succeeds; of proxies acting on the same
//! read exactly one wins; the word always decodes to one site (or idle);
//! the effective state follows the contract (ACTIVE iff applied == epoch,
//! FAILED only for a failure reported for this very epoch).
//!
//! And start-up: routing follows the role words from the first request on.

use std::sync::Arc;

use proptest::prelude::*;

use super::peers::LocalWindow;
use super::protocol;
use super::view::{Effective, Freshness, NodeView};
use rdmalb_window::layout::word;
use rdmalb_window::{RoleState, RoleStatus, RoleStatusCode, RoleWord, SiteSlot, WindowMemory};

#[derive(Debug, Clone)]
enum Step {
    /// Proxy `p` reads the role word (refreshing its view).
    Read(usize),
    /// Proxy `p` claims for `site` from its (maybe stale) view.
    Claim(usize, u16),
    /// Proxy `p` rolls back from its view if that view shows FAILED.
    Rollback(usize),
    /// The sidecar applies the current role.
    Apply,
    /// The sidecar fails the current role, keeping what it serves.
    Fail,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0..3usize).prop_map(Step::Read),
        (0..3usize, 0..3u16).prop_map(|(p, s)| Step::Claim(p, s)),
        (0..3usize).prop_map(Step::Rollback),
        Just(Step::Apply),
        Just(Step::Fail),
    ]
}

fn view(w: &WindowMemory) -> NodeView {
    let raw = w.load(word::ROLE).unwrap();
    NodeView {
        index: 0,
        raw_role: raw,
        role: RoleWord::decode(raw).unwrap(),
        applied: w.load(word::ROLE_APPLIED).unwrap(),
        status: RoleStatus::decode(w.load(word::ROLE_STATUS).unwrap()).ok(),
        freshness: Freshness::Fresh,
        load: Some(0.0),
        pin: rdmalb_window::PinWord::decode(w.load(word::PIN).unwrap()),
    }
}

proptest! {
    #[test]
    fn role_word_state_machine(steps in prop::collection::vec(step(), 1..60)) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let mem = Arc::new(WindowMemory::anonymous(0, 0).unwrap());
        let w = LocalWindow::new(mem.clone());
        let start = RoleWord { site: SiteSlot::Site(0), state: RoleState::Active, epoch: 1 };
        mem.compare_swap(word::ROLE, 0, start.encode());
        mem.words()[word::ROLE_APPLIED].store(1, std::sync::atomic::Ordering::Release);
        let mut serving = SiteSlot::Site(0);
        let mut views: Vec<NodeView> = vec![view(&mem); 3];
        for s in steps {
            let before = view(&mem);
            match s {
                Step::Read(p) => views[p] = view(&mem),
                Step::Claim(p, site) => {
                    let v = &views[p];
                    let new = v.role.next(SiteSlot::Site(site), RoleState::Switching);
                    let won = rt.block_on(protocol::claim(&w, v.raw_role, new)).unwrap();
                    prop_assert_eq!(won, v.raw_role == before.raw_role, "CAS succeeds iff the view is current");
                    if won {
                        prop_assert_eq!(view(&mem).role.epoch, before.role.epoch + 1);
                        // Others who read the same value now hold a stale view.
                        for (q, other) in views.iter().enumerate() {
                            if q != p && other.raw_role == v.raw_role {
                                let again = rt.block_on(protocol::claim(&w, other.raw_role, new)).unwrap();
                                prop_assert!(!again, "a second winner on the same read");
                            }
                        }
                    }
                    views[p] = view(&mem);
                }
                Step::Rollback(p) => {
                    let v = views[p].clone();
                    if v.effective() == Effective::Failed {
                        let to = v.status.unwrap().serving;
                        let won = rt.block_on(protocol::claim(&w, v.raw_role, v.role.next(to, RoleState::Switching))).unwrap();
                        prop_assert_eq!(won, v.raw_role == before.raw_role);
                    }
                }
                Step::Apply | Step::Fail => {
                    let r = before.role;
                    if before.applied != r.epoch {
                        let ok = matches!(s, Step::Apply);
                        let code = if ok { RoleStatusCode::Ok } else { RoleStatusCode::ReloadFailed };
                        if ok { serving = r.site; }
                        let st = RoleStatus { epoch: r.epoch, serving, code };
                        mem.words()[word::ROLE_STATUS].store(st.encode(), std::sync::atomic::Ordering::Release);
                        if ok {
                            mem.words()[word::ROLE_APPLIED].store(r.epoch, std::sync::atomic::Ordering::Release);
                        }
                    }
                }
            }
            let after = view(&mem);
            // Epochs only grow, by one per change; the word always decodes.
            prop_assert!(after.role.epoch == before.role.epoch || after.role.epoch == before.role.epoch + 1);
            prop_assert!(after.role.site.index().is_some_and(|s| s < 3));
            match after.effective() {
                Effective::Active => prop_assert_eq!(after.applied, after.role.epoch),
                Effective::Failed => {
                    let st = after.status.unwrap();
                    prop_assert_eq!(st.epoch, after.role.epoch);
                    prop_assert!(st.code.is_failure());
                }
                Effective::Switching => prop_assert!(after.applied < after.role.epoch),
                Effective::Unset => prop_assert!(false, "never unset after start"),
            }
            // The sidecar serves exactly one site at any time; ACTIVE means
            // it serves the role's site.
            if after.effective() == Effective::Active {
                prop_assert_eq!(serving, after.role.site);
            }
        }
    }
}

/// Start-up reads the role words before it returns (the listeners open
/// after it): a node with a window whose word says it serves is routed from
/// the first request, not only after the watcher's first tick. Checked on a
/// current-thread runtime right after `start` returns, before any task it
/// spawned has run.
#[tokio::test]
async fn start_reads_the_role_words_before_it_returns() {
    use crate::balance::{Backends, NodeWindows};
    use arc_swap::ArcSwap;
    use tokio::sync::watch;

    let dir = tempfile::tempdir().unwrap();
    let sites = ["web", "blog"];
    let hash = rdmalb_window::site_table_hash(&sites);
    let mut nodes = String::new();
    let mut mems = Vec::new();
    // n0 serves web (applied), n1 was moved to blog by another proxy while
    // this one was down, n2's sidecar never wrote its role word.
    for (i, role) in [Some(0u16), Some(1), None].into_iter().enumerate() {
        let path = dir.path().join(format!("w{i}"));
        let mem = WindowMemory::create_shm(&path, 0o600, i as u64 + 1, hash).unwrap();
        rdmalb_window::publish(
            &mem,
            &rdmalb_window::LoadSample {
                app_capacity: 8,
                ..Default::default()
            },
        );
        if let Some(site) = role {
            let word = RoleWord {
                site: SiteSlot::Site(site),
                state: RoleState::Active,
                epoch: 1,
            };
            mem.compare_swap(word::ROLE, 0, word.encode());
            mem.words()[word::ROLE_APPLIED].store(1, std::sync::atomic::Ordering::Release);
        }
        nodes.push_str(&format!(
            "[[node]]\nname = \"n{i}\"\naddress = \"127.0.0.1:{}\"\nsite = \"web\"\n\
             transport = \"shm\"\nsidecar = \"{}\"\nnode_id = {}\n",
            9000 + i,
            path.display(),
            i + 1
        ));
        mems.push(mem);
    }
    let text = format!(
        "[global]\nbalance = \"weighted-least-load\"\n[[listener]]\nlisten = \"127.0.0.1:1\"\n\
         [[site]]\nname = \"web\"\nhosts = [\"web.test\"]\n\
         [[site]]\nname = \"blog\"\nhosts = [\"blog.test\"]\n{nodes}"
    );
    let config = crate::config::parse(&text, &dir.path().join("rdmalb.toml"))
        .unwrap_or_else(|e| panic!("{e}"));
    let (stop, rx) = watch::channel(false);
    let windows = NodeWindows::start(&config, rx.clone()).await.unwrap();
    let routing = Arc::new(ArcSwap::from_pointee(Backends::build_with_windows(
        &config, None, &windows,
    )));
    let demand = crate::qos::guarantee::Demand::new(sites.iter().map(|s| s.to_string()));
    let current = Arc::new(ArcSwap::from_pointee(config.clone()));
    let reconfig =
        super::Reconfiguration::start(&config, current, windows, Arc::clone(&routing), demand, rx)
            .await
            .unwrap()
            .expect("nodes have windows");
    let b = routing.load();
    let serves = |i: usize, site: usize| b.nodes()[i].serves(site);
    assert!(serves(0, 0), "n0's word says web: routed at once");
    assert!(serves(1, 1) && !serves(1, 0), "n1's word says blog");
    assert!(!serves(2, 0), "n2 has no role word yet: held out");
    stop.send(true).unwrap();
    reconfig.join().await;
}
