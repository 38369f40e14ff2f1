//! HAProxy's `monitor-uri` (`[[listener]] monitor_uri`): a request for
//! exactly that path (and query) is answered by the proxy itself, in the
//! request-filter phase, before any site is chosen: 200 with HAProxy's
//! "Service ready." page while the process serves, 503 with HAProxy's
//! "No server is available" page once it drains (SIGTERM, SIGINT, a
//! restart), so an L4 balancer in front stops sending it new connections
//! while in-flight requests finish, or while a site has fewer nodes
//! serving than `monitor_fail` asks (HAProxy's `monitor fail if {
//! nbsrv(<backend>) lt <n> }`).

use std::sync::atomic::Ordering;

use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Request, StatusCode};

use super::forward::Reply;
use super::state::{ConnCtx, Snapshot};

const READY: &str = "<html><body><h1>200 OK</h1>\nService ready.\n</body></html>\n";
const DRAINING: &str = "<html><body><h1>503 Service Unavailable</h1>\nNo server is available to handle this request.\n</body></html>\n";

/// The proxy's own answer when `req` asks for its listener's monitor URI.
pub fn reply<B>(ctx: &ConnCtx, snap: &Snapshot, req: &Request<B>) -> Option<Reply> {
    let listener = snap
        .config
        .listeners
        .iter()
        .find(|l| *l.name == *ctx.listener)?;
    let uri = listener.monitor_uri.as_deref()?;
    if req.uri().path_and_query().map(|p| p.as_str()) != Some(uri) {
        return None;
    }
    let failing = listener.monitor_fail.as_ref().is_some_and(|f| {
        let backends = &snap.backends;
        let site = backends.sites().iter().find(|s| s.name == f.site);
        let serving = site.map_or(0, |s| {
            backends
                .nodes()
                .iter()
                .filter(|n| n.admits() && n.serves(s.index))
                .count()
        });
        serving < f.serving_below
    });
    let (status, body) = if failing || ctx.proxy.draining.load(Ordering::Relaxed) {
        (StatusCode::SERVICE_UNAVAILABLE, DRAINING)
    } else {
        (StatusCode::OK, READY)
    };
    let mut headers = HeaderMap::new();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html"));
    Some(Reply {
        status,
        headers,
        body: Bytes::from_static(body.as_bytes()),
    })
}
