//! Client traffic through every proxy, checked for misrouted answers, and
//! the proxies' claim counters.

use super::*;

pub(super) type Client = hyper_util::client::legacy::Client<
    hyper_util::client::legacy::connect::HttpConnector,
    http_body_util::Empty<bytes::Bytes>,
>;

pub(super) fn client() -> Client {
    hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(5))
        .build_http()
}

/// GET `path` for `site` through `proxy`: status (0 = no response) and the
/// node's `X-Site`.
pub(super) async fn request(
    client: &Client,
    proxy: SocketAddr,
    site: &str,
    path: &str,
) -> (u16, String) {
    match fetch(client, proxy, site, path).await {
        Answer::Response { status, site, .. } => (status, site),
        Answer::None(_) => (0, String::new()),
    }
}

/// What a request got.
pub(super) enum Answer {
    /// A response: status, the node's `X-Site` (empty when the proxy
    /// answered itself) and, for a failure status, the first line of the
    /// body (the proxy's reason).
    Response {
        status: u16,
        site: String,
        reason: String,
    },
    /// No response.
    None(Cause),
}

/// How long a client waits for an answer.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);

/// GET `path` for `site` through `proxy`.
pub(super) async fn fetch(client: &Client, proxy: SocketAddr, site: &str, path: &str) -> Answer {
    let req = http::Request::get(format!("http://{proxy}{path}"))
        .header(http::header::HOST, format!("{site}.localhost"))
        .body(http_body_util::Empty::new());
    let Ok(req) = req else {
        return Answer::None(Cause::Transport {
            error: "bad request".into(),
        });
    };
    let r = match tokio::time::timeout(CLIENT_TIMEOUT, client.request(req)).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => return Answer::None(no_answer(&e)),
        Err(_) => return Answer::None(Cause::Timeout),
    };
    let site = r
        .headers()
        .get("x-site")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let status = r.status().as_u16();
    let body = http_body_util::BodyExt::collect(r.into_body()).await;
    let reason = match body {
        Ok(b) if status >= 400 => {
            let b = b.to_bytes();
            let text = String::from_utf8_lossy(&b);
            text.lines()
                .next()
                .unwrap_or("")
                .chars()
                .take(100)
                .collect()
        }
        _ => String::new(),
    };
    Answer::Response {
        status,
        site,
        reason,
    }
}

/// The cause of a request that got no response.
fn no_answer(e: &hyper_util::client::legacy::Error) -> Cause {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    let mut last = e.to_string();
    while let Some(err) = source {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            match io.kind() {
                std::io::ErrorKind::ConnectionRefused => return Cause::Refused,
                std::io::ErrorKind::ConnectionReset => return Cause::Reset,
                _ => {}
            }
        }
        if let Some(h) = err.downcast_ref::<hyper::Error>() {
            if h.is_incomplete_message() || h.is_canceled() {
                return Cause::Closed;
            }
        }
        last = err.to_string();
        source = err.source();
    }
    Cause::Transport { error: last }
}

/// Whether site `site` (index) has a node that serves it now: ACTIVE for
/// the site, its role applied, its app not killed.
fn healthy_node(findings: &Mutex<watch::Findings>, apps: &AppsDown, site: usize) -> bool {
    findings.lock().is_ok_and(|f| {
        f.nodes.iter().enumerate().any(|(i, s)| {
            s.role.is_some_and(|r| {
                r.site.index() == Some(site)
                    && r.state == rdmalb_window::RoleState::Active
                    && s.applied == r.epoch
            }) && !apps.is_down(i)
        })
    })
}

/// One client lane's request, its answer checked and counted.
struct Lane {
    client: Client,
    proxy: usize,
    listen: SocketAddr,
    tally: Arc<Tally>,
    conditions: Arc<Conditions>,
    findings: Arc<Mutex<watch::Findings>>,
    violations: Arc<Mutex<Vec<String>>>,
    start: Instant,
}

impl Lane {
    /// Sends one request for site `site` (index); false when it failed.
    async fn request(&self, site: usize) -> bool {
        let name = SITES[site];
        let states = &self.conditions.proxies;
        let before = states.read(self.proxy);
        let answer = fetch(&self.client, self.listen, name, "/dynamic/x?cost=40ms").await;
        if matches!(answer, Answer::Response { .. }) {
            states.answered(self.proxy);
        }
        let answered = matches!(answer, Answer::Response { .. });
        let state = StateWord::during(before, states.read(self.proxy), answered);
        let cause = match answer {
            Answer::Response {
                status: 200, site, ..
            } if site == name => {
                self.tally.count(state, true, None);
                return true;
            }
            Answer::Response {
                status: status @ (200 | 421),
                site,
                ..
            } => {
                if let Ok(mut v) = self.violations.lock() {
                    v.push(format!(
                        "t={:.2}s a request for site {name} through {} was answered {status} by a node serving `{site}`",
                        self.start.elapsed().as_secs_f64(),
                        self.listen
                    ));
                }
                self.tally.count(state, false, None);
                return true;
            }
            Answer::Response {
                status,
                site,
                reason,
            } => Cause::Status {
                status,
                by_proxy: site.is_empty(),
                reason,
            },
            Answer::None(cause) => cause,
        };
        let healthy = healthy_node(&self.findings, &self.conditions.apps, site);
        self.tally.count(state, false, Some((cause, healthy)));
        false
    }
}

/// Client loops through every proxy: the hot site rotates every
/// [`HOT_FOR`]; every other site gets one slow loop per proxy. Each answer
/// is checked (421 or a foreign `X-Site` is a misrouted request) and
/// counted by the proxy's state and, when it failed, by cause.
pub(super) fn traffic(
    c: &Cluster,
    start: Instant,
    tally: Arc<Tally>,
    findings: Arc<Mutex<watch::Findings>>,
    violations: Arc<Mutex<Vec<String>>>,
    stop: channel::Receiver<bool>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let client = client();
    let mut tasks = Vec::new();
    for (proxy, &(listen, _)) in c.proxy_addrs.iter().enumerate() {
        for lane in 0..HOT_LOOPS + SITES.len() {
            let mut stop = stop.clone();
            let l = Lane {
                client: client.clone(),
                proxy,
                listen,
                tally: tally.clone(),
                conditions: c.conditions.clone(),
                findings: findings.clone(),
                violations: violations.clone(),
                start,
            };
            tasks.push(tokio::spawn(async move {
                loop {
                    if *stop.borrow() {
                        return;
                    }
                    let phase = (start.elapsed().as_secs() / HOT_FOR.as_secs()) as usize;
                    let site = if lane < HOT_LOOPS {
                        phase % SITES.len()
                    } else {
                        lane - HOT_LOOPS
                    };
                    if !l.request(site).await {
                        tokio::select! {
                            _ = tokio::time::sleep(Duration::from_millis(50)) => {}
                            _ = stop.changed() => return,
                        }
                    }
                    if lane >= HOT_LOOPS {
                        tokio::select! {
                            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                            _ = stop.changed() => return,
                        }
                    }
                }
            }));
        }
    }
    tasks
}

/// The agent counters of one proxy's `/status`: (claims, claim records not
/// written).
pub(super) async fn proxy_claims(admin: SocketAddr) -> Option<(u64, u64)> {
    let client = client();
    let req = http::Request::get(format!("http://{admin}/status"))
        .body(http_body_util::Empty::new())
        .ok()?;
    let r = tokio::time::timeout(Duration::from_secs(5), client.request(req))
        .await
        .ok()?
        .ok()?;
    let body = http_body_util::BodyExt::collect(r.into_body())
        .await
        .ok()?
        .to_bytes();
    let v: serde_json::Value = serde_json::from_slice(&body).ok()?;
    let c = &v["reconfig"]["counters"];
    Some((c["claims"].as_u64()?, c["claim_record_errors"].as_u64()?))
}
