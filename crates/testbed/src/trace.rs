//! Request traces: the line format, seeded generators and host mapping.
//!
//! A trace is a text file, one request per line: `<site><TAB><path>`
//! (path with query). Lines starting with `#` and empty lines are
//! ignored; generators write a `#` header naming the generator and its
//! parameters, so a trace file documents how it was made. The client
//! sends each request with its site's Host header ([`HostMap`]).
//!
//! Generators (docs/testbed.md, "Traces"), all deterministic for a seed
//! (`rand::StdRng`):
//! - `single-file`: one URL per site (`/static/1k`, seed 001 §6), the
//!   site of each request drawn uniformly.
//! - `zipf`: a file set with popularity ∝ 1/rank^α (seed 002 §5, α 0.25 ..
//!   0.9); file sizes log-uniform in [min_size, max_size], a share of the
//!   files dynamic.
//! - `bursty`: runs of exactly L requests (512 .. 64K, seeds 001 §6 / 003
//!   §5.2.2) alternating between sites in turn, or between static and
//!   dynamic content.
//! - `world-cup`: the synthetic stand-in for the 1998 World Cup trace of
//!   seed 003 §5.2.2 — about two thirds dynamic requests in long bursts,
//!   static requests (Zipf over a file set) between them; run lengths are
//!   exponential with means chosen to give the dynamic share.

pub mod export;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Deserialize;

use super::config::format_size;
use rdmalb_base::duration;

/// Why a trace could not be read, generated or written.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("trace {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("trace {path}, line {line}: {message}")]
    Line {
        path: String,
        line: usize,
        message: String,
    },
    #[error("trace {path} holds no requests")]
    Empty { path: String },
    #[error("trace generator: {0}")]
    Invalid(String),
}

/// A loaded trace: the site table (first-seen order) and the requests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Trace {
    pub sites: Vec<String>,
    /// (index into `sites`, path).
    pub requests: Vec<(usize, String)>,
}

impl Trace {
    /// Appends a request, adding its site to the table when new.
    pub fn push(&mut self, site: &str, path: String) {
        let i = match self.sites.iter().position(|s| s == site) {
            Some(i) => i,
            None => {
                self.sites.push(site.to_string());
                self.sites.len() - 1
            }
        };
        self.requests.push((i, path));
    }

    /// Parses the line format.
    pub fn parse(text: &str, path: &str) -> Result<Trace, TraceError> {
        let mut t = Trace::default();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim_end_matches('\r');
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let err = |message: &str| TraceError::Line {
                path: path.to_string(),
                line: n + 1,
                message: message.to_string(),
            };
            let Some((site, p)) = line.split_once('\t') else {
                return Err(err("expected <site><TAB><path>"));
            };
            if site.is_empty() || site.bytes().any(|b| b.is_ascii_whitespace()) {
                return Err(err("the site name is empty or has blanks"));
            }
            if !p.starts_with('/')
                || p.bytes()
                    .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
            {
                return Err(err("the path must start with / and have no blanks"));
            }
            t.push(site, p.to_string());
        }
        if t.requests.is_empty() {
            return Err(TraceError::Empty {
                path: path.to_string(),
            });
        }
        Ok(t)
    }

    pub fn load(path: &Path) -> Result<Trace, TraceError> {
        let p = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| TraceError::Io {
            path: p.clone(),
            source: e,
        })?;
        Trace::parse(&text, &p)
    }

    /// The file text, with `header` lines as `#` comments first.
    pub fn to_text(&self, header: &str) -> String {
        let mut s = String::with_capacity(self.requests.len() * 24);
        for l in header.lines() {
            let _ = writeln!(s, "# {l}");
        }
        for (site, path) in &self.requests {
            let _ = writeln!(s, "{}\t{}", self.sites[*site], path);
        }
        s
    }

    pub fn write(&self, path: &Path, header: &str) -> Result<(), TraceError> {
        std::fs::write(path, self.to_text(header)).map_err(|e| TraceError::Io {
            path: path.display().to_string(),
            source: e,
        })
    }
}

/// Site → Host header. Default `<site>.localhost`; `site=host` entries
/// override.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostMap {
    map: HashMap<String, String>,
}

impl HostMap {
    /// Parses `shop=shop.example.com,blog=blog.example.com` (empty: defaults).
    pub fn parse(text: &str) -> Result<HostMap, String> {
        let mut map = HashMap::new();
        for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((site, host)) = pair.split_once('=') else {
                return Err(format!("`{pair}` is not site=host"));
            };
            if site.is_empty() || host.is_empty() || host.bytes().any(|b| b.is_ascii_whitespace()) {
                return Err(format!("`{pair}` is not site=host"));
            }
            map.insert(site.to_string(), host.to_string());
        }
        Ok(HostMap { map })
    }

    pub fn host(&self, site: &str) -> String {
        self.map
            .get(site)
            .cloned()
            .unwrap_or_else(|| format!("{site}.localhost"))
    }
}

/// Which content a bursty trace alternates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum BurstMode {
    /// Bursts of L requests to one site, sites in turn.
    Sites,
    /// Bursts of L static then L dynamic requests, sites drawn uniformly.
    Content,
}

/// A generator and its parameters (the `[trace]` table of a cluster spec
/// and the `rdmalb-testbed trace` subcommands). Sizes are text (`1k`), costs
/// durations (`10ms`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Generator {
    SingleFile {
        #[serde(default = "default_size")]
        size: String,
    },
    Zipf {
        alpha: f64,
        #[serde(default = "default_files")]
        files: u32,
        #[serde(default = "default_min_size")]
        min_size: String,
        #[serde(default = "default_max_size")]
        max_size: String,
        #[serde(default)]
        dynamic_share: f64,
        #[serde(default = "default_cost")]
        cost: String,
    },
    Bursty {
        burst: u64,
        #[serde(default = "default_mode")]
        mode: BurstMode,
        #[serde(default = "default_size")]
        size: String,
        #[serde(default = "default_cost")]
        cost: String,
    },
    WorldCup {
        #[serde(default = "default_wc_share")]
        dynamic_share: f64,
        #[serde(default = "default_wc_burst")]
        mean_burst: u64,
        #[serde(default = "default_files")]
        files: u32,
        #[serde(default = "default_cost")]
        cost: String,
    },
}

fn default_size() -> String {
    "1k".into()
}
fn default_min_size() -> String {
    "512".into()
}
fn default_max_size() -> String {
    "64k".into()
}
fn default_files() -> u32 {
    1000
}
fn default_cost() -> String {
    "10ms".into()
}
fn default_mode() -> BurstMode {
    BurstMode::Sites
}
fn default_wc_share() -> f64 {
    2.0 / 3.0
}
fn default_wc_burst() -> u64 {
    4096
}

/// Zipf exponent of the world-cup model's static file popularity.
pub const WORLD_CUP_STATIC_ALPHA: f64 = 0.8;

/// Cumulative Zipf weights of ranks 1..=n (normalised to end at 1).
fn zipf_cdf(n: u32, alpha: f64) -> Vec<f64> {
    let mut acc = 0.0;
    let mut cdf: Vec<f64> = (1..=n)
        .map(|i| {
            acc += 1.0 / f64::from(i).powf(alpha);
            acc
        })
        .collect();
    for c in &mut cdf {
        *c /= acc;
    }
    cdf
}

/// Draws a 0-based rank from a CDF.
fn draw(cdf: &[f64], rng: &mut StdRng) -> usize {
    let u: f64 = rng.gen();
    cdf.partition_point(|&c| c < u).min(cdf.len() - 1)
}

/// Exponential run length with the given mean, at least 1.
fn run_length(mean: f64, rng: &mut StdRng) -> u64 {
    let u: f64 = rng.gen_range(f64::MIN_POSITIVE..1.0);
    ((-u.ln()) * mean).round().max(1.0) as u64
}

fn size_arg(what: &str, text: &str) -> Result<u64, TraceError> {
    super::config::parse_size(text).map_err(|e| TraceError::Invalid(format!("{what}: {e}")))
}

fn cost_arg(text: &str) -> Result<Duration, TraceError> {
    duration::parse(text).map_err(|e| TraceError::Invalid(format!("cost: {e}")))
}

fn share_arg(what: &str, v: f64) -> Result<f64, TraceError> {
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err(TraceError::Invalid(format!(
            "{what} {v} is out of range (accepted: 0.0 to 1.0)"
        )))
    }
}

/// The file set of a Zipf-like generator: per rank, its path.
fn file_set(
    files: u32,
    min: u64,
    max: u64,
    dynamic_share: f64,
    cost: Duration,
    rng: &mut StdRng,
) -> Vec<String> {
    let (lmin, lmax) = ((min.max(1) as f64).ln(), (max.max(1) as f64).ln());
    (0..files)
        .map(|i| {
            let size = rng.gen_range(lmin..=lmax).exp().round() as u64;
            if rng.gen::<f64>() < dynamic_share {
                format!("/dynamic/f{i}?cost={}&size={size}", duration::format(cost))
            } else {
                format!("/static/{size}?file={i}")
            }
        })
        .collect()
}

impl Generator {
    /// One line describing the generator (written into the trace header).
    pub fn describe(&self) -> String {
        match self {
            Generator::SingleFile { size } => format!("single-file size={size}"),
            Generator::Zipf {
                alpha,
                files,
                min_size,
                max_size,
                dynamic_share,
                cost,
            } => {
                format!("zipf alpha={alpha} files={files} min_size={min_size} max_size={max_size} dynamic_share={dynamic_share} cost={cost}")
            }
            Generator::Bursty {
                burst,
                mode,
                size,
                cost,
            } => format!("bursty burst={burst} mode={mode:?} size={size} cost={cost}"),
            Generator::WorldCup {
                dynamic_share,
                mean_burst,
                files,
                cost,
            } => {
                format!("world-cup dynamic_share={dynamic_share} mean_burst={mean_burst} files={files} cost={cost}")
            }
        }
    }

    /// Generates `requests` requests over `sites` with `seed`.
    pub fn generate(
        &self,
        sites: &[String],
        requests: u64,
        seed: u64,
    ) -> Result<Trace, TraceError> {
        if sites.is_empty() {
            return Err(TraceError::Invalid("no sites given".into()));
        }
        if requests == 0 || requests > 100_000_000 {
            return Err(TraceError::Invalid(format!(
                "{requests} requests is out of range (accepted: 1 to 100000000)"
            )));
        }
        let mut rng = StdRng::seed_from_u64(seed);
        let mut t = Trace {
            sites: sites.to_vec(),
            requests: Vec::with_capacity(requests as usize),
        };
        let n = sites.len();
        match self {
            Generator::SingleFile { size } => {
                let path = format!("/static/{}", format_size(size_arg("size", size)?));
                for _ in 0..requests {
                    t.requests.push((rng.gen_range(0..n), path.clone()));
                }
            }
            Generator::Zipf {
                alpha,
                files,
                min_size,
                max_size,
                dynamic_share,
                cost,
            } => {
                let sizes = (min_size.as_str(), max_size.as_str());
                let set = zipf_files(*alpha, *files, sizes, *dynamic_share, cost, &mut rng)?;
                let cdf = zipf_cdf(*files, *alpha);
                for _ in 0..requests {
                    let site = rng.gen_range(0..n);
                    t.requests.push((site, set[draw(&cdf, &mut rng)].clone()));
                }
            }
            Generator::Bursty {
                burst,
                mode,
                size,
                cost,
            } => {
                let out = &mut t.requests;
                bursty(out, n, requests, (*burst, *mode), (size, cost), &mut rng)?
            }
            Generator::WorldCup {
                dynamic_share,
                mean_burst,
                files,
                cost,
            } => {
                let shape = (*dynamic_share, *mean_burst, *files);
                world_cup(&mut t.requests, n, requests, shape, cost, &mut rng)?
            }
        }
        Ok(t)
    }
}

/// A Zipf trace's file set (alpha, files and sizes checked).
fn zipf_files(
    alpha: f64,
    files: u32,
    (min_size, max_size): (&str, &str),
    dynamic_share: f64,
    cost: &str,
    rng: &mut StdRng,
) -> Result<Vec<String>, TraceError> {
    if !(0.0..=2.0).contains(&alpha) {
        return Err(TraceError::Invalid(format!(
            "alpha {alpha} is out of range (accepted: 0.0 to 2.0; the seeds use 0.25 to 0.9)"
        )));
    }
    if files == 0 {
        return Err(TraceError::Invalid("files must be at least 1".into()));
    }
    let (min, max) = (
        size_arg("min_size", min_size)?,
        size_arg("max_size", max_size)?,
    );
    if min > max {
        return Err(TraceError::Invalid(format!(
            "min_size {min_size} is above max_size {max_size}"
        )));
    }
    Ok(file_set(
        files,
        min,
        max,
        share_arg("dynamic_share", dynamic_share)?,
        cost_arg(cost)?,
        rng,
    ))
}

/// A bursty trace: runs of `burst` requests to one site (`Sites`), or
/// static and dynamic runs in turn (`Content`).
fn bursty(
    out: &mut Vec<(usize, String)>,
    n: usize,
    requests: u64,
    (burst, mode): (u64, BurstMode),
    (size, cost): (&str, &str),
    rng: &mut StdRng,
) -> Result<(), TraceError> {
    if burst == 0 {
        return Err(TraceError::Invalid("burst must be at least 1".into()));
    }
    let size = format_size(size_arg("size", size)?);
    let stat = format!("/static/{size}");
    let dyna = format!(
        "/dynamic/cgi?cost={}&size={size}",
        duration::format(cost_arg(cost)?)
    );
    for i in 0..requests {
        let run = (i / burst) as usize;
        match mode {
            BurstMode::Sites => out.push((run % n, stat.clone())),
            BurstMode::Content => {
                let p = if run % 2 == 0 { &stat } else { &dyna };
                out.push((rng.gen_range(0..n), p.clone()));
            }
        }
    }
    Ok(())
}

/// A World Cup-like trace: dynamic and static runs whose mean lengths
/// give the dynamic share, the static files drawn by Zipf.
fn world_cup(
    out: &mut Vec<(usize, String)>,
    n: usize,
    requests: u64,
    (dynamic_share, mean_burst, files): (f64, u64, u32),
    cost: &str,
    rng: &mut StdRng,
) -> Result<(), TraceError> {
    let p = share_arg("dynamic_share", dynamic_share)?;
    if !(0.0..1.0).contains(&p) || p == 0.0 {
        return Err(TraceError::Invalid(format!(
            "dynamic_share {p} is out of range (accepted: above 0.0, below 1.0)"
        )));
    }
    if mean_burst == 0 || files == 0 {
        return Err(TraceError::Invalid(
            "mean_burst and files must be at least 1".into(),
        ));
    }
    let cost = duration::format(cost_arg(cost)?);
    let set = file_set(files, 512, 64 << 10, 0.0, Duration::ZERO, rng);
    let cdf = zipf_cdf(files, WORLD_CUP_STATIC_ALPHA);
    // Dynamic runs mean L, static runs mean L·(1-p)/p: the
    // expected dynamic share is p.
    let (md, ms) = (mean_burst as f64, mean_burst as f64 * (1.0 - p) / p);
    let mut dynamic = true;
    while (out.len() as u64) < requests {
        let len = run_length(if dynamic { md } else { ms }, rng);
        for _ in 0..len.min(requests - out.len() as u64) {
            let site = rng.gen_range(0..n);
            let path = if dynamic {
                format!(
                    "/dynamic/cgi?cost={cost}&size={}",
                    rng.gen_range(1..=8) * 1024
                )
            } else {
                set[draw(&cdf, rng)].clone()
            };
            out.push((site, path));
        }
        dynamic = !dynamic;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
