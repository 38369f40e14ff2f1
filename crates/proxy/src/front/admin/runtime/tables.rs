//! HAProxy's stick-table commands on the runtime API: `show table`,
//! `show table NAME [data.<type> <op> <value>]* [key K]` and `clear table
//! NAME [filters]` ([`crate::rules::stick::show`] prints them as HAProxy
//! 2.6 does). `clear table` removes the entries no request tracks.

use http::StatusCode;

use super::{Admin, Outcome};
use crate::rules::stick::show;

/// Runs a table command; `None` when the words are not one.
pub fn run(state: &Admin, words: &[&str]) -> Option<Outcome> {
    let config = state.config.load();
    let rules = &config.rules;
    let find = |name: &str| {
        rules
            .table(name)
            .ok_or_else(|| (StatusCode::NOT_FOUND, "No such table".to_string()))
    };
    let select =
        |t, rest: &[&str]| show::selection(t, rest).map_err(|e| (StatusCode::BAD_REQUEST, e));
    Some(match words {
        ["show", "table"] => Ok(show::list(&rules.tables)),
        ["show", "table", name, rest @ ..] => {
            find(name).and_then(|t| select(t, rest).map(|s| show::entries(t, &s)))
        }
        ["clear", "table", name, rest @ ..] => find(name).and_then(|t| {
            let s = select(t, rest)?;
            let n = show::clear(t, &s);
            tracing::info!(table = %t.name, removed = n, "runtime table clear");
            Ok(String::new())
        }),
        ["clear", "table"] => Err((StatusCode::BAD_REQUEST, "table name expected".to_string())),
        _ => return None,
    })
}
