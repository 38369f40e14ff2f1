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
    let req = http::Request::get(format!("http://{proxy}{path}"))
        .header(http::header::HOST, format!("{site}.localhost"))
        .body(http_body_util::Empty::new());
    let Ok(req) = req else {
        return (0, String::new());
    };
    match tokio::time::timeout(Duration::from_secs(5), client.request(req)).await {
        Ok(Ok(r)) => {
            let site = r
                .headers()
                .get("x-site")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string();
            let status = r.status().as_u16();
            let _ = http_body_util::BodyExt::collect(r.into_body()).await;
            (status, site)
        }
        _ => (0, String::new()),
    }
}

/// Client-side tallies.
#[derive(Default)]
pub(super) struct Traffic {
    pub(super) requests: AtomicU64,
    pub(super) ok: AtomicU64,
    pub(super) errors: AtomicU64,
}

/// Client loops through every proxy: the hot site rotates every
/// [`HOT_FOR`]; every other site gets one slow loop per proxy. Each answer
/// is checked: 421 or a foreign `X-Site` is a misrouted request.
pub(super) fn traffic(
    c: &Cluster,
    start: Instant,
    tally: Arc<Traffic>,
    violations: Arc<Mutex<Vec<String>>>,
    stop: channel::Receiver<bool>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let client = client();
    let mut tasks = Vec::new();
    for &(listen, _) in &c.proxy_addrs {
        for lane in 0..HOT_LOOPS + SITES.len() {
            let (client, tally, violations, mut stop) = (
                client.clone(),
                tally.clone(),
                violations.clone(),
                stop.clone(),
            );
            tasks.push(tokio::spawn(async move {
                loop {
                    if *stop.borrow() {
                        return;
                    }
                    let phase = (start.elapsed().as_secs() / HOT_FOR.as_secs()) as usize;
                    let hot = SITES[phase % SITES.len()];
                    let site = if lane < HOT_LOOPS {
                        hot
                    } else {
                        SITES[lane - HOT_LOOPS]
                    };
                    let (status, served) =
                        request(&client, listen, site, "/dynamic/x?cost=40ms").await;
                    tally.requests.fetch_add(1, Ordering::Relaxed);
                    match status {
                        200 if served == site => {
                            tally.ok.fetch_add(1, Ordering::Relaxed);
                        }
                        200 | 421 => {
                            if let Ok(mut v) = violations.lock() {
                                v.push(format!(
                                    "t={:.2}s a request for site {site} through {listen} was answered {status} by a node serving `{served}`",
                                    start.elapsed().as_secs_f64()
                                ));
                            }
                        }
                        _ => {
                            tally.errors.fetch_add(1, Ordering::Relaxed);
                            tokio::select! {
                                _ = tokio::time::sleep(Duration::from_millis(50)) => {}
                                _ = stop.changed() => return,
                            }
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
