//! The reconfiguration agent inside the proxy (DESIGN.md
//! "Reconfiguration"; seed 001 section 3, seed 003 section 3): it moves idle
//! nodes of other sites to a site that stays hot, with remote atomics on the
//! node and proxy windows, so that one high-load event yields exactly one
//! move however many proxies see it.
//!
//! - [`view`]: one node as read in a round (role word, applied epoch, role
//!   status, load) and the site load derived from it;
//! - [`history`]: hot-site detection over the history window T;
//! - [`donor`]: the one replaceable donor-choice function;
//! - [`protocol`]: the remote-atomic steps (site lock, role CAS, claim
//!   record, update counters);
//! - [`agent`]: the loop that observes, plans and applies, plus the admin
//!   move through the same lock and CAS;
//! - [`windows`]: where windows come from, this proxy's own window and the
//!   links to peer proxies;
//! - [`status`]: counters, metrics names and the `/status` document.
//!
//! The role-word protocol shared with the sidecar is
//! `docs/reconfiguration.md` (and the contract it cites). Depends on
//! `config`, `window` and `balance`; nothing depends on it but the proxy
//! wiring.

pub mod agent;
pub mod donor;
pub mod history;
pub mod protocol;
pub mod status;
pub mod view;
pub mod windows;

pub use agent::{Agent, AgentSettings, ClaimOutcome, MoveError};
pub use status::AgentStatus;
pub use windows::{LocalWindow, OwnWindow, PeerLinks, WindowSource};
