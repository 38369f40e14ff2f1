//! What one request may still send again, and why (HAProxy's `retries` and
//! `retry-on`; docs/proxy.md, "Retries"). The bookkeeping lives on the
//! request's stack, without an allocation: a replay is sent from the same
//! request head, which a send only borrows ([`Attempts::may_replay`]).
//!
//! - `conn-failure` (the default): the node could not be connected to;
//!   nothing was sent, so any method goes to another node, at most
//!   `global.retries` times in all.
//! - `empty-response` (opt-in): the node's connection broke (reset, closed) before a
//!   response head. Only an idempotent request without a body (RFC 9110
//!   section 9.2.2: such a request may be repeated automatically after a
//!   communication failure before the response is read) is sent again, on
//!   a new connection, preferably to another node, to the same one when no
//!   other is left; from the same `global.retries`.
//! - misdirected: a node answered 421 (it moved to another site); a request
//!   without a body is replayed on another node, on its own budget.
//! - A pooled connection found closed when it is taken from the pool is
//!   replaced before anything is written. One the node closes as the
//!   request goes out, before any byte of an answer, is replaced without
//!   counting a retry when the request may be repeated (idempotent, no
//!   body): the node most likely timed the idle connection out.

use super::super::error::ErrorKind;
use crate::config::{RetryOn, MAX_RETRIES};

/// How many times a request may be re-sent because a pooled connection
/// turned out to be closed before anything was written on it.
const STALE_RETRIES: u8 = 3;
/// How many times a request without a body is replayed on another node
/// after a 421 (the node it went to had moved to another site).
pub(super) const MISDIRECTED_REPLAYS: u8 = 2;

/// Why a request was sent again: the `reason` label of
/// `rdmalb_retries_total{site,reason}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryReason {
    ConnFailure,
    EmptyResponse,
    Misdirected,
}

impl RetryReason {
    /// Label values, indexed by [`RetryReason::index`].
    pub const LABELS: [&'static str; 3] = ["conn-failure", "empty-response", "misdirected"];

    pub fn index(self) -> usize {
        match self {
            RetryReason::ConnFailure => 0,
            RetryReason::EmptyResponse => 1,
            RetryReason::Misdirected => 2,
        }
    }
}

/// The attempts of one request: nodes tried, budgets left, last failure.
pub(super) struct Attempts {
    tried: Tried,
    retries_left: u8,
    on: RetryOn,
    stale_left: u8,
    misdirected_left: u8,
    /// The failure of the last attempt, answered when no node is left.
    pub last_error: Option<ErrorKind>,
    /// The next attempt opens a new connection instead of a pooled one.
    pub fresh: bool,
    /// The last attempt ended in an empty response: when every node was
    /// tried, the same ones may be tried again.
    again_on_exhausted: bool,
}

impl Attempts {
    pub fn new(retries: u8, on: RetryOn) -> Attempts {
        Attempts {
            tried: Tried::default(),
            retries_left: retries,
            on,
            stale_left: STALE_RETRIES,
            misdirected_left: MISDIRECTED_REPLAYS,
            last_error: None,
            fresh: false,
            again_on_exhausted: false,
        }
    }

    /// The nodes not to pick again.
    pub fn tried(&self) -> &[usize] {
        self.tried.as_slice()
    }

    /// `node` is being tried.
    pub fn picking(&mut self, node: usize) {
        self.tried.insert(node);
    }

    /// Whether the request may be sent again from its head: it has no body
    /// and may be replayed after a 421 (where nodes move) or after an empty
    /// response (idempotent).
    pub fn may_replay(&self, has_body: bool, idempotent: bool, roles_move: bool) -> bool {
        !has_body
            && ((roles_move && self.misdirected_left > 0)
                || (idempotent && self.on.empty_response && self.retries_left > 0))
    }

    /// The connect failed with `kind`: whether to try another node.
    pub fn connect_failed(&mut self, kind: ErrorKind) -> bool {
        self.last_error = Some(kind);
        self.again_on_exhausted = false;
        self.take_retry(self.on.conn_failure)
    }

    /// The node's connection broke before a response head (`kind`) and a
    /// copy of the request was kept (`replayable`): whether to send it again.
    pub fn empty_response(&mut self, kind: ErrorKind, replayable: bool) -> bool {
        self.last_error = Some(kind);
        let again = replayable && self.take_retry(self.on.empty_response);
        self.fresh = again;
        self.again_on_exhausted = again;
        again
    }

    /// A pooled connection on `node` was closed before anything was written:
    /// whether to take another connection (the node may be picked again).
    pub fn stale(&mut self, node: usize) -> bool {
        if self.stale_left == 0 {
            return false;
        }
        self.stale_left -= 1;
        self.tried.remove(node);
        true
    }

    /// Whether a 421 may still be replayed.
    pub fn misdirected(&mut self) -> bool {
        if self.misdirected_left == 0 {
            return false;
        }
        self.misdirected_left -= 1;
        true
    }

    /// Every node was tried: whether to try them again (only right after an
    /// empty response, once per retry).
    pub fn retry_tried_nodes(&mut self) -> bool {
        if !std::mem::take(&mut self.again_on_exhausted) {
            return false;
        }
        self.tried = Tried::default();
        true
    }

    fn take_retry(&mut self, allowed: bool) -> bool {
        if !allowed || self.retries_left == 0 {
            return false;
        }
        self.retries_left -= 1;
        true
    }
}

/// Nodes already tried by one request, without a heap allocation: the
/// first, one per retry and one per 421 replay. When full, further nodes
/// are not remembered (they may be picked again).
#[derive(Default)]
pub(super) struct Tried {
    nodes: [usize; 1 + MAX_RETRIES as usize + MISDIRECTED_REPLAYS as usize],
    len: usize,
}

impl Tried {
    pub fn as_slice(&self) -> &[usize] {
        &self.nodes[..self.len]
    }

    pub fn insert(&mut self, node: usize) {
        if !self.as_slice().contains(&node) && self.len < self.nodes.len() {
            self.nodes[self.len] = node;
            self.len += 1;
        }
    }

    pub fn remove(&mut self, node: usize) {
        if let Some(i) = self.as_slice().iter().position(|&n| n == node) {
            self.nodes.copy_within(i + 1..self.len, i);
            self.len -= 1;
        }
    }
}

#[cfg(test)]
mod tests;
