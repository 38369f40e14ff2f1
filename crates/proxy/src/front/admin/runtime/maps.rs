//! HAProxy's map commands on the runtime API: `show map [MAP]`, `add map
//! MAP KEY VALUE`, `set map MAP KEY VALUE`, `del map MAP KEY`, `clear map
//! MAP`, where MAP is a `[[map]]`'s name or its file. A change applies at
//! once to every worker (the map's entries are swapped whole); it is not
//! written to the file, so a reload (SIGHUP) reads the file again and
//! drops it, as HAProxy's runtime changes are lost on a reload.

use std::fmt::Write as _;

use http::StatusCode;

use super::{bad, Admin, Outcome};
use crate::rules::{Map, MapEdit};

/// Runs a map command (`words` from `show`/`add`/… on); `None` when the
/// words are not a map command.
pub fn run(state: &Admin, words: &[&str]) -> Option<Outcome> {
    let config = state.config.load();
    let rules = &config.rules;
    let find = |spec: &str| -> Result<&Map, (StatusCode, String)> {
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
    };
    let edit = |spec: &str, e: MapEdit| -> Outcome {
        let m = find(spec)?;
        m.change(&e).map_err(|why| (StatusCode::NOT_FOUND, why))?;
        tracing::info!(map = %m.name, change = ?e, "runtime map change (not written to the file: a reload drops it)");
        Ok(String::new())
    };
    Some(match words {
        ["show", "map"] => {
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
            Ok(out)
        }
        ["show", "map", spec] => find(spec).map(|m| {
            let mut out = String::new();
            for (i, (k, v)) in m.snapshot().entries().iter().enumerate() {
                let _ = writeln!(out, "{i:#x} {k} {v}");
            }
            out
        }),
        ["add", "map", spec, key, value @ ..] if !value.is_empty() => {
            edit(spec, MapEdit::Add(key.to_string(), value.join(" ")))
        }
        ["set", "map", spec, key, value @ ..] if !value.is_empty() => {
            edit(spec, MapEdit::Set(key.to_string(), value.join(" ")))
        }
        ["del", "map", spec, key] => edit(spec, MapEdit::Del(key.to_string())),
        ["clear", "map", spec] => edit(spec, MapEdit::Clear),
        ["add" | "set" | "del" | "clear" | "show", "map", ..] => Err(bad(format!(
            "wrong arguments to `{} map` (try `help`)",
            words[0]
        ))),
        _ => return None,
    })
}
