//! What one upstream attempt ended in ([`Outcome`]): what passive health
//! counts against a node and the `kind` of `rdmalb_upstream_errors_total`.

/// Result of one upstream attempt, reported by the data path for passive
/// health.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// The node answered with a non-5xx status.
    Success,
    /// TCP connect (or the upstream handshake) failed.
    ConnectFailed,
    /// Connect, response-header or body timeout.
    Timeout,
    /// The node answered 5xx other than 503.
    ServerError,
    /// The node answered 503: it is alive and says it is overloaded (a
    /// full queue) or briefly unavailable. Neither a success nor a failure
    /// for passive health: ejecting a node for shedding load takes its
    /// capacity away exactly when it is needed, and its load reads then
    /// fall to zero, which hides the site's overload from the
    /// reconfiguration agent. Active checks still take down a node whose
    /// health path answers 503.
    Busy,
    /// The node broke the HTTP protocol (malformed response, reset mid-response).
    ProtocolError,
}

impl Outcome {
    /// Whether this outcome counts towards passive ejection.
    pub fn is_failure(self) -> bool {
        !matches!(self, Outcome::Success | Outcome::Busy)
    }

    /// The `kind` label of `rdmalb_upstream_errors_total` (None for success).
    pub fn error_kind(self) -> Option<&'static str> {
        match self {
            Outcome::Success => None,
            Outcome::ConnectFailed => Some("connect"),
            Outcome::Timeout => Some("timeout"),
            Outcome::ServerError | Outcome::Busy => Some("5xx"),
            Outcome::ProtocolError => Some("protocol"),
        }
    }
}
