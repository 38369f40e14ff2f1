//! A `peers` section as `[stick_share]` (docs/rate-limits.md, "One limit
//! across several proxies"): this HAProxy's own peer (`localpeer`, else
//! the section's `bind` or the `server` without an address, else the
//! first peer) gives `listen`, the others `peers`; its tables, and the
//! tables that name it with `peers`, get `shared = true`. HAProxy
//! replicates over TCP without authentication; rdmalb counts together
//! over UDP with a key, which the import names and the user makes.

use std::fmt::Write;
use std::net::SocketAddr;

use super::lexer::Line;
use super::sections::Haproxy;
use super::site::q;
use super::{Kind, Note};

/// The key file the imported `[stick_share]` names.
pub const KEY_FILE: &str = "stick_share.key";

/// The `peers` sections the tables use, in order of first use.
fn used(h: &Haproxy) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    let named = h.proxies.iter().filter_map(|p| {
        let l = p.stick_table.as_ref()?;
        let i = l.words.iter().position(|w| w == "peers")?;
        Some(l.word(i + 1))
    });
    for s in h.peer_tables.iter().map(|(p, _)| p.as_str()).chain(named) {
        if !out.contains(&s) {
            out.push(s);
        }
    }
    out
}

/// A member's address: `peer NAME ADDR`, `server NAME ADDR`, `bind ADDR`.
fn address(l: &Line) -> Option<SocketAddr> {
    let w = if l.keyword() == "bind" {
        l.word(1)
    } else {
        l.word(2)
    };
    w.trim_start_matches("ipv4@")
        .trim_start_matches("ipv6@")
        .parse()
        .ok()
}

/// Writes the `[stick_share]` of the first `peers` section a table uses
/// and that names other peers; returns that section's name.
pub fn share(h: &Haproxy, out: &mut String, notes: &mut Vec<Note>) -> Option<String> {
    let sections = used(h);
    let section = *sections.first()?;
    let members: Vec<&Line> = h
        .peer_members
        .iter()
        .filter(|(p, _)| p == section)
        .map(|(_, l)| l)
        .collect();
    let at = members.first().map_or(0, |l| l.number);
    let note = |notes: &mut Vec<Note>, kind, why: String| {
        notes.push(Note::new(at, "peers", kind, why));
    };
    for other in &sections[1..] {
        note(notes, Kind::Approximated, format!("`peers {other}`: rdmalb shares tables with one set of proxies ([stick_share], from `peers {section}`); its tables count on this proxy only"));
    }
    let bind = members.iter().position(|l| l.keyword() == "bind");
    let named = h.global.localpeer.as_deref().and_then(|n| {
        members
            .iter()
            .position(|l| l.keyword() != "bind" && l.word(1) == n)
    });
    let without = members
        .iter()
        .position(|l| l.keyword() == "server" && l.word(2).is_empty());
    let local = match (named, bind.or(without)) {
        (Some(i), _) => i,
        (None, Some(i)) => i,
        (None, None) => {
            let first = members.iter().position(|l| l.keyword() != "bind")?;
            note(notes, Kind::Approximated, format!("no `localpeer`: this proxy is taken to be peer `{}` (the first); set [stick_share] listen and peers on each proxy", members[first].word(1)));
            first
        }
    };
    // The local peer's address: its own, or the section's `bind`.
    let listen = address(members[local]).or_else(|| bind.and_then(|b| address(members[b])));
    let others: Vec<SocketAddr> = members
        .iter()
        .enumerate()
        .filter(|(i, l)| *i != local && l.keyword() != "bind")
        .filter_map(|(_, l)| address(l))
        .filter(|a| Some(*a) != listen)
        .collect();
    let Some(listen) = listen.filter(|_| !others.is_empty()) else {
        note(notes, Kind::Approximated, format!("`peers {section}`: no other peer with an address, or none for this proxy: its tables count on this proxy only (is not replicated)"));
        return None;
    };
    let list: Vec<String> = others.iter().map(|a| q(&a.to_string())).collect();
    out.push_str("\n[stick_share]\n");
    writeln!(out, "listen = {}", q(&listen.to_string())).ok();
    writeln!(out, "peers = [{}]", list.join(", ")).ok();
    writeln!(out, "key_file = {}", q(KEY_FILE)).ok();
    note(notes, Kind::Approximated, format!(
        "`peers {section}` -> [stick_share]: its tables are counted together by the proxies (UDP at the peers' addresses, every 50 ms), not replicated; HAProxy's peers are not authenticated, rdmalb's share is: make the key with `rdmalb psk --out {KEY_FILE}` next to the config and copy the same file to every proxy"
    ));
    Some(section.to_string())
}
