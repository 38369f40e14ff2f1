//! Small shared helpers: duration parsing for configs, clocks.

pub mod duration;
