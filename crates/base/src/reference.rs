//! The configuration reference (`docs/configuration.md`): the JSON schema
//! that `schemars` derives from a config file's raw serde structs is turned
//! into sections of keys, rendered as markdown, and used to check which keys
//! a config file uses.
//!
//! The text is the structs' doc comments. A field's doc comment may end with
//! a paragraph of conventions the reference shows in their own columns:
//!
//! ```text
//! /// How often a node is checked.
//! ///
//! /// Default: `"2s"`. Example: `"500ms"`.
//! ```
//!
//! `Default:` is either a TOML value in backticks (a literal the proxy's own
//! tests check against the code: setting it changes nothing) or words
//! (`none`, "`global.balance`"). `Example:` is a TOML value; without one the
//! literal default is the example.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use serde_json::{Map, Value};

/// One config file's keys, in the order of its structs' fields.
#[derive(Debug)]
pub struct Reference {
    /// The file's own doc comment (its top-level struct).
    pub doc: String,
    /// The top-level keys first (path ""), then every table in depth-first order.
    pub sections: Vec<Section>,
}

/// A table of the file: `[global]`, `[[site]]`, `[site.hash]`, `[role.site.<name>]`.
#[derive(Debug)]
pub struct Section {
    /// Dotted path; `<name>` stands for a key the operator chooses.
    pub path: String,
    /// `[[site]]` (an array of tables) rather than `[site]`.
    pub array: bool,
    pub doc: String,
    pub keys: Vec<Key>,
}

/// A key that holds a value (not a table).
#[derive(Debug, Clone)]
pub struct Key {
    pub name: String,
    /// Dotted path from the top of the file, e.g. `site.hash.type`.
    pub path: String,
    /// "string", "integer", "array of strings", ...
    pub ty: String,
    /// The doc comment without the conventions paragraph.
    pub doc: String,
    /// The text after `Default:`, backticks included.
    pub default: Option<String>,
    /// A TOML value.
    pub example: Option<String>,
}

impl Key {
    /// The default when it is a TOML literal in backticks, as TOML text.
    pub fn literal_default(&self) -> Option<&str> {
        let d = self.default.as_deref()?.trim();
        let inner = d.strip_prefix('`')?.strip_suffix('`')?;
        (!inner.contains('`') && parse_value(inner).is_some()).then_some(inner)
    }
}

/// Parses a TOML value (`"2s"`, `3`, `["a"]`).
pub fn parse_value(text: &str) -> Option<toml::Value> {
    let table: toml::Table = format!("v = {text}").parse().ok()?;
    table.get("v").cloned()
}

/// The schema's named types (`$defs`), which its `$ref`s point at.
fn definitions(schema: &Value) -> Map<String, Value> {
    schema
        .get("$defs")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

/// Builds the reference from a schema (`schemars::schema_for!(RawFile)`).
pub fn build(schema: &Value) -> Reference {
    let defs = definitions(schema);
    let walker = Walker { defs: &defs };
    let mut sections = Vec::new();
    walker.table(schema, "", false, String::new(), &mut sections);
    // The root's title is the type's name; its description is the text.
    let doc = schema
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    Reference { doc, sections }
}

struct Walker<'a> {
    defs: &'a Map<String, Value>,
}

/// What a property holds once `Option` and `$ref` are looked through.
enum Shape<'a> {
    Table(&'a Value),
    ArrayOfTables(&'a Value),
    MapOfTables(&'a Value),
    Leaf(String),
}

impl<'a> Walker<'a> {
    fn resolve(&self, s: &'a Value) -> &'a Value {
        match s.get("$ref").and_then(Value::as_str) {
            Some(r) => r
                .strip_prefix("#/$defs/")
                .and_then(|name| self.defs.get(name))
                .unwrap_or(s),
            None => s,
        }
    }

    /// Drops `null` from `anyOf`/`oneOf`/`type` lists (an `Option`).
    fn non_null(&self, s: &'a Value) -> &'a Value {
        let s = self.resolve(s);
        for k in ["anyOf", "oneOf"] {
            if let Some(list) = s.get(k).and_then(Value::as_array) {
                let rest: Vec<&Value> = list.iter().filter(|v| !is_null(v)).collect();
                if rest.len() == 1 {
                    return self.non_null(rest[0]);
                }
            }
        }
        s
    }

    fn is_table(&self, s: &Value) -> bool {
        s.get("properties").is_some()
    }

    fn shape(&self, s: &'a Value) -> Shape<'a> {
        let s = self.non_null(s);
        if self.is_table(s) {
            return Shape::Table(s);
        }
        if let Some(items) = s.get("items") {
            let items = self.non_null(items);
            if self.is_table(items) {
                return Shape::ArrayOfTables(items);
            }
        }
        if let Some(extra) = s.get("additionalProperties") {
            let extra = self.non_null(extra);
            if self.is_table(extra) {
                return Shape::MapOfTables(extra);
            }
        }
        Shape::Leaf(self.type_name(s))
    }

    fn type_name(&self, s: &Value) -> String {
        let s = self.non_null(s);
        if let Some(list) = s.get("anyOf").or(s.get("oneOf")).and_then(Value::as_array) {
            let names: Vec<String> = list
                .iter()
                .filter(|v| !is_null(v))
                .map(|v| self.type_name(v))
                .collect();
            return names.join(" or ");
        }
        let ty = match s.get("type") {
            Some(Value::String(t)) => t.clone(),
            Some(Value::Array(list)) => list
                .iter()
                .filter_map(Value::as_str)
                .filter(|t| *t != "null")
                .collect::<Vec<_>>()
                .join(" or "),
            _ => return "any TOML value".into(),
        };
        match ty.as_str() {
            "array" => match s.get("items") {
                Some(items) => format!("array of {}s", self.type_name(items)),
                None => "array".into(),
            },
            "object" => match s.get("additionalProperties") {
                Some(v) if v.is_object() => format!("table of {}s", self.type_name(v)),
                _ => "table".into(),
            },
            "number" => "number".into(),
            _ => ty,
        }
    }

    fn table(&self, s: &'a Value, path: &str, array: bool, doc: String, out: &mut Vec<Section>) {
        let at = out.len();
        out.push(Section {
            path: path.to_string(),
            array,
            doc,
            keys: Vec::new(),
        });
        let Some(props) = s.get("properties").and_then(Value::as_object) else {
            return;
        };
        let required: Vec<&str> = s
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        for (name, prop) in props {
            let child = join(path, name);
            // The field's own doc comment, else its type's.
            let doc = match description(prop) {
                d if !d.is_empty() => d,
                _ => description(self.non_null(prop)),
            };
            match self.shape(prop) {
                Shape::Table(t) => self.table(t, &child, false, doc, out),
                Shape::ArrayOfTables(t) => self.table(t, &child, true, doc, out),
                Shape::MapOfTables(t) => self.table(t, &join(&child, "<name>"), false, doc, out),
                Shape::Leaf(ty) => {
                    let (doc, mut default, example) = conventions(&doc);
                    if default.is_none() && required.contains(&name.as_str()) {
                        default = Some("required".into());
                    }
                    out[at].keys.push(Key {
                        name: name.clone(),
                        path: child,
                        ty,
                        doc,
                        default,
                        example,
                    })
                }
            }
        }
    }
}

fn is_null(v: &Value) -> bool {
    v.get("type").and_then(Value::as_str) == Some("null")
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

fn description(s: &Value) -> String {
    let title = s.get("title").and_then(Value::as_str);
    let body = s.get("description").and_then(Value::as_str);
    match (title, body) {
        (Some(t), Some(b)) => format!("{t}\n\n{b}"),
        (Some(t), None) => t.to_string(),
        (None, Some(b)) => b.to_string(),
        (None, None) => String::new(),
    }
}

/// Splits the `Default:` / `Example:` paragraph off a doc comment.
fn conventions(doc: &str) -> (String, Option<String>, Option<String>) {
    let mut text = Vec::new();
    let (mut default, mut example) = (None, None);
    for para in doc.split("\n\n") {
        let p = para.trim();
        if p.starts_with("Default:") || p.starts_with("Example:") {
            for part in split_conventions(p) {
                if let Some(d) = part.strip_prefix("Default:") {
                    default = Some(d.trim().trim_end_matches('.').trim().to_string());
                } else if let Some(e) = part.strip_prefix("Example:") {
                    let e = e.trim().trim_end_matches('.').trim();
                    example = Some(e.trim_matches('`').to_string());
                }
            }
        } else {
            text.push(p.replace('\n', " "));
        }
    }
    (text.join("\n\n"), default, example)
}

/// "Default: `1`. Example: `2`." → ["Default: `1`.", "Example: `2`."]
fn split_conventions(p: &str) -> Vec<&str> {
    match p.find(" Example:") {
        Some(i) => vec![&p[..i], p[i + 1..].trim()],
        None => vec![p],
    }
}

impl Reference {
    /// Every key, in order.
    pub fn keys(&self) -> impl Iterator<Item = &Key> {
        self.sections.iter().flat_map(|s| s.keys.iter())
    }

    /// Renders the reference of one file as markdown under `## {title}`.
    pub fn markdown(&self, title: &str) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "## {title}\n");
        if !self.doc.is_empty() {
            let _ = writeln!(out, "{}\n", self.doc);
        }
        let shown = || {
            self.sections
                .iter()
                .filter(|s| !(s.keys.is_empty() && s.path.is_empty()))
        };
        let index: Vec<String> = shown()
            .map(|s| format!("[{}](#{})", s.header(), anchor(&s.header())))
            .collect();
        let _ = writeln!(out, "Tables: {}.\n", index.join(", "));
        for s in shown() {
            let _ = writeln!(out, "### {}\n", s.header());
            if !s.doc.is_empty() {
                let _ = writeln!(out, "{}\n", s.doc);
            }
            if s.keys.is_empty() {
                continue;
            }
            let _ = writeln!(out, "| key | type | default | what it does |");
            let _ = writeln!(out, "|---|---|---|---|");
            for k in &s.keys {
                let _ = writeln!(
                    out,
                    "| `{}` | {} | {} | {} |",
                    k.name,
                    k.ty,
                    k.default.as_deref().unwrap_or("none"),
                    cell(&k.doc)
                );
            }
            let _ = writeln!(out, "\nExample:\n\n```toml");
            match (s.path.as_str(), s.array) {
                ("", _) => {}
                (p, true) => {
                    let _ = writeln!(out, "[[{p}]]");
                }
                (p, false) => {
                    let _ = writeln!(out, "[{}]", p.replace("<name>", "shop"));
                }
            }
            for k in &s.keys {
                if let Some(v) = k.example.as_deref().or(k.literal_default()) {
                    let _ = writeln!(out, "{} = {v}", k.name);
                }
            }
            let _ = writeln!(out, "```\n");
        }
        out
    }

    /// The keys of a config file's text that the reference does not have
    /// (dotted paths; `site[1].wieght`), or the TOML syntax error.
    pub fn unknown_keys(&self, schema: &Value, text: &str) -> Result<Vec<String>, String> {
        let table: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| format!("TOML syntax error: {}", e.message().trim()))?;
        let defs = definitions(schema);
        let walker = Walker { defs: &defs };
        let mut unknown = Vec::new();
        walker.check(schema, &toml::Value::Table(table), "", &mut unknown);
        Ok(unknown)
    }
}

impl Walker<'_> {
    fn check(&self, s: &Value, v: &toml::Value, path: &str, unknown: &mut Vec<String>) {
        match (self.shape(s), v) {
            (Shape::Table(t), toml::Value::Table(values)) => {
                let props = t.get("properties").and_then(Value::as_object);
                for (name, value) in values {
                    let child = join(path, name);
                    match props.and_then(|p| p.get(name)) {
                        Some(prop) => self.check(prop, value, &child, unknown),
                        None => unknown.push(child),
                    }
                }
            }
            (Shape::ArrayOfTables(t), toml::Value::Array(items)) => {
                for (i, item) in items.iter().enumerate() {
                    self.check(t, item, &format!("{path}[{i}]"), unknown);
                }
            }
            (Shape::MapOfTables(t), toml::Value::Table(values)) => {
                for (name, value) in values {
                    self.check(t, value, &join(path, name), unknown);
                }
            }
            // A value of another shape is for validation to report.
            _ => {}
        }
    }
}

impl Section {
    /// `top level`, `` `[global]` `` or `` `[[site]]` ``.
    pub fn header(&self) -> String {
        match (self.path.as_str(), self.array) {
            ("", _) => "top level".to_string(),
            (p, true) => format!("`[[{p}]]`"),
            (p, false) => format!("`[{p}]`"),
        }
    }
}

/// The anchor GitHub gives a heading: lower case, spaces to `-`, other
/// punctuation dropped.
pub fn anchor(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// Text a markdown table cell can hold: no `|`, paragraphs as `<br>`.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace("\n\n", "<br><br>")
}

/// `table` with `value` written at a key's dotted `path` (`site.hash.len`,
/// `role.site.<name>.health_path`): in the first entry of an array of
/// tables (or of a `<name>` table) whose parent table exists and which does
/// not set the key already. `None` when there is no such place. The tests
/// that check each literal default against the validator use it.
pub fn with_key(table: &toml::Table, path: &str, value: toml::Value) -> Option<toml::Table> {
    let segments: Vec<&str> = path.split('.').collect();
    let mut out = table.clone();
    set(&mut out, &segments, &value).then_some(out)
}

fn set(table: &mut toml::Table, segments: &[&str], value: &toml::Value) -> bool {
    let (first, rest) = match segments {
        [] => return false,
        [last] => {
            if table.contains_key(*last) {
                return false;
            }
            table.insert(last.to_string(), value.clone());
            return true;
        }
        [first, rest @ ..] => (*first, rest),
    };
    if first == "<name>" {
        return table.iter_mut().any(|(_, v)| match v {
            toml::Value::Table(t) => set(t, rest, value),
            _ => false,
        });
    }
    match table.get_mut(first) {
        Some(toml::Value::Table(t)) => set(t, rest, value),
        Some(toml::Value::Array(items)) => items.iter_mut().any(|v| match v {
            toml::Value::Table(t) => set(t, rest, value),
            _ => false,
        }),
        _ => false,
    }
}

/// A value's `{:#?}` with its lines sorted: equal for two values that
/// differ only in the order of a hash map's entries.
pub fn sorted_debug(value: &impl std::fmt::Debug) -> Vec<String> {
    let mut lines: Vec<String> = format!("{value:#?}").lines().map(str::to_string).collect();
    lines.sort();
    lines
}

/// A value that is an integer or a word (`candidates = 2` or `"all"`), for
/// fields kept as a raw `toml::Value` until validation.
#[derive(schemars::JsonSchema)]
#[serde(untagged)]
pub enum IntOrText {
    Int(i64),
    Text(String),
}

/// The file's top-level keys (values and tables), to compare with the list
/// the validator accepts.
pub fn top_level_names(r: &Reference) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for s in &r.sections {
        match s.path.split('.').next() {
            Some("") => names.extend(s.keys.iter().map(|k| k.name.clone())),
            Some(first) => {
                names.insert(first.to_string());
            }
            None => {}
        }
    }
    names
}

#[cfg(test)]
mod tests;
