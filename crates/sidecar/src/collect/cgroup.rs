//! `kind = "cgroup"`: the load of one cgroup v2 directory (the app's
//! service), for nodes that run more than the app.
//!
//! - cpu (ppm): `usage_usec` of `cpu.stat` between samples, divided by the
//!   wall time and by the CPUs the cgroup may use: the `cpus` key if set,
//!   else the `cpu.max` quota, else the size of `cpuset.cpus.effective`, else
//!   the machine's CPU count. 1 000 000 means "using everything it may use",
//!   which is what the load index wants (a cgroup capped at half a CPU is
//!   saturated at half a CPU).
//! - mem (ppm): `memory.current` / `memory.max`; when `memory.max` is `max`,
//!   the machine's MemTotal is the limit. Missing memory files (controller
//!   not enabled, the root cgroup) leave the field out.

use std::path::Path;
use std::time::Instant;

use super::{read_text, CollectError, Field, Reading};
use crate::config;

/// `usage_usec` from `cpu.stat`.
pub fn parse_cpu_stat_usage(text: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let mut it = l.split_ascii_whitespace();
        (it.next() == Some("usage_usec"))
            .then(|| it.next()?.parse().ok())
            .flatten()
    })
}

/// CPUs granted by `cpu.max` (`"$QUOTA $PERIOD"`); `Some(None)` for `max`
/// (no quota), `None` for unreadable text.
pub fn parse_cpu_max(text: &str) -> Option<Option<f64>> {
    let mut it = text.split_ascii_whitespace();
    let quota = it.next()?;
    let period: f64 = it.next().map_or(Some(100_000.0), |p| p.parse().ok())?;
    if quota == "max" {
        return Some(None);
    }
    let quota: f64 = quota.parse().ok()?;
    (quota > 0.0 && period > 0.0).then_some(Some(quota / period))
}

/// Number of CPUs in a cpuset list such as `0-3,6,8-9`.
pub fn parse_cpuset(text: &str) -> Option<u32> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    let mut n = 0u32;
    for part in text.split(',') {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
                n = n.checked_add(b.checked_sub(a)?.checked_add(1)?)?;
            }
            None => {
                part.trim().parse::<u32>().ok()?;
                n = n.checked_add(1)?;
            }
        }
    }
    Some(n)
}

/// `memory.max`: `None` for `max` (no limit), else the limit in bytes.
pub fn parse_memory_max(text: &str) -> Option<Option<u64>> {
    match text.trim() {
        "max" => Some(None),
        t => t.parse().ok().map(Some),
    }
}

fn mem_total_bytes(proc_root: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(proc_root.join("meminfo")).ok()?;
    text.lines().find_map(|l| {
        let rest = l.strip_prefix("MemTotal:")?;
        let kb: u64 = rest.split_ascii_whitespace().next()?.parse().ok()?;
        kb.checked_mul(1024)
    })
}

/// The cgroup collector.
#[derive(Debug)]
pub struct CgroupCollector {
    cfg: config::CgroupCollector,
    prev: Option<(Instant, u64)>,
}

impl CgroupCollector {
    pub fn new(cfg: config::CgroupCollector) -> Self {
        CgroupCollector { cfg, prev: None }
    }

    /// CPUs that count as 100 % for this cgroup right now.
    fn cpu_capacity(&self) -> f64 {
        if let Some(n) = self.cfg.cpus {
            return n;
        }
        let read = |f: &str| std::fs::read_to_string(self.cfg.path.join(f)).ok();
        if let Some(Some(q)) = read("cpu.max").as_deref().and_then(parse_cpu_max) {
            return q;
        }
        if let Some(n) = read("cpuset.cpus.effective")
            .as_deref()
            .and_then(parse_cpuset)
        {
            if n > 0 {
                return f64::from(n);
            }
        }
        std::thread::available_parallelism().map_or(1.0, |n| n.get() as f64)
    }

    /// Takes one sample. Fails when the cgroup's `cpu.stat` cannot be read
    /// (cgroup removed, not cgroup v2).
    pub fn sample(&mut self) -> Result<Reading, CollectError> {
        let now = Instant::now();
        let stat_path = self.cfg.path.join("cpu.stat");
        let usage = parse_cpu_stat_usage(&read_text(&stat_path)?).ok_or_else(|| {
            CollectError::parse(
                &stat_path,
                "no usage_usec line (is this a cgroup v2 directory?)",
            )
        })?;
        let mut r = Reading::default();
        if let Some((at, before)) = self.prev {
            let wall_us = now.duration_since(at).as_secs_f64() * 1e6;
            if let (Some(used), true) = (usage.checked_sub(before), wall_us > 0.0) {
                let ppm = used as f64 / (wall_us * self.cpu_capacity()) * 1e6;
                r.set(Field::Cpu, ppm.round().min(u64::MAX as f64) as u64);
            }
        }
        self.prev = Some((now, usage));

        let current = std::fs::read_to_string(self.cfg.path.join("memory.current"))
            .ok()
            .and_then(|t| t.trim().parse::<u64>().ok());
        if let Some(current) = current {
            let limit = std::fs::read_to_string(self.cfg.path.join("memory.max"))
                .ok()
                .and_then(|t| parse_memory_max(&t))
                .flatten()
                .or_else(|| mem_total_bytes(&self.cfg.proc_root));
            if let Some(limit) = limit.filter(|&l| l > 0) {
                let ppm = u128::from(current.min(limit)) * 1_000_000 / u128::from(limit);
                r.set(Field::Mem, ppm as u64);
            }
        }
        Ok(r)
    }
}

#[cfg(test)]
mod tests;
