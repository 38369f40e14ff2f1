//! What every rdmalb crate builds on, and nothing else: the config-problem
//! collector all three config files report through ([`problems`]),
//! the rule for names ([`name`]), human-readable durations ([`duration`]), wall-clock integers
//! ([`time`]), the one shutdown signal background loops wait on
//! ([`shutdown`]), the process's Prometheus recorder ([`metrics`]) and
//! one-line error chains ([`error`]), and the configuration reference
//! rendered from the config structs' schemas ([`reference`]).
#![deny(unsafe_code)]

pub mod cpu;
pub mod duration;
pub mod error;
pub mod logging;
pub mod metrics;
pub mod name;
pub mod problems;
pub mod reference;
pub mod shutdown;
pub mod time;
