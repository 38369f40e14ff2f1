//! HAProxy's stick-table commands on the runtime API: `show table`,
//! `show table NAME [data.<type> <op> <value>]* [key K]` and `clear table
//! NAME [filters]` ([`crate::rules::stick::show`] prints them as HAProxy
//! 2.6 does). `clear table` removes the entries no request tracks.

use http::StatusCode;

use super::command::Refusal;
use super::{Admin, Outcome};
use crate::rules::stick::{show, StickTable};

/// The table named `name` and the entries `filters` select in it.
fn select<'c>(
    rules: &'c crate::rules::Rules,
    name: &str,
    filters: &[&str],
) -> Result<(&'c StickTable, show::Selection), Refusal> {
    let t = rules
        .table(name)
        .ok_or_else(|| (StatusCode::NOT_FOUND, "No such table".to_string()))?;
    let selection = show::selection(t, filters).map_err(|e| (StatusCode::BAD_REQUEST, e))?;
    Ok((t, selection))
}

/// `show table`: the tables; `show table TABLE [filters]`: its entries.
pub fn show(state: &Admin, table: Option<&str>, filters: &[&str]) -> Outcome {
    let config = state.config.load();
    let Some(name) = table else {
        return Ok(show::list(&config.rules.tables));
    };
    let (t, selection) = select(&config.rules, name, filters)?;
    Ok(show::entries(t, &selection))
}

/// `clear table TABLE [filters]`.
pub fn clear(state: &Admin, table: &str, filters: &[&str]) -> Outcome {
    let config = state.config.load();
    let (t, selection) = select(&config.rules, table, filters)?;
    let n = show::clear(t, &selection);
    tracing::info!(table = %t.name, removed = n, "runtime table clear");
    Ok(String::new())
}
