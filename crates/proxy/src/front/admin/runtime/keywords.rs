//! The runtime commands' keywords: the words that name each command, its
//! usage line, and the level it needs. `help` and the answer to an unknown
//! command are printed from this table in HAProxy 2.6's layout (two
//! spaces, the usage padded to 40 columns, `: `, the description; the
//! matches for an unknown command, then `help`, `prompt` and `quit`).

use crate::config::Level;

/// One command of the table.
pub struct Keyword {
    pub words: &'static [&'static str],
    pub usage: &'static str,
    pub help: &'static str,
    /// The level a session needs to run it.
    pub level: Level,
}

const fn kw(
    words: &'static [&'static str],
    usage: &'static str,
    help: &'static str,
    level: Level,
) -> Keyword {
    Keyword {
        words,
        usage,
        help,
        level,
    }
}

use Level::{Admin, Operator, User};

/// Every command but `help`, `prompt` and `quit` (always listed last, as
/// HAProxy does), in HAProxy's alphabetical order.
pub const KEYWORDS: &[Keyword] = &[
    kw(
        &["acme", "renew"],
        "acme renew <certfile>",
        "renew a certificate using the ACME protocol",
        Admin,
    ),
    kw(
        &["acme", "status"],
        "acme status",
        "show status of certificates configured with ACME",
        Admin,
    ),
    kw(
        &["add", "map"],
        "add map [@<ver>] <map> <key> <val>",
        "add a map entry",
        Operator,
    ),
    kw(
        &["clear", "map"],
        "clear map [@<ver>] <map>",
        "clear the contents of this map",
        Operator,
    ),
    kw(
        &["clear", "table"],
        "clear table <table> [<filter>]*",
        "remove an entry from a table (filter: data/key)",
        Operator,
    ),
    kw(
        &["del", "map"],
        "del map <map> [<key>|#<ref>]",
        "delete map entries matching <key>",
        Operator,
    ),
    kw(
        &["disable", "server"],
        "disable server (DEPRECATED)",
        "disable a server for maintenance (use 'set server' instead)",
        Admin,
    ),
    kw(
        &["enable", "server"],
        "enable server  (DEPRECATED)",
        "enable a disabled server (use 'set server' instead)",
        Admin,
    ),
    kw(
        &["get", "weight"],
        "get weight <bk>/<srv>",
        "report a server's current weight",
        User,
    ),
    kw(
        &["move", "node"],
        "move node <node> site <site>|idle",
        "move a node to a site through the reconfiguration agent",
        Admin,
    ),
    kw(
        &["release", "node"],
        "release node <node>",
        "lift a moved node's pin: the reconfiguration agents may move it again",
        Admin,
    ),
    kw(
        &["operator"],
        "operator",
        "lower the level of the current CLI session to operator",
        Operator,
    ),
    kw(
        &["set", "map"],
        "set map <map> [<key>|#<ref>] <value>",
        "modify a map entry",
        Operator,
    ),
    kw(
        &["set", "node"],
        "set node <node> state|weight <value>",
        "change a node's state (ready|drain|maint) or weight (N or N%)",
        Admin,
    ),
    kw(
        &["set", "server"],
        "set server <bk>/<srv> [opts]",
        "change a server's state, weight or address",
        Admin,
    ),
    kw(
        &["set", "weight"],
        "set weight <bk>/<srv>  (DEPRECATED)",
        "change a server's weight (use 'set server' instead)",
        Admin,
    ),
    kw(
        &["show", "backend"],
        "show backend",
        "list backends in the current running config",
        User,
    ),
    kw(
        &["show", "cli", "level"],
        "show cli level",
        "display the level of the current CLI session",
        User,
    ),
    kw(
        &["show", "info"],
        "show info [desc|json|typed|float]*",
        "report information about the running process",
        User,
    ),
    kw(
        &["show", "map"],
        "show map [@<ver>] [<map>]",
        "report available maps or dump a map's contents",
        Operator,
    ),
    kw(
        &["show", "servers", "state"],
        "show servers state [<backend>]",
        "dump volatile server information (all or for a single backend)",
        User,
    ),
    kw(
        &["show", "stat"],
        "show stat [desc|json|no-maint|typed|up]*",
        "report counters for each proxy and server",
        User,
    ),
    kw(
        &["show", "table"],
        "show table <table> [<filter>]*",
        "report table usage stats or dump this table's contents (filter: data/key)",
        Operator,
    ),
    kw(
        &["user"],
        "user",
        "lower the level of the current CLI session to user",
        User,
    ),
];

const TRAILER: &[(&str, &str)] = &[
    ("help [<command>]", "list matching or all commands"),
    ("prompt", "toggle interactive mode with prompt"),
    ("quit", "disconnect"),
];

/// The table entry naming `words` (its words are their first ones).
pub fn lookup(words: &[&str]) -> Option<&'static Keyword> {
    KEYWORDS
        .iter()
        .filter(|k| words.len() >= k.words.len() && words[..k.words.len()] == *k.words)
        .max_by_key(|k| k.words.len())
}

fn line(out: &mut String, usage: &str, help: &str) {
    out.push_str(&format!("  {usage:<40}: {help}\n"));
}

/// HAProxy's answer to `help [words]` (`help == true`) or to an unknown
/// command `words`: the commands sharing the most leading words with
/// `words`, the five nearest when there are more, or all of them.
pub fn usage(words: &[&str], help: bool) -> String {
    let shared = |k: &Keyword| {
        k.words
            .iter()
            .zip(words)
            .take_while(|(a, b)| a == b)
            .count()
    };
    let length = KEYWORDS.iter().map(shared).max().unwrap_or(0);
    let mut out = String::from(if help {
        "The following commands are valid at this level:\n"
    } else if length == 0 && words.is_empty() {
        "Unknown command. Please enter one of the following commands only:\n"
    } else {
        "Unknown command, but maybe one of the following ones is a better match:\n"
    });
    let matches: Vec<&Keyword> = match words.get(length) {
        Some(next) => {
            let mut near: Vec<(usize, &Keyword)> = KEYWORDS
                .iter()
                .filter(|k| shared(k) == length && k.words.len() > length)
                .map(|k| (distance(k.words[length], next), k))
                .collect();
            near.sort_by_key(|(d, _)| *d);
            near.into_iter().take(5).map(|(_, k)| k).collect()
        }
        None => KEYWORDS.iter().filter(|k| shared(k) == length).collect(),
    };
    for k in matches {
        line(&mut out, k.usage, k.help);
    }
    for (usage, help) in TRAILER {
        line(&mut out, usage, help);
    }
    out
}

/// Edit distance between two words (for the nearest commands).
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_usage_fits_haproxy_columns() {
        for k in KEYWORDS {
            assert!(k.usage.len() <= 40, "{}", k.usage);
            assert!(k.usage.starts_with(&k.words.join(" ")), "{}", k.usage);
        }
    }

    #[test]
    fn unknown_commands_get_the_nearest_ones() {
        let text = usage(&["show", "stats"], false);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "Unknown command, but maybe one of the following ones is a better match:"
        );
        assert!(lines[1].starts_with("  show stat "), "{text}");
        assert_eq!(lines.len(), 1 + 5 + TRAILER.len(), "{text}");
        assert!(usage(&[], false).starts_with("Unknown command. Please enter"));
        assert_eq!(
            lookup(&["show", "servers", "state", "www"]).unwrap().words,
            ["show", "servers", "state"]
        );
        assert!(lookup(&["show"]).is_none());
    }
}
