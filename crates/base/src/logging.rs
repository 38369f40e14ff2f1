//! Logging of every rdmalb binary: `tracing` events, one per line on
//! stderr, filtered by `RDMALB_LOG` (tracing's filter syntax; default
//! `info`), coloured only on a terminal.
//!
//! A few events of dependencies are triggered by clients at will, one per
//! frame they send ([`QUIETED`]): logged as they are, any client could
//! fill the log. Those are counted in a Prometheus counter each, always,
//! and printed only when `RDMALB_LOG` names the dependency's target (for
//! example `RDMALB_LOG=info,h2=debug`).

use tracing::{Level, Metadata, Subscriber};
use tracing_subscriber::filter::{filter_fn, Directive};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// `rdmalb_h2_unsolicited_ping_acks_total` counter: HTTP/2 PING frames
/// with the ACK flag that answer no PING the proxy sent.
pub const H2_UNSOLICITED_PING_ACKS: &str = "rdmalb_h2_unsolicited_ping_acks_total";

/// An event of a dependency counted instead of logged.
#[derive(Debug)]
pub struct Quieted {
    /// The event's target (its module path in the dependency).
    pub target: &'static str,
    pub level: Level,
    /// The start of its message, which tells it from the module's other
    /// events at that level.
    pub message: &'static str,
    /// The counter it increments.
    pub metric: &'static str,
}

/// The quieted events.
pub const QUIETED: &[Quieted] = &[Quieted {
    // h2 0.4 `proto/ping_pong.rs`, `recv_ping`: a PING ACK that matches no
    // PING h2 sent (neither its shutdown ping nor hyper's keep-alive ping).
    // RFC 9113 section 6.7 gives such a frame no meaning and h2 drops it,
    // but warns first; hyper reports nothing about it to the server, so
    // this event is the only place the proxy can see it.
    target: "h2::proto::ping_pong",
    level: Level::WARN,
    message: "recv PING ack that we never sent",
    metric: H2_UNSOLICITED_PING_ACKS,
}];

fn quieted(meta: &Metadata<'_>) -> Option<&'static Quieted> {
    QUIETED
        .iter()
        .find(|q| meta.target() == q.target && *meta.level() == q.level)
}

/// Counts the [`QUIETED`] events, whatever `RDMALB_LOG` says.
struct QuietedCounter;

impl<S: Subscriber> Layer<S> for QuietedCounter {
    fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        let Some(q) = quieted(event.metadata()) else {
            return;
        };
        let mut message = MessageStart {
            prefix: q.message,
            matched: false,
        };
        event.record(&mut message);
        if message.matched {
            metrics::counter!(q.metric).increment(1);
        }
    }
}

/// Whether an event's `message` field starts with `prefix`.
struct MessageStart {
    prefix: &'static str,
    matched: bool,
}

impl tracing::field::Visit for MessageStart {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.matched = format!("{value:?}").starts_with(self.prefix);
        }
    }
}

/// The log filter for `spec` (`RDMALB_LOG`; `None`: `info`): the quieted
/// events are left out unless `spec` names their crate.
pub fn filter(spec: Option<&str>) -> EnvFilter {
    let mut filter = spec
        .and_then(|s| EnvFilter::try_new(s).ok())
        .unwrap_or_else(|| EnvFilter::new("info"));
    for q in QUIETED {
        let krate = q.target.split("::").next().unwrap_or(q.target);
        if !spec.is_some_and(|s| names_crate(s, krate)) {
            // Only the events above the quieted level pass.
            let quieter = match q.level {
                Level::TRACE => Level::DEBUG,
                Level::DEBUG => Level::INFO,
                Level::INFO => Level::WARN,
                _ => Level::ERROR,
            };
            if let Ok(d) = format!("{}={quieter}", q.target).parse::<Directive>() {
                filter = filter.add_directive(d);
            }
        }
    }
    filter
}

/// Whether a filter spec has a directive for `krate` or one of its modules.
fn names_crate(spec: &str, krate: &str) -> bool {
    spec.split(',').any(|directive| {
        let target = directive.split(['=', '[']).next().unwrap_or("").trim();
        target == krate || target.starts_with(&format!("{krate}::"))
    })
}

/// Installs the subscriber; call once, first thing in `main`.
pub fn init() {
    let spec = std::env::var("RDMALB_LOG").ok();
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .with_filter(filter(spec.as_deref()));
    // The hint keeps the global level as low as the log filter's, so
    // disabled `debug!`/`trace!` stay a static check on the data path.
    let quietest = QUIETED
        .iter()
        .map(|q| q.level)
        .max()
        .unwrap_or(Level::ERROR);
    let counter = QuietedCounter
        .with_filter(filter_fn(|meta| quieted(meta).is_some()).with_max_level_hint(quietest));
    tracing_subscriber::registry()
        .with(fmt)
        .with(counter)
        .init();
}

#[cfg(test)]
mod tests;
