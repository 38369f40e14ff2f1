//! HAProxy's map commands on the runtime API: `show map [MAP]`, `add map
//! MAP KEY VALUE`, `set map MAP KEY VALUE`, `del map MAP KEY`, `clear map
//! MAP`, where MAP is a `[[map]]`'s name or its file. A change applies at
//! once to every worker (the map's entries are swapped whole); it is not
//! written to the file, so a reload (SIGHUP) reads the file again and
//! drops it, as HAProxy's runtime changes are lost on a reload.

use std::fmt::Write as _;

use http::StatusCode;

use super::command::Refusal;
use super::{Admin, Outcome};
use crate::rules::{Map, MapEdit};

/// The `[[map]]` named `spec` (its name or its file).
fn find<'c>(rules: &'c crate::rules::Rules, spec: &str) -> Result<&'c Map, Refusal> {
    rules
        .maps
        .iter()
        .find(|m| m.name == spec || m.file.to_str() == Some(spec))
        .ok_or_else(|| {
            (
                StatusCode::NOT_FOUND,
                format!("no map named `{spec}` (see `show map`)"),
            )
        })
}

/// `show map [MAP]`: the maps, or one map's entries.
pub fn show(state: &Admin, map: Option<&str>) -> Outcome {
    let config = state.config.load();
    let rules = &config.rules;
    let Some(spec) = map else {
        let mut out = String::from("# name (file) entries\n");
        for m in &rules.maps {
            let _ = writeln!(
                out,
                "{} ({}) entry_cnt={} match={}",
                m.name,
                m.file.display(),
                m.snapshot().entries().len(),
                m.kind.as_str()
            );
        }
        return Ok(out);
    };
    find(rules, spec).map(|m| {
        let mut out = String::new();
        for (i, (k, v)) in m.snapshot().entries().iter().enumerate() {
            let _ = writeln!(out, "{i:#x} {k} {v}");
        }
        out
    })
}

/// `add map`, `set map`, `del map`, `clear map`.
pub fn edit(state: &Admin, spec: &str, e: MapEdit) -> Outcome {
    let config = state.config.load();
    let m = find(&config.rules, spec)?;
    m.change(&e).map_err(|why| (StatusCode::NOT_FOUND, why))?;
    tracing::info!(map = %m.name, change = ?e, "runtime map change (not written to the file: a reload drops it)");
    Ok(String::new())
}
