//! The `[qos]` admission queue and per-site QoS accounting, end to end.

mod accounting;
mod admission;
