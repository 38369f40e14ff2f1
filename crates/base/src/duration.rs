//! Human-readable durations in config files: `250ms`, `2s`, `1m`, `1.5s`, `500us`.

use std::time::Duration;

/// Parses a duration such as `250ms`, `2s`, `1.5s`, `3m`, `1h`, `500us`.
///
/// Returns a message naming what would be accepted when the text is not a
/// duration; callers add the file and key.
pub fn parse(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("`{text}` is not a duration (expected e.g. 250ms, 2s, 1m)"))?;
    let scale = match unit.trim() {
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        "" => {
            return Err(format!(
                "`{text}` has no unit (expected e.g. 250ms, 2s, 1m)"
            ))
        }
        u => {
            return Err(format!(
                "`{text}`: unknown unit `{u}` (expected ns, us, ms, s, m or h)"
            ))
        }
    };
    let secs = value * scale;
    if !secs.is_finite() || secs > 1e9 {
        return Err(format!("`{text}` is out of range"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Parses a duration that must lie within `min..=max`; the message of an
/// out-of-range value names the accepted range. Shared by every config
/// validator (proxy, sidecar, testbed).
pub fn parse_within(text: &str, min: Duration, max: Duration) -> Result<Duration, String> {
    let d = parse(text)?;
    if d < min || d > max {
        return Err(format!(
            "`{text}` is out of range (accepted: {} to {})",
            format(min),
            format(max)
        ));
    }
    Ok(d)
}

/// Formats a duration the way configs write it (for messages and /status).
pub fn format(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns % 1_000_000_000 == 0 {
        format!("{}s", ns / 1_000_000_000)
    } else if ns % 1_000_000 == 0 {
        format!("{}ms", ns / 1_000_000)
    } else if ns % 1_000 == 0 {
        format!("{}us", ns / 1_000)
    } else {
        format!("{ns}ns")
    }
}

/// Serde adapter: `#[serde(with = "crate::duration::serde_text")]`.
pub mod serde_text {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let s = String::deserialize(d)?;
        super::parse(&s).map_err(serde::de::Error::custom)
    }

    pub fn serialize<S: Serializer>(v: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::format(*v))
    }
}

/// Serde adapter for `Option<Duration>`.
pub mod serde_opt {
    use serde::{Deserialize, Deserializer};
    use std::time::Duration;

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        let s: Option<String> = Option::deserialize(d)?;
        s.map(|s| super::parse(&s).map_err(serde::de::Error::custom))
            .transpose()
    }
}

#[cfg(test)]
mod tests;
