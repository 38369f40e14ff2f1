//! `rdmalb-testbed abuse-report`: the side-by-side table of the service
//! under attack benchmark (`bench/abuse/run.sh`). Its input is the script's
//! runs file, one CSV row per (round, proxy, attack):
//!
//! `round,proxy,attack,client,base_rps,base_p99_ms,attack_rps,attack_p99_ms,rss_before_kib,rss_peak_kib,metric`
//!
//! where `base_*` is the well-behaved client's run just before the attack
//! and `attack_*` its run while the attack goes on, `rss_peak_kib` the
//! highest resident set size sampled during the attack (all processes of
//! the proxy), and `metric` what the attack moved in the proxy's metrics
//! (last column, free text without commas). Per attack and proxy the
//! table gives the medians over rounds of the kept share of requests/s
//! (attack / base) and of the p99 ratio (attack / base), and the highest
//! peak memory; written as `<out>/abuse.json` and `<out>/abuse.txt`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

/// Why the table could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} line {line}: {why}")]
    Parse {
        path: String,
        line: usize,
        why: String,
    },
}

/// One measured (round, proxy, attack).
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    pub round: u32,
    pub proxy: String,
    pub attack: String,
    pub client: String,
    pub base_rps: f64,
    pub base_p99_ms: f64,
    pub attack_rps: f64,
    pub attack_p99_ms: f64,
    pub rss_before_kib: u64,
    pub rss_peak_kib: u64,
    pub metric: String,
}

/// One proxy's figures under one attack.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Figures {
    pub proxy: String,
    pub rounds: usize,
    /// Median over rounds of 100 × attack rps / base rps.
    pub kept_pct: f64,
    /// Median over rounds of attack p99 / base p99.
    pub p99_ratio: f64,
    pub base_rps: f64,
    pub base_p99_ms: f64,
    /// Highest resident set size sampled during the attack, MiB.
    pub peak_rss_mib: f64,
    /// Resident set size before the attack (last round), MiB.
    pub rss_before_mib: f64,
    /// The goal: kept ≥ 90 % and p99 at most 2x.
    pub goal_met: bool,
    pub metric: String,
}

/// One attack's row of the table.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Row {
    pub attack: String,
    pub client: String,
    pub proxies: Vec<Figures>,
}

/// Parses the runs file.
pub fn parse(text: &str, path: &str) -> Result<Vec<Run>, ReportError> {
    let mut runs = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if i == 0 || line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let err = |why: String| ReportError::Parse {
            path: path.to_string(),
            line: i + 1,
            why,
        };
        let f: Vec<&str> = line.splitn(11, ',').collect();
        if f.len() != 11 {
            return Err(err(format!("{} fields, expected 11", f.len())));
        }
        let num = |k: usize| -> Result<f64, ReportError> {
            f[k].trim()
                .parse::<f64>()
                .map_err(|_| err(format!("field {} is not a number: {:?}", k + 1, f[k])))
        };
        runs.push(Run {
            round: num(0)? as u32,
            proxy: f[1].to_string(),
            attack: f[2].to_string(),
            client: f[3].to_string(),
            base_rps: num(4)?,
            base_p99_ms: num(5)?,
            attack_rps: num(6)?,
            attack_p99_ms: num(7)?,
            rss_before_kib: num(8)? as u64,
            rss_peak_kib: num(9)? as u64,
            metric: f[10].trim().to_string(),
        });
    }
    Ok(runs)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        f64::NAN
    }
}

/// The table, attacks in the order they first appear, proxies likewise.
pub fn table(runs: &[Run]) -> Vec<Row> {
    let mut attacks: Vec<&str> = Vec::new();
    let mut proxies: Vec<&str> = Vec::new();
    let mut by: BTreeMap<(&str, &str), Vec<&Run>> = BTreeMap::new();
    for r in runs {
        if !attacks.contains(&r.attack.as_str()) {
            attacks.push(&r.attack);
        }
        if !proxies.contains(&r.proxy.as_str()) {
            proxies.push(&r.proxy);
        }
        by.entry((&r.attack, &r.proxy)).or_default().push(r);
    }
    attacks
        .iter()
        .map(|a| Row {
            attack: a.to_string(),
            client: runs
                .iter()
                .find(|r| r.attack == *a)
                .map(|r| r.client.clone())
                .unwrap_or_default(),
            proxies: proxies
                .iter()
                .filter_map(|p| by.get(&(*a, *p)))
                .map(|rs| figures(rs))
                .collect(),
        })
        .collect()
}

fn figures(rs: &[&Run]) -> Figures {
    let last = rs[rs.len() - 1];
    let kept_pct = median(
        rs.iter()
            .map(|r| 100.0 * ratio(r.attack_rps, r.base_rps))
            .collect(),
    );
    let p99_ratio = median(
        rs.iter()
            .map(|r| ratio(r.attack_p99_ms, r.base_p99_ms))
            .collect(),
    );
    let round1 = |x: f64| (x * 10.0).round() / 10.0;
    let round2 = |x: f64| (x * 100.0).round() / 100.0;
    Figures {
        proxy: last.proxy.clone(),
        rounds: rs.len(),
        kept_pct: round1(kept_pct),
        p99_ratio: round2(p99_ratio),
        base_rps: median(rs.iter().map(|r| r.base_rps).collect()).round(),
        base_p99_ms: round2(median(rs.iter().map(|r| r.base_p99_ms).collect())),
        peak_rss_mib: round1(rs.iter().map(|r| r.rss_peak_kib).max().unwrap_or(0) as f64 / 1024.0),
        rss_before_mib: round1(last.rss_before_kib as f64 / 1024.0),
        goal_met: kept_pct >= 90.0 && p99_ratio <= 2.0,
        metric: last.metric.clone(),
    }
}

fn cell(x: f64, suffix: &str) -> String {
    if x.is_finite() {
        format!("{x}{suffix}")
    } else {
        "n/a".into()
    }
}

/// The table as Markdown: one line per attack, per proxy kept %, p99
/// ratio and peak memory; then what the attack moved in each proxy's
/// metrics.
pub fn text(rows: &[Row]) -> String {
    let mut proxies: Vec<&str> = Vec::new();
    for r in rows {
        for f in &r.proxies {
            if !proxies.contains(&f.proxy.as_str()) {
                proxies.push(&f.proxy);
            }
        }
    }
    let mut out = String::from("| attack | client |");
    let mut rule = String::from("|---|---|");
    for p in &proxies {
        let _ = write!(out, " {p} kept | {p} p99 | {p} peak RSS |");
        rule.push_str("---:|---:|---:|");
    }
    out.push('\n');
    out.push_str(&rule);
    out.push('\n');
    for r in rows {
        let _ = write!(out, "| {} | {} |", r.attack, r.client);
        for p in &proxies {
            match r.proxies.iter().find(|f| f.proxy == *p) {
                Some(f) => {
                    let mark = if f.goal_met { "" } else { " ✗" };
                    let _ = write!(
                        out,
                        " {}{mark} | {} | {} |",
                        cell(f.kept_pct, " %"),
                        cell(f.p99_ratio, "x"),
                        cell(f.peak_rss_mib, " MiB")
                    );
                }
                None => out.push_str(" – | – | – |"),
            }
        }
        out.push('\n');
    }
    out.push_str(
        "\nWhat each attack moved in the proxy's metrics, and the no-attack baseline (median):\n\n",
    );
    for r in rows {
        for f in &r.proxies {
            let _ = writeln!(
                out,
                "- {} / {}: baseline {} req/s, p99 {} ms, RSS before {} MiB; {}",
                r.attack,
                f.proxy,
                f.base_rps,
                f.base_p99_ms,
                f.rss_before_mib,
                if f.metric.is_empty() { "-" } else { &f.metric }
            );
        }
    }
    out
}

/// The JSON file's content.
#[derive(Debug, Serialize)]
struct Document<'a> {
    title: &'a str,
    transport: &'static str,
    rows: &'a [Row],
}

/// Reads `runs`, writes `<out>/abuse.json` and `<out>/abuse.txt`, returns
/// the text.
pub fn write(runs: &Path, out: &Path, title: &str) -> Result<String, ReportError> {
    let io = |p: &Path| {
        let path = p.display().to_string();
        move |source| ReportError::Io { path, source }
    };
    let data = std::fs::read_to_string(runs).map_err(io(runs))?;
    let rows = table(&parse(&data, &runs.display().to_string())?);
    let mut body = format!("{title}\n\n");
    body.push_str(&text(&rows));
    std::fs::create_dir_all(out).map_err(io(out))?;
    let json = serde_json::to_string_pretty(&Document {
        title,
        transport: "tcp loopback",
        rows: &rows,
    })
    .unwrap_or_default();
    let j = out.join("abuse.json");
    std::fs::write(&j, json + "\n").map_err(io(&j))?;
    let t = out.join("abuse.txt");
    std::fs::write(&t, &body).map_err(io(&t))?;
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUNS: &str = "round,proxy,attack,client,base_rps,base_p99_ms,attack_rps,attack_p99_ms,rss_before_kib,rss_peak_kib,metric\n\
        1,rdmalb,slowloris,wrk,1000,2,950,3,10240,20480,client_errors{kind=408} +5\n\
        2,rdmalb,slowloris,wrk,1000,2,800,5,10240,30720,client_errors{kind=408} +7\n\
        3,rdmalb,slowloris,wrk,1000,2,990,2,10240,25600,client_errors{kind=408} +6\n\
        1,haproxy,slowloris,wrk,2000,1,1000,1,5120,6144,\n";

    #[test]
    fn medians_over_rounds_and_highest_peak() {
        let rows = table(&parse(RUNS, "runs.csv").unwrap());
        assert_eq!(rows.len(), 1);
        let r = &rows[0].proxies[0];
        assert_eq!(r.proxy, "rdmalb");
        assert_eq!(r.rounds, 3);
        assert_eq!(r.kept_pct, 95.0);
        assert_eq!(r.p99_ratio, 1.5);
        assert_eq!(r.peak_rss_mib, 30.0);
        assert!(r.goal_met);
        assert_eq!(r.metric, "client_errors{kind=408} +6");
        let h = &rows[0].proxies[1];
        assert_eq!(h.kept_pct, 50.0);
        assert!(!h.goal_met);
    }

    #[test]
    fn text_has_a_column_group_per_proxy() {
        let t = text(&table(&parse(RUNS, "runs.csv").unwrap()));
        assert!(
            t.contains("| rdmalb kept | rdmalb p99 | rdmalb peak RSS |"),
            "{t}"
        );
        assert!(
            t.contains("| slowloris | wrk | 95 % | 1.5x | 30 MiB | 50 % ✗ | 1x | 6 MiB |"),
            "{t}"
        );
    }

    #[test]
    fn a_short_line_names_its_line() {
        let e = parse("header\n1,rdmalb,x\n", "runs.csv").unwrap_err();
        assert_eq!(e.to_string(), "runs.csv line 2: 3 fields, expected 11");
    }
}
