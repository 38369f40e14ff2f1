//! `rdmalb config-reference`: docs/configuration.md, generated from the
//! proxy's and the sidecar's config types and their doc comments
//! ([`rdmalb_base::reference`]), and the checks `scripts/docs-check.sh`
//! runs: the committed file is what the code generates, and the example
//! configs use only keys the reference has.

use std::path::{Path, PathBuf};

use rdmalb_base::reference::{self, Reference};

/// How to regenerate the file; the test suite prints it on a mismatch.
pub const REGENERATE: &str = "cargo run -q -- config-reference > docs/configuration.md";

/// The two config files' schemas and references.
pub struct Files {
    proxy: (serde_json::Value, Reference),
    sidecar: (serde_json::Value, Reference),
}

impl Files {
    pub fn new() -> Files {
        let proxy = rdmalb_proxy::config::reference::schema();
        let sidecar = rdmalb_sidecar::config::reference::schema();
        Files {
            proxy: (proxy.clone(), reference::build(&proxy)),
            sidecar: (sidecar.clone(), reference::build(&sidecar)),
        }
    }

    /// The whole of docs/configuration.md.
    pub fn markdown(&self) -> String {
        let count = |r: &Reference| r.keys().count();
        let mut out = format!(
            "# Configuration reference\n\n\
             Every key of the proxy's `rdmalb.toml` ({} keys) and of the sidecar's \
             config ({} keys): its type, its default, what it does and accepts, and \
             an example per table. Generated from the config types and their doc \
             comments (`crates/proxy/src/config/reference.rs`, \
             `crates/sidecar/src/config/reference.rs` and the raw structs they name) \
             by `rdmalb config-reference`; do not edit it by hand. `scripts/test.sh` \
             fails when this file differs from what the code generates \
             (regenerate: `{REGENERATE}`) and when a `conf/` example uses a key \
             that is not here. `rdmalb check -c FILE` validates a file and names \
             every problem with its key.\n\n\
             A default in backticks is a value: writing it changes nothing (the \
             proxy's tests check each one against the validator). `<name>` in a \
             table's name stands for a name you choose.\n\n\
             - [rdmalb.toml (the proxy)](#rdmalbtoml-the-proxy)\n\
             - [The sidecar's config](#the-sidecars-config)\n\n",
            count(&self.proxy.1),
            count(&self.sidecar.1),
        );
        let proxy = self.proxy.1.markdown("rdmalb.toml (the proxy)");
        let sidecar = self.sidecar.1.markdown("The sidecar's config");
        let sidecar = second_anchors(&proxy, &sidecar);
        out.push_str(&proxy);
        out.push_str(&sidecar);
        while out.ends_with("\n\n") {
            out.pop();
        }
        out
    }

    /// Problems with the committed reference and the example files, one a
    /// line; empty when all is well.
    pub fn check(
        &self,
        committed: Option<&Path>,
        proxy: &[PathBuf],
        sidecar: &[PathBuf],
    ) -> Vec<String> {
        let mut problems = Vec::new();
        if let Some(path) = committed {
            match std::fs::read_to_string(path) {
                Ok(text) => {
                    if let Some(line) = first_difference(&text, &self.markdown()) {
                        problems.push(format!(
                            "{}: differs from what the code generates, from line {line} (regenerate: {REGENERATE})",
                            path.display()
                        ));
                    }
                }
                Err(e) => problems.push(format!("{}: {e}", path.display())),
            }
        }
        for (files, (schema, r), kind) in [
            (proxy, &self.proxy, "proxy"),
            (sidecar, &self.sidecar, "sidecar"),
        ] {
            for file in files {
                let text = match std::fs::read_to_string(file) {
                    Ok(t) => t,
                    Err(e) => {
                        problems.push(format!("{}: {e}", file.display()));
                        continue;
                    }
                };
                match r.unknown_keys(schema, &text) {
                    Ok(keys) => problems.extend(keys.into_iter().map(|k| {
                        format!(
                            "{}: `{k}` is not a key of the {kind} config in docs/configuration.md",
                            file.display()
                        )
                    })),
                    Err(e) => problems.push(format!("{}: {e}", file.display())),
                }
            }
        }
        problems
    }
}

/// The sidecar's links to its own tables: a heading both files have
/// (`[admin]`) gets GitHub's anchor with `-1` the second time it appears.
fn second_anchors(first: &str, second: &str) -> String {
    let anchor =
        |heading: &str| rdmalb_base::reference::anchor(heading.trim_start_matches('#').trim());
    let taken: std::collections::HashSet<String> = first
        .lines()
        .filter(|l| l.starts_with('#'))
        .map(anchor)
        .collect();
    let mut out = second.to_string();
    for a in second.lines().filter(|l| l.starts_with('#')).map(anchor) {
        if taken.contains(&a) {
            out = out.replace(&format!("](#{a})"), &format!("](#{a}-1)"));
        }
    }
    out
}

/// The 1-based number of the first line where `a` and `b` differ.
fn first_difference(a: &str, b: &str) -> Option<usize> {
    if a.trim_end() == b.trim_end() {
        return None;
    }
    let mut la = a.lines();
    let mut lb = b.lines();
    let mut n = 1;
    loop {
        match (la.next(), lb.next()) {
            (Some(x), Some(y)) if x == y => n += 1,
            _ => return Some(n),
        }
    }
}
