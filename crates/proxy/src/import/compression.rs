//! HAProxy's `compression` directives (defaults, frontend, listen,
//! backend) and the global `maxcompcpuusage`, `maxcomprate` and
//! `tune.comp.maxlevel`, mapped to `[site.compression]` and
//! `global.compression_max_cpu`.
//!
//! A backend's own `compression` lines make its site's table; a backend
//! without them takes its frontend's (HAProxy runs the frontend's filter
//! on every response it sends). HAProxy offers gzip and deflate; rdmalb
//! gzip, brotli and zstd: an imported site offers gzip only, so clients get
//! what HAProxy gave them (`deflate` is noted: every client that accepts it
//! accepts gzip). Without `compression type`, HAProxy compresses every
//! type: `types = ["*/*"]`. It has no minimum size: `min_size = 0`.

use std::fmt::Write;

use super::lexer::Line;
use super::sections::At;
use super::site::q;
use super::{Kind, Note};

/// One proxy's `compression` settings.
#[derive(Debug, Clone, Default)]
pub struct Comp {
    pub algos: Option<At<Vec<String>>>,
    pub types: Option<At<Vec<String>>>,
    pub offload: Option<usize>,
    pub min_size: Option<At<u64>>,
}

impl Comp {
    /// Whether this proxy compresses (an `algo` with something rdmalb
    /// offers).
    pub fn enabled(&self) -> bool {
        self.algos.is_some()
    }

    /// One `compression ...` line.
    pub fn directive(&mut self, line: &Line, notes: &mut Vec<Note>) {
        let n = line.number;
        let words = line.words.get(2..).unwrap_or_default().to_vec();
        let mut note = |kind, why: String| notes.push(Note::new(n, "compression", kind, why));
        match line.word(1) {
            "algo" | "algo-res" => {
                for w in &words {
                    match w.as_str() {
                        "gzip" | "identity" => {}
                        "deflate" | "raw-deflate" => note(Kind::Approximated, format!("`{w}` is not offered by rdmalb (gzip, br, zstd); clients that accept it accept gzip")),
                        other => note(Kind::Unsupported, format!("unknown algorithm `{other}`")),
                    }
                }
                self.algos = Some(At {
                    value: words,
                    line: n,
                });
            }
            "type" | "type-res" => {
                self.types = Some(At {
                    value: words,
                    line: n,
                })
            }
            "offload" => self.offload = Some(n),
            "minsize-res" => match size(line.word(2)) {
                Some(v) => self.min_size = Some(At { value: v, line: n }),
                None => note(
                    Kind::Unsupported,
                    format!("`{}` is not a size; ignored", line.word(2)),
                ),
            },
            "direction" if line.word(2) == "response" => {}
            "direction" | "algo-req" | "type-req" | "minsize-req" => note(
                Kind::Unsupported,
                "not supported: rdmalb compresses responses, never requests".into(),
            ),
            other => note(
                Kind::Unsupported,
                format!("unknown compression keyword `{other}`"),
            ),
        }
    }

    /// Writes the site's `[site.compression]`, `level` from
    /// `tune.comp.maxlevel`; nothing when HAProxy would not compress.
    pub fn write(&self, out: &mut String, level: Option<u64>) {
        let Some(algos) = &self.algos else {
            return;
        };
        if !algos
            .value
            .iter()
            .any(|a| a == "gzip" || a == "deflate" || a == "raw-deflate")
        {
            return;
        }
        out.push_str("\n[site.compression]\ncodings = [\"gzip\"]\n");
        let types = match &self.types {
            Some(t) => t.value.iter().map(|t| q(t)).collect::<Vec<_>>().join(", "),
            None => q("*/*"),
        };
        writeln!(out, "types = [{types}]").ok();
        writeln!(
            out,
            "min_size = {}",
            self.min_size.as_ref().map_or(0, |m| m.value)
        )
        .ok();
        if let Some(l) = level {
            writeln!(out, "level = {}", l.clamp(1, 9)).ok();
        }
        if self.offload.is_some() {
            out.push_str("offload = true\n");
        }
    }
}

/// HAProxy's size format: a number with an optional `k`, `m` or `g`.
fn size(text: &str) -> Option<u64> {
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (num, unit) = text.split_at(split);
    let n: u64 = num.parse().ok()?;
    n.checked_mul(match unit {
        "" => 1,
        "k" | "K" => 1 << 10,
        "m" | "M" => 1 << 20,
        "g" | "G" => 1 << 30,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(text: &str) -> Line {
        Line {
            number: 7,
            words: text.split_whitespace().map(str::to_string).collect(),
        }
    }

    #[test]
    fn sizes_take_haproxys_suffixes() {
        assert_eq!(size("512"), Some(512));
        assert_eq!(size("2k"), Some(2048));
        assert_eq!(size("1M"), Some(1 << 20));
        assert_eq!(size("1g"), Some(1 << 30));
        assert_eq!(size("1kb"), None);
        assert_eq!(size("k"), None);
    }

    #[test]
    fn a_backend_section_becomes_its_sites_table() {
        let mut notes = Vec::new();
        let mut c = Comp::default();
        for l in [
            "compression algo gzip deflate",
            "compression type text/html application/json",
            "compression minsize-res 1k",
            "compression offload",
            "compression direction both",
        ] {
            c.directive(&line(l), &mut notes);
        }
        let mut out = String::new();
        c.write(&mut out, Some(12));
        assert_eq!(
            out,
            "\n[site.compression]\ncodings = [\"gzip\"]\ntypes = [\"text/html\", \"application/json\"]\nmin_size = 1024\nlevel = 9\noffload = true\n"
        );
        let kinds: Vec<Kind> = notes.iter().map(|n| n.kind).collect();
        assert_eq!(kinds, [Kind::Approximated, Kind::Unsupported], "{notes:?}");
        // identity alone compresses nothing: no table.
        let mut none = Comp::default();
        none.directive(&line("compression algo identity"), &mut notes);
        let mut out = String::new();
        none.write(&mut out, None);
        assert!(out.is_empty());
    }
}
