//! Sticky clients for [`super::run_with_clients`]: a population of K
//! simulated clients, each with a one-cookie jar, so a replay exercises a
//! proxy's persistence cookie (HAProxy's `cookie SRV insert`, rdmalb's
//! `[site.sticky]`) the way browsers do.
//!
//! Request k is sent by client `k % K` (round-robin: every client sends at
//! the same rate, rate / K). It carries `Cookie: NAME=VALUE` when the
//! client holds a value, and any `Set-Cookie: NAME=VALUE; ...` of the
//! response replaces the value (an empty value, the proxy's deletion,
//! empties the jar). Only the one cookie name is kept; other cookies are
//! ignored.
//!
//! A *move* is a response that sets a value naming another node than the
//! one the client held (the node is the value up to the first `|`, so
//! HAProxy's dated values `s1|LAST|FIRST` whose dates were refreshed are
//! not moves); the first value a client gets is a *pin*. A client may have
//! several requests in flight (its k and k + K overlap when a response is
//! slower than K / rate): each response updates the jar in the order it
//! arrives, as a browser's parallel requests do. Only a response to a
//! request that carried the cookie can be a move: when a client's first
//! two requests both leave without one (the second sent before the first
//! is answered) and are balanced to different nodes, the second value
//! replaces the first but no session left a node. A session the proxy
//! moves while two of its requests are in flight can still count two
//! moves; the proxies' `rdmalb_sticky_moves_total` counts each session
//! that left once.

use std::collections::BTreeMap;
use std::sync::Mutex;

use http::{header, HeaderMap, HeaderValue};
use serde::Serialize;

use super::LoadError;

/// Most simulated clients.
pub const MAX_CLIENTS: u32 = 1_000_000;

/// One client's jar and what it saw.
#[derive(Debug, Default)]
struct Jar {
    value: Option<String>,
    pins: u64,
    moves: u64,
    clears: u64,
}

/// K clients' jars for one cookie name. Shared by the replay's tasks.
#[derive(Debug)]
pub struct StickyClients {
    cookie: String,
    jars: Box<[Mutex<Jar>]>,
}

/// What the clients saw, at the end of a replay.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StickySummary {
    pub cookie: String,
    pub clients: u64,
    /// First values received (a client without a value got one).
    pub pins: u64,
    /// Values naming another node than the one held (session moves seen
    /// by the clients).
    pub moves: u64,
    /// Clients that saw at least one move.
    pub clients_moved: u64,
    /// The most moves one client saw.
    pub max_moves_per_client: u64,
    /// Deletions received (an empty value).
    pub clears: u64,
    /// Clients holding each node's value at the end (`""`: no value).
    pub sessions_per_node: BTreeMap<String, u64>,
}

impl StickyClients {
    /// `clients` jars for cookie `cookie` (an RFC 6265 token).
    pub fn new(cookie: &str, clients: u32) -> Result<StickyClients, LoadError> {
        let token = !cookie.is_empty()
            && cookie
                .bytes()
                .all(|b| b.is_ascii_graphic() && !b"()<>@,;:\\\"/[]?={}".contains(&b));
        if !token {
            return Err(LoadError::Invalid(format!(
                "`{cookie}` is not a cookie name (expected a token such as \"SRV\")"
            )));
        }
        if clients == 0 || clients > MAX_CLIENTS {
            return Err(LoadError::Invalid(format!(
                "{clients} sticky clients is out of range (accepted: 1 to {MAX_CLIENTS})"
            )));
        }
        Ok(StickyClients {
            cookie: cookie.to_string(),
            jars: (0..clients).map(|_| Mutex::new(Jar::default())).collect(),
        })
    }

    /// The client that sends request `k`.
    pub fn client_of(&self, k: u64) -> usize {
        (k % self.jars.len() as u64) as usize
    }

    /// The `Cookie` header client `c` sends, if it holds a value.
    pub fn cookie_header(&self, c: usize) -> Option<HeaderValue> {
        let jar = self.jars.get(c)?.lock().unwrap_or_else(|e| e.into_inner());
        let v = jar.value.as_deref()?;
        HeaderValue::from_str(&format!("{}={v}", self.cookie)).ok()
    }

    /// Takes the cookie's `Set-Cookie` from a response to client `c`'s
    /// request, which carried the cookie when `sent`.
    pub fn observe(&self, c: usize, sent: bool, headers: &HeaderMap) {
        let Some(jar) = self.jars.get(c) else { return };
        let set = headers
            .get_all(header::SET_COOKIE)
            .iter()
            .filter_map(|h| h.to_str().ok())
            .filter_map(|line| set_cookie_value(line, &self.cookie))
            .next_back();
        let Some(new) = set else { return };
        let mut jar = jar.lock().unwrap_or_else(|e| e.into_inner());
        if new.is_empty() {
            if jar.value.take().is_some() {
                jar.clears += 1;
            }
            return;
        }
        match jar.value.as_deref() {
            None => jar.pins += 1,
            Some(old) if sent && node_of(old) != node_of(new) => jar.moves += 1,
            Some(_) => {}
        }
        jar.value = Some(new.to_string());
    }

    /// What the clients saw so far.
    pub fn summary(&self) -> StickySummary {
        let mut s = StickySummary {
            cookie: self.cookie.clone(),
            clients: self.jars.len() as u64,
            pins: 0,
            moves: 0,
            clients_moved: 0,
            max_moves_per_client: 0,
            clears: 0,
            sessions_per_node: BTreeMap::new(),
        };
        for jar in self.jars.iter() {
            let jar = jar.lock().unwrap_or_else(|e| e.into_inner());
            s.pins += jar.pins;
            s.moves += jar.moves;
            s.clears += jar.clears;
            s.clients_moved += u64::from(jar.moves > 0);
            s.max_moves_per_client = s.max_moves_per_client.max(jar.moves);
            let node = jar.value.as_deref().map(node_of).unwrap_or("");
            *s.sessions_per_node.entry(node.to_string()).or_default() += 1;
        }
        s
    }
}

/// The value of cookie `name` set by one `Set-Cookie` line
/// (`NAME=VALUE; attributes`), or `None` when the line sets another
/// cookie. Surrounding quotes of the value are kept (RFC 6265 keeps them).
pub fn set_cookie_value<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let pair = line.split(';').next()?;
    let (n, v) = pair.split_once('=')?;
    (n.trim() == name).then(|| v.trim())
}

/// The node a persistence value names: up to the first `|` (HAProxy's
/// dated insert values are `NODE|LAST|FIRST`).
fn node_of(value: &str) -> &str {
    value.split('|').next().unwrap_or(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(lines: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for l in lines {
            h.append(header::SET_COOKIE, HeaderValue::from_str(l).unwrap());
        }
        h
    }

    #[test]
    fn set_cookie_lines_are_parsed_for_the_one_name() {
        assert_eq!(set_cookie_value("SRVID=n3; path=/", "SRVID"), Some("n3"));
        assert_eq!(set_cookie_value(" SRVID = n3 ", "SRVID"), Some("n3"));
        assert_eq!(
            set_cookie_value("SRVID=n3|AbCdE|AbCdE", "SRVID"),
            Some("n3|AbCdE|AbCdE")
        );
        assert_eq!(
            set_cookie_value(
                "SRVID=; Expires=Thu, 01-Jan-1970 00:00:01 GMT; path=/",
                "SRVID"
            ),
            Some("")
        );
        assert_eq!(set_cookie_value("OTHER=n3; path=/", "SRVID"), None);
        assert_eq!(set_cookie_value("SRVIDX=n3", "SRVID"), None);
        assert_eq!(set_cookie_value("path=/; SRVID=n3", "SRVID"), None);
        assert_eq!(set_cookie_value("garbage", "SRVID"), None);
        assert_eq!(set_cookie_value("", "SRVID"), None);
    }

    #[test]
    fn a_client_is_pinned_then_moved_and_refreshes_are_not_moves() {
        let c = StickyClients::new("SRVID", 3).unwrap();
        assert_eq!(c.cookie_header(1), None);
        c.observe(1, true, &response(&["SRVID=n3; path=/"]));
        assert_eq!(c.cookie_header(1).unwrap(), "SRVID=n3");
        // No Set-Cookie, another cookie, the same node with new dates.
        c.observe(1, true, &HeaderMap::new());
        c.observe(1, true, &response(&["SESSION=abc; path=/"]));
        c.observe(1, true, &response(&["SRVID=n3; path=/"]));
        c.observe(1, true, &response(&["SRVID=n3|AAAAA|AAAAA; path=/"]));
        c.observe(1, true, &response(&["SRVID=n3|AAAAB|AAAAA; path=/"]));
        let s = c.summary();
        assert_eq!((s.pins, s.moves, s.clients_moved), (1, 0, 0));
        c.observe(1, true, &response(&["SESSION=abc", "SRVID=n5; path=/"]));
        assert_eq!(c.cookie_header(1).unwrap(), "SRVID=n5");
        c.observe(1, true, &response(&["SRVID=n3; path=/"]));
        c.observe(2, true, &response(&["SRVID=n5; path=/"]));
        let s = c.summary();
        assert_eq!(
            (s.pins, s.moves, s.clients_moved, s.max_moves_per_client),
            (2, 2, 1, 2)
        );
        assert_eq!(
            s.sessions_per_node,
            BTreeMap::from([("".into(), 1), ("n3".into(), 1), ("n5".into(), 1)])
        );
    }

    #[test]
    fn first_requests_sent_together_without_the_cookie_are_not_moves() {
        let c = StickyClients::new("SRVID", 1).unwrap();
        // Two requests left without a cookie; their answers name two nodes.
        c.observe(0, false, &response(&["SRVID=n1; path=/"]));
        c.observe(0, false, &response(&["SRVID=n2; path=/"]));
        assert_eq!(c.cookie_header(0).unwrap(), "SRVID=n2");
        let s = c.summary();
        assert_eq!((s.pins, s.moves), (1, 0));
        // With the cookie sent, another node is a move.
        c.observe(0, true, &response(&["SRVID=n4; path=/"]));
        assert_eq!(c.summary().moves, 1);
    }

    #[test]
    fn a_deletion_empties_the_jar_and_the_next_value_is_a_pin() {
        let c = StickyClients::new("SRV", 1).unwrap();
        c.observe(0, true, &response(&["SRV=s1; path=/"]));
        c.observe(
            0,
            true,
            &response(&["SRV=; Expires=Thu, 01-Jan-1970 00:00:01 GMT; path=/"]),
        );
        assert_eq!(c.cookie_header(0), None);
        c.observe(0, true, &response(&["SRV=s2; path=/"]));
        let s = c.summary();
        assert_eq!((s.pins, s.moves, s.clears), (2, 0, 1));
    }

    #[test]
    fn requests_go_round_robin_over_the_clients() {
        let c = StickyClients::new("SRV", 4).unwrap();
        let picked: Vec<usize> = (0..9).map(|k| c.client_of(k)).collect();
        assert_eq!(picked, [0, 1, 2, 3, 0, 1, 2, 3, 0]);
        // Out-of-range clients are ignored, not a panic.
        c.observe(9, true, &response(&["SRV=s1"]));
        assert_eq!(c.cookie_header(9), None);
    }

    #[test]
    fn bad_names_and_populations_are_rejected() {
        for bad in ["", "SR V", "SRV;", "a=b"] {
            assert!(StickyClients::new(bad, 10).is_err(), "{bad}");
        }
        assert!(StickyClients::new("SRV", 0).is_err());
        assert!(StickyClients::new("SRV", MAX_CLIENTS + 1).is_err());
    }
}
