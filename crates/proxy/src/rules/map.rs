//! Maps: key → value tables read from files (HAProxy's `map`, `map_dom`,
//! `map_beg`, `map_end`, `map_sub`, `map_reg`), used to choose a site and
//! in header values.
//!
//! The file format is HAProxy's: one entry a line, the key up to the first
//! blank, the value the rest of the line; blank lines and lines starting
//! with `#` are skipped. Exact maps look up in one hash probe; prefix maps
//! take the longest matching prefix (one probe per distinct key length);
//! the other kinds test entries in file order and the first match wins, as
//! in HAProxy. Runtime commands (`add map`, `set map`, `del map`, `clear
//! map`) swap in a new table at once for every worker; they do not write
//! the file, so a reload (SIGHUP) reads the file again and drops them, as
//! HAProxy's runtime API does.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arc_swap::ArcSwap;
use regex::Regex;

use super::pattern::{text_match, MatchKind};

/// One map: its file, its match kind and its current entries.
#[derive(Debug)]
pub struct Map {
    pub name: String,
    pub file: PathBuf,
    pub kind: MatchKind,
    data: ArcSwap<MapData>,
}

/// The entries of a map and the index its kind looks up in.
#[derive(Debug, Default)]
pub struct MapData {
    /// Key and value, in file order.
    entries: Vec<(String, String)>,
    /// First entry of each key (exact and prefix maps).
    index: HashMap<String, usize>,
    /// Distinct key lengths, longest first (prefix maps).
    lengths: Vec<usize>,
    /// Compiled keys (regex maps), by entry.
    regexes: Vec<Option<Regex>>,
}

impl MapData {
    fn build(kind: MatchKind, entries: Vec<(String, String)>) -> Result<MapData, String> {
        let mut d = MapData {
            entries,
            ..MapData::default()
        };
        match kind {
            MatchKind::Exact | MatchKind::Prefix => {
                d.index.reserve(d.entries.len());
                for (i, (k, _)) in d.entries.iter().enumerate() {
                    d.index.entry(k.clone()).or_insert(i);
                }
                if kind == MatchKind::Prefix {
                    let mut l: Vec<usize> = d.entries.iter().map(|(k, _)| k.len()).collect();
                    l.sort_unstable_by(|a, b| b.cmp(a));
                    l.dedup();
                    d.lengths = l;
                }
            }
            MatchKind::Regex => {
                for (k, _) in &d.entries {
                    let r = Regex::new(k).map_err(|e| {
                        format!(
                            "`{k}` is not a regular expression: {}",
                            e.to_string().lines().last().unwrap_or("")
                        )
                    })?;
                    d.regexes.push(Some(r));
                }
            }
            _ => {}
        }
        Ok(d)
    }

    fn lookup(&self, kind: MatchKind, key: &str) -> Option<&str> {
        let at = match kind {
            MatchKind::Exact => self.index.get(key).copied(),
            MatchKind::Prefix => self
                .lengths
                .iter()
                .find_map(|&l| key.get(..l).and_then(|p| self.index.get(p).copied())),
            MatchKind::Regex => self
                .regexes
                .iter()
                .position(|r| r.as_ref().is_some_and(|r| r.is_match(key))),
            _ => self
                .entries
                .iter()
                .position(|(k, _)| text_match(kind, false, key, word(kind, k))),
        };
        at.map(|i| self.entries[i].1.as_str())
    }

    pub fn entries(&self) -> &[(String, String)] {
        &self.entries
    }
}

/// A domain or dir key without the delimiters around it.
fn word(kind: MatchKind, k: &str) -> &str {
    match kind {
        MatchKind::Domain => k.trim_matches(|c| matches!(c, '/' | '?' | '.' | ':')),
        MatchKind::Dir => k.trim_matches(|c| matches!(c, '/' | '?')),
        _ => k,
    }
}

/// Reads a map file's entries; the error names the line.
pub fn read_entries(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim();
            if l.is_empty() || l.starts_with('#') {
                return None;
            }
            let (k, v) = match l.split_once([' ', '\t']) {
                Some((k, v)) => (k, v.trim()),
                None => (l, ""),
            };
            Some((k.to_string(), v.to_string()))
        })
        .collect()
}

impl Map {
    /// Loads `file` as a map of `kind`.
    pub fn load(name: &str, file: &Path, kind: MatchKind) -> Result<Map, String> {
        let text = std::fs::read_to_string(file)
            .map_err(|e| format!("cannot read map file {}: {e}", file.display()))?;
        Map::from_entries(name, file, kind, read_entries(&text))
    }

    pub fn from_entries(
        name: &str,
        file: &Path,
        kind: MatchKind,
        entries: Vec<(String, String)>,
    ) -> Result<Map, String> {
        Ok(Map {
            name: name.to_string(),
            file: file.to_path_buf(),
            kind,
            data: ArcSwap::from_pointee(MapData::build(kind, entries)?),
        })
    }

    /// Calls `f` with the value `key` maps to (none: `None`).
    pub fn with<R>(&self, key: &str, f: impl FnOnce(Option<&str>) -> R) -> R {
        let d = self.data.load();
        f(d.lookup(self.kind, key))
    }

    /// The current entries.
    pub fn snapshot(&self) -> Arc<MapData> {
        self.data.load_full()
    }

    /// Applies a runtime change to a copy of the entries and swaps it in.
    pub fn change(&self, edit: &MapEdit) -> Result<usize, String> {
        let cur = self.data.load_full();
        let mut entries = cur.entries.clone();
        let touched = match edit {
            MapEdit::Add(k, v) => {
                entries.push((k.clone(), v.clone()));
                1
            }
            MapEdit::Set(k, v) => {
                let mut n = 0;
                for e in entries.iter_mut().filter(|e| &e.0 == k) {
                    e.1.clone_from(v);
                    n += 1;
                }
                if n == 0 {
                    return Err(format!("entry `{k}` not found in map {}", self.name));
                }
                n
            }
            MapEdit::Del(k) => {
                let before = entries.len();
                entries.retain(|e| &e.0 != k);
                if entries.len() == before {
                    return Err(format!("entry `{k}` not found in map {}", self.name));
                }
                before - entries.len()
            }
            MapEdit::Clear => {
                let n = entries.len();
                entries.clear();
                n
            }
        };
        self.data
            .store(Arc::new(MapData::build(self.kind, entries)?));
        Ok(touched)
    }
}

/// A runtime change to a map (HAProxy's `add map`, `set map`, `del map`,
/// `clear map`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MapEdit {
    Add(String, String),
    Set(String, String),
    Del(String),
    Clear,
}
