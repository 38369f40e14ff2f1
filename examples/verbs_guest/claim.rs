//! The claim race of the verbs guest driver: the reconfiguration agent's
//! lock, claim and counter steps (`rdmalb_proxy::reconfig::protocol`) over real
//! RDMA atomics, and the check that every hot event was claimed exactly once.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use rdmalb_proxy::reconfig::protocol::{self, LockAttempt};
use rdmalb_window::layout::{site_lock_word, update_counter_word, word};
use rdmalb_window::verbs::VerbsWindow;
use rdmalb_window::{RemoteWindow, RoleState, RoleWord, SiteLock, SiteSlot};

use super::check;

/// Lease and skew allowance of the claim race's site locks.
const CLAIM_LEASE: Duration = Duration::from_secs(5);
const CLAIM_SKEW: Duration = Duration::from_millis(500);

/// The site hot at role epoch `e`: the claim race rotates through the sites
/// so consecutive claims move the node between sites like the agent does.
fn hot_site(epoch: u64, sites: usize) -> usize {
    (epoch as usize + 1) % sites
}

/// Claim race through the reconfiguration agent's protocol over verbs: every
/// client treats role epoch `e` as one hot event of site `hot_site(e)` and
/// tries to act on it exactly as the agent does (docs/reconfiguration.md
/// "One round"; seed 001 section 3.3): take the site lock on
/// the lock home (this window) with remote CAS, re-read the role word under
/// the lock, CAS it from the observed value to (site, SWITCHING, e+1), FAA
/// the site's update counter, release the lock. A client that loses the
/// lock or the CAS re-reads; none retries a CAS blindly. Returns the epochs
/// this client claimed.
pub async fn claim_race(w: &VerbsWindow, me: u16, claims: u64, sites: usize) -> Result<Vec<u64>> {
    let mut won = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let role = RoleWord::decode(w.read_word(word::ROLE).await?)?;
        if role.epoch >= claims {
            return Ok(won);
        }
        let site = hot_site(role.epoch, sites);
        let held = match protocol::try_lock(w, site, me, CLAIM_LEASE, CLAIM_SKEW).await? {
            LockAttempt::Acquired(held) | LockAttempt::Stolen { held, .. } => Some(held),
            LockAttempt::Busy { .. } => None,
        };
        if let Some(held) = held {
            let raw = w.read_word(word::ROLE).await?;
            let fresh = RoleWord::decode(raw)?;
            if fresh.epoch == role.epoch {
                let new = fresh.next(SiteSlot::Site(site as u16), RoleState::Switching);
                if protocol::claim(w, raw, new).await? {
                    won.push(fresh.epoch);
                    protocol::bump_counter(w, site).await?;
                }
            }
            if !protocol::unlock(w, held).await? {
                bail!("site lock {site} was taken from client {me} while it held it");
            }
        }
        if Instant::now() > deadline {
            bail!(
                "claim race did not finish in time (at epoch {})",
                role.epoch
            );
        }
        tokio::task::yield_now().await;
    }
}

/// Exactly one claim per hot event, the role word at the last epoch, each
/// site's update counter equal to its claims, and every site lock released.
pub async fn verify_claims(
    w: &VerbsWindow,
    claims: u64,
    sites: usize,
    claimers: &[usize],
) -> Result<()> {
    let multiple = claimers.iter().filter(|&&c| c > 1).count();
    let none = claimers.iter().filter(|&&c| c == 0).count();
    check(
        "claim-exactly-one-per-hot-event",
        multiple == 0 && none == 0,
        format!("{claims} hot events, {multiple} claimed twice or more, {none} never"),
    );
    let role = RoleWord::decode(w.read_word(word::ROLE).await?)?;
    check(
        "claim-final-role",
        role.epoch == claims && role.state == RoleState::Switching,
        format!("role word {role:?}"),
    );
    let mut counters_ok = true;
    let mut locks_free = true;
    let mut detail = String::new();
    for site in 0..sites {
        let expected = (0..claims).filter(|&e| hot_site(e, sites) == site).count() as u64;
        let counter = w
            .read_word(update_counter_word(site).context("site out of range")?)
            .await?;
        let lock_word = site_lock_word(site).context("site out of range")?;
        let lock = SiteLock::decode(w.read_word(lock_word).await?)?;
        counters_ok &= counter == expected;
        locks_free &= lock == SiteLock::Free;
        detail.push_str(&format!(
            "site {site}: counter {counter}/{expected}, lock {lock:?}; "
        ));
    }
    check("claim-counters", counters_ok, &detail);
    check("claim-locks-released", locks_free, &detail);
    Ok(())
}
