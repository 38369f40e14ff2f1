//! Which HAProxy directives decide who gets in, or change how a request
//! reaches its backend, when the importer cannot carry them over.
//!
//! Dropping such a directive silently opens the door it closed: an
//! `http-request deny` on an admin path, an `auth` in front of a customer's
//! back office, `tcp-request connection reject` for a blocklist, a listener
//! that requires client certificates. Each is therefore a
//! [`Kind::Routing`] note (`rdmalb import` exits 3), naming the line. Rule
//! actions known to change nothing a backend or a client sees (counters,
//! variables, log levels, captures) stay [`Kind::Unsupported`]; any action
//! not known here is treated as one that may change routing.

use super::lexer::Line;
use super::{Kind, Note};

/// `http-request`/`tcp-request` actions that neither refuse, redirect or
/// answer a request nor change what reaches the backend.
const NEUTRAL_ACTIONS: &[&str] = &[
    "capture",
    "set-var",
    "set-var-fmt",
    "unset-var",
    "set-log-level",
    "set-mark",
    "set-tos",
    "set-nice",
    "set-bandwidth-limit",
    "sc-inc-gpc",
    "sc-inc-gpc0",
    "sc-inc-gpc1",
    "sc-set-gpt",
    "sc-set-gpt0",
    "sc-add-gpc",
    "inspect-delay",
    "wait-for-body",
    "wait-for-handshake",
    "do-resolve",
    "early-hint",
    "set-timeout",
    "accept",
];

/// The note for a `tcp-request` or `tcp-response` line of a proxy.
pub fn rule(line: &Line) -> Note {
    dropped(line, "rdmalb has no TCP rules")
}

/// The note for a rule line that is not carried over, `why`: a routing
/// change (exit 3) unless its action changes nothing a backend or a
/// client sees.
pub fn dropped(line: &Line, why: &str) -> Note {
    let kw = line.keyword();
    let n = line.number;
    let text = line.words.join(" ");
    if kw == "redirect" {
        return Note::new(n, kw, Kind::Routing, format!("`{text}` not carried over ({why}), so these requests reach a backend instead of being redirected"));
    }
    // `tcp-request connection|session|content <action>`; `http-request <action>`.
    let action_at = if kw.starts_with("tcp-") { 2 } else { 1 };
    // `set-var(txn.x)`, `sc-inc-gpc(0,1)`: the action is the name before `(`.
    let word = line.word(action_at);
    let action = word.split_once('(').map_or(word, |(a, _)| a);
    let response_side = matches!(kw, "http-response" | "http-after-response" | "tcp-response");
    let neutral = action.starts_with("track-sc")
        || action.starts_with("sc-")
        || NEUTRAL_ACTIONS.contains(&action)
        || (kw == "tcp-request" && line.word(1) == "inspect-delay")
        || (response_side
            && !matches!(
                action,
                "deny" | "return" | "redirect" | "reject" | "silent-drop"
            ));
    if neutral {
        return Note::new(n, kw, Kind::Unsupported, format!("not supported: `{text}` ({why}); which backend a request reaches, and whether it may, do not change"));
    }
    let effect = match action {
        "deny" | "reject" | "silent-drop" | "tarpit" => "the requests it refuses reach a backend",
        "auth" => "the requests it asks credentials for reach a backend without any",
        "redirect" => "the requests it redirects reach a backend instead",
        "return" | "use-service" | "cache-use" => "the requests it answers reach a backend",
        "expect-proxy" | "expect-netscaler-cip" => {
            "clients' addresses are no longer taken from the PROXY header it expects"
        }
        "set-src" | "set-src-port" | "set-dst" | "set-dst-port" => {
            "the client address backends and access rules see changes"
        }
        "set-header" | "add-header" | "del-header" | "replace-header" | "replace-value"
        | "set-header-fmt" | "add-header-fmt" => {
            "the backend gets the request's headers without this change"
        }
        "set-path" | "set-pathq" | "set-uri" | "set-query" | "replace-path" | "replace-pathq"
        | "replace-uri" | "set-method" | "normalize-uri" => {
            "the backend gets the request's target and method without this change"
        }
        _ => "what reaches the backend, or whether anything does, may differ from HAProxy",
    };
    Note::new(
        n,
        kw,
        Kind::Routing,
        format!("`{text}` not carried over ({why}), so {effect}"),
    )
}

/// The note for a `bind` option the importer does not carry over.
pub fn bind_option(line: &Line, option: &str, _value: &str, notes: &mut Vec<Note>) {
    notes.push(Note::new(
        line.number,
        "bind",
        Kind::Unsupported,
        format!("bind option `{option}` not supported"),
    ));
}

/// `option forwardfor [except <network>] [header <name>] [if-none]`: the
/// arguments that change what the backend is told about the client.
pub fn forwardfor(line: &Line, args: &[String], notes: &mut Vec<Note>) {
    let mut i = 0;
    while i < args.len() {
        let why = match args[i].as_str() {
            "except" => {
                i += 1;
                format!(
                    "`except {}` dropped: rdmalb adds X-Forwarded-For for every client, those in `{}` included",
                    args.get(i).map_or("", String::as_str),
                    args.get(i).map_or("", String::as_str)
                )
            }
            "header" => {
                i += 1;
                let name = args.get(i).map_or("", String::as_str);
                if name.eq_ignore_ascii_case("x-forwarded-for") {
                    i += 1;
                    continue;
                }
                format!("`header {name}` dropped: backends get the client address in X-Forwarded-For, not in `{name}`")
            }
            "if-none" => "`if-none` dropped: rdmalb adds its X-Forwarded-For element even when the request has one".to_string(),
            other => format!("`{other}` is not an argument of `option forwardfor`"),
        };
        notes.push(Note::new(
            line.number,
            "option forwardfor",
            Kind::Routing,
            why,
        ));
        i += 1;
    }
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
    fn refusing_answering_and_rewriting_rules_are_routing_changes() {
        for text in [
            "http-request deny if { path_beg /admin }",
            "http-request auth realm x unless ok",
            "http-request redirect scheme https",
            "http-request return status 200",
            "http-request set-header X-Site a",
            "http-request set-path /x",
            "http-request lua.check",
            "http-response deny if { status 500 }",
            "tcp-request connection reject if bad",
            "tcp-request content silent-drop",
            "tcp-request connection expect-proxy layer4 if lb",
            "redirect prefix https://www.example.com code 301",
        ] {
            let note = dropped(&line(text), "a test");
            assert_eq!(note.kind, Kind::Routing, "{text}");
            assert_eq!(note.line, 7);
            assert!(note.why.contains(text), "{text}: {}", note.why);
        }
    }

    #[test]
    fn bookkeeping_rules_are_not() {
        for text in [
            "http-request track-sc0 src",
            "http-request set-var(txn.x) str(a)",
            "http-request capture req.hdr(host) len 20",
            "tcp-request connection track-sc0 src",
            "tcp-request inspect-delay 5s",
            "tcp-request content accept if HTTP",
            "http-response set-header X-Frame-Options DENY",
            "http-after-response del-header server",
        ] {
            assert_eq!(
                dropped(&line(text), "a test").kind,
                Kind::Unsupported,
                "{text}"
            );
        }
    }

    #[test]
    fn forwardfor_arguments_are_routing_changes() {
        let l = line("bind :443 ssl crt a.pem");
        let mut notes = Vec::new();
        let args = |t: &str| t.split_whitespace().map(str::to_string).collect::<Vec<_>>();
        forwardfor(&l, &args("header X-Forwarded-For"), &mut notes);
        assert!(notes.is_empty());
        forwardfor(
            &l,
            &args("except 127.0.0.0/8 header X-Real-IP if-none"),
            &mut notes,
        );
        assert_eq!(notes.len(), 3);
        assert!(notes.iter().all(|n| n.kind == Kind::Routing));
        assert!(notes[0].why.contains("127.0.0.0/8"));
        assert!(notes[1].why.contains("X-Real-IP"));
    }
}
