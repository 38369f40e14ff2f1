//! Differential tests against HAProxy: the same raw request streams sent
//! through the real `rdmalb proxy` and through Debian's HAProxy (configured
//! the same way: one server, keep-alive, `option forwardfor`, http mode),
//! each in front of its own raw echo node ([`EchoNode`]), and what the
//! nodes received compared request by request, header by header, after the
//! normalisation written down in [`View::of`]; the client-side statuses
//! and echoed digests are compared too.
//!
//! The valid stream is seeded ([`stream`]): the seed is printed, and
//! `RDMALB_DIFF_SEED=<n>` replays it. The malformed stream
//! ([`malformed`]) holds requests both proxies must refuse, with the RFC
//! outcomes each may have and the differences the RFCs allow.

mod malformed;
mod stream;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::AsyncWriteExt;

use crate::support::echo::{fnv1a, EchoNode, Framing, Head, Received, Wire};
use crate::support::haproxy::Haproxy;
use crate::support::*;
use malformed::{Outcome, ALLOWED};

/// rdmalb's `global.via_name` here, to recognise its own `Via` element.
const VIA_NAME: &str = "rdmalb-diff";

/// Both proxies, each in front of its own echo node.
struct Pair {
    rdmalb: Side,
    haproxy: Side,
    _rdmalb_process: Proxy,
    _haproxy_process: Haproxy,
    _dir: tempfile::TempDir,
}

struct Side {
    name: &'static str,
    addr: SocketAddr,
    echo: EchoNode,
}

/// Starts both; `None` when HAProxy is missing (the test skips, a
/// failure under `CI=true`).
async fn start(test: &str) -> Option<Pair> {
    let dir = tempfile::tempdir().unwrap();
    let (r_echo, h_echo) = (EchoNode::start().await, EchoNode::start().await);
    let h_addr = free_addr();
    // HAProxy's defaults apart from what the test needs: http mode,
    // keep-alive both ways (the default), `option forwardfor`, one server
    // without health checks.
    let cfg = format!(
        "global\n    maxconn 256\n\
         defaults\n    mode http\n    option forwardfor\n    timeout connect 5s\n\
         \x20   timeout client 30s\n    timeout server 30s\n    timeout http-request 10s\n\
         frontend web\n    bind {h_addr}\n    default_backend echo\n\
         backend echo\n    server echo {}\n",
        h_echo.addr
    );
    let haproxy = Haproxy::start(test, dir.path(), &cfg, &[h_addr])?;
    // rdmalb configured as HAProxy's equivalent: `forwarded_for = "append"`
    // is `option forwardfor` (docs/proxy.md); no health checks.
    let (listen, r_addr, _) = listener_toml();
    let config = format!(
        "{listen}[global]\naccess_log = \"off\"\nforwarded_for = \"append\"\nvia_name = \"{VIA_NAME}\"\n\n\
         [[site]]\nname = \"echo\"\nhosts = [\"*\"]\n\n{}check = false\n",
        node_toml("echo", r_echo.addr, "echo")
    );
    let proxy = Proxy::start(&config, &[r_addr]);
    Some(Pair {
        rdmalb: Side {
            name: "rdmalb",
            addr: r_addr,
            echo: r_echo,
        },
        haproxy: Side {
            name: "haproxy",
            addr: h_addr,
            echo: h_echo,
        },
        _rdmalb_process: proxy,
        _haproxy_process: haproxy,
        _dir: dir,
    })
}

/// The seed: `RDMALB_DIFF_SEED` or a fresh one.
fn seed() -> u64 {
    match std::env::var("RDMALB_DIFF_SEED") {
        Ok(s) => s
            .parse()
            .unwrap_or_else(|_| panic!("RDMALB_DIFF_SEED={s:?} is not a u64")),
        Err(_) => rand::random(),
    }
}

/// What the client got for one request.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Answer {
    status: u16,
    /// The echo node's `X-Echo-Id`: absent when the proxy answered itself.
    echo_id: Option<String>,
    body: Vec<u8>,
}

/// Reads the response to a `method` request (1xx skipped).
async fn answer(wire: &mut Wire<tokio::net::TcpStream>, method: &str) -> Result<Answer, String> {
    loop {
        let head = wire
            .head()
            .await?
            .ok_or("connection closed before the response")?;
        let status: u16 = head.line[1]
            .parse()
            .map_err(|_| format!("status line {:?}", head.line))?;
        if (100..200).contains(&status) {
            continue;
        }
        let body = if method == "HEAD" || status == 204 || status == 304 {
            Vec::new()
        } else {
            match head.framing()? {
                Framing::None => wire.until_close().await?,
                f => wire.body(f).await?.data,
            }
        };
        return Ok(Answer {
            status,
            echo_id: head.values("x-echo-id").next().map(str::to_string),
            body,
        });
    }
}

/// Sends the stream through `addr`, connections in parallel, each
/// connection's batches pipelined; the answers by request id.
async fn run(
    addr: SocketAddr,
    conns: Arc<Vec<stream::Connection>>,
) -> BTreeMap<String, Result<Answer, String>> {
    let mut tasks = tokio::task::JoinSet::new();
    for c in 0..conns.len() {
        let conns = Arc::clone(&conns);
        tasks.spawn(async move {
            let mut out = Vec::new();
            let tcp = match tokio::net::TcpStream::connect(addr).await {
                Ok(t) => t,
                Err(e) => panic!("connect {addr}: {e}"),
            };
            let mut wire = Wire::new(tcp);
            let mut broken: Option<String> = None;
            for batch in &conns[c].batches {
                if broken.is_none() {
                    let bytes: Vec<u8> = batch.iter().flat_map(|r| r.bytes.clone()).collect();
                    if let Err(e) = wire.stream.write_all(&bytes).await {
                        broken = Some(format!("write: {e}"));
                    }
                }
                for r in batch {
                    let a = match &broken {
                        Some(e) => Err(format!("not answered: {e}")),
                        None => answer(&mut wire, r.method).await,
                    };
                    if let Err(e) = &a {
                        broken.get_or_insert(e.clone());
                    }
                    out.push((r.id.clone(), a));
                }
            }
            out
        });
    }
    let mut answers = BTreeMap::new();
    while let Some(r) = tasks.join_next().await {
        answers.extend(r.expect("client task"));
    }
    answers
}

/// A node's view of one request after the normalisation: what must be
/// equal through both proxies.
#[derive(Debug, Clone, PartialEq, Eq)]
struct View {
    method: String,
    target: String,
    version: String,
    /// "none", "length" or "chunked".
    framing: &'static str,
    body: Vec<u8>,
    /// Trailer fields, names lower-cased.
    trailers: Vec<(String, String)>,
    /// Field values by lower-cased name, in arrival order per name.
    fields: BTreeMap<String, Vec<String>>,
}

/// Fields that are lists of comma-separated elements, compared element by
/// element: RFC 9110 5.3 lets a proxy combine a list field's lines into
/// one (rdmalb merges `X-Forwarded-For` lines, HAProxy adds a line), and
/// both add an element of their own at the end.
const LISTS: [&str; 3] = ["x-forwarded-for", "via", "forwarded"];

impl View {
    /// The normalisation, item by item, each with its reason. `rdmalb`
    /// says whose node saw the request (the additions differ).
    fn of(r: &Received, rdmalb: bool) -> Result<View, String> {
        // (3) Hop-by-hop fields: `Connection`, every field it names, and
        // `Keep-Alive` (RFC 9110 7.6.1; RFC 9112 C.2.2 for Keep-Alive).
        // HAProxy 2.6 forwards the fields `Connection` names (and
        // `Connection` itself, minus close/keep-alive) and `Keep-Alive`;
        // rdmalb removes them as 7.6.1 requires, which
        // `hop_by_hop_forwarded` checks on its side. Not compared.
        let mut hop: Vec<String> = vec!["connection".into(), "keep-alive".into()];
        hop.extend(
            r.head
                .values("connection")
                .flat_map(|v| v.split(','))
                .map(|t| t.trim().to_ascii_lowercase())
                .filter(|t| !t.is_empty()),
        );
        let mut fields: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (name, value) in &r.head.headers {
            // (1) Field names are case-insensitive (RFC 9110 5.1); both
            // proxies lower-case them, so the case is only reported.
            let name = name.to_ascii_lowercase();
            // (2) Content-Length and Transfer-Encoding frame the body:
            // they are compared as the framing kind and the decoded body
            // (each hop re-frames chunked bodies: RFC 9112 7.1, chunk
            // sizes are not semantics).
            if name == "content-length" || name == "transfer-encoding" || hop.contains(&name) {
                continue;
            }
            let values = fields.entry(name.clone()).or_default();
            if LISTS.contains(&name.as_str()) {
                // (4) See LISTS.
                values.extend(
                    value
                        .split(',')
                        .map(|e| e.trim().to_string())
                        .filter(|e| !e.is_empty()),
                );
            } else {
                values.push(value.clone());
            }
        }
        // (5) What each proxy adds on its own: both add the client's
        // address as the last X-Forwarded-For element (`option
        // forwardfor`, `forwarded_for = "append"`), which must be there
        // and is then dropped; rdmalb also adds `X-Forwarded-Proto`, a
        // `Forwarded` element and a `Via` element (docs/proxy.md,
        // "Forwarding"; not configurable), checked and dropped the same
        // way. HAProxy adds nothing else.
        let last_is = |fields: &mut BTreeMap<String, Vec<String>>,
                       name: &str,
                       want: &dyn Fn(&str) -> bool|
         -> Result<(), String> {
            let values = fields.get_mut(name).ok_or(format!("no {name}"))?;
            match values.pop() {
                Some(v) if want(&v) => {}
                other => return Err(format!("last {name} element is {other:?}")),
            }
            if values.is_empty() {
                fields.remove(name);
            }
            Ok(())
        };
        last_is(&mut fields, "x-forwarded-for", &|v| v == "127.0.0.1")?;
        if rdmalb {
            // `1.0` for HTTP/1.0 clients: Via names the received version.
            last_is(&mut fields, "via", &|v| {
                v == format!("1.1 {VIA_NAME}") || v == format!("1.0 {VIA_NAME}")
            })?;
            last_is(&mut fields, "forwarded", &|v| {
                v.starts_with("for=127.0.0.1;proto=http")
            })?;
            last_is(&mut fields, "x-forwarded-proto", &|v| v == "http")?;
        }
        let trailers = r
            .body
            .trailers
            .iter()
            .map(|(n, v)| (n.to_ascii_lowercase(), v.clone()))
            .collect();
        // (6) An absolute-form target (RFC 9112 3.2.2): HAProxy forwards it
        // as it came, rdmalb in origin form with `Host` set to the
        // target's authority (docs/proxy.md, "Forwarding"). A server MUST
        // accept both, and MUST take the authority of an absolute-form
        // target over `Host` (RFC 9112 3.2.2, 7.2): compared as origin
        // form and the authority the node must use.
        let mut target = r.target().to_string();
        if let Some(rest) = target.strip_prefix("http://") {
            let (authority, path) = rest.split_at(rest.find(['/', '?']).unwrap_or(rest.len()));
            fields.insert("host".into(), vec![authority.to_string()]);
            target = if path.starts_with('/') {
                path.to_string()
            } else {
                format!("/{path}")
            };
        }
        Ok(View {
            method: r.method().to_string(),
            target,
            version: r.version().to_string(),
            framing: match r.framing {
                Framing::None => "none",
                Framing::Length(_) => "length",
                Framing::Chunked => "chunked",
            },
            body: r.body.data.clone(),
            trailers,
            fields,
        })
    }
}

/// A line of differences between two views, for the failure message.
fn describe(a: &View, b: &View) -> String {
    let mut out = Vec::new();
    for (what, x, y) in [
        ("method", &a.method, &b.method),
        ("target", &a.target, &b.target),
        ("version", &a.version, &b.version),
    ] {
        if x != y {
            out.push(format!("{what}: rdmalb {x:?}, haproxy {y:?}"));
        }
    }
    if a.framing != b.framing {
        out.push(format!(
            "framing: rdmalb {}, haproxy {}",
            a.framing, b.framing
        ));
    }
    if a.body != b.body {
        out.push(format!(
            "body: rdmalb {} bytes ({:016x}), haproxy {} bytes ({:016x})",
            a.body.len(),
            fnv1a(&a.body),
            b.body.len(),
            fnv1a(&b.body)
        ));
    }
    if a.trailers != b.trailers {
        out.push(format!(
            "trailers: rdmalb {:?}, haproxy {:?}",
            a.trailers, b.trailers
        ));
    }
    let names: std::collections::BTreeSet<&String> =
        a.fields.keys().chain(b.fields.keys()).collect();
    for n in names {
        let (x, y) = (a.fields.get(n), b.fields.get(n));
        if x != y {
            out.push(format!(
                "field {n}: rdmalb {}, haproxy {}",
                short(x),
                short(y)
            ));
        }
    }
    out.join("; ")
}

fn short(v: Option<&Vec<String>>) -> String {
    let s = format!("{v:?}");
    let n = s.chars().count();
    if n > 200 {
        format!("{}…({n} chars)", s.chars().take(200).collect::<String>())
    } else {
        s
    }
}

/// The hop-by-hop fields of `sent` (the request as the client sent it)
/// that reached the node in `r`: `Connection`, `Keep-Alive`,
/// `Proxy-Connection` and every field `Connection` names (RFC 9110 7.6.1).
fn hop_by_hop_forwarded(r: &Received, sent: &[u8]) -> Vec<String> {
    let mut hop = vec![
        "connection".to_string(),
        "keep-alive".into(),
        "proxy-connection".into(),
    ];
    let sent = String::from_utf8_lossy(sent);
    for line in sent.split("\r\n\r\n").next().unwrap_or("").lines() {
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("connection") {
                hop.extend(value.split(',').map(|t| t.trim().to_ascii_lowercase()));
            }
        }
    }
    r.head
        .headers
        .iter()
        .map(|(n, _)| n.to_ascii_lowercase())
        .filter(|n| hop.contains(n))
        .collect()
}

/// The node's records by `X-Diff-Id`.
fn by_id(records: Vec<Received>) -> BTreeMap<String, Vec<Received>> {
    let mut m: BTreeMap<String, Vec<Received>> = BTreeMap::new();
    for r in records {
        let id = r.head.values("x-diff-id").next().unwrap_or("").to_string();
        m.entry(id).or_default().push(r);
    }
    m
}

/// The compared field names (those of `view`) in the order of their first
/// line in `r`. Reported, not compared: the order of fields with different
/// names is not significant (RFC 9110 5.3); rdmalb's header map groups a
/// repeated name at its first line, and a removal moves its last field
/// into the removed one's place.
fn first_order(r: &Received, view: &View) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for (n, _) in &r.head.headers {
        let n = n.to_ascii_lowercase();
        if view.fields.contains_key(&n) && !names.contains(&n) {
            names.push(n);
        }
    }
    names
}

/// The version on a raw request line.
fn sent_version(raw: &[u8]) -> String {
    let line = raw.split(|&b| b == b'\r').next().unwrap_or(&[]);
    String::from_utf8_lossy(line)
        .rsplit(' ')
        .next()
        .unwrap_or("")
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn valid_requests_reach_the_node_as_through_haproxy() {
    const TEST: &str = "valid_requests_reach_the_node_as_through_haproxy";
    let seed = seed();
    eprintln!("{TEST}: seed {seed} (replay with RDMALB_DIFF_SEED={seed})");
    let Some(pair) = start(TEST).await else {
        return;
    };
    let conns = Arc::new(stream::stream(seed));
    let sent: Vec<&stream::Request> = conns
        .iter()
        .flat_map(|c| c.batches.iter().flatten())
        .collect();
    let raw: BTreeMap<&str, &[u8]> = sent
        .iter()
        .map(|r| (r.id.as_str(), r.bytes.as_slice()))
        .collect();

    let mut answers = Vec::new();
    let mut nodes = Vec::new();
    for side in [&pair.rdmalb, &pair.haproxy] {
        answers.push(run(side.addr, Arc::clone(&conns)).await);
        let (records, anomalies, incomplete) = side.echo.snapshot();
        assert!(
            anomalies.is_empty() && incomplete.is_empty(),
            "seed {seed}: {}'s node saw malformed or cut requests: {anomalies:?} {incomplete:?}",
            side.name
        );
        nodes.push(by_id(records));
    }

    let mut problems = Vec::new();
    let (mut order_differs, mut case_differs) = (0, 0);
    let mut order_example = None;
    for r in &sent {
        let id = r.id.as_str();
        let (ra, ha) = (&answers[0][id], &answers[1][id]);
        match (ra, ha) {
            (Ok(ra), Ok(ha)) => {
                if ra != ha {
                    problems.push(format!(
                        "{id}: client side: rdmalb {} {:?} {:?}, haproxy {} {:?} {:?}",
                        ra.status,
                        ra.echo_id,
                        String::from_utf8_lossy(&ra.body),
                        ha.status,
                        ha.echo_id,
                        String::from_utf8_lossy(&ha.body)
                    ));
                }
            }
            _ => problems.push(format!("{id}: client side: rdmalb {ra:?}, haproxy {ha:?}")),
        }
        let (rn, hn) = (nodes[0].get(id), nodes[1].get(id));
        let (Some([rr]), Some([hr])) = (rn.map(Vec::as_slice), hn.map(Vec::as_slice)) else {
            problems.push(format!(
                "{id}: the node got it {} times through rdmalb, {} through haproxy",
                rn.map_or(0, Vec::len),
                hn.map_or(0, Vec::len)
            ));
            continue;
        };
        let left = hop_by_hop_forwarded(rr, raw[id]);
        if !left.is_empty() {
            problems.push(format!(
                "{id}: rdmalb forwarded hop-by-hop fields {left:?} (RFC 9110 7.6.1)"
            ));
        }
        match (View::of(rr, true), View::of(hr, false)) {
            (Ok(rv), Ok(mut hv)) => {
                // (7) The version: rdmalb sends its own, HTTP/1.1, as an
                // intermediary MUST (RFC 9110 2.5); HAProxy 2.6 forwards an
                // HTTP/1.0 request as HTTP/1.0. HAProxy's must then be the
                // client's, rdmalb's 1.1.
                if rv.version == "HTTP/1.1"
                    && hv.version == "HTTP/1.0"
                    && sent_version(raw[id]) == "HTTP/1.0"
                {
                    hv.version = rv.version.clone();
                }
                let (ro, ho) = (first_order(rr, &rv), first_order(hr, &hv));
                if ro != ho {
                    order_differs += 1;
                    order_example
                        .get_or_insert_with(|| format!("{id}: rdmalb {ro:?}\n    haproxy {ho:?}"));
                }
                if rv != hv {
                    problems.push(format!("{id}: {}", describe(&rv, &hv)));
                }
            }
            (rv, hv) => problems.push(format!(
                "{id}: additions missing: rdmalb {:?}, haproxy {:?}",
                rv.err(),
                hv.err()
            )),
        }
        let names = |h: &Head| h.headers.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
        let lower = |h: &Head| names(h).iter().all(|n| *n == n.to_ascii_lowercase());
        if !(lower(&rr.head) && lower(&hr.head)) {
            case_differs += 1;
        }
    }
    eprintln!(
        "{TEST}: seed {seed}: {} requests on {} connections; order of field names differs in \
         {order_differs} (RFC 9110 5.3: not significant), names not all lower-case in {case_differs}",
        sent.len(),
        conns.len()
    );
    if let Some(e) = order_example {
        eprintln!("  e.g. {e}");
    }
    if !problems.is_empty() {
        // Every problem on one line, then the first few requests whole.
        let mut first: Vec<String> = problems
            .iter()
            .map(|p| format!("- {}", p.chars().take(400).collect::<String>()))
            .collect();
        let mut shown = std::collections::BTreeSet::new();
        for p in &problems {
            let id = p.split(':').next().unwrap_or("");
            if shown.len() < 4 && shown.insert(id) {
                let req = raw.get(id).map_or(String::new(), |b| {
                    String::from_utf8_lossy(b).chars().take(1500).collect()
                });
                first.push(format!("request {id}: {req:?}"));
            }
        }
        let first = first.join("\n");
        panic!(
            "seed {seed} (replay with RDMALB_DIFF_SEED={seed}): {} differences between rdmalb and haproxy over {} requests:\n{first}",
            problems.len(),
            sent.len()
        );
    }
}

/// Sends one malformed request on its own connection: the status of the
/// answer (`None`: the connection closed without one).
async fn send_one(addr: SocketAddr, bytes: &[u8], to_close: bool) -> Option<u16> {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut wire = Wire::new(tcp);
    // A proxy may answer and close before reading everything: a failed
    // write is not a failure.
    let _ = wire.stream.write_all(bytes).await;
    let status = match wire.head().await {
        Ok(Some(h)) => h.line[1].parse().ok(),
        _ => None,
    };
    if to_close {
        let _ = wire.until_close().await;
    }
    status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_requests_are_refused_as_by_haproxy() {
    const TEST: &str = "malformed_requests_are_refused_as_by_haproxy";
    let Some(pair) = start(TEST).await else {
        return;
    };
    let cases = malformed::cases();
    let mut statuses = Vec::new();
    for side in [&pair.rdmalb, &pair.haproxy] {
        let mut s = Vec::new();
        for c in &cases {
            let to_close = malformed::READ_TO_CLOSE.contains(&c.name);
            s.push(send_one(side.addr, &c.bytes, to_close).await);
        }
        statuses.push(s);
    }
    let mut outcomes: Vec<Vec<Outcome>> = Vec::new();
    let mut problems = Vec::new();
    for (i, side) in [&pair.rdmalb, &pair.haproxy].into_iter().enumerate() {
        let (records, anomalies, _) = side.echo.snapshot();
        let records = by_id(records);
        for r in records.values().flatten() {
            if r.head.values("content-length").next().is_some()
                && r.head.values("transfer-encoding").next().is_some()
            {
                problems.push(format!(
                    "{} forwarded both Content-Length and Transfer-Encoding: {:?}",
                    side.name, r.head
                ));
            }
        }
        let mut o = Vec::new();
        for (c, status) in cases.iter().zip(&statuses[i]) {
            let id = format!("m-{}", c.name);
            if records.contains_key(&format!("{id}-smuggled")) {
                problems.push(format!("{}: {} smuggled a request", c.name, side.name));
            }
            let marker = format!("x-diff-id: {id}\r\n");
            let garbled = anomalies.iter().find(|a| {
                String::from_utf8_lossy(&a.bytes)
                    .to_ascii_lowercase()
                    .contains(&marker)
            });
            if let Some(a) = garbled {
                eprintln!("{}: {}'s node got {:?}", c.name, side.name, a.error);
            }
            o.push(match (records.contains_key(&id), status) {
                _ if garbled.is_some() => Outcome::Garbled(status.unwrap_or(0)),
                (true, s) => Outcome::Forwarded(s.unwrap_or(0)),
                (false, Some(s)) => Outcome::Refused(*s),
                (false, None) => Outcome::Closed,
            });
        }
        outcomes.push(o);
    }
    for side in [&pair.rdmalb, &pair.haproxy] {
        let (_, anomalies, _) = side.echo.snapshot();
        for a in anomalies {
            let text = String::from_utf8_lossy(&a.bytes).to_ascii_lowercase();
            if !cases
                .iter()
                .any(|c| text.contains(&format!("x-diff-id: m-{}\r\n", c.name)))
            {
                problems.push(format!(
                    "{}'s node got an unknown message: {a:?}",
                    side.name
                ));
            }
        }
    }
    // RFC 9112 3.2.2: what rdmalb forwards for an absolute-form target
    // carries a Host made from the target's authority.
    let (records, _, _) = pair.rdmalb.echo.snapshot();
    if let Some(r) = by_id(records).get("m-absolute-form-host-mismatch") {
        let hosts: Vec<&str> = r.iter().flat_map(|r| r.head.values("host")).collect();
        if hosts != ["www.example.com"] {
            problems.push(format!(
                "absolute-form-host-mismatch: rdmalb forwarded Host {hosts:?}"
            ));
        }
    }
    let mut table = Vec::new();
    for (k, c) in cases.iter().enumerate() {
        let (r, h) = (outcomes[0][k], outcomes[1][k]);
        let allowed = ALLOWED
            .iter()
            .find(|a| a.case == c.name && a.rdmalb == r && a.haproxy == h);
        table.push(format!(
            "{:<32} rdmalb {r:?}, haproxy {h:?}{}",
            c.name,
            allowed.map_or(String::new(), |a| format!(" (allowed: {})", a.why))
        ));
        if !c.accept.contains(&r) {
            problems.push(format!(
                "{}: rdmalb {r:?}, but {} allows only {:?}",
                c.name, c.rfc, c.accept
            ));
        }
        if r != h && allowed.is_none() {
            problems.push(format!(
                "{}: rdmalb {r:?}, haproxy {h:?}, not an allowed difference ({})",
                c.name, c.rfc
            ));
        }
    }
    eprintln!("{TEST}:\n{}", table.join("\n"));
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
