//! The one rule for the names of nodes, sites, tables and maps, in every
//! config file (proxy, sidecar, testbed) and on the admin API: 1 to 64
//! characters from `a-z A-Z 0-9 - _ .`, so a name needs no quoting in a
//! URL query, a log line or HAProxy's `SITE/NODE`.

/// Longest name.
pub const MAX_LEN: usize = 64;

/// A character a name may hold.
pub fn is_name_char(ch: char) -> bool {
    ch.is_ascii_alphanumeric() || matches!(ch, '-' | '_' | '.')
}

/// Whether `name` follows the rule.
pub fn is_valid(name: &str) -> bool {
    !name.is_empty() && name.len() <= MAX_LEN && name.chars().all(is_name_char)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_one_rule() {
        for ok in ["n1", "shop-eu_2.a", &"x".repeat(MAX_LEN)] {
            assert!(is_valid(ok), "{ok}");
        }
        for bad in ["", "a b", "a/b", "é", &"x".repeat(MAX_LEN + 1)] {
            assert!(!is_valid(bad), "{bad}");
        }
    }
}
