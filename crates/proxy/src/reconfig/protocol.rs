//! The remote-atomic steps of a claim (seed 001 section 3.2, two-level
//! locking with dual update counters), each one operation on a window:
//!
//! 1. [`try_lock`]: CAS the site's lock word on the lock home from free (or
//!    from a lease that ran out more than the skew allowance ago) to
//!    (owner, deadline);
//! 2. [`claim`]: CAS the node's role word from the value read to
//!    `RoleWord::next(site, SWITCHING)`; a lost CAS means the view was stale;
//! 3. [`write_claim_record`]: the informational claim record;
//! 4. [`bump_counter`]: FAA a site's update counter on a proxy window;
//! 5. [`unlock`]: CAS the lock word from our value back to free.
//!
//! Every function returns what happened; policy (retry or not, metrics)
//! belongs to the agent.

use std::time::Duration;

use rdmalb_window::layout::{site_lock_word, update_counter_word, word};
use rdmalb_window::role::ControlWordError;
use rdmalb_window::{RemoteWindow, RoleWord, SiteLock, WindowError, WindowFuture};

/// Why a protocol step failed (as opposed to losing a race, which is an
/// ordinary outcome).
#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    /// The window operation failed.
    #[error("{step} on {peer}: {source}")]
    Window {
        /// Which step.
        step: &'static str,
        /// The window's peer name.
        peer: String,
        /// Transport error.
        #[source]
        source: WindowError,
    },
    /// A site index past the 64 site slots of a window.
    #[error("site index {0} has no lock or counter word (at most 64 sites)")]
    NoSuchSite(usize),
    /// The lock word holds something no proxy writes.
    #[error("site lock word of site {site}: {source}")]
    BadLock {
        /// Site index.
        site: usize,
        /// Why it does not decode.
        #[source]
        source: ControlWordError,
    },
}

/// Bound on one remote operation: a peer that stopped answering (a stalled
/// tcp responder) must not hang a round. A lock held by a hung round frees
/// itself when its lease runs out.
pub const OP_TIMEOUT: Duration = Duration::from_millis(500);

/// Runs one window operation of step `step` on `w`, bounded by
/// [`OP_TIMEOUT`].
pub(crate) async fn op<T>(
    step: &'static str,
    w: &dyn RemoteWindow,
    fut: WindowFuture<'_, T>,
) -> Result<T, ProtocolError> {
    let source = match tokio::time::timeout(OP_TIMEOUT, fut).await {
        Ok(Ok(v)) => return Ok(v),
        Ok(Err(e)) => e,
        Err(_) => WindowError::Timeout {
            peer: w.peer().to_string(),
            after: OP_TIMEOUT,
        },
    };
    Err(ProtocolError::Window {
        step,
        peer: w.peer().to_string(),
        source,
    })
}

/// A site lock this proxy holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeldLock {
    /// Site index.
    pub site: usize,
    /// The raw lock word we installed (what [`unlock`] CASes from).
    pub raw: u64,
    /// Lease deadline, unix ms.
    pub deadline_ms: u64,
}

/// Outcome of [`try_lock`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockAttempt {
    /// The lock was free and is ours.
    Acquired(HeldLock),
    /// The holder's lease ran out (plus skew): we took it over.
    Stolen {
        /// The lock, ours now.
        held: HeldLock,
        /// The proxy that held it.
        from: u16,
    },
    /// Someone holds it (or won the race for it).
    Busy {
        /// The holder as last read (0 when it changed under us).
        owner: u16,
    },
}

/// Tries once to take site `site`'s lock on the lock home `home` as proxy
/// `me` for `lease`. Never waits and never retries: a busy lock means
/// another proxy is acting for the site this round.
pub async fn try_lock(
    home: &dyn RemoteWindow,
    site: usize,
    me: u16,
    lease: Duration,
    skew: Duration,
) -> Result<LockAttempt, ProtocolError> {
    let w = site_lock_word(site).ok_or(ProtocolError::NoSuchSite(site))?;
    let raw = op("reading site lock", home, home.read_word(w)).await?;
    let current =
        SiteLock::decode(raw).map_err(|source| ProtocolError::BadLock { site, source })?;
    let now = rdmalb_base::time::unix_now_ms();
    let stolen_from = match current {
        SiteLock::Free => None,
        // A lock in our name that we do not hold in memory was left by an
        // earlier run of this proxy id; its lease rules it like any other.
        SiteLock::Held { owner, .. } if current.is_expired(now, skew.as_millis() as u64) => {
            Some(owner)
        }
        SiteLock::Held { owner, .. } => return Ok(LockAttempt::Busy { owner }),
    };
    let deadline_ms = now.saturating_add(lease.as_millis() as u64);
    let mine = SiteLock::held(me, deadline_ms)
        .map_err(|source| ProtocolError::BadLock { site, source })?;
    let new = mine.encode();
    let old = op("CAS of site lock", home, home.compare_swap(w, raw, new)).await?;
    if old != raw {
        return Ok(LockAttempt::Busy {
            owner: SiteLock::decode(old)
                .ok()
                .and_then(SiteLock::owner)
                .unwrap_or(0),
        });
    }
    let held = HeldLock {
        site,
        raw: new,
        deadline_ms,
    };
    Ok(match stolen_from {
        None => LockAttempt::Acquired(held),
        Some(from) => LockAttempt::Stolen { held, from },
    })
}

/// Releases a lock taken by [`try_lock`]. Returns false when the word no
/// longer holds our value (our lease ran out and another proxy took it).
pub async fn unlock(home: &dyn RemoteWindow, held: HeldLock) -> Result<bool, ProtocolError> {
    let w = site_lock_word(held.site).ok_or(ProtocolError::NoSuchSite(held.site))?;
    let old = op(
        "CAS releasing site lock",
        home,
        home.compare_swap(w, held.raw, 0),
    )
    .await?;
    Ok(old == held.raw)
}

/// CASes node window `w`'s role word from `observed` (the raw value read)
/// to `new`. Returns whether it swapped; false means another proxy changed
/// the word since it was read.
pub async fn claim(
    w: &dyn RemoteWindow,
    observed: u64,
    new: RoleWord,
) -> Result<bool, ProtocolError> {
    let old = op(
        "CAS of role word",
        w,
        w.compare_swap(word::ROLE, observed, new.encode()),
    )
    .await?;
    Ok(old == observed)
}

/// Writes the claim record (proxy, time, epoch), each word by CAS from the
/// value read. Informational (`/status`): a lost race here changes nothing.
pub async fn write_claim_record(
    w: &dyn RemoteWindow,
    proxy: u16,
    epoch: u64,
) -> Result<(), ProtocolError> {
    for (wd, value) in [
        (word::CLAIM_PROXY, u64::from(proxy)),
        (word::CLAIM_TIME, rdmalb_base::time::unix_now_ms()),
        (word::CLAIM_EPOCH, epoch),
    ] {
        let old = op("reading claim record", w, w.read_word(wd)).await?;
        op("CAS of claim record", w, w.compare_swap(wd, old, value)).await?;
    }
    Ok(())
}

/// Fetch-and-adds one to site `site`'s update counter on proxy window `w`;
/// returns the counter's new value.
pub async fn bump_counter(w: &dyn RemoteWindow, site: usize) -> Result<u64, ProtocolError> {
    let wd = update_counter_word(site).ok_or(ProtocolError::NoSuchSite(site))?;
    let old = op("FAA of update counter", w, w.fetch_add(wd, 1)).await?;
    Ok(old.wrapping_add(1))
}

#[cfg(test)]
mod tests;
