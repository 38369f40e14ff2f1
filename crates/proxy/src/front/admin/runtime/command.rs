//! The runtime commands as one type: [`Command`] is what a session can
//! run, [`COMMANDS`] holds, for each command, the words that name it, its
//! usage line, the level it needs and how its arguments parse into a
//! [`Command`]; an answer is an [`Outcome`]. `help`, the answer to an
//! unknown command and `rdmalb ctl --help` are printed from the table in
//! HAProxy 2.6's layout (two spaces, the usage padded to 40 columns, `: `,
//! the description; the matches for an unknown command, then `help`,
//! `prompt` and `quit`).
//!
//! Adding a command: a variant here with its row in [`COMMANDS`], and its
//! arm in [`super::execute`] (the compiler asks for it); CONTRIBUTING.md.

use std::time::Duration;

use http::StatusCode;

use crate::config::{Level, StatsSocket};

/// Why a command failed: the status `POST /runtime` answers (400 bad
/// words, 403 level, 404 unknown name, 409/502/503 a move) and the text
/// both doors print, as HAProxy words it.
pub type Refusal = (StatusCode, String);

/// What a command answers: its text (empty for a change that succeeded;
/// each door follows it with an empty line), or why it failed.
pub type Outcome = Result<String, Refusal>;

/// A 400 with `message`.
pub fn bad(message: impl Into<String>) -> Refusal {
    (StatusCode::BAD_REQUEST, message.into())
}

/// One runtime command, its arguments read. Node names are `NODE` or
/// HAProxy's `SITE/NODE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command<'a> {
    /// `acme renew <certificate>`.
    AcmeRenew { certificate: &'a str },
    /// `acme status`.
    AcmeStatus,
    /// `add map`, `set map`, `del map`, `clear map`.
    EditMap {
        map: &'a str,
        edit: crate::rules::MapEdit,
    },
    /// `show table [TABLE [filters]]`.
    ShowTable {
        table: Option<&'a str>,
        filters: &'a [&'a str],
    },
    /// `clear table TABLE [filters]`.
    ClearTable {
        table: &'a str,
        filters: &'a [&'a str],
    },
    /// `set node|server NODE state WORD`, `enable server`, `disable server`.
    SetState { node: &'a str, state: &'a str },
    /// `set node|server NODE weight N|N%`, `set weight NODE N|N%`.
    SetWeight { node: &'a str, weight: &'a str },
    /// `set server NODE addr IP [port PORT]`.
    SetAddr { node: &'a str, args: &'a [&'a str] },
    /// `set server NODE <anything else>`: the node is looked up first,
    /// then the usage is the answer (HAProxy's order).
    SetServerUsage { node: &'a str },
    /// `get weight NODE`.
    GetWeight { node: &'a str },
    /// `move node NODE site SITE`.
    MoveNode { node: &'a str, site: &'a str },
    /// `release node NODE`.
    ReleaseNode { node: &'a str },
    /// `show backend`.
    ShowBackend,
    /// `show cli level`.
    ShowCliLevel,
    /// `show info [typed|json]…`.
    ShowInfo { args: &'a [&'a str] },
    /// `show map [MAP]`.
    ShowMap { map: Option<&'a str> },
    /// `show sess`.
    ShowSess,
    /// `show servers state [BACKEND]`.
    ShowServersState { backend: Option<&'a str> },
    /// `show stat [PROXY TYPE SID] [typed|json|up|no-maint]…`.
    ShowStat { args: &'a [&'a str] },
    /// `user`, `operator`: lower the session's level.
    Lower(Level),
    /// `help [WORDS]`.
    Help { words: &'a [&'a str] },
    /// `prompt`: toggle interactive mode.
    Prompt,
    /// `quit`: end the session.
    Quit,
    /// `set timeout cli SECONDS`: the session's idle timeout.
    SetTimeout(Duration),
}

/// How a command's words after its name are wrong.
pub enum Unparsed {
    /// Not a form of the command: HAProxy's usage answer for the words.
    Usage,
    /// A message of the command's own.
    Says(String),
}

/// Reads the words after a command's name.
pub type Parse = for<'a> fn(&'a [&'a str]) -> Result<Command<'a>, Unparsed>;

/// Where `help` lists a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listed {
    /// In the alphabetical list.
    Sorted,
    /// After it: `help`, `prompt`, `quit`.
    Last,
    /// Not listed (as HAProxy does not list `set timeout`).
    No,
}

/// One command of the table.
pub struct Keyword {
    pub words: &'static [&'static str],
    pub usage: &'static str,
    pub help: &'static str,
    /// The level a session needs to run it.
    pub level: Level,
    pub listed: Listed,
    pub parse: Parse,
}

use Level::{Admin, Operator, User};
use Unparsed::{Says, Usage};

const fn kw(
    words: &'static [&'static str],
    usage: &'static str,
    help: &'static str,
    level: Level,
    parse: Parse,
) -> Keyword {
    Keyword {
        words,
        usage,
        help,
        level,
        listed: Listed::Sorted,
        parse,
    }
}

const fn last(keyword: Keyword, listed: Listed) -> Keyword {
    Keyword { listed, ..keyword }
}

/// A map command's arguments: `MAP KEY VALUE…`, `MAP KEY` or `MAP`.
fn map_edit<'a>(
    rest: &'a [&'a str],
    words: &str,
    edit: impl Fn(&'a [&'a str]) -> Option<(&'a str, crate::rules::MapEdit)>,
) -> Result<Command<'a>, Unparsed> {
    edit(rest)
        .map(|(map, edit)| Command::EditMap { map, edit })
        .ok_or_else(|| Says(format!("wrong arguments to `{words}` (try `help`)")))
}

/// `set server NODE …`.
fn set_server<'a>(rest: &'a [&'a str]) -> Result<Command<'a>, Unparsed> {
    match rest {
        [node, "state", state] => Ok(Command::SetState { node, state }),
        [node, "weight", weight] => Ok(Command::SetWeight { node, weight }),
        [node, "addr", args @ ..] => Ok(Command::SetAddr { node, args }),
        [node, ..] => Ok(Command::SetServerUsage { node }),
        [] => Err(Usage),
    }
}

/// `set timeout cli SECONDS`.
fn set_timeout<'a>(rest: &'a [&'a str]) -> Result<Command<'a>, Unparsed> {
    match rest {
        ["cli", s] => s
            .parse::<u64>()
            .ok()
            .map(Duration::from_secs)
            // As long as a `[[stats_socket]] timeout` may be.
            .filter(|d| (Duration::from_secs(1)..=StatsSocket::MAX_TIMEOUT).contains(d))
            .map(Command::SetTimeout)
            .ok_or("Invalid timeout value."),
        ["cli"] => Err("Expects an integer value."),
        _ => Err("'set timeout' only supports 'cli'."),
    }
    .map_err(|m| Says(m.to_string()))
}

/// Every command. The `Sorted` ones are in HAProxy's alphabetical order;
/// the `Last` ones are listed after them in this order.
pub const COMMANDS: &[Keyword] = &[
    kw(
        &["acme", "renew"],
        "acme renew <certfile>",
        "renew a certificate using the ACME protocol",
        Admin,
        |rest| match rest {
            [certificate] => Ok(Command::AcmeRenew { certificate }),
            _ => Err(Usage),
        },
    ),
    kw(
        &["acme", "status"],
        "acme status",
        "show status of certificates configured with ACME",
        Admin,
        |rest| match rest {
            [] => Ok(Command::AcmeStatus),
            _ => Err(Usage),
        },
    ),
    kw(
        &["add", "map"],
        "add map [@<ver>] <map> <key> <val>",
        "add a map entry",
        Operator,
        |rest| {
            map_edit(rest, "add map", |r| match r {
                [map, key, value @ ..] if !value.is_empty() => Some((
                    *map,
                    crate::rules::MapEdit::Add(key.to_string(), value.join(" ")),
                )),
                _ => None,
            })
        },
    ),
    kw(
        &["clear", "map"],
        "clear map [@<ver>] <map>",
        "clear the contents of this map",
        Operator,
        |rest| {
            map_edit(rest, "clear map", |r| match r {
                [map] => Some((*map, crate::rules::MapEdit::Clear)),
                _ => None,
            })
        },
    ),
    kw(
        &["clear", "table"],
        "clear table <table> [<filter>]*",
        "remove an entry from a table (filter: data/key)",
        Operator,
        |rest| match rest {
            [table, filters @ ..] => Ok(Command::ClearTable { table, filters }),
            [] => Err(Says("table name expected".into())),
        },
    ),
    kw(
        &["del", "map"],
        "del map <map> [<key>|#<ref>]",
        "delete map entries matching <key>",
        Operator,
        |rest| {
            map_edit(rest, "del map", |r| match r {
                [map, key] => Some((*map, crate::rules::MapEdit::Del(key.to_string()))),
                _ => None,
            })
        },
    ),
    kw(
        &["disable", "server"],
        "disable server (DEPRECATED)",
        "disable a server for maintenance (use 'set server' instead)",
        Admin,
        |rest| match rest {
            [node] => Ok(Command::SetState {
                node,
                state: "maint",
            }),
            _ => Err(Usage),
        },
    ),
    kw(
        &["enable", "server"],
        "enable server  (DEPRECATED)",
        "enable a disabled server (use 'set server' instead)",
        Admin,
        |rest| match rest {
            [node] => Ok(Command::SetState {
                node,
                state: "ready",
            }),
            _ => Err(Usage),
        },
    ),
    kw(
        &["get", "weight"],
        "get weight <bk>/<srv>",
        "report a server's current weight",
        User,
        |rest| match rest {
            [node] => Ok(Command::GetWeight { node }),
            _ => Err(Usage),
        },
    ),
    kw(
        &["move", "node"],
        "move node <node> site <site>|idle",
        "move a node to a site through the reconfiguration agent",
        Admin,
        |rest| match rest {
            [node, "site", site] => Ok(Command::MoveNode { node, site }),
            _ => Err(Usage),
        },
    ),
    kw(
        &["release", "node"],
        "release node <node>",
        "lift a moved node's pin: the reconfiguration agents may move it again",
        Admin,
        |rest| match rest {
            [node] => Ok(Command::ReleaseNode { node }),
            _ => Err(Usage),
        },
    ),
    kw(
        &["operator"],
        "operator",
        "lower the level of the current CLI session to operator",
        Operator,
        |rest| match rest {
            [] => Ok(Command::Lower(Operator)),
            _ => Err(Usage),
        },
    ),
    kw(
        &["set", "map"],
        "set map <map> [<key>|#<ref>] <value>",
        "modify a map entry",
        Operator,
        |rest| {
            map_edit(rest, "set map", |r| match r {
                [map, key, value @ ..] if !value.is_empty() => Some((
                    *map,
                    crate::rules::MapEdit::Set(key.to_string(), value.join(" ")),
                )),
                _ => None,
            })
        },
    ),
    kw(
        &["set", "node"],
        "set node <node> state|weight <value>",
        "change a node's state (ready|drain|maint) or weight (N or N%)",
        Admin,
        |rest| match rest {
            [node, "state", state] => Ok(Command::SetState { node, state }),
            [node, "weight", weight] => Ok(Command::SetWeight { node, weight }),
            _ => Err(Usage),
        },
    ),
    kw(
        &["set", "server"],
        "set server <bk>/<srv> [opts]",
        "change a server's state, weight or address",
        Admin,
        set_server,
    ),
    kw(
        &["set", "weight"],
        "set weight <bk>/<srv>  (DEPRECATED)",
        "change a server's weight (use 'set server' instead)",
        Admin,
        |rest| match rest {
            [node, weight] => Ok(Command::SetWeight { node, weight }),
            _ => Err(Usage),
        },
    ),
    kw(
        &["show", "backend"],
        "show backend",
        "list backends in the current running config",
        User,
        |rest| match rest {
            [] => Ok(Command::ShowBackend),
            _ => Err(Usage),
        },
    ),
    kw(
        &["show", "cli", "level"],
        "show cli level",
        "display the level of the current CLI session",
        User,
        |rest| match rest {
            [] => Ok(Command::ShowCliLevel),
            _ => Err(Usage),
        },
    ),
    kw(
        &["show", "info"],
        "show info [desc|json|typed|float]*",
        "report information about the running process",
        User,
        |args| Ok(Command::ShowInfo { args }),
    ),
    kw(
        &["show", "map"],
        "show map [@<ver>] [<map>]",
        "report available maps or dump a map's contents",
        Operator,
        |rest| match rest {
            [] => Ok(Command::ShowMap { map: None }),
            [map] => Ok(Command::ShowMap { map: Some(map) }),
            _ => Err(Says("wrong arguments to `show map` (try `help`)".into())),
        },
    ),
    kw(
        &["show", "servers", "state"],
        "show servers state [<backend>]",
        "dump volatile server information (all or for a single backend)",
        User,
        |rest| match rest {
            [] => Ok(Command::ShowServersState { backend: None }),
            [backend] => Ok(Command::ShowServersState {
                backend: Some(backend),
            }),
            _ => Err(Usage),
        },
    ),
    kw(
        &["show", "sess"],
        "show sess",
        "report the connections and requests in flight",
        Operator,
        |rest| match rest {
            [] => Ok(Command::ShowSess),
            _ => Err(Usage),
        },
    ),
    kw(
        &["show", "stat"],
        "show stat [desc|json|no-maint|typed|up]*",
        "report counters for each proxy and server",
        User,
        |args| Ok(Command::ShowStat { args }),
    ),
    kw(
        &["show", "table"],
        "show table <table> [<filter>]*",
        "report table usage stats or dump this table's contents (filter: data/key)",
        Operator,
        |rest| {
            Ok(Command::ShowTable {
                table: rest.first().copied(),
                filters: rest.get(1..).unwrap_or_default(),
            })
        },
    ),
    kw(
        &["user"],
        "user",
        "lower the level of the current CLI session to user",
        User,
        |rest| match rest {
            [] => Ok(Command::Lower(User)),
            _ => Err(Usage),
        },
    ),
    last(
        kw(
            &["help"],
            "help [<command>]",
            "list matching or all commands",
            User,
            |words| Ok(Command::Help { words }),
        ),
        Listed::Last,
    ),
    last(
        kw(
            &["prompt"],
            "prompt",
            "toggle interactive mode with prompt",
            User,
            |rest| match rest {
                [] => Ok(Command::Prompt),
                _ => Err(Usage),
            },
        ),
        Listed::Last,
    ),
    last(
        kw(&["quit"], "quit", "disconnect", User, |rest| match rest {
            [] => Ok(Command::Quit),
            _ => Err(Usage),
        }),
        Listed::Last,
    ),
    last(
        kw(
            &["set", "timeout"],
            "set timeout cli <delay>",
            "change the timeout of the current CLI session",
            User,
            set_timeout,
        ),
        Listed::No,
    ),
];

impl<'a> Command<'a> {
    /// Reads `words` as a command run at `level`: HAProxy's usage answer
    /// (400) for words that are no command, `Permission denied` (403)
    /// when the command needs more than `level`.
    pub fn parse(words: &'a [&'a str], level: Level) -> Result<Command<'a>, Refusal> {
        let Some(keyword) = lookup(words) else {
            return Err(bad(usage(words, false)));
        };
        if keyword.level > level {
            return Err((StatusCode::FORBIDDEN, "Permission denied".into()));
        }
        (keyword.parse)(&words[keyword.words.len()..]).map_err(|why| match why {
            Usage => bad(usage(words, false)),
            Says(message) => bad(message),
        })
    }
}

/// The table entry naming `words` (its words are their first ones).
pub fn lookup(words: &[&str]) -> Option<&'static Keyword> {
    COMMANDS
        .iter()
        .filter(|k| words.len() >= k.words.len() && words[..k.words.len()] == *k.words)
        .max_by_key(|k| k.words.len())
}

fn line(out: &mut String, usage: &str, help: &str) {
    out.push_str(&format!("  {usage:<40}: {help}\n"));
}

/// The commands `help` lists in HAProxy's order, then the last ones.
fn listed(which: Listed) -> impl Iterator<Item = &'static Keyword> {
    COMMANDS.iter().filter(move |k| k.listed == which)
}

/// Every listed command, one line each, as `help` prints them (`rdmalb
/// ctl --help`).
pub fn help_text() -> String {
    usage(&[], true)
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
    let length = listed(Listed::Sorted).map(shared).max().unwrap_or(0);
    let mut out = String::from(if help {
        "The following commands are valid at this level:\n"
    } else if length == 0 && words.is_empty() {
        "Unknown command. Please enter one of the following commands only:\n"
    } else {
        "Unknown command, but maybe one of the following ones is a better match:\n"
    });
    let matches: Vec<&Keyword> = match words.get(length) {
        Some(next) => {
            let mut near: Vec<(usize, &Keyword)> = listed(Listed::Sorted)
                .filter(|k| shared(k) == length && k.words.len() > length)
                .map(|k| (distance(k.words[length], next), k))
                .collect();
            near.sort_by_key(|(d, _)| *d);
            near.into_iter().take(5).map(|(_, k)| k).collect()
        }
        None => listed(Listed::Sorted)
            .filter(|k| shared(k) == length)
            .collect(),
    };
    for k in matches {
        line(&mut out, k.usage, k.help);
    }
    for k in listed(Listed::Last) {
        line(&mut out, k.usage, k.help);
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
        for k in COMMANDS {
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
        assert_eq!(lines.len(), 1 + 5 + listed(Listed::Last).count(), "{text}");
        assert!(usage(&[], false).starts_with("Unknown command. Please enter"));
        assert_eq!(
            lookup(&["show", "servers", "state", "www"]).unwrap().words,
            ["show", "servers", "state"]
        );
        assert!(lookup(&["show"]).is_none());
    }

    #[test]
    fn haproxys_spellings_parse_to_one_command() {
        let node = |n| Command::SetState {
            node: n,
            state: "maint",
        };
        for (text, command) in [
            ("set node a state maint", node("a")),
            ("set server shop/a state maint", node("shop/a")),
            ("disable server shop/a", node("shop/a")),
            (
                "set weight shop/a 50%",
                Command::SetWeight {
                    node: "shop/a",
                    weight: "50%",
                },
            ),
            (
                "set server a weight 3",
                Command::SetWeight {
                    node: "a",
                    weight: "3",
                },
            ),
            ("set server a foo", Command::SetServerUsage { node: "a" }),
            (
                "show servers state",
                Command::ShowServersState { backend: None },
            ),
            (
                "show table t key k",
                Command::ShowTable {
                    table: Some("t"),
                    filters: &["key", "k"],
                },
            ),
            ("help show", Command::Help { words: &["show"] }),
            ("show sess", Command::ShowSess),
            (
                "set timeout cli 5",
                Command::SetTimeout(Duration::from_secs(5)),
            ),
        ] {
            let words: Vec<&str> = text.split(' ').collect();
            assert_eq!(Command::parse(&words, Admin), Ok(command), "{text}");
        }
    }

    #[test]
    fn wrong_words_and_levels_are_refused_before_running() {
        let refusal = |text: &str, level| {
            let words: Vec<&str> = text.split(' ').collect();
            Command::parse(&words, level).unwrap_err()
        };
        assert_eq!(
            refusal("set node a weight", Admin).1,
            usage(&["set", "node", "a", "weight"], false)
        );
        assert_eq!(refusal("quit now", Admin).0, StatusCode::BAD_REQUEST);
        assert_eq!(refusal("clear table", Admin).1, "table name expected");
        assert_eq!(
            refusal("add map m k", Admin).1,
            "wrong arguments to `add map` (try `help`)"
        );
        assert_eq!(
            refusal("set timeout cli 0", User).1,
            "Invalid timeout value."
        );
        assert_eq!(
            refusal("set node a state maint", Operator),
            (StatusCode::FORBIDDEN, "Permission denied".to_string())
        );
        assert_eq!(refusal("operator", User).0, StatusCode::FORBIDDEN);
        assert_eq!(refusal("show sess", User).0, StatusCode::FORBIDDEN);
        assert_eq!(
            refusal("show sess all", Operator).0,
            StatusCode::BAD_REQUEST
        );
    }

    #[test]
    fn help_lists_every_listed_command_once() {
        let text = help_text();
        for k in COMMANDS {
            let shown = text
                .matches(&format!("  {:<40}: {}\n", k.usage, k.help))
                .count();
            let expected = usize::from(k.listed != Listed::No);
            assert_eq!(shown, expected, "{}", k.usage);
        }
        let last: Vec<&str> = text.lines().rev().take(3).collect();
        assert!(last[0].starts_with("  quit"), "{text}");
        assert!(last[2].starts_with("  help [<command>]"), "{text}");
    }
}
