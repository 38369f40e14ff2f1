//! A PNG of per-site throughput over time, drawn by gnuplot (Debian's
//! gnuplot-nox, installed by scripts/setup.sh) from the wide CSV of
//! [`super::report::Report::throughput_csv`]: one line per site, so a
//! reader sees bursts and reconfigurations at a glance.

use std::path::Path;
use std::process::Command;

/// Why the plot could not be drawn.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    #[error("plot: cannot run gnuplot ({0}); install gnuplot-nox (scripts/setup.sh)")]
    Spawn(#[source] std::io::Error),
    #[error("plot: gnuplot failed: {0}")]
    Failed(String),
    #[error("plot: cannot write {path}: {source}")]
    Write {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

fn quote(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', "''"))
}

/// Plots `csv` (`time_s,<site>...`, `sites` columns) into `png`, keeping
/// the gnuplot script beside it (`<png>.gp`) so the figure can be redrawn.
pub fn throughput_png(csv: &Path, sites: usize, png: &Path, title: &str) -> Result<(), PlotError> {
    let script = format!(
        "set terminal pngcairo size 1000,500 font ',10'\n\
         set output {out}\n\
         set datafile separator ','\n\
         set key outside right top autotitle columnheader\n\
         set title \"{title}\" noenhanced\n\
         set xlabel 'time (s)'\n\
         set ylabel 'served requests/s'\n\
         set grid\n\
         set yrange [0:*]\n\
         plot for [i=2:{last}] {csv} using 1:i with linespoints lw 2 pt 7 ps 0.5\n",
        out = quote(png),
        title = title.replace('"', "'"),
        last = sites + 1,
        csv = quote(csv),
    );
    let gp = png.with_extension("gp");
    std::fs::write(&gp, &script).map_err(|e| PlotError::Write {
        path: gp.display().to_string(),
        source: e,
    })?;
    let out = Command::new("gnuplot")
        .arg(&gp)
        .output()
        .map_err(PlotError::Spawn)?;
    if !out.status.success() {
        return Err(PlotError::Failed(
            String::from_utf8_lossy(&out.stderr).trim().to_string(),
        ));
    }
    Ok(())
}
