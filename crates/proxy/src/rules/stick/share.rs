//! One rate limit across several proxies (`docs/rate-limits.md`, "One
//! limit across several proxies"): a `[[stick_table]]` with `shared =
//! true` keeps this proxy's increments per key since the last flush
//! ([`StickTable::note`], on the request path: one sharded-map update),
//! and every `[stick_share] interval` (50 ms) the share task
//! (`front/share.rs`) sends them to the other proxies in authenticated
//! datagrams ([`wire`]); a proxy adds what it receives into its own
//! entries ([`StickTable::merge`]) through the same `freq_ctr` updates as
//! its own requests. Every proxy then reads the cluster-wide count, less
//! at most one interval (and the network delay) of the others' requests.
//!
//! Bounded: the pending map holds at most `size` keys (a key past that
//! is not shared, and counted); received keys take table slots as local
//! ones do (a full table drops them, counted); a datagram is at most
//! [`wire::MAX_DATAGRAM`] bytes. `conn_cur` stays local: a gauge is not
//! summed.

pub mod config;
pub mod wire;

use std::sync::atomic::Ordering;

use super::{rate, Counters, Data, Key, KeyKind, StickTable, Store};

pub use config::Share;

/// A key's increments: what one proxy's requests added since its last
/// flush (a count and its rate move together).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Delta {
    /// `http_req_cnt` / `http_req_rate`.
    pub req: u32,
    /// `http_err_cnt` / `http_err_rate`.
    pub err: u32,
    /// `conn_cnt` / `conn_rate` (trackings started).
    pub conn: u32,
    /// `gpc0`/`gpc1` and their rates.
    pub gpc: [u32; 2],
}

impl Delta {
    /// Adds `o` (saturating: a forged or wrapped figure cannot wrap).
    pub fn add(&mut self, o: &Delta) {
        self.req = self.req.saturating_add(o.req);
        self.err = self.err.saturating_add(o.err);
        self.conn = self.conn.saturating_add(o.conn);
        self.gpc[0] = self.gpc[0].saturating_add(o.gpc[0]);
        self.gpc[1] = self.gpc[1].saturating_add(o.gpc[1]);
    }

    pub fn is_empty(&self) -> bool {
        *self == Delta::default()
    }
}

impl Counters {
    /// Adds another proxy's increments at `now`, as its requests would
    /// have counted here.
    pub fn merge(&mut self, d: &Delta, store: &Store, now: u32) {
        self.conn_cnt = self.conn_cnt.wrapping_add(d.conn);
        rate(&mut self.conn_rate, store, Data::ConnRate, now, d.conn);
        self.http_req_cnt = self.http_req_cnt.wrapping_add(d.req);
        rate(
            &mut self.http_req_rate,
            store,
            Data::HttpReqRate,
            now,
            d.req,
        );
        self.http_err_cnt = self.http_err_cnt.wrapping_add(d.err);
        rate(
            &mut self.http_err_rate,
            store,
            Data::HttpErrRate,
            now,
            d.err,
        );
        for (i, d_rate) in [Data::Gpc0Rate, Data::Gpc1Rate].into_iter().enumerate() {
            self.gpc[i] = self.gpc[i].wrapping_add(d.gpc[i]);
            rate(&mut self.gpc_rate[i], store, d_rate, now, d.gpc[i]);
        }
    }
}

/// Why received increments were not added.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MergeRefusal {
    /// The key is not of the table's type (an address in a string table,
    /// a string longer than `len`).
    WrongKey,
    /// The table is full of entries in use.
    Full,
}

impl StickTable {
    /// Records this proxy's increments `f` of `key` for the next flush
    /// (nothing when the table is not shared or `key` is `None`). Returns
    /// false when the pending map is full (`size` keys): the increment
    /// counts here but is not shared.
    pub fn note(&self, key: Option<&Key>, f: impl FnOnce(&mut Delta)) -> bool {
        let Some(key) = key.filter(|_| self.shared) else {
            return true;
        };
        if let Some(mut d) = self.pending.get_mut(key) {
            f(&mut d);
            return true;
        }
        if self.pending_len.fetch_add(1, Ordering::AcqRel) >= self.size {
            self.pending_len.fetch_sub(1, Ordering::AcqRel);
            self.pending_refused.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        let mut fresh = false;
        let mut d = self.pending.entry(key.clone()).or_insert_with(|| {
            fresh = true;
            Delta::default()
        });
        f(&mut d);
        drop(d);
        if !fresh {
            // Another request inserted it meanwhile.
            self.pending_len.fetch_sub(1, Ordering::AcqRel);
        }
        true
    }

    /// Increments not shared since the last call (the pending map was
    /// full).
    pub fn take_pending_refused(&self) -> u64 {
        self.pending_refused.swap(0, Ordering::Relaxed)
    }

    /// Takes the increments recorded since the last call.
    pub fn take_pending(&self) -> Vec<(Key, Delta)> {
        let mut out = Vec::new();
        let mut removed = 0;
        self.pending.retain(|k, d| {
            removed += 1;
            if !d.is_empty() {
                out.push((k.clone(), *d));
            }
            false
        });
        self.pending_len.fetch_sub(removed, Ordering::AcqRel);
        out
    }

    /// Adds another proxy's increments of `key` into its entry (created
    /// when missing, within `size`, and touched) at `now`.
    pub fn merge(&self, key: Key, d: &Delta, now: u32) -> Result<(), MergeRefusal> {
        let fits = match (&key, self.kind) {
            (Key::V4(_), KeyKind::Ip) | (Key::V6(_), KeyKind::Ipv6) => true,
            (Key::Str(s), KeyKind::Str { len }) => s.len() <= len,
            _ => false,
        };
        if !fits {
            return Err(MergeRefusal::WrongKey);
        }
        let e = self.entry(key, now).ok_or(MergeRefusal::Full)?;
        e.counters.lock().merge(d, &self.store, now);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
