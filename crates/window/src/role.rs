//! Typed views of the control words peers change with remote CAS: the role
//! word (which site a node serves, in which state, at which epoch) and the
//! site lock (owner proxy and lease deadline).
//!
//! Beside them sits the role status word the sidecar publishes (plain
//! stores, never CAS): [`RoleStatus`], what the sidecar did with the role
//! at an epoch and which site the node really serves.
//!
//! All are plain `u64` encodings so that a remote compare-and-swap on the
//! raw word is the whole protocol (seed 001 section 3.2: two-level locking
//! with remote CAS). The role word carries an epoch that every change bumps,
//! so a CAS prepared from a stale view can never succeed (no ABA).

use std::fmt;

/// Site index value meaning "idle pool, serving no site".
pub const IDLE_SITE: u16 = 0xFFFF;
/// Largest epoch a role word can carry (40 bits).
pub const MAX_EPOCH: u64 = (1 << 40) - 1;
/// Largest lease deadline a site lock can carry (48 bits of unix ms).
pub const MAX_LEASE_MS: u64 = (1 << 48) - 1;

/// The name of the idle pool wherever a site name is written: role
/// commands (`move n3 idle`), the sidecar's `site` and state file, the
/// proxy's `[[node]] site`. No site may take it.
pub const IDLE_POOL: &str = "idle";

/// Whether `name` may not name a site: [`IDLE_POOL`] in any letter case
/// (`Idle` would read as the idle pool to a person, and to HAProxy users'
/// case-insensitive tools).
pub fn is_reserved_site_name(name: &str) -> bool {
    name.eq_ignore_ascii_case(IDLE_POOL)
}

/// Which site a node serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SiteSlot {
    /// In the idle pool (site index `0xFFFF` on the wire).
    Idle,
    /// Serving the site at this index in the site table. Index `0xFFFF` is
    /// reserved for [`SiteSlot::Idle`] and encodes as idle.
    Site(u16),
}

impl SiteSlot {
    fn encode(self) -> u16 {
        match self {
            SiteSlot::Idle => IDLE_SITE,
            SiteSlot::Site(i) => i,
        }
    }

    fn decode(raw: u16) -> Self {
        if raw == IDLE_SITE {
            SiteSlot::Idle
        } else {
            SiteSlot::Site(raw)
        }
    }

    /// The site index, or `None` when idle.
    pub fn index(self) -> Option<usize> {
        match self {
            SiteSlot::Site(i) if i != IDLE_SITE => Some(usize::from(i)),
            _ => None,
        }
    }
}

impl fmt::Display for SiteSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.index() {
            None => f.write_str(IDLE_POOL),
            Some(i) => write!(f, "site#{i}"),
        }
    }
}

/// State of a node's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RoleState {
    /// The word was never written (all zero window).
    Unset,
    /// Serving the site.
    Active,
    /// A proxy claimed the node; the sidecar is switching it to the site.
    Switching,
    /// The sidecar failed to apply the role (see the role status word).
    Failed,
    /// Finishing in-flight work before leaving the site.
    Draining,
}

impl RoleState {
    /// Wire code (bits 16-23 of the role word).
    pub fn code(self) -> u8 {
        match self {
            RoleState::Unset => 0,
            RoleState::Active => 1,
            RoleState::Switching => 2,
            RoleState::Failed => 3,
            RoleState::Draining => 4,
        }
    }

    /// Decode a wire code.
    pub fn from_code(code: u8) -> Option<Self> {
        Some(match code {
            0 => RoleState::Unset,
            1 => RoleState::Active,
            2 => RoleState::Switching,
            3 => RoleState::Failed,
            4 => RoleState::Draining,
            _ => return None,
        })
    }

    /// Lower-case name for logs and status pages.
    pub fn as_str(self) -> &'static str {
        match self {
            RoleState::Unset => "unset",
            RoleState::Active => "active",
            RoleState::Switching => "switching",
            RoleState::Failed => "failed",
            RoleState::Draining => "draining",
        }
    }
}

impl fmt::Display for RoleState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A control word that does not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ControlWordError {
    /// The role word's state byte is not a known state.
    #[error("role word {raw:#018x} has unknown state code {code}")]
    UnknownRoleState {
        /// The raw word.
        raw: u64,
        /// The state byte.
        code: u8,
    },
    /// A non-zero site lock word with owner 0.
    #[error("site lock word {raw:#018x} is held by owner 0, which is not a valid proxy id")]
    LockWithoutOwner {
        /// The raw word.
        raw: u64,
    },
    /// The role status word's code byte is not a known code.
    #[error("role status word {raw:#018x} has unknown code {code}")]
    UnknownRoleStatus {
        /// The raw word.
        raw: u64,
        /// The code byte.
        code: u8,
    },
    /// A site lock owner id of 0 was requested.
    #[error("proxy id 0 cannot own a site lock (0 means free)")]
    ZeroOwner,
    /// A lease deadline past the 48-bit field.
    #[error("lease deadline {deadline_ms} ms does not fit in 48 bits")]
    DeadlineTooLarge {
        /// The requested deadline.
        deadline_ms: u64,
    },
}

/// The role word: bits 0-15 site index (`0xFFFF` idle), bits 16-23 state,
/// bits 24-63 epoch (40 bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RoleWord {
    /// Site served.
    pub site: SiteSlot,
    /// State of the role.
    pub state: RoleState,
    /// Change counter; only the low 40 bits are stored.
    pub epoch: u64,
}

impl RoleWord {
    /// The all-zero word of a fresh window: site 0, unset, epoch 0.
    pub const UNSET: RoleWord = RoleWord {
        site: SiteSlot::Site(0),
        state: RoleState::Unset,
        epoch: 0,
    };

    /// Encode to the raw word. The epoch is truncated to 40 bits.
    pub fn encode(self) -> u64 {
        u64::from(self.site.encode())
            | (u64::from(self.state.code()) << 16)
            | ((self.epoch & MAX_EPOCH) << 24)
    }

    /// Decode a raw word read from a window.
    pub fn decode(raw: u64) -> Result<RoleWord, ControlWordError> {
        let code = ((raw >> 16) & 0xFF) as u8;
        let state =
            RoleState::from_code(code).ok_or(ControlWordError::UnknownRoleState { raw, code })?;
        Ok(RoleWord {
            site: SiteSlot::decode((raw & 0xFFFF) as u16),
            state,
            epoch: raw >> 24,
        })
    }

    /// The next role word: a new site and state with the epoch bumped by one.
    ///
    /// Because every change goes through `next`, two different writes never
    /// produce the same raw word until the 40-bit epoch wraps (10^12 changes).
    pub fn next(self, site: SiteSlot, state: RoleState) -> RoleWord {
        RoleWord {
            site,
            state,
            epoch: (self.epoch.wrapping_add(1)) & MAX_EPOCH,
        }
    }
}

impl fmt::Display for RoleWord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} epoch {}", self.site, self.state, self.epoch)
    }
}

/// The pin word (`PIN`): an operator's move holds the node where it put
/// it until a deadline. Bits 0-47 the deadline in unix milliseconds (0:
/// not pinned), bits 48-63 the id of the proxy that pinned it. Written by
/// CAS, read by every proxy's agent, which moves no pinned node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PinWord {
    /// Deadline in unix milliseconds; 0 when not pinned.
    pub until_ms: u64,
    /// The proxy that pinned it (0 when not pinned).
    pub proxy: u16,
}

impl PinWord {
    /// Not pinned.
    pub const NONE: PinWord = PinWord {
        until_ms: 0,
        proxy: 0,
    };

    /// A pin by `proxy` until `until_ms` (clamped to 48 bits).
    pub fn new(proxy: u16, until_ms: u64) -> PinWord {
        PinWord {
            until_ms: until_ms.min(MAX_LEASE_MS),
            proxy,
        }
    }

    /// Encode to the raw word.
    pub fn encode(self) -> u64 {
        (self.until_ms & MAX_LEASE_MS) | (u64::from(self.proxy) << 48)
    }

    /// Decode a raw word (every value decodes).
    pub fn decode(raw: u64) -> PinWord {
        PinWord {
            until_ms: raw & MAX_LEASE_MS,
            proxy: (raw >> 48) as u16,
        }
    }

    /// Whether the pin still holds at `now_ms` (unix milliseconds).
    pub fn holds_at(self, now_ms: u64) -> bool {
        self.until_ms > now_ms
    }
}

/// What the sidecar reports about applying a role (word `ROLE_STATUS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RoleStatusCode {
    /// Applied and verified.
    Ok,
    /// Render, reload or verification in progress.
    Applying,
    /// The template could not be rendered or the config file not written.
    RenderFailed,
    /// The reload command failed, exited non-zero or timed out.
    ReloadFailed,
    /// The verification probe did not pass within its timeout.
    VerifyFailed,
    /// The sidecar has no template for the requested site.
    NoTemplate,
}

impl RoleStatusCode {
    /// Wire code (bits 0-7 of the status word).
    pub fn code(self) -> u8 {
        match self {
            RoleStatusCode::Ok => 0,
            RoleStatusCode::Applying => 1,
            RoleStatusCode::RenderFailed => 2,
            RoleStatusCode::ReloadFailed => 3,
            RoleStatusCode::VerifyFailed => 4,
            RoleStatusCode::NoTemplate => 5,
        }
    }

    /// Decode a wire code.
    pub fn from_code(code: u8) -> Option<Self> {
        Some(match code {
            0 => RoleStatusCode::Ok,
            1 => RoleStatusCode::Applying,
            2 => RoleStatusCode::RenderFailed,
            3 => RoleStatusCode::ReloadFailed,
            4 => RoleStatusCode::VerifyFailed,
            5 => RoleStatusCode::NoTemplate,
            _ => return None,
        })
    }

    /// Whether this code reports a failed application (code >= 2): the node
    /// is FAILED for the status's epoch.
    pub fn is_failure(self) -> bool {
        self.code() >= 2
    }

    /// Lower-case name for logs, metrics and status pages.
    pub fn as_str(self) -> &'static str {
        match self {
            RoleStatusCode::Ok => "ok",
            RoleStatusCode::Applying => "applying",
            RoleStatusCode::RenderFailed => "render_failed",
            RoleStatusCode::ReloadFailed => "reload_failed",
            RoleStatusCode::VerifyFailed => "verify_failed",
            RoleStatusCode::NoTemplate => "no_template",
        }
    }
}

impl fmt::Display for RoleStatusCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The role status word: bits 0-7 code, bits 8-23 the site index the node
/// actually serves now (`0xFFFF` = idle / nothing), bits 24-63 the role
/// epoch this status is about (40 bits).
///
/// Written only by the node's sidecar with plain stores; proxies read it to
/// tell SWITCHING from FAILED and, on failure, which site to roll back to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RoleStatus {
    /// The role epoch this status reports on.
    pub epoch: u64,
    /// The site the node really serves now.
    pub serving: SiteSlot,
    /// What happened.
    pub code: RoleStatusCode,
}

impl RoleStatus {
    /// The all-zero word of a fresh window (epoch 0 matches no role).
    pub const UNSET: RoleStatus = RoleStatus {
        epoch: 0,
        serving: SiteSlot::Site(0),
        code: RoleStatusCode::Ok,
    };

    /// Encode to the raw word. The epoch is truncated to 40 bits.
    pub fn encode(self) -> u64 {
        u64::from(self.code.code())
            | (u64::from(self.serving.encode()) << 8)
            | ((self.epoch & MAX_EPOCH) << 24)
    }

    /// Decode a raw word read from a window.
    pub fn decode(raw: u64) -> Result<RoleStatus, ControlWordError> {
        let code = (raw & 0xFF) as u8;
        let c = RoleStatusCode::from_code(code)
            .ok_or(ControlWordError::UnknownRoleStatus { raw, code })?;
        Ok(RoleStatus {
            epoch: raw >> 24,
            serving: SiteSlot::decode(((raw >> 8) & 0xFFFF) as u16),
            code: c,
        })
    }
}

impl fmt::Display for RoleStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} epoch {} serving {}",
            self.code, self.epoch, self.serving
        )
    }
}

/// A site lock word: 0 free; else bits 0-15 owner proxy id (non-zero) and
/// bits 16-63 lease deadline in unix milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SiteLock {
    /// Nobody holds the lock.
    Free,
    /// Held by a proxy until the lease deadline.
    Held {
        /// Proxy id of the holder (non-zero).
        owner: u16,
        /// Lease deadline, unix milliseconds (48 bits).
        deadline_ms: u64,
    },
}

impl SiteLock {
    /// A held lock, checking the owner is non-zero and the deadline fits.
    pub fn held(owner: u16, deadline_ms: u64) -> Result<SiteLock, ControlWordError> {
        if owner == 0 {
            return Err(ControlWordError::ZeroOwner);
        }
        if deadline_ms > MAX_LEASE_MS {
            return Err(ControlWordError::DeadlineTooLarge { deadline_ms });
        }
        Ok(SiteLock::Held { owner, deadline_ms })
    }

    /// Encode to the raw word. A `Held` value built by hand with owner 0
    /// would be ambiguous, so build held locks with [`SiteLock::held`].
    pub fn encode(self) -> u64 {
        match self {
            SiteLock::Free => 0,
            SiteLock::Held { owner, deadline_ms } => {
                u64::from(owner) | ((deadline_ms & MAX_LEASE_MS) << 16)
            }
        }
    }

    /// Decode a raw word read from a window.
    pub fn decode(raw: u64) -> Result<SiteLock, ControlWordError> {
        if raw == 0 {
            return Ok(SiteLock::Free);
        }
        let owner = (raw & 0xFFFF) as u16;
        if owner == 0 {
            return Err(ControlWordError::LockWithoutOwner { raw });
        }
        Ok(SiteLock::Held {
            owner,
            deadline_ms: raw >> 16,
        })
    }

    /// Whether the lock may be taken by someone else at `now_ms`: it is free,
    /// or its lease ran out more than `skew_ms` ago (the allowance covers
    /// clock skew between proxies, so a live holder is never robbed early).
    pub fn is_expired(self, now_ms: u64, skew_ms: u64) -> bool {
        match self {
            SiteLock::Free => true,
            SiteLock::Held { deadline_ms, .. } => now_ms > deadline_ms.saturating_add(skew_ms),
        }
    }

    /// The holder's proxy id, if held.
    pub fn owner(self) -> Option<u16> {
        match self {
            SiteLock::Free => None,
            SiteLock::Held { owner, .. } => Some(owner),
        }
    }
}

#[cfg(test)]
mod tests;
