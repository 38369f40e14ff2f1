//! Stick tables: counters per client key (an address, a header, a
//! cookie), HAProxy's `stick-table` with its `store` data types, for rate
//! limits (`docs/rate-limits.md`).
//!
//! A table is a [`DashMap`] (sharded locks: two requests lock the same
//! shard only when their keys hash there, never a table-wide lock) from a
//! [`Key`] to an [`Entry`] behind an `Arc`: the requests that track an
//! entry hold it (HAProxy's `ref_cnt`), so it is not evicted under them.
//! An entry's counters sit behind its own small lock, held for a few
//! additions.
//!
//! Memory is bounded: a table never holds more than `size` entries. An
//! entry is created only when a slot is reserved ([`StickTable::entry`]);
//! when the table is full, the expired entries and then the least recently
//! touched ones that no request tracks are removed, an eighth of the table
//! at a time (HAProxy's `stktable_trash_oldest`; the batch keeps the scan
//! cost per insertion constant). When nothing can be removed, the request
//! is not tracked, as in HAProxy. `expire` is measured from the last touch
//! of an entry (a tracking start or a counter update); an expired entry
//! that no request tracks is treated as new and removed by the periodic
//! [`StickTable::purge`].
//!
//! Rates follow HAProxy's `freq_ctr` exactly ([`freq`]), so a sequence of
//! requests gets the same 429s from rdmalb and from HAProxy.

pub mod config;
pub mod freq;
pub mod share;
pub mod show;
pub mod track;

use std::fmt;
use std::net::IpAddr;
use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use dashmap::DashMap;
use parking_lot::Mutex;

/// The tables' maps hash with foldhash, seeded at random per map (about a
/// tenth of SipHash's cost per key, counted per request; a client cannot
/// predict the seed to pile its keys into one bucket).
type Map<K, V> = DashMap<K, V, foldhash::fast::RandomState>;

pub use freq::{ms_at, now_ms, Freq};
pub use share::Delta;
pub use track::{Slots, Tracked, Tracking};

/// What a table is keyed by (HAProxy's `type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    /// IPv4 addresses (an IPv6 client maps only from `::ffff:a.b.c.d`).
    Ip,
    /// IPv6 addresses (an IPv4 client as `::ffff:a.b.c.d`).
    Ipv6,
    /// Strings, cut to `len` bytes (HAProxy's default: 32).
    Str { len: usize },
}

impl KeyKind {
    pub fn name(self) -> &'static str {
        match self {
            KeyKind::Ip => "ip",
            KeyKind::Ipv6 => "ipv6",
            KeyKind::Str { .. } => "string",
        }
    }

    /// The key of a client address, if the table takes it.
    pub fn of_addr(self, ip: IpAddr) -> Option<Key> {
        match (self, ip) {
            (KeyKind::Ip, IpAddr::V4(a)) => Some(Key::V4(a.octets())),
            (KeyKind::Ip, IpAddr::V6(a)) => a.to_ipv4_mapped().map(|a| Key::V4(a.octets())),
            (KeyKind::Ipv6, IpAddr::V4(a)) => Some(Key::V6(a.to_ipv6_mapped().octets())),
            (KeyKind::Ipv6, IpAddr::V6(a)) => Some(Key::V6(a.octets())),
            (KeyKind::Str { len }, ip) => Some(Key::text(&ip.to_string(), len)),
        }
    }

    /// The key of a text sample (an address in an address table).
    pub fn of_text(self, s: &str) -> Option<Key> {
        match self {
            KeyKind::Str { len } => Some(Key::text(s, len)),
            _ => self.of_addr(s.trim().parse().ok()?),
        }
    }
}

/// A table key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Key {
    V4([u8; 4]),
    V6([u8; 16]),
    Str(Box<str>),
}

impl Key {
    /// `s` cut to at most `len` bytes (on a character boundary).
    fn text(s: &str, len: usize) -> Key {
        let mut end = s.len().min(len);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        Key::Str(s[..end].into())
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Key::V4(a) => write!(f, "{}", std::net::Ipv4Addr::from(*a)),
            Key::V6(a) => write!(f, "{}", std::net::Ipv6Addr::from(*a)),
            Key::Str(s) => f.write_str(s),
        }
    }
}

/// The data types a table may store, in HAProxy's order (the order
/// `show table` prints them in).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Data {
    Gpc0,
    Gpc0Rate,
    ConnCnt,
    ConnRate,
    ConnCur,
    HttpReqCnt,
    HttpReqRate,
    HttpErrCnt,
    HttpErrRate,
    Gpc1,
    Gpc1Rate,
}

impl Data {
    pub const ALL: [Data; 11] = [
        Data::Gpc0,
        Data::Gpc0Rate,
        Data::ConnCnt,
        Data::ConnRate,
        Data::ConnCur,
        Data::HttpReqCnt,
        Data::HttpReqRate,
        Data::HttpErrCnt,
        Data::HttpErrRate,
        Data::Gpc1,
        Data::Gpc1Rate,
    ];

    /// HAProxy's name of the type.
    pub fn name(self) -> &'static str {
        match self {
            Data::Gpc0 => "gpc0",
            Data::Gpc0Rate => "gpc0_rate",
            Data::ConnCnt => "conn_cnt",
            Data::ConnRate => "conn_rate",
            Data::ConnCur => "conn_cur",
            Data::HttpReqCnt => "http_req_cnt",
            Data::HttpReqRate => "http_req_rate",
            Data::HttpErrCnt => "http_err_cnt",
            Data::HttpErrRate => "http_err_rate",
            Data::Gpc1 => "gpc1",
            Data::Gpc1Rate => "gpc1_rate",
        }
    }

    pub fn parse(name: &str) -> Option<Data> {
        Data::ALL.into_iter().find(|d| d.name() == name)
    }

    /// Whether the type is a rate (it takes a period).
    pub fn is_rate(self) -> bool {
        matches!(
            self,
            Data::Gpc0Rate
                | Data::ConnRate
                | Data::HttpReqRate
                | Data::HttpErrRate
                | Data::Gpc1Rate
        )
    }

    fn bit(self) -> u16 {
        1 << self as u16
    }
}

/// What a table stores, and the period of each rate (ms).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Store {
    mask: u16,
    periods: [u32; 11],
}

impl Store {
    pub fn add(&mut self, d: Data, period_ms: u32) {
        self.mask |= d.bit();
        self.periods[d as usize] = period_ms;
    }

    pub fn has(&self, d: Data) -> bool {
        self.mask & d.bit() != 0
    }

    /// The period of rate `d` (0 when not stored).
    pub fn period(&self, d: Data) -> u32 {
        if self.has(d) {
            self.periods[d as usize]
        } else {
            0
        }
    }

    /// The stored types, in HAProxy's order.
    pub fn types(&self) -> impl Iterator<Item = Data> + '_ {
        Data::ALL.into_iter().filter(|d| self.has(*d))
    }
}

/// The counters of one key. Every stored type is kept; a type the table
/// does not store stays 0 and reads as absent.
#[derive(Debug, Clone, Copy, Default)]
pub struct Counters {
    pub gpc: [u32; 2],
    pub conn_cnt: u32,
    pub conn_cur: u32,
    pub http_req_cnt: u32,
    pub http_err_cnt: u32,
    pub gpc_rate: [Freq; 2],
    pub conn_rate: Freq,
    pub http_req_rate: Freq,
    pub http_err_rate: Freq,
}

impl Counters {
    /// The value of `d` at `now`.
    pub fn get(&self, d: Data, store: &Store, now: u32) -> u32 {
        let p = store.period(d);
        match d {
            Data::Gpc0 => self.gpc[0],
            Data::Gpc1 => self.gpc[1],
            Data::Gpc0Rate => self.gpc_rate[0].read(now, p),
            Data::Gpc1Rate => self.gpc_rate[1].read(now, p),
            Data::ConnCnt => self.conn_cnt,
            Data::ConnRate => self.conn_rate.read(now, p),
            Data::ConnCur => self.conn_cur,
            Data::HttpReqCnt => self.http_req_cnt,
            Data::HttpReqRate => self.http_req_rate.read(now, p),
            Data::HttpErrCnt => self.http_err_cnt,
            Data::HttpErrRate => self.http_err_rate.read(now, p),
        }
    }

    /// A tracking starts (HAProxy's `stream_start_counters`).
    pub fn start(&mut self, store: &Store, now: u32) {
        self.conn_cur += 1;
        self.conn_cnt = self.conn_cnt.wrapping_add(1);
        rate(&mut self.conn_rate, store, Data::ConnRate, now, 1);
    }

    /// One HTTP request (`stkctr_inc_http_req_ctr`).
    pub fn request(&mut self, store: &Store, now: u32) {
        self.http_req_cnt = self.http_req_cnt.wrapping_add(1);
        rate(&mut self.http_req_rate, store, Data::HttpReqRate, now, 1);
    }

    /// One HTTP error (`stkctr_inc_http_err_ctr`).
    pub fn error(&mut self, store: &Store, now: u32) {
        self.http_err_cnt = self.http_err_cnt.wrapping_add(1);
        rate(&mut self.http_err_rate, store, Data::HttpErrRate, now, 1);
    }

    /// Increments general purpose counter `idx` (0 or 1) and its rate;
    /// returns the new value.
    pub fn inc_gpc(&mut self, idx: usize, store: &Store, now: u32) -> u32 {
        let d = if idx == 0 {
            Data::Gpc0Rate
        } else {
            Data::Gpc1Rate
        };
        rate(&mut self.gpc_rate[idx], store, d, now, 1);
        self.gpc[idx] = self.gpc[idx].wrapping_add(1);
        self.gpc[idx]
    }
}

fn rate(f: &mut Freq, store: &Store, d: Data, now: u32, inc: u32) {
    let p = store.period(d);
    if p > 0 && inc > 0 {
        f.add(now, p, inc);
    }
}

/// One key's entry.
#[derive(Debug, Default)]
pub struct Entry {
    pub counters: Mutex<Counters>,
    /// When the entry expires (a tick), renewed at each touch.
    expire: AtomicU32,
    /// Set while the table removes the entry ([`untracked`]): a connection
    /// that remembers it ([`track::Recent`]) looks it up in the map again.
    gone: AtomicBool,
}

impl Entry {
    /// Whether the entry is past its expiry at `now`.
    fn expired(&self, now: u32) -> bool {
        (now.wrapping_sub(self.expire.load(Ordering::Relaxed)) as i32) >= 0
    }

    /// Milliseconds before the entry expires (negative when past).
    pub fn remaining(&self, now: u32) -> i32 {
        self.expire.load(Ordering::Relaxed).wrapping_sub(now) as i32
    }
}

/// Whether no request tracks `e` (the table's map holds the only
/// reference), for a removal under the map shard's lock. A connection may
/// at the same time take the entry back from its [`track::Recent`], which
/// does not hold it: the entry is marked gone before the count is read,
/// and the connection reads the mark after raising the count (both behind
/// a full fence), so at least one of them sees the other — the removal
/// does not happen, or the connection looks the key up in the map.
fn untracked(e: &Arc<Entry>) -> bool {
    if Arc::strong_count(e) != 1 {
        return false;
    }
    e.gone.store(true, Ordering::Relaxed);
    fence(Ordering::SeqCst);
    if Arc::strong_count(e) == 1 {
        return true;
    }
    e.gone.store(false, Ordering::Relaxed);
    false
}

/// Bytes one entry takes, roughly: its map slot (key, pointer and the
/// hash table's control byte), its allocation (the `Arc`'s two counts and
/// the entry) and a string key's text.
pub fn entry_bytes(kind: KeyKind) -> usize {
    let text = match kind {
        KeyKind::Str { len } => len,
        _ => 0,
    };
    std::mem::size_of::<(Key, Arc<Entry>)>()
        + 1
        + 2 * std::mem::size_of::<usize>()
        + std::mem::size_of::<Entry>()
        + text
}

/// One table.
#[derive(Debug)]
pub struct StickTable {
    pub name: String,
    pub kind: KeyKind,
    /// At most this many entries.
    pub size: usize,
    /// Milliseconds an untouched entry lives.
    pub expire: u32,
    pub store: Store,
    map: Map<Key, Arc<Entry>>,
    /// Entries held or reserved: never above `size`.
    used: AtomicUsize,
    trimming: AtomicBool,
    /// `shared = true`: this proxy's increments since the last flush to
    /// the other proxies ([`share`]); empty otherwise.
    shared: bool,
    pending: Map<Key, Delta>,
    /// Keys in `pending`: never above `size`.
    pending_len: AtomicUsize,
    /// Increments not shared since the last report (`pending` was full).
    pending_refused: AtomicU64,
}

impl StickTable {
    pub fn new(name: &str, kind: KeyKind, size: usize, expire: u32, store: Store) -> StickTable {
        StickTable {
            name: name.to_string(),
            kind,
            size,
            expire,
            store,
            map: Map::default(),
            used: AtomicUsize::new(0),
            trimming: AtomicBool::new(false),
            shared: false,
            pending: Map::default(),
            pending_len: AtomicUsize::new(0),
            pending_refused: AtomicU64::new(0),
        }
    }

    /// The table, shared with the other proxies of `[stick_share]`.
    pub fn shared(mut self) -> StickTable {
        self.shared = true;
        self
    }

    /// Whether the table is shared with other proxies.
    pub fn is_shared(&self) -> bool {
        self.shared
    }

    /// Whether `other` is the same table definition (a reload keeps the
    /// counters of such a table).
    pub fn same_definition(&self, other: &StickTable) -> bool {
        self.name == other.name
            && self.kind == other.kind
            && self.size == other.size
            && self.expire == other.expire
            && self.store == other.store
    }

    /// Takes the entries of `old` when it is the same definition (a
    /// reload): the requests tracking them go on counting in them, and
    /// the increments not yet sent to the other proxies are sent.
    pub fn adopt(&self, old: &StickTable) {
        if !self.same_definition(old) || std::ptr::eq(self, old) {
            return;
        }
        if self.shared {
            for (k, d) in old.take_pending() {
                self.note(Some(&k), |p| p.add(&d));
            }
        }
        for e in old.map.iter() {
            if self.used.load(Ordering::Acquire) >= self.size {
                break;
            }
            if self
                .map
                .insert(e.key().clone(), Arc::clone(e.value()))
                .is_none()
            {
                self.used.fetch_add(1, Ordering::AcqRel);
            }
        }
    }

    /// Entries in the table.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    fn touch(&self, e: &Entry, now: u32) {
        e.expire
            .store(now.wrapping_add(self.expire), Ordering::Relaxed);
    }

    /// The entry of `key`, if there is a live one (`src_*` fetches: no
    /// entry is created).
    pub fn get(&self, key: &Key, now: u32) -> Option<Arc<Entry>> {
        let e = self.map.get(key)?;
        (!e.expired(now) || Arc::strong_count(&e) > 1).then(|| Arc::clone(&e))
    }

    /// The entry of `key`, created when missing (HAProxy's
    /// `stktable_get_entry`); `None` when the table is full of entries
    /// in use. The entry is touched.
    pub fn entry(&self, key: Key, now: u32) -> Option<Arc<Entry>> {
        if let Some(e) = self.map.get(&key) {
            return Some(self.found(Arc::clone(&e), now));
        }
        if !self.reserve(now) {
            return None;
        }
        let mut fresh = false;
        let e = Arc::clone(
            self.map
                .entry(key)
                .or_insert_with(|| {
                    fresh = true;
                    Arc::new(Entry::default())
                })
                .value(),
        );
        if !fresh {
            // Another request inserted it meanwhile.
            self.used.fetch_sub(1, Ordering::AcqRel);
        }
        self.touch(&e, now);
        Some(e)
    }

    /// An entry of the map taken for a tracking (`e` is the caller's
    /// reference): expired and tracked by no one, it is as good as new.
    /// The entry is touched.
    #[inline]
    fn found(&self, e: Arc<Entry>, now: u32) -> Arc<Entry> {
        if e.expired(now) && Arc::strong_count(&e) <= 2 {
            *e.counters.lock() = Counters::default();
        }
        self.touch(&e, now);
        e
    }

    /// The entry a connection remembered from an earlier request
    /// ([`track::Recent`]; `e` upgraded from its weak reference), unless
    /// the table is removing it ([`untracked`]): then `None`, and the key
    /// is looked up in the map. Touched, as [`StickTable::entry`].
    #[inline]
    pub fn remembered(&self, e: Arc<Entry>, now: u32) -> Option<Arc<Entry>> {
        fence(Ordering::SeqCst);
        if e.gone.load(Ordering::Relaxed) {
            return None;
        }
        Some(self.found(e, now))
    }

    /// Reserves one slot, making room when the table is full.
    fn reserve(&self, now: u32) -> bool {
        for _ in 0..2 {
            let n = self.used.fetch_add(1, Ordering::AcqRel);
            if n < self.size {
                return true;
            }
            self.used.fetch_sub(1, Ordering::AcqRel);
            self.trim(now);
        }
        false
    }

    /// Removes the expired entries, then the least recently touched
    /// untracked ones, until an eighth of the table is free (one thread at
    /// a time; the others find the room it made, or none).
    fn trim(&self, now: u32) {
        if self.trimming.swap(true, Ordering::AcqRel) {
            return;
        }
        let want = (self.size / 8).max(1);
        // Expiry order is touch order: the smallest remaining time is the
        // least recently touched.
        let mut old: Vec<(i32, Key)> = self
            .map
            .iter()
            .filter(|e| Arc::strong_count(e.value()) == 1)
            .map(|e| (e.value().remaining(now), e.key().clone()))
            .collect();
        let n = want.min(old.len());
        if n > 0 && n < old.len() {
            old.select_nth_unstable_by_key(n - 1, |(r, _)| *r);
        }
        let mut removed = 0;
        for (i, (r, key)) in old.iter().enumerate() {
            // The `n` oldest, and any other that expired.
            if i >= n && *r > 0 {
                continue;
            }
            if self.map.remove_if(key, |_, e| untracked(e)).is_some() {
                removed += 1;
            }
        }
        self.used.fetch_sub(removed, Ordering::AcqRel);
        self.trimming.store(false, Ordering::Release);
    }

    /// Removes the expired entries no request tracks (run periodically,
    /// as HAProxy's expiry task, and before `show table`).
    pub fn purge(&self, now: u32) -> usize {
        self.remove_where(|e| e.expired(now) && untracked(e))
    }

    /// Removes the entries `gone` picks, counting them as it goes (not as
    /// a difference of lengths, which an insertion meanwhile would throw
    /// off, leaving `used` above the entries held until the table refuses
    /// every new key).
    fn remove_where(&self, mut gone: impl FnMut(&Arc<Entry>) -> bool) -> usize {
        let mut removed = 0;
        self.map.retain(|_, e| {
            let g = gone(e);
            removed += usize::from(g);
            !g
        });
        self.used.fetch_sub(removed, Ordering::AcqRel);
        removed
    }

    /// Removes every entry no request tracks, or only `key`'s (`clear
    /// table`).
    pub fn clear(&self, key: Option<&Key>) -> usize {
        match key {
            Some(k) => {
                let removed = usize::from(self.map.remove_if(k, |_, e| untracked(e)).is_some());
                self.used.fetch_sub(removed, Ordering::AcqRel);
                removed
            }
            None => self.remove_where(untracked),
        }
    }

    /// A copy of the entries (key, whether tracked, remaining ms,
    /// counters), for `show table`.
    pub fn snapshot(&self, now: u32) -> Vec<(Key, usize, i32, Counters)> {
        self.map
            .iter()
            .map(|e| {
                let v = e.value();
                (
                    e.key().clone(),
                    Arc::strong_count(v) - 1,
                    v.remaining(now),
                    *v.counters.lock(),
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
