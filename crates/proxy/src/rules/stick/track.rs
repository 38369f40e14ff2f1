//! What a request tracks (HAProxy's stick counters `sc0`..`sc2`), the
//! fetches that read them (`sc0_http_req_rate`, `src_conn_cur`, ...) and
//! the counting along the request's life: a tracking start counts a
//! connection (`conn_cnt`, `conn_rate`, `conn_cur` until the request
//! ends, as HAProxy's `stream_start_counters`), the request itself
//! (`http_req_*`), and a deny or a 4xx response an error (`http_err_*`).

use std::net::IpAddr;
use std::sync::{Arc, Weak};

use http::{HeaderMap, HeaderName};
use parking_lot::Mutex;

use super::{now_ms, Data, Entry, Key, StickTable};

/// Stick counters a request (or connection) may track at once.
pub const SLOTS: usize = 3;

/// One tracked entry. [`stop`] or dropping it ends the tracking
/// (`conn_cur` down, the entry touched).
#[derive(Debug)]
pub struct Tracked {
    /// Index of the table in the rule set.
    pub table: usize,
    /// The table's `expire`, to touch the entry when the tracking ends.
    expire: u32,
    pub entry: Arc<Entry>,
    /// The entry's key when the table is shared (its increments are sent
    /// to the other proxies under it).
    pub key: Option<Key>,
    /// The tracking has ended ([`stop`]).
    stopped: bool,
}

impl Tracked {
    /// Ends the tracking at `now` (HAProxy's touch at the stream's end:
    /// the entry expires `expire` after its last request ended).
    fn stop(&mut self, now: u32) {
        if std::mem::replace(&mut self.stopped, true) {
            return;
        }
        let mut c = self.entry.counters.lock();
        c.conn_cur = c.conn_cur.saturating_sub(1);
        drop(c);
        self.entry.expire.store(
            now.wrapping_add(self.expire),
            std::sync::atomic::Ordering::Relaxed,
        );
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        if !self.stopped {
            self.stop(now_ms());
        }
    }
}

/// Ends the tracking of a request that ended at `now` (read once for its
/// log line: no second clock read).
pub fn stop(slots: &mut Tracking, now: u32) {
    for tr in slots.iter_mut().flat_map(|s| s.iter_mut().flatten()) {
        tr.stop(now);
    }
}

/// The stick counters of a request.
pub type Slots = [Option<Tracked>; SLOTS];

/// A request's stick counters, allocated when a rule first tracks.
pub type Tracking = Option<Box<Slots>>;

/// What a `track-sc` action keys on (a sample of the request).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyFetch {
    /// `src`: the client's address.
    Src,
    /// `hdr(host)`.
    Host,
    /// `req.hdr(NAME)`: its last value, as HAProxy's sample fetch.
    Header(HeaderName),
    /// `req.cook(NAME)`.
    Cookie(String),
    /// `url_param(NAME)`.
    Param(String),
    Path,
    /// `base`: the Host and the path.
    Base,
}

impl KeyFetch {
    pub fn parse(s: &str) -> Option<KeyFetch> {
        let (name, arg) = match s.split_once('(') {
            Some((n, a)) => (n, Some(a.strip_suffix(')')?)),
            None => (s, None),
        };
        Some(match (name, arg) {
            ("src", None) => KeyFetch::Src,
            ("path", None) => KeyFetch::Path,
            ("base", None) => KeyFetch::Base,
            ("hdr" | "req.hdr" | "req.fhdr", Some(h)) if h.eq_ignore_ascii_case("host") => {
                KeyFetch::Host
            }
            ("hdr" | "req.hdr" | "req.fhdr", Some(h)) => {
                KeyFetch::Header(HeaderName::try_from(h).ok()?)
            }
            ("cook" | "req.cook", Some(c)) if !c.is_empty() => KeyFetch::Cookie(c.to_string()),
            ("url_param" | "urlp", Some(p)) if !p.is_empty() => KeyFetch::Param(p.to_string()),
            _ => return None,
        })
    }
}

/// What a stick fetch reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StickFetch {
    /// `scN_<data>` / `sc_<data>(N)`: a type of the entry slot N tracks.
    Sc(usize, Data),
    /// `scN_inc_gpc0` / `sc_inc_gpc(IDX,N)`: increments, then reads.
    ScIncGpc(usize, usize),
    /// `scN_tracked`: whether slot N tracks an entry.
    ScTracked(usize),
    /// `src_<data>(TABLE)`: a type of the client address's entry.
    Src(usize, Data),
    /// `src_inc_gpc0(TABLE)`.
    SrcIncGpc(usize, usize),
    /// `table_cnt(TABLE)`: the entries in the table.
    TableCnt(usize),
}

impl StickFetch {
    /// The stick counter the fetch reads, if it reads one.
    pub fn slot(&self) -> Option<usize> {
        match *self {
            StickFetch::Sc(n, _) | StickFetch::ScIncGpc(_, n) | StickFetch::ScTracked(n) => Some(n),
            _ => None,
        }
    }

    /// The period of the rate the fetch reads, or the table's expiry for
    /// a count (how long a client waits for a limit on it to lift), in ms.
    pub fn window(&self, tables: &[Arc<StickTable>], slot_table: Option<usize>) -> Option<u32> {
        let (table, d) = match *self {
            StickFetch::Sc(_, d) => (slot_table?, d),
            StickFetch::Src(t, d) => (t, d),
            StickFetch::ScIncGpc(..) => (slot_table?, Data::Gpc0),
            StickFetch::SrcIncGpc(t, _) => (t, Data::Gpc0),
            _ => return None,
        };
        let t = tables.get(table)?;
        Some(if d.is_rate() {
            t.store.period(d)
        } else {
            t.expire
        })
    }
}

/// Where stick fetches look: the tables and the request's counters.
#[derive(Debug, Clone, Copy)]
pub struct StickView<'a> {
    pub tables: &'a [Arc<StickTable>],
    pub slots: Option<&'a Slots>,
    /// The request's time ([`super::ms_at`]).
    pub now: u32,
}

impl StickView<'_> {
    /// The value of `fetch` for a request from `client`; `None` when
    /// HAProxy's fetch finds no sample (an untracked slot, a type the
    /// table does not store): a test on it does not match.
    #[inline]
    pub fn value(&self, fetch: &StickFetch, client: IpAddr) -> Option<i64> {
        let now = self.now;
        let slot = |n: usize| self.slots.and_then(|s| s.get(n)?.as_ref());
        let read = |t: &StickTable, e: Option<&Entry>, d: Data| -> Option<i64> {
            if !t.store.has(d) {
                return None;
            }
            Some(e.map_or(0, |e| i64::from(e.counters.lock().get(d, &t.store, now))))
        };
        match *fetch {
            StickFetch::Sc(n, d) => {
                let tr = slot(n)?;
                read(self.tables.get(tr.table)?, Some(&tr.entry), d)
            }
            StickFetch::ScTracked(n) => Some(i64::from(slot(n).is_some())),
            StickFetch::ScIncGpc(idx, n) => {
                let tr = slot(n)?;
                inc_gpc(self.tables.get(tr.table)?, tr, idx, now)
            }
            StickFetch::Src(t, d) => {
                let t = self.tables.get(t)?;
                let e = t.get(&t.kind.of_addr(client)?, now);
                read(t, e.as_deref(), d)
            }
            StickFetch::SrcIncGpc(t, idx) => {
                // HAProxy creates the entry for `src_inc_gpc0`.
                let t = self.tables.get(t)?;
                let k = t.kind.of_addr(client)?;
                let shared = t.is_shared().then(|| k.clone());
                let e = t.entry(k, now)?;
                inc_gpc_of(t, &e, shared.as_ref(), idx, now)
            }
            StickFetch::TableCnt(t) => Some(self.tables.get(t)?.len() as i64),
        }
    }
}

/// Increments gpc `idx` of the entry `tr` tracks when its table `t`
/// stores it; its new value.
pub fn inc_gpc(t: &StickTable, tr: &Tracked, idx: usize, now: u32) -> Option<i64> {
    inc_gpc_of(t, &tr.entry, tr.key.as_ref(), idx, now)
}

/// Increments gpc `idx` of `e` (of `key` when the table is shared).
fn inc_gpc_of(t: &StickTable, e: &Entry, key: Option<&Key>, idx: usize, now: u32) -> Option<i64> {
    let d = if idx == 0 { Data::Gpc0 } else { Data::Gpc1 };
    let rate = if idx == 0 {
        Data::Gpc0Rate
    } else {
        Data::Gpc1Rate
    };
    if !t.store.has(d) && !t.store.has(rate) {
        return None;
    }
    let v = e.counters.lock().inc_gpc(idx, &t.store, now);
    t.note(key, |d| d.gpc[idx & 1] += 1);
    Some(i64::from(v))
}

/// The key of a `track-sc` action for a request in table `t` (`None`
/// when the request has no such sample: nothing is tracked).
#[inline]
pub fn key(k: &KeyFetch, t: &StickTable, f: &crate::rules::Facts<'_>) -> Option<Key> {
    let text = |s: &str| t.kind.of_text(s);
    match k {
        KeyFetch::Src => t.kind.of_addr(f.client),
        KeyFetch::Host => text(f.host()?),
        KeyFetch::Header(h) => text(last_value(f.headers, h)?),
        KeyFetch::Cookie(c) => text(f.cookie(c)?),
        KeyFetch::Param(p) => text(f.param(p)?),
        KeyFetch::Path => text(f.path()),
        KeyFetch::Base => text(&format!("{}{}", f.host()?, f.path())),
    }
}

/// The last comma-separated value of header `name`.
fn last_value<'a>(headers: &'a HeaderMap, name: &HeaderName) -> Option<&'a str> {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .next_back()
}

/// The entries a connection's last requests tracked, by slot: the next
/// request tracking the same key in the same table takes the entry from
/// here instead of looking it up in the table's map (a keep-alive
/// client's `src` is the same on every request: one lookup per
/// connection). The references are weak: an idle connection tracks
/// nothing, and the table expires, evicts and clears a remembered entry
/// as any other ([`StickTable::remembered`] sees it removed). It also
/// keeps the last request's emptied counters for the next one
/// ([`recycle`]: no allocation per request). Allocated when the
/// connection first tracks; HTTP/2 streams running at once share it, and
/// one that finds it busy looks up the map.
#[derive(Debug, Default)]
pub struct Recent(Mutex<Option<Box<Memory>>>);

/// What a [`Recent`] holds.
#[derive(Debug, Default)]
pub struct Memory {
    entries: [Option<Remembered>; SLOTS],
    /// Counters of an ended request, emptied.
    spare: Option<Box<Slots>>,
}

/// One remembered entry.
#[derive(Debug)]
pub struct Remembered {
    /// The table (weak: a reload's new table is another one).
    table: Weak<StickTable>,
    key: Key,
    entry: Weak<Entry>,
}

impl Recent {
    /// Holds the memory as a stream of the connection would.
    #[cfg(test)]
    pub fn lock_for_test(&self) -> impl Drop + '_ {
        self.0.lock()
    }

    /// The entry of `key` in `table`, remembered in slot `n` or found in
    /// the table (and then remembered; `None` when the table is full),
    /// and counters for the request when `slots` has none.
    fn entry(
        &self,
        n: usize,
        (table, key): (&Arc<StickTable>, Key),
        slots: &mut Tracking,
        now: u32,
    ) -> Option<Arc<Entry>> {
        let Some(mut recent) = self.0.try_lock() else {
            return table.entry(key, now);
        };
        let memory = recent.get_or_insert_with(Default::default);
        if slots.is_none() {
            *slots = memory.spare.take();
        }
        let slot = memory.entries.get_mut(n)?;
        if let Some(r) = slot.as_ref() {
            if Weak::as_ptr(&r.table) == Arc::as_ptr(table) && r.key == key {
                if let Some(e) = r.entry.upgrade().and_then(|e| table.remembered(e, now)) {
                    return Some(e);
                }
            }
        }
        let entry = table.entry(key.clone(), now)?;
        *slot = Some(Remembered {
            table: Arc::downgrade(table),
            key,
            entry: Arc::downgrade(&entry),
        });
        Some(entry)
    }
}

/// Ends a request's counters for good (after [`stop`]) and keeps their
/// room in the connection's `recent` for its next request.
pub fn recycle(slots: &mut Tracking, recent: &Recent) {
    let Some(mut s) = slots.take() else { return };
    *s = Default::default();
    if let Some(mut r) = recent.0.try_lock() {
        if let Some(m) = r.as_mut() {
            m.spare.get_or_insert(s);
        }
    }
}

/// Starts tracking the entry of `key` in table `index` in slot `n` of
/// `slots` (a slot already in use is kept, as in HAProxy; the entry is
/// made all the same) and counts the request. `recent` is the
/// connection's memory of its last entries, when it has one.
pub fn start(
    slots: &mut Tracking,
    n: usize,
    (index, table): (usize, &Arc<StickTable>),
    key: Key,
    recent: Option<&Recent>,
    now: u32,
) {
    let shared = table.is_shared().then(|| key.clone());
    let entry = match recent {
        Some(r) => r.entry(n, (table, key), slots, now),
        None => table.entry(key, now),
    };
    let Some(entry) = entry else {
        return;
    };
    let s = slots.get_or_insert_with(Default::default);
    let Some(slot) = s.get_mut(n) else { return };
    if slot.is_some() {
        return;
    }
    {
        let mut c = entry.counters.lock();
        c.start(&table.store, now);
        c.request(&table.store, now);
    }
    table.note(shared.as_ref(), |d| {
        d.conn += 1;
        d.req += 1;
    });
    slot.get_or_insert(Tracked {
        table: index,
        expire: table.expire,
        entry,
        key: shared,
        stopped: false,
    });
}

/// Counts an HTTP error (a deny, a 4xx from the node) on every tracked
/// entry.
pub fn error(slots: &Tracking, tables: &[Arc<StickTable>], now: u32) {
    let Some(s) = slots else { return };
    for tr in s.iter().flatten() {
        if let Some(t) = tables.get(tr.table) {
            tr.entry.counters.lock().error(&t.store, now);
            t.note(tr.key.as_ref(), |d| d.err += 1);
        }
    }
}
