//! `kind = "system"`: whole-machine load from procfs.
//!
//! | field | source |
//! |---|---|
//! | cpu (ppm) | `/proc/stat` first `cpu` line, busy / total jiffies between two samples (busy excludes idle and iowait) |
//! | run queue (milli-tasks) | `procs_running` in `/proc/stat` (fallback: the running count of `/proc/loadavg`), minus the collector itself |
//! | mem (ppm) | `/proc/meminfo`, (MemTotal − MemAvailable) / MemTotal |
//! | net rx/tx (bytes/s) | `/proc/net/dev` byte counters between samples, summed over the configured interfaces (default: all but `lo`) |
//! | connections | `/proc/net/tcp` + `/proc/net/tcp6`, state 01 (ESTABLISHED) with local port = `app_port` |
//! | irq rate (/s) | sums of `/proc/interrupts` + `/proc/softirqs` between samples |
//!
//! Rates need two samples, so the first sample after start fills only the
//! level fields. Every parser takes text and returns `Option`: odd or
//! truncated procfs contents yield "unknown", never a panic.

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::{read_text, CollectError, Field, Reading};
use crate::config;

/// CPU time counters from the aggregate `cpu` line of `/proc/stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuTimes {
    /// Jiffies not idle and not waiting for I/O.
    pub busy: u64,
    /// All jiffies (guest time is already inside user/nice, so it is not added).
    pub total: u64,
}

/// What `/proc/stat` tells us.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub cpu: CpuTimes,
    pub procs_running: Option<u64>,
}

/// Parses `/proc/stat`.
pub fn parse_stat(text: &str) -> Option<Stat> {
    let mut cpu = None;
    let mut procs_running = None;
    for line in text.lines() {
        let mut it = line.split_ascii_whitespace();
        match it.next() {
            Some("cpu") => {
                let v: Vec<u64> = it.take(8).map_while(|t| t.parse().ok()).collect();
                // user nice system idle [iowait irq softirq steal]; at least
                // the first four exist on every kernel.
                if v.len() < 4 {
                    return None;
                }
                let total = v.iter().try_fold(0u64, |a, &b| a.checked_add(b))?;
                let idle = v[3].checked_add(v.get(4).copied().unwrap_or(0))?;
                cpu = Some(CpuTimes {
                    busy: total.saturating_sub(idle),
                    total,
                });
            }
            Some("procs_running") => procs_running = it.next().and_then(|t| t.parse().ok()),
            _ => {}
        }
    }
    Some(Stat {
        cpu: cpu?,
        procs_running,
    })
}

/// CPU utilisation in ppm between two `/proc/stat` samples.
pub fn cpu_ppm(before: CpuTimes, after: CpuTimes) -> Option<u64> {
    let total = after.total.checked_sub(before.total)?;
    let busy = after.busy.checked_sub(before.busy)?;
    if total == 0 {
        return None;
    }
    Some((u128::from(busy.min(total)) * 1_000_000 / u128::from(total)) as u64)
}

/// The running-task count of `/proc/loadavg` (`0.10 0.20 0.30 3/456 789`).
pub fn parse_loadavg_running(text: &str) -> Option<u64> {
    let field = text.split_ascii_whitespace().nth(3)?;
    field.split_once('/')?.0.parse().ok()
}

/// Memory used in ppm from `/proc/meminfo` (MemAvailable; on kernels
/// without it, MemFree + Buffers + Cached).
pub fn parse_meminfo_used_ppm(text: &str) -> Option<u64> {
    let (mut total, mut avail, mut free, mut buffers, mut cached) = (None, None, None, None, None);
    for line in text.lines() {
        let Some((k, rest)) = line.split_once(':') else {
            continue;
        };
        let v = rest
            .split_ascii_whitespace()
            .next()
            .and_then(|t| t.parse::<u64>().ok());
        match k {
            "MemTotal" => total = v,
            "MemAvailable" => avail = v,
            "MemFree" => free = v,
            "Buffers" => buffers = v,
            "Cached" => cached = v,
            _ => {}
        }
    }
    let total = total.filter(|&t| t > 0)?;
    let avail = match avail {
        Some(a) => a,
        None => free?
            .saturating_add(buffers.unwrap_or(0))
            .saturating_add(cached.unwrap_or(0)),
    };
    let used = total.saturating_sub(avail.min(total));
    Some((u128::from(used) * 1_000_000 / u128::from(total)) as u64)
}

/// Summed byte counters of `/proc/net/dev`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NetBytes {
    pub rx: u64,
    pub tx: u64,
}

/// Parses `/proc/net/dev`, summing `interfaces` (or every interface but `lo`).
pub fn parse_net_dev(text: &str, interfaces: Option<&[String]>) -> Option<NetBytes> {
    let mut sum = NetBytes::default();
    let mut any = false;
    for line in text.lines() {
        // Header lines have a '|' and no "name:" prefix.
        let Some((name, rest)) = line.split_once(':') else {
            continue;
        };
        let name = name.trim();
        let wanted = match interfaces {
            Some(list) => list.iter().any(|i| i == name),
            None => name != "lo",
        };
        if !wanted {
            continue;
        }
        let v: Vec<u64> = rest
            .split_ascii_whitespace()
            .map_while(|t| t.parse().ok())
            .collect();
        // 8 receive columns, then transmit bytes.
        let (Some(&rx), Some(&tx)) = (v.first(), v.get(8)) else {
            continue;
        };
        sum.rx = sum.rx.wrapping_add(rx);
        sum.tx = sum.tx.wrapping_add(tx);
        any = true;
    }
    // No wanted interface at all is an answer ("0 bytes"), not an error, unless
    // the file is not /proc/net/dev-shaped.
    (any || text.contains("Receive")).then_some(sum)
}

/// Counts ESTABLISHED (state `01`) sockets with local port `port` in a
/// `/proc/net/tcp` or `/proc/net/tcp6` text.
pub fn count_established(text: &str, port: u16) -> u64 {
    let mut n = 0;
    for line in text.lines().skip(1) {
        let mut it = line.split_ascii_whitespace();
        // sl local_address rem_address st ...
        let (Some(_), Some(local), Some(_), Some(st)) =
            (it.next(), it.next(), it.next(), it.next())
        else {
            continue;
        };
        let Some((_, hex_port)) = local.rsplit_once(':') else {
            continue;
        };
        if st == "01" && u16::from_str_radix(hex_port, 16) == Ok(port) {
            n += 1;
        }
    }
    n
}

/// Sums every per-CPU counter of `/proc/interrupts` or `/proc/softirqs`.
/// The header names the CPUs; each row is `NAME: c0 c1 ... [description]`
/// (rows such as `ERR:` have a single count).
pub fn sum_irq_table(text: &str) -> Option<u64> {
    let mut lines = text.lines();
    let ncpu = lines
        .next()?
        .split_ascii_whitespace()
        .filter(|t| t.starts_with("CPU"))
        .count();
    if ncpu == 0 {
        return None;
    }
    let mut sum = 0u64;
    for line in lines {
        let Some((_, rest)) = line.split_once(':') else {
            continue;
        };
        for t in rest.split_ascii_whitespace().take(ncpu) {
            match t.parse::<u64>() {
                Ok(v) => sum = sum.wrapping_add(v),
                Err(_) => break,
            }
        }
    }
    Some(sum)
}

/// Per-second rate of a counter between two samples; a counter that went
/// backwards (reset, wrap) gives no rate rather than a huge one.
pub fn rate(before: u64, after: u64, secs: f64) -> Option<u64> {
    if secs <= 0.0 {
        return None;
    }
    let d = after.checked_sub(before)?;
    Some((d as f64 / secs).round() as u64)
}

/// Counters kept between samples.
#[derive(Debug, Clone, Copy)]
struct Previous {
    at: Instant,
    cpu: Option<CpuTimes>,
    net: Option<NetBytes>,
    irq: Option<u64>,
}

/// The system collector: keeps the previous counters to compute rates.
#[derive(Debug)]
pub struct SystemCollector {
    cfg: config::SystemCollector,
    prev: Option<Previous>,
}

impl SystemCollector {
    pub fn new(cfg: config::SystemCollector) -> Self {
        SystemCollector { cfg, prev: None }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.cfg.proc_root.join(rel)
    }

    /// Takes one sample. Fails only when `/proc/stat` or `/proc/meminfo`
    /// cannot be read or parsed; a missing optional source (no IPv6, no
    /// softirqs) just leaves its field out.
    pub fn sample(&mut self) -> Result<Reading, CollectError> {
        let now = Instant::now();
        let stat_path = self.path("stat");
        let stat = parse_stat(&read_text(&stat_path)?)
            .ok_or_else(|| CollectError::parse(&stat_path, "no `cpu` line with 4+ counters"))?;
        let mem_path = self.path("meminfo");
        let mem = parse_meminfo_used_ppm(&read_text(&mem_path)?)
            .ok_or_else(|| CollectError::parse(&mem_path, "no MemTotal/MemAvailable"))?;

        let mut r = Reading::default();
        r.set(Field::Mem, mem);
        let running = match stat.procs_running {
            Some(n) => Some(n),
            None => read_opt(&self.path("loadavg")).and_then(|t| parse_loadavg_running(&t)),
        };
        // The collector itself is running while it reads the count.
        r.set_opt(
            Field::RunQueue,
            running.map(|n| n.saturating_sub(1).saturating_mul(1000)),
        );

        let net_path = self.path("net/dev");
        let net =
            read_opt(&net_path).and_then(|t| parse_net_dev(&t, self.cfg.interfaces.as_deref()));
        let irq = {
            let hard = read_opt(&self.path("interrupts")).and_then(|t| sum_irq_table(&t));
            let soft = read_opt(&self.path("softirqs")).and_then(|t| sum_irq_table(&t));
            match (hard, soft) {
                (None, None) => None,
                (h, s) => Some(h.unwrap_or(0).wrapping_add(s.unwrap_or(0))),
            }
        };
        if let Some(port) = self.cfg.app_port {
            let v4 = read_opt(&self.path("net/tcp"));
            let v6 = read_opt(&self.path("net/tcp6"));
            if v4.is_some() || v6.is_some() {
                let n = v4.map_or(0, |t| count_established(&t, port))
                    + v6.map_or(0, |t| count_established(&t, port));
                r.set(Field::Connections, n);
            }
        }

        if let Some(p) = self.prev {
            let secs = now.duration_since(p.at).as_secs_f64();
            if let (Some(a), b) = (p.cpu, stat.cpu) {
                r.set_opt(Field::Cpu, cpu_ppm(a, b));
            }
            if let (Some(a), Some(b)) = (p.net, net) {
                r.set_opt(Field::NetRx, rate(a.rx, b.rx, secs));
                r.set_opt(Field::NetTx, rate(a.tx, b.tx, secs));
            }
            if let (Some(a), Some(b)) = (p.irq, irq) {
                r.set_opt(Field::IrqRate, rate(a, b, secs));
            }
        }
        self.prev = Some(Previous {
            at: now,
            cpu: Some(stat.cpu),
            net,
            irq,
        });
        Ok(r)
    }
}

fn read_opt(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

#[cfg(test)]
mod tests;
