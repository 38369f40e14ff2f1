//! `kind = "status"`: scrape the app's own status page.
//!
//! - `format = "nginx"` (`stub_status`): connections = `Active connections`,
//!   busy = `Reading` + `Writing`, requests_total = the third counter of the
//!   `server accepts handled requests` line. nginx does not tell its
//!   capacity; set `capacity` in the collector to publish one.
//! - `format = "apache"` (`mod_status`, `?auto`): busy = `BusyWorkers`,
//!   capacity = `BusyWorkers` + `IdleWorkers` (unless `capacity` is set),
//!   requests_total = `Total Accesses`, connections = `ConnsTotal` (event MPM).
//!
//! The scrape itself occupies one connection and one busy worker on the app,
//! so one is subtracted from `connections` and `busy`: an idle app reads 0.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;

use super::{CollectError, Field, Reading};
use crate::config::{self, StatusFormat};

/// Status pages are a few hundred bytes; anything past this is not one.
const MAX_BODY: usize = 64 * 1024;

/// nginx `stub_status` numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NginxStatus {
    pub active: u64,
    pub accepts: u64,
    pub handled: u64,
    pub requests: u64,
    pub reading: u64,
    pub writing: u64,
    pub waiting: u64,
}

/// A status page body that is not the format configured: what it lacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum StatusPageError {
    #[error("no `Active connections: N` line")]
    NginxActive,
    #[error("no `server accepts handled requests` counters")]
    NginxCounters,
    #[error("no `Reading: N Writing: N Waiting: N` line")]
    NginxStates,
    #[error("no `BusyWorkers: N` line (is the URL `...server-status?auto`?)")]
    ApacheBusy,
    #[error("no `IdleWorkers: N` line")]
    ApacheIdle,
}

/// Parses an nginx `stub_status` body.
pub fn parse_nginx(text: &str) -> Result<NginxStatus, StatusPageError> {
    let mut active = None;
    let mut counters = None;
    let mut rww = None;
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("Active connections:") {
            active = rest.trim().parse().ok();
        } else if line.starts_with("server accepts handled requests") {
            let v: Vec<u64> = lines
                .next()
                .unwrap_or("")
                .split_ascii_whitespace()
                .map_while(|t| t.parse().ok())
                .collect();
            if let [a, h, r, ..] = v[..] {
                counters = Some((a, h, r));
            }
        } else if line.starts_with("Reading:") {
            let t: Vec<&str> = line.split_ascii_whitespace().collect();
            if let ["Reading:", r, "Writing:", w, "Waiting:", wa, ..] = t[..] {
                if let (Ok(r), Ok(w), Ok(wa)) = (r.parse(), w.parse(), wa.parse()) {
                    rww = Some((r, w, wa));
                }
            }
        }
    }
    let active = active.ok_or(StatusPageError::NginxActive)?;
    let (accepts, handled, requests) = counters.ok_or(StatusPageError::NginxCounters)?;
    let (reading, writing, waiting) = rww.ok_or(StatusPageError::NginxStates)?;
    Ok(NginxStatus {
        active,
        accepts,
        handled,
        requests,
        reading,
        writing,
        waiting,
    })
}

/// Apache `mod_status?auto` numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApacheStatus {
    pub total_accesses: Option<u64>,
    pub busy_workers: u64,
    pub idle_workers: u64,
    pub conns_total: Option<u64>,
}

/// Parses an Apache `mod_status?auto` body.
pub fn parse_apache(text: &str) -> Result<ApacheStatus, StatusPageError> {
    let (mut accesses, mut busy, mut idle, mut conns) = (None, None, None, None);
    for line in text.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let v = v.trim().parse::<u64>().ok();
        match k.trim() {
            "Total Accesses" => accesses = v,
            "BusyWorkers" => busy = v,
            "IdleWorkers" => idle = v,
            "ConnsTotal" => conns = v,
            _ => {}
        }
    }
    Ok(ApacheStatus {
        total_accesses: accesses,
        busy_workers: busy.ok_or(StatusPageError::ApacheBusy)?,
        idle_workers: idle.ok_or(StatusPageError::ApacheIdle)?,
        conns_total: conns,
    })
}

/// Maps a status body to a reading, excluding the scrape itself.
pub fn reading_from_body(
    format: StatusFormat,
    body: &str,
    capacity: Option<u64>,
) -> Result<Reading, StatusPageError> {
    let mut r = Reading::default();
    match format {
        StatusFormat::Nginx => {
            let s = parse_nginx(body)?;
            r.set(Field::Connections, s.active.saturating_sub(1));
            r.set(Field::AppBusy, (s.reading + s.writing).saturating_sub(1));
            r.set(Field::RequestsTotal, s.requests);
            r.set_opt(Field::AppCapacity, capacity);
        }
        StatusFormat::Apache => {
            let s = parse_apache(body)?;
            r.set(Field::AppBusy, s.busy_workers.saturating_sub(1));
            r.set(
                Field::AppCapacity,
                capacity.unwrap_or(s.busy_workers.saturating_add(s.idle_workers)),
            );
            r.set_opt(Field::RequestsTotal, s.total_accesses);
            r.set_opt(
                Field::Connections,
                s.conns_total.map(|c| c.saturating_sub(1)),
            );
        }
    }
    Ok(r)
}

/// The status collector: one pooled HTTP/1.1 client.
#[derive(Debug)]
pub struct StatusCollector {
    cfg: config::StatusCollector,
    client: Client<HttpConnector, Empty<Bytes>>,
}

impl StatusCollector {
    pub fn new(cfg: config::StatusCollector) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(cfg.timeout));
        connector.set_nodelay(true);
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .pool_max_idle_per_host(1)
            .build(connector);
        StatusCollector { cfg, client }
    }

    fn err(&self, detail: impl Into<String>) -> CollectError {
        CollectError::Http {
            url: self.cfg.url.to_string(),
            detail: detail.into(),
        }
    }

    /// One scrape within the configured timeout.
    pub async fn sample(&self) -> Result<Reading, CollectError> {
        let body = tokio::time::timeout(self.cfg.timeout, self.fetch())
            .await
            .map_err(|_| {
                self.err(format!(
                    "no answer within {}",
                    rdmalb_base::duration::format(self.cfg.timeout)
                ))
            })??;
        let text = std::str::from_utf8(&body).map_err(|_| self.err("body is not UTF-8 text"))?;
        reading_from_body(self.cfg.format, text, self.cfg.capacity)
            .map_err(|e| self.err(e.to_string()))
    }

    async fn fetch(&self) -> Result<Bytes, CollectError> {
        let res =
            self.client.get(self.cfg.url.clone()).await.map_err(|e| {
                self.err(format!("request failed: {}", rdmalb_base::error::chain(&e)))
            })?;
        if !res.status().is_success() {
            return Err(self.err(format!("HTTP status {}", res.status())));
        }
        let body = Limited::new(res.into_body(), MAX_BODY)
            .collect()
            .await
            .map_err(|e| self.err(format!("reading body: {e}")))?;
        Ok(body.to_bytes())
    }
}

#[cfg(test)]
mod tests;
