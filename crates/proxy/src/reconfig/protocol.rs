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
//!
//! A CAS or fetch-and-add whose reply did not come (a timeout, a cut
//! connection) may still have landed. It is never taken as failed: the
//! word is read back (the role word and the lock word tell whether our value
//! is there; a counter tells whether it moved) and, when that cannot
//! settle it, the step returns [`ProtocolError::Unresolved`] so the agent
//! acts as if it may have happened.

use std::time::Duration;

use rdmalb_window::layout::{site_lock_word, update_counter_word, word};
use rdmalb_window::role::ControlWordError;
use rdmalb_window::{PinWord, RemoteWindow, RoleWord, SiteLock, WindowError, WindowFuture};

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
    /// A CAS whose reply was lost, and reading the word back could not tell
    /// whether it landed: the caller must act as if it may have.
    #[error("{step} on {peer}: no reply ({source}), and the word read back does not tell whether it landed")]
    Unresolved {
        /// Which step.
        step: &'static str,
        /// The window's peer name.
        peer: String,
        /// Why the reply was lost.
        #[source]
        source: WindowError,
    },
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
pub const OP_TIMEOUT: Duration = crate::config::WINDOW_OP_TIMEOUT;

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

/// Whether a failed operation may still have been applied by the peer
/// (the request may have left before the reply was lost).
fn may_have_landed(e: &ProtocolError) -> Option<&WindowError> {
    match e {
        ProtocolError::Window { source, .. }
            if matches!(
                source,
                WindowError::Timeout { .. } | WindowError::Closed { .. } | WindowError::Io { .. }
            ) =>
        {
            Some(source)
        }
        _ => None,
    }
}

/// What a CAS of `word` from `expected` to `new` did when its reply was
/// lost (`err`), told by reading the word back: `Ok(true)` it landed (the
/// word holds `new`, a value only this CAS writes), `Ok(false)` it cannot
/// land any more (`still_lost` says the word moved on without it), `Err`
/// the original error, or [`ProtocolError::Unresolved`].
async fn read_back(
    step: &'static str,
    w: &dyn RemoteWindow,
    wd: usize,
    new: u64,
    err: ProtocolError,
    still_lost: impl Fn(u64) -> bool,
) -> Result<bool, ProtocolError> {
    if may_have_landed(&err).is_none() {
        return Err(err);
    }
    let ProtocolError::Window { source, .. } = err else {
        return Err(err);
    };
    match op("reading back after a lost reply", w, w.read_word(wd)).await {
        Ok(now) if now == new => Ok(true),
        Ok(now) if still_lost(now) => Ok(false),
        _ => Err(ProtocolError::Unresolved {
            step,
            peer: w.peer().to_string(),
            source,
        }),
    }
}

/// The window generation of `home` (header word, read with the header).
async fn generation(home: &dyn RemoteWindow) -> Result<u64, ProtocolError> {
    let header = op("reading lock home generation", home, home.read_raw()).await?;
    Ok(header[word::GENERATION])
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
    /// The lock home's window generation when the lock was taken.
    pub generation: u64,
}

/// Whether a held lock still fences a write ([`fence`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fence {
    /// Ours, with at least one op timeout of lease left.
    Held,
    /// Less than one op timeout of lease left: a write started now could
    /// land after another proxy took the lock over.
    LeaseShort,
    /// The lock word is not ours any more (taken over after our lease).
    TakenOver,
    /// The lock home's window has another generation (it restarted: its
    /// locks are fresh and another proxy may hold ours).
    HomeRestarted,
}

/// Re-validates `held` before a write made under it (fencing,
/// docs/reconfiguration.md "Faults"): enough lease left for one more operation, the lock home's
/// generation unchanged, and the lock word still ours (its value is unique
/// to this acquisition: owner and deadline).
pub async fn fence(home: &dyn RemoteWindow, held: &HeldLock) -> Result<Fence, ProtocolError> {
    let left = held
        .deadline_ms
        .saturating_sub(rdmalb_base::time::unix_now_ms());
    if left < OP_TIMEOUT.as_millis() as u64 {
        return Ok(Fence::LeaseShort);
    }
    let generation = generation(home).await?;
    if generation != held.generation {
        return Ok(Fence::HomeRestarted);
    }
    let w = site_lock_word(held.site).ok_or(ProtocolError::NoSuchSite(held.site))?;
    let raw = op("re-reading site lock", home, home.read_word(w)).await?;
    if raw != held.raw {
        return Ok(Fence::TakenOver);
    }
    Ok(Fence::Held)
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
    let generation = generation(home).await?;
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
    let old = match op("CAS of site lock", home, home.compare_swap(w, raw, new)).await {
        Ok(old) => old,
        // Our lock word is unique (owner and deadline): if it is there, the
        // lock is ours; if another value is, someone else got it.
        Err(e) => match read_back("CAS of site lock", home, w, new, e, |v| v != raw).await? {
            true => raw,
            false => !raw,
        },
    };
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
        generation,
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
    let step = "CAS releasing site lock";
    match op(step, home, home.compare_swap(w, held.raw, 0)).await {
        Ok(old) => Ok(old == held.raw),
        // Still ours after a lost reply: release it again (once).
        Err(e) => match op("reading back after a lost reply", home, home.read_word(w)).await {
            Ok(v) if v == held.raw => {
                let old = op(step, home, home.compare_swap(w, held.raw, 0)).await?;
                Ok(old == held.raw)
            }
            Ok(_) => Ok(true),
            Err(_) => Err(e),
        },
    }
}

/// CASes node window `w`'s role word from `observed` (the raw value read)
/// to `new`. Returns whether it swapped; false means another proxy changed
/// the word since it was read.
///
/// When the reply is lost the word is read back: `new` there means ours
/// landed (the epoch makes the value unique to this change); another
/// word at our epoch means another proxy's CAS from the same value won.
/// The word still at `observed` (ours may yet land) or past our epoch (ours
/// may have landed and been changed since) is
/// [`ProtocolError::Unresolved`].
pub async fn claim(
    w: &dyn RemoteWindow,
    observed: u64,
    new: RoleWord,
) -> Result<bool, ProtocolError> {
    let step = "CAS of role word";
    let raw = new.encode();
    match op(step, w, w.compare_swap(word::ROLE, observed, raw)).await {
        Ok(old) => Ok(old == observed),
        Err(e) => {
            let lost = |v: u64| RoleWord::decode(v).is_ok_and(|r| r.epoch == new.epoch);
            read_back(step, w, word::ROLE, raw, e, lost).await
        }
    }
}

/// Writes the claim record (proxy, time, epoch), each word by CAS from the
/// value read. Informational (`/status`): a lost race here changes nothing.
/// The epoch word is cleared first and written last, so a reader that sees
/// the same non-zero epoch before and after reading the other two words has
/// read one whole record.
pub async fn write_claim_record(
    w: &dyn RemoteWindow,
    proxy: u16,
    epoch: u64,
) -> Result<(), ProtocolError> {
    for (wd, value) in [
        (word::CLAIM_EPOCH, 0),
        (word::CLAIM_PROXY, u64::from(proxy)),
        (word::CLAIM_TIME, rdmalb_base::time::unix_now_ms()),
        (word::CLAIM_EPOCH, epoch),
    ] {
        let old = op("reading claim record", w, w.read_word(wd)).await?;
        op("CAS of claim record", w, w.compare_swap(wd, old, value)).await?;
    }
    Ok(())
}

/// Sets node window `w`'s pin word to `pin` by CAS from the value read
/// (retried when another proxy changed it in between, at most 4 times):
/// the operator's last word wins.
pub async fn write_pin(w: &dyn RemoteWindow, pin: PinWord) -> Result<(), ProtocolError> {
    let mut old = op("reading the pin", w, w.read_word(word::PIN)).await?;
    for _ in 0..4 {
        let seen = op(
            "CAS of the pin",
            w,
            w.compare_swap(word::PIN, old, pin.encode()),
        )
        .await?;
        if seen == old {
            return Ok(());
        }
        old = seen;
    }
    Err(ProtocolError::Window {
        step: "CAS of the pin",
        peer: w.peer().to_string(),
        source: WindowError::Refused {
            peer: w.peer().to_string(),
            word: word::PIN,
            reason: "the pin word kept changing under four CAS attempts".into(),
        },
    })
}

/// Fetch-and-adds one to site `site`'s update counter on proxy window `w`;
/// returns the counter's new value.
///
/// The counter only tells its owner "something changed": when the reply is
/// lost, a counter read back past its value before the FAA is enough
/// (ours or another proxy's bump landed); one still at it gets the FAA
/// again, since a bump too many costs the peer one skipped round and a
/// missing one could let it claim twice for one hot event.
pub async fn bump_counter(w: &dyn RemoteWindow, site: usize) -> Result<u64, ProtocolError> {
    let wd = update_counter_word(site).ok_or(ProtocolError::NoSuchSite(site))?;
    let step = "FAA of update counter";
    let before = op("reading update counter", w, w.read_word(wd)).await?;
    match op(step, w, w.fetch_add(wd, 1)).await {
        Ok(old) => Ok(old.wrapping_add(1)),
        Err(e) => {
            if may_have_landed(&e).is_none() {
                return Err(e);
            }
            match op("reading back after a lost reply", w, w.read_word(wd)).await {
                Ok(now) if now != before => Ok(now),
                Ok(_) => op(step, w, w.fetch_add(wd, 1))
                    .await
                    .map(|o| o.wrapping_add(1)),
                Err(_) => Err(e),
            }
        }
    }
}

#[cfg(test)]
mod tests;
