//! `weighted-least-load`: the lowest load index ([`super::load::rank`],
//! [`Decision::rank_by_load`]),
//! each candidate's load scored with its site's weights, per unit of the
//! node's weight when weights differ. Read by [`super::load_aware`].

use super::load_aware::{Decision, LoadRule};
use crate::config::Balance;

/// The `weighted-least-load` rule.
#[derive(Debug, Default)]
pub struct LeastLoad;

impl LoadRule for LeastLoad {
    fn balance(&self) -> Balance {
        Balance::WeightedLeastLoad
    }

    fn choose(&self, d: &Decision<'_, '_>, scores: &mut [f64]) -> usize {
        let best = d.rank_by_load(scores).unwrap_or(0);
        d.per_weight(scores, best)
    }
}
