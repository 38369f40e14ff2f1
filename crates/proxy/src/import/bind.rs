//! `bind` lines: read into a proxy's binds ([`parse`]), then written as
//! `[[listener]]` tables: addresses, `accept-proxy`, and
//! `ssl crt` files or directories (under `crt-base`) to certificate pairs.

use std::fmt::Write;
use std::path::Path;

use std::net::SocketAddr;

use super::lexer::Line;
use super::sections::{Bind, Proxy};
use super::site::{q, site_name};
use super::{Kind, Note};

/// The names of a frontend's listeners, one per bound address.
pub(super) fn names(f: &Proxy) -> Vec<String> {
    (0..f.binds.len())
        .map(|i| {
            if i == 0 {
                site_name(&f.name)
            } else {
                format!("{}-{}", site_name(&f.name), i + 1)
            }
        })
        .collect()
}

pub(super) fn listeners(
    out: &mut String,
    frontends: &[&Proxy],
    dir: &Path,
    crt_base: Option<&str>,
    notes: &mut Vec<Note>,
) {
    for f in frontends {
        for (b, name) in f.binds.iter().zip(names(f)) {
            write!(
                out,
                "\n[[listener]]\nname = {}\nlisten = {}\n",
                q(&name),
                q(&b.address.to_string())
            )
            .ok();
            if let Some(uri) = &f.monitor.uri {
                writeln!(out, "monitor_uri = {}", q(uri)).ok();
                if let Some((backend, below)) = &f.monitor.fail {
                    let site = super::site::backend_site_name(backend);
                    writeln!(
                        out,
                        "monitor_fail = {{ site = {}, serving_below = {below} }}",
                        q(&site)
                    )
                    .ok();
                }
            }
            if b.accept_proxy {
                // What HAProxy's `accept-proxy` does: any peer may send the
                // header. rdmalb wants the list said.
                out.push_str("accept_proxy = true\n# HAProxy's accept-proxy trusts every peer: narrow this to the balancers in front.\naccept_proxy_from = [\"0.0.0.0/0\", \"::/0\"]\n");
            }
            if let Some(crts) = &b.crt {
                let mut pairs = Vec::new();
                for crt in crts {
                    // HAProxy puts a relative `crt` under `crt-base`.
                    let crt = match crt_base {
                        Some(base) if !crt.starts_with('/') => {
                            format!("{}/{crt}", base.trim_end_matches('/'))
                        }
                        _ => crt.clone(),
                    };
                    pairs.extend(certificates(&crt, dir, b.line, notes));
                }
                write!(out, "tls = {{ h2 = {}, ", b.h2).ok();
                // `verify none` (HAProxy's default) asks for no certificate.
                if b.client_auth
                    .iter()
                    .any(|(k, v)| *k == "verify" && v != "none")
                {
                    for (k, v) in &b.client_auth {
                        write!(out, "{k} = {}, ", q(v)).ok();
                    }
                }
                out.push_str("certificates = [\n");
                for (cert, key) in pairs {
                    writeln!(out, "  {{ cert = {}, key = {} }},", q(&cert), q(&key)).ok();
                }
                out.push_str("] }\n");
            }
        }
    }
}

/// `crt <file>` (certificate and key in one PEM file, or the key in
/// `<file>.key`) or `crt <directory>` (every certificate file in it).
fn certificates(
    crt: &str,
    dir: &Path,
    line: usize,
    notes: &mut Vec<Note>,
) -> Vec<(String, String)> {
    let full = dir.join(crt);
    let pair = |path: String| {
        let key = format!("{path}.key");
        if dir.join(&key).is_file() {
            (path, key)
        } else {
            (path.clone(), path)
        }
    };
    if full.is_dir() {
        let mut files: Vec<String> = std::fs::read_dir(&full)
            .map(|d| {
                d.filter_map(Result::ok)
                    .filter(|e| e.path().is_file())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        files.retain(|f| {
            ![".key", ".ocsp", ".issuer", ".sctl"]
                .iter()
                .any(|ext| f.ends_with(ext))
        });
        files.sort();
        if files.is_empty() {
            notes.push(Note::new(
                line,
                "bind",
                Kind::Routing,
                format!("`crt {crt}`: no certificate files in the directory"),
            ));
        }
        return files
            .into_iter()
            .map(|f| pair(format!("{}/{f}", crt.trim_end_matches('/'))))
            .collect();
    }
    if !full.is_file() {
        notes.push(Note::new(line, "bind", Kind::Unsupported, format!("`crt {crt}` does not exist at import time; imported as a file holding certificate and key")));
    }
    vec![pair(crt.to_string())]
}

/// `bind <addr>[,<addr>...] [params]`, the addresses starting at word `at`.
pub(super) fn parse(p: &mut Proxy, line: &Line, at: usize, notes: &mut Vec<Note>) {
    let n = line.number;
    let mut crt = Vec::new();
    let (mut ssl, mut h2, mut accept_proxy) = (false, false, false);
    let mut client_auth = Vec::new();
    let mut i = at + 1;
    while i < line.words.len() {
        let w = line.word(i);
        match w {
            "ssl" => ssl = true,
            "crt" => {
                crt.push(line.word(i + 1).to_string());
                i += 1;
            }
            "alpn" => {
                h2 = line.word(i + 1).split(',').any(|p| p == "h2");
                i += 1;
            }
            "accept-proxy" => accept_proxy = true,
            "verify" | "ca-file" | "crl-file" => {
                let key = match w {
                    "verify" => "verify",
                    "ca-file" => "client_ca",
                    _ => "crl",
                };
                client_auth.push((key, line.word(i + 1).to_string()));
                i += 1;
            }
            "v4v6" | "v6only" => {}
            "name" | "ciphers" | "ciphersuites" | "ssl-min-ver" | "ssl-max-ver" | "curves"
            | "ecdhe" | "process" | "crt-list" | "interface" | "mss" | "maxconn" | "npn"
            | "thread" | "level" | "mode" | "user" | "group" => {
                super::access::bind_option(line, w, line.word(i + 1), notes);
                i += 1;
            }
            _ => notes.push(Note::new(
                n,
                "bind",
                Kind::Unsupported,
                format!("bind option `{w}` not supported"),
            )),
        }
        i += 1;
    }
    if ssl && crt.is_empty() {
        notes.push(Note::new(
            n,
            "bind",
            Kind::Routing,
            "`ssl` without `crt`: listener dropped".into(),
        ));
        return;
    }
    for addr in line.word(at).split(',') {
        match bind_address(addr) {
            Some(address) => p.binds.push(Bind {
                line: n,
                address,
                crt: ssl.then(|| crt.clone()),
                h2,
                accept_proxy,
                client_auth: client_auth.clone(),
            }),
            None => notes.push(Note::new(
                n,
                "bind",
                Kind::Routing,
                format!("address `{addr}` not supported (expected [ip]:port; no names, ranges, unix sockets); listener dropped"),
            )),
        }
    }
}

/// `:80`, `*:80`, `0.0.0.0:80`, `:::80`, `[::]:80`, `ipv4@...`, `ipv6@...`.
fn bind_address(addr: &str) -> Option<SocketAddr> {
    let addr = addr
        .strip_prefix("ipv4@")
        .or_else(|| addr.strip_prefix("ipv6@"))
        .unwrap_or(addr);
    let (host, port) = addr.rsplit_once(':')?;
    let port: u16 = port.parse().ok()?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let ip: std::net::IpAddr = match host {
        "" | "*" => std::net::Ipv4Addr::UNSPECIFIED.into(),
        "::" | ":" => std::net::Ipv6Addr::UNSPECIFIED.into(),
        h => h.parse().ok()?,
    };
    Some(SocketAddr::new(ip, port))
}
