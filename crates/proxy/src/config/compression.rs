//! `[site.compression]` (raw → typed [`Compression`]): which responses of a
//! site are compressed, with which codings and how hard; and
//! `global.compression_max_cpu`. Defaults documented in `conf/rdmalb.toml`
//! and docs/proxy.md ("Compression").

use serde::Deserialize;

use rdmalb_base::problems::ConfigCheck;

/// A content coding the proxy compresses with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coding {
    Gzip,
    Brotli,
    Zstd,
}

impl Coding {
    pub const ACCEPTED: &'static str = "`zstd`, `br` or `gzip`";

    fn parse(name: &str) -> Option<Coding> {
        match name {
            "gzip" => Some(Coding::Gzip),
            "br" => Some(Coding::Brotli),
            "zstd" => Some(Coding::Zstd),
            _ => None,
        }
    }
}

/// `[site.compression]` as written.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawCompression {
    /// Codings offered, the preferred first: `"zstd"`, `"br"`, `"gzip"`. The
    /// client's Accept-Encoding q-values decide, ties go to the earlier.
    ///
    /// Default: `["zstd", "br", "gzip"]`. Example: `["gzip"]`.
    pub codings: Option<Vec<String>>,
    /// Media types compressed; `"text/*"` a whole top type, `"*/*"` every type.
    ///
    /// Default: html, plain, css, xml, javascript, json, xhtml and svg. Example: `["text/html", "application/json"]`.
    pub types: Option<Vec<String>>,
    /// Responses whose Content-Length is below this (bytes) go out as they are.
    ///
    /// Default: `256`.
    pub min_size: Option<i64>,
    /// 1 (fastest) to 9 (smallest), one scale for every coding.
    ///
    /// Default: `1`. Example: `6`.
    pub level: Option<i64>,
    /// Remove Accept-Encoding from requests so the nodes never compress and the
    /// proxy does it (HAProxy's `compression offload`).
    ///
    /// Default: `false`. Example: `true`.
    pub offload: Option<bool>,
}

/// A site's compression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compression {
    /// The codings offered, the preferred first (a client's q-values
    /// decide; ties go to the earlier).
    pub codings: Vec<Coding>,
    /// Media types compressed (`text/*` matches a whole top-level type,
    /// `*/*` every type and responses without one).
    pub types: Vec<String>,
    /// Responses whose `Content-Length` is below this are sent as they are.
    pub min_size: u64,
    /// 1 (fastest) to 9 (smallest), the same scale for every coding.
    pub level: u32,
    /// `Accept-Encoding` is removed from requests, so the nodes never
    /// compress and the proxy does it for them (HAProxy's `compression
    /// offload`).
    pub offload: bool,
}

/// The default `types`: text formats that compress well.
pub const DEFAULT_TYPES: [&str; 10] = [
    "text/html",
    "text/plain",
    "text/css",
    "text/xml",
    "text/javascript",
    "application/javascript",
    "application/json",
    "application/xml",
    "application/xhtml+xml",
    "image/svg+xml",
];

/// The default `codings`, in this order (docs/benchmarks.md,
/// "Compression").
pub const DEFAULT_CODINGS: [Coding; 3] = [Coding::Zstd, Coding::Brotli, Coding::Gzip];

pub const DEFAULT_LEVEL: u32 = 1;

pub(super) fn validate(c: &mut ConfigCheck, key: &str, raw: RawCompression) -> Compression {
    let mut codings = Vec::new();
    match raw.codings {
        None => codings.extend(DEFAULT_CODINGS),
        Some(list) => {
            for (i, name) in list.iter().enumerate() {
                match Coding::parse(name) {
                    Some(cd) if codings.contains(&cd) => c.add(
                        format!("{key}.codings[{i}]"),
                        format!("`{name}` is listed twice"),
                    ),
                    Some(cd) => codings.push(cd),
                    None => c.add(
                        format!("{key}.codings[{i}]"),
                        format!("`{name}` is not a coding (expected {})", Coding::ACCEPTED),
                    ),
                }
            }
            if list.is_empty() {
                c.add(
                    format!("{key}.codings"),
                    "empty (expected at least one of `zstd`, `br`, `gzip`; remove [site.compression] to compress nothing)",
                );
            }
        }
    }
    let types = match raw.types {
        None => DEFAULT_TYPES.iter().map(|t| t.to_string()).collect(),
        Some(list) => {
            for (i, t) in list.iter().enumerate() {
                if !media_type(t) {
                    c.add(
                        format!("{key}.types[{i}]"),
                        format!("`{t}` is not a media type (expected `type/subtype` or `type/*`, without parameters)"),
                    );
                }
            }
            list.into_iter().map(|t| t.to_ascii_lowercase()).collect()
        }
    };
    Compression {
        codings,
        types,
        min_size: c.int(&format!("{key}.min_size"), raw.min_size, 256, 0, 1 << 30),
        level: c.int(
            &format!("{key}.level"),
            raw.level,
            u64::from(DEFAULT_LEVEL),
            1,
            9,
        ) as u32,
        offload: raw.offload.unwrap_or(false),
    }
}

/// `type/subtype` or `type/*`: tokens of RFC 9110 section 5.6.2.
fn media_type(t: &str) -> bool {
    let token = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
    };
    if t == "*/*" {
        return true;
    }
    match t.split_once('/') {
        Some((ty, sub)) => token(ty) && ty != "*" && (sub == "*" || token(sub)),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(raw: RawCompression) -> (Compression, Vec<String>) {
        let mut c = ConfigCheck::new(std::path::Path::new("test.toml"));
        let conf = validate(&mut c, "site[0].compression", raw);
        let problems = match c.finish(()) {
            Ok(()) => Vec::new(),
            Err(e) => e
                .problems
                .iter()
                .map(|p| format!("{}: {}", p.key, p.message))
                .collect(),
        };
        (conf, problems)
    }

    #[test]
    fn defaults() {
        let (conf, problems) = check(RawCompression::default());
        assert!(problems.is_empty());
        assert_eq!(conf.codings, DEFAULT_CODINGS);
        assert_eq!(conf.min_size, 256);
        assert_eq!(conf.level, DEFAULT_LEVEL);
        assert!(conf.types.iter().any(|t| t == "text/html"));
    }

    #[test]
    fn bad_values_name_their_key() {
        let (_, problems) = check(RawCompression {
            codings: Some(vec!["gzip".into(), "deflate".into(), "gzip".into()]),
            types: Some(vec!["text/html".into(), "html".into(), "*/html".into()]),
            level: Some(12),
            ..Default::default()
        });
        let text = problems.join("\n");
        assert!(
            text.contains("site[0].compression.codings[1]: `deflate` is not a coding"),
            "{text}"
        );
        assert!(
            text.contains("site[0].compression.codings[2]: `gzip` is listed twice"),
            "{text}"
        );
        assert!(text.contains("site[0].compression.types[1]"), "{text}");
        assert!(text.contains("site[0].compression.types[2]"), "{text}");
        assert!(text.contains("site[0].compression.level"), "{text}");
    }
}
