//! Role templates: the app config file rendered for a site.
//!
//! The syntax is deliberately tiny, so that nginx, Apache or TOML text
//! (which are full of single braces) pass through untouched:
//!
//! - `{{name}}` (spaces inside the braces allowed: `{{ name }}`) is replaced
//!   by the variable's value. Names are `[A-Za-z_][A-Za-z0-9_]*`.
//! - `\{{` is a literal `{{`.
//! - Everything else is copied byte for byte.
//!
//! Templates are parsed when the config is validated, and every variable a
//! template uses must be known for the site it renders: an unknown name is
//! a config error naming the file and line, never a silent empty string.

use std::collections::BTreeMap;
use std::fmt;

/// Variables every site template may use (besides its own `vars`).
pub const SITE_VARIABLES: &[&str] = &[
    "site",
    "node",
    "node_id",
    "hosts",
    "hosts_quoted",
    "primary_host",
    "health_path",
    "listen",
    "port",
];
/// Variables a site template may use besides [`SITE_VARIABLES`] when
/// `[role] mode = "warm"`: `gate`, the path of the site's gate marker file.
pub const WARM_SITE_VARIABLES: &[&str] = &["gate"];
/// Variables the idle template may use (besides its own `vars`).
pub const IDLE_VARIABLES: &[&str] = &["site", "node", "node_id", "listen", "port"];

/// A parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    Var { name: String, line: usize },
}

/// Why a template did not parse or render.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// `{{` without a closing `}}` on the same line.
    #[error("line {line}: `{{{{` is not closed by `}}}}` on the same line (write `\\{{{{` for a literal `{{{{`)")]
    Unterminated { line: usize },
    /// `{{ ... }}` holding something that is not a variable name.
    #[error("line {line}: `{{{{{text}}}}}` is not a variable name (accepted: letters, digits and _, not starting with a digit)")]
    BadName { line: usize, text: String },
    /// A variable the renderer does not define.
    #[error("line {line}: unknown variable `{name}` (known here: {known})")]
    Unknown {
        line: usize,
        name: String,
        known: String,
    },
}

/// Whether `s` is a variable name: `[A-Za-z_][A-Za-z0-9_]*`.
pub fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl Template {
    /// Parses template text.
    pub fn parse(text: &str) -> Result<Template, TemplateError> {
        let mut parts = Vec::new();
        let mut lit = String::new();
        let mut rest = text;
        let mut line = 1;
        while let Some(i) = rest.find("{{") {
            if rest[..i].ends_with('\\') {
                // `\{{`: drop the backslash, keep the braces literally.
                lit.push_str(&rest[..i - 1]);
                lit.push_str("{{");
                line += rest[..i].matches('\n').count();
                rest = &rest[i + 2..];
                continue;
            }
            lit.push_str(&rest[..i]);
            line += rest[..i].matches('\n').count();
            let after = &rest[i + 2..];
            let eol = after.find('\n').unwrap_or(after.len());
            let Some(close) = after[..eol].find("}}") else {
                return Err(TemplateError::Unterminated { line });
            };
            let name = after[..close].trim();
            if !is_name(name) {
                return Err(TemplateError::BadName {
                    line,
                    text: after[..close].to_string(),
                });
            }
            if !lit.is_empty() {
                parts.push(Part::Text(std::mem::take(&mut lit)));
            }
            parts.push(Part::Var {
                name: name.to_string(),
                line,
            });
            rest = &after[close + 2..];
        }
        lit.push_str(rest);
        if !lit.is_empty() {
            parts.push(Part::Text(lit));
        }
        Ok(Template { parts })
    }

    /// Every variable name used, with the line of its first use.
    pub fn variables(&self) -> Vec<(&str, usize)> {
        let mut seen: Vec<(&str, usize)> = Vec::new();
        for p in &self.parts {
            if let Part::Var { name, line } = p {
                if !seen.iter().any(|(n, _)| n == name) {
                    seen.push((name, *line));
                }
            }
        }
        seen
    }

    /// Checks every variable used is among `known`.
    pub fn check(&self, known: &[&str]) -> Result<(), TemplateError> {
        for (name, line) in self.variables() {
            if !known.contains(&name) {
                return Err(unknown(name, line, known.iter().copied()));
            }
        }
        Ok(())
    }

    /// Renders with `vars`; an unknown variable is an error.
    pub fn render(&self, vars: &Vars) -> Result<String, TemplateError> {
        let mut out = String::new();
        for p in &self.parts {
            match p {
                Part::Text(t) => out.push_str(t),
                Part::Var { name, line } => match vars.0.get(name) {
                    Some(v) => out.push_str(v),
                    None => return Err(unknown(name, *line, vars.0.keys().map(String::as_str))),
                },
            }
        }
        Ok(out)
    }
}

fn unknown<'a>(name: &str, line: usize, known: impl Iterator<Item = &'a str>) -> TemplateError {
    let mut k: Vec<&str> = known.collect();
    k.sort_unstable();
    TemplateError::Unknown {
        line,
        name: name.to_string(),
        known: k.join(", "),
    }
}

/// Variable values for one rendering.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Vars(pub BTreeMap<String, String>);

impl Vars {
    /// Sets one variable.
    pub fn set(&mut self, name: &str, value: impl Into<String>) -> &mut Self {
        self.0.insert(name.to_string(), value.into());
        self
    }

    /// The names defined.
    pub fn names(&self) -> Vec<&str> {
        self.0.keys().map(String::as_str).collect()
    }
}

impl fmt::Display for Vars {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.names().join(", "))
    }
}

#[cfg(test)]
mod tests;
