//! Pattern sets and HAProxy's string match methods (`-m str`, `beg`,
//! `end`, `sub`, `dom`, `dir`, `reg`, `found`), integer and IP matching,
//! compiled once from the configured values.
//!
//! Case-insensitive matching (`-i`) is ASCII, as HAProxy's `strncasecmp`.
//! Exact names are looked up in a hash set, so a list of thousands costs
//! one lookup; nothing here allocates while matching (a sample longer than
//! [`STACK_LOWER`] bytes matched `-i` against a set is the one exception).

use std::collections::HashSet;
use std::net::IpAddr;

use regex::{Regex, RegexBuilder};

/// The match method of a test (HAProxy's `-m`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatchKind {
    /// `-m str`: the whole sample equals a value.
    Exact,
    /// `-m beg`: the sample starts with a value.
    Prefix,
    /// `-m end`: the sample ends with a value.
    Suffix,
    /// `-m sub`: the sample contains a value.
    Substring,
    /// `-m dom`: a value is in the sample between `/ ? . :` delimiters
    /// (or its ends); delimiters around the value are ignored.
    Domain,
    /// `-m dir`: a value is in the sample between `/ ?` delimiters (or
    /// its ends); slashes around the value are ignored.
    Dir,
    /// `-m reg`: a value (a regular expression) matches somewhere.
    Regex,
    /// `-m found`: the sample exists.
    Found,
    /// `-m int`: integers, `N`, `A:B` ranges or `eq|lt|le|gt|ge N`.
    Int,
    /// `-m ip`: IP networks.
    Ip,
    /// `-m bool`: the sample is true.
    Bool,
}

impl MatchKind {
    pub const ACCEPTED: &'static str = "\"exact\", \"prefix\", \"suffix\", \"substring\", \"domain\", \"dir\", \"regex\", \"found\", \"int\", \"ip\" or \"bool\"";

    pub fn parse(s: &str) -> Option<MatchKind> {
        Some(match s {
            "exact" => MatchKind::Exact,
            "prefix" => MatchKind::Prefix,
            "suffix" => MatchKind::Suffix,
            "substring" => MatchKind::Substring,
            "domain" => MatchKind::Domain,
            "dir" => MatchKind::Dir,
            "regex" => MatchKind::Regex,
            "found" => MatchKind::Found,
            "int" => MatchKind::Int,
            "ip" => MatchKind::Ip,
            "bool" => MatchKind::Bool,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            MatchKind::Exact => "exact",
            MatchKind::Prefix => "prefix",
            MatchKind::Suffix => "suffix",
            MatchKind::Substring => "substring",
            MatchKind::Domain => "domain",
            MatchKind::Dir => "dir",
            MatchKind::Regex => "regex",
            MatchKind::Found => "found",
            MatchKind::Int => "int",
            MatchKind::Ip => "ip",
            MatchKind::Bool => "bool",
        }
    }

    /// Whether the kind compares text samples.
    pub fn is_text(self) -> bool {
        !matches!(
            self,
            MatchKind::Found | MatchKind::Int | MatchKind::Ip | MatchKind::Bool
        )
    }
}

/// Longest sample lower-cased on the stack for a case-insensitive lookup.
pub const STACK_LOWER: usize = 256;

/// Compiled values of one test.
#[derive(Debug, Clone)]
pub enum Patterns {
    /// Exact values (lower-cased when case-insensitive).
    Set {
        values: HashSet<String>,
        icase: bool,
    },
    /// Prefix, suffix, substring, domain or dir values, in order.
    List {
        kind: MatchKind,
        values: Vec<String>,
        icase: bool,
    },
    Regex(Vec<Regex>),
    Int(Vec<IntRange>),
    Ip(Vec<Network>),
    /// `found` and `bool`: no values.
    None,
}

/// An inclusive integer range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntRange {
    pub min: i64,
    pub max: i64,
}

/// An IP network as HAProxy's `src` patterns take it: host bits set after
/// the prefix are ignored (`10.0.0.1/8` is `10.0.0.0/8`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Network {
    addr: u128,
    v4: bool,
    prefix: u8,
}

impl Network {
    /// `address`, `address/prefix` or (IPv4) `address/netmask`.
    pub fn parse(text: &str) -> Result<Network, String> {
        let (a, p) = match text.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (text, None),
        };
        let ip: IpAddr = a
            .parse()
            .map_err(|_| format!("`{a}` is not an IP address"))?;
        let (v4, addr, max) = match ip {
            IpAddr::V4(v) => (true, u128::from(u32::from(v)), 32u8),
            IpAddr::V6(v) => (false, u128::from(v), 128u8),
        };
        let prefix = match p {
            None => max,
            Some(p) => match p.parse::<u8>() {
                Ok(n) if n <= max => n,
                _ => match (v4, p.parse::<std::net::Ipv4Addr>()) {
                    (true, Ok(mask))
                        if u32::from(mask).leading_ones() == u32::from(mask).count_ones() =>
                    {
                        u32::from(mask).leading_ones() as u8
                    }
                    _ => return Err(format!("`/{p}` is not a prefix length from 0 to {max}")),
                },
            },
        };
        Ok(Network {
            addr: addr & mask(v4, prefix),
            v4,
            prefix,
        })
    }

    /// Whether `ip` is in the network (an IPv4-mapped IPv6 address counts
    /// as its IPv4 address).
    pub fn contains(&self, ip: IpAddr) -> bool {
        match ip.to_canonical() {
            IpAddr::V4(a) if self.v4 => {
                u128::from(u32::from(a)) & mask(true, self.prefix) == self.addr
            }
            IpAddr::V6(a) if !self.v4 => u128::from(a) & mask(false, self.prefix) == self.addr,
            _ => false,
        }
    }
}

fn mask(v4: bool, prefix: u8) -> u128 {
    let bits: u32 = if v4 { 32 } else { 128 };
    let all: u128 = if v4 { u128::from(u32::MAX) } else { u128::MAX };
    all.checked_shl(bits - u32::from(prefix))
        .map_or(0, |m| m & all)
}

impl IntRange {
    /// `N`, `A:B`, `:B`, `A:`, or an operator and a number
    /// (`eq`, `lt`, `le`, `gt`, `ge`), as HAProxy's integer patterns.
    pub fn parse(op: Option<&str>, text: &str) -> Result<IntRange, String> {
        let num = |t: &str| {
            t.parse::<i64>()
                .map_err(|_| format!("`{t}` is not an integer"))
        };
        if let Some(op) = op {
            let n = num(text)?;
            return Ok(match op {
                "eq" => IntRange { min: n, max: n },
                "lt" => IntRange {
                    min: i64::MIN,
                    max: n.saturating_sub(1),
                },
                "le" => IntRange {
                    min: i64::MIN,
                    max: n,
                },
                "gt" => IntRange {
                    min: n.saturating_add(1),
                    max: i64::MAX,
                },
                "ge" => IntRange {
                    min: n,
                    max: i64::MAX,
                },
                _ => {
                    return Err(format!(
                        "`{op}` is not an operator (expected eq, lt, le, gt or ge)"
                    ))
                }
            });
        }
        match text.split_once(':') {
            None => num(text).map(|n| IntRange { min: n, max: n }),
            Some((a, b)) => Ok(IntRange {
                min: if a.is_empty() { i64::MIN } else { num(a)? },
                max: if b.is_empty() { i64::MAX } else { num(b)? },
            }),
        }
    }
}

impl Patterns {
    /// Compiles `values` for `kind`; the error names the bad value.
    pub fn compile(kind: MatchKind, values: &[String], icase: bool) -> Result<Patterns, String> {
        Ok(match kind {
            MatchKind::Exact => Patterns::Set {
                values: values
                    .iter()
                    .map(|v| {
                        if icase {
                            v.to_ascii_lowercase()
                        } else {
                            v.clone()
                        }
                    })
                    .collect(),
                icase,
            },
            MatchKind::Prefix | MatchKind::Suffix | MatchKind::Substring => Patterns::List {
                kind,
                values: values.to_vec(),
                icase,
            },
            MatchKind::Domain | MatchKind::Dir => Patterns::List {
                kind,
                values: values
                    .iter()
                    .map(|v| v.trim_matches(|c| is_delimiter(kind, c as u8)).to_string())
                    .collect(),
                icase,
            },
            MatchKind::Regex => Patterns::Regex(
                values
                    .iter()
                    .map(|v| {
                        RegexBuilder::new(v)
                            .case_insensitive(icase)
                            .size_limit(1 << 20)
                            .build()
                            .map_err(|e| {
                                format!(
                                    "`{v}` is not a regular expression: {}",
                                    first_line(&e.to_string())
                                )
                            })
                    })
                    .collect::<Result<_, _>>()?,
            ),
            MatchKind::Int => {
                let mut out = Vec::new();
                let mut op = None;
                for v in values {
                    if matches!(v.as_str(), "eq" | "lt" | "le" | "gt" | "ge") {
                        op = Some(v.as_str());
                        continue;
                    }
                    out.push(IntRange::parse(op.take(), v)?);
                }
                Patterns::Int(out)
            }
            MatchKind::Ip => Patterns::Ip(
                values
                    .iter()
                    .map(|v| Network::parse(v.trim()))
                    .collect::<Result<_, _>>()?,
            ),
            MatchKind::Found | MatchKind::Bool => Patterns::None,
        })
    }

    /// Whether the text `sample` matches one of the values.
    pub fn text(&self, sample: &str) -> bool {
        match self {
            Patterns::Set { values, icase } => {
                if !icase {
                    return values.contains(sample);
                }
                let mut buf = [0u8; STACK_LOWER];
                match buf.get_mut(..sample.len()) {
                    Some(dst) => {
                        dst.copy_from_slice(sample.as_bytes());
                        dst.make_ascii_lowercase();
                        std::str::from_utf8(dst).is_ok_and(|s| values.contains(s))
                    }
                    None => values.contains(&sample.to_ascii_lowercase()),
                }
            }
            Patterns::List {
                kind,
                values,
                icase,
            } => values.iter().any(|v| text_match(*kind, *icase, sample, v)),
            Patterns::Regex(res) => res.iter().any(|r| r.is_match(sample)),
            Patterns::Int(ranges) => sample
                .trim()
                .parse::<i64>()
                .is_ok_and(|n| ranges.iter().any(|r| r.min <= n && n <= r.max)),
            Patterns::Ip(nets) => sample
                .parse::<IpAddr>()
                .is_ok_and(|ip| nets.iter().any(|n| n.contains(ip))),
            Patterns::None => true,
        }
    }

    /// Whether the integer `n` is in one of the ranges.
    pub fn int(&self, n: i64) -> bool {
        match self {
            Patterns::Int(ranges) => ranges.iter().any(|r| r.min <= n && n <= r.max),
            _ => false,
        }
    }

    /// Whether `ip` is in one of the networks.
    pub fn ip(&self, ip: IpAddr) -> bool {
        match self {
            Patterns::Ip(nets) => nets.iter().any(|n| n.contains(ip)),
            _ => false,
        }
    }
}

fn first_line(s: &str) -> String {
    s.lines()
        .rfind(|l| !l.trim().is_empty())
        .unwrap_or(s)
        .trim()
        .to_string()
}

/// One text match of `sample` against `value` (already compiled).
pub fn text_match(kind: MatchKind, icase: bool, sample: &str, value: &str) -> bool {
    let (s, v) = (sample.as_bytes(), value.as_bytes());
    let eq = |a: &[u8], b: &[u8]| {
        if icase {
            a.eq_ignore_ascii_case(b)
        } else {
            a == b
        }
    };
    match kind {
        MatchKind::Exact => eq(s, v),
        MatchKind::Prefix => s.len() >= v.len() && eq(&s[..v.len()], v),
        MatchKind::Suffix => s.len() >= v.len() && eq(&s[s.len() - v.len()..], v),
        MatchKind::Substring => {
            v.is_empty() || (s.len() >= v.len() && s.windows(v.len()).any(|w| eq(w, v)))
        }
        MatchKind::Domain | MatchKind::Dir => word_match(kind, icase, s, v),
        _ => false,
    }
}

/// The delimiters of `-m dom` (`/ ? . :`) and `-m dir` (`/ ?`).
fn is_delimiter(kind: MatchKind, c: u8) -> bool {
    match kind {
        MatchKind::Domain => matches!(c, b'/' | b'?' | b'.' | b':'),
        _ => matches!(c, b'/' | b'?'),
    }
}

/// HAProxy's word match: `value` occurs in `s` starting at the start or
/// after a delimiter, and ending at the end or before a delimiter.
fn word_match(kind: MatchKind, icase: bool, s: &[u8], v: &[u8]) -> bool {
    if v.len() > s.len() {
        return false;
    }
    let mut may_match = true;
    for at in 0..=s.len() - v.len() {
        if at < s.len() && is_delimiter(kind, s[at]) {
            may_match = true;
            continue;
        }
        if !may_match {
            continue;
        }
        let w = &s[at..at + v.len()];
        let same = if icase {
            w.eq_ignore_ascii_case(v)
        } else {
            w == v
        };
        let end = at + v.len();
        if same && (end == s.len() || is_delimiter(kind, s[end])) {
            return true;
        }
        may_match = false;
    }
    false
}
