//! The sidecar's admin endpoint: `GET /metrics` (Prometheus text, rendered
//! by `metrics-exporter-prometheus`) and `GET /status` (JSON: node, the load
//! block as published, the role word and role status decoded,
//! role_applied, the last switch and failure, transports served, peers
//! seen on tcp/verbs, collector health).
//!
//! Load-block gauges are refreshed from the window at scrape time rather
//! than by the publisher, so the 1 ms publish loop never touches metrics.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::{header, Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use metrics_exporter_prometheus::PrometheusHandle;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::collect::{Field, Slot};
use super::publish::PublishStats;
use super::role::RoleReport;
use super::serve::Peers;
use super::{BoundAddrs, SidecarConfig};
use rdmalb_base::duration;
use rdmalb_base::time::unix_ms;
use rdmalb_window::layout::word;
use rdmalb_window::{
    seqlock, Listen, LoadBlock, RoleState, RoleStatus, RoleWord, SiteSlot, WindowMemory,
};

/// Everything /status and /metrics show.
pub struct AdminState {
    pub cfg: Arc<SidecarConfig>,
    pub memory: Arc<WindowMemory>,
    pub slots: Vec<Arc<Slot>>,
    pub publish: Arc<PublishStats>,
    pub peers: Peers,
    pub addrs: Mutex<BoundAddrs>,
    /// Role application's last switch and failure.
    pub role: Arc<Mutex<RoleReport>>,
}

/// The process's Prometheus recorder ([`rdmalb_base::metrics`]), installed
/// on first use and shared with a proxy in the same process; `None` when
/// another component installed a different recorder first (then /metrics
/// says so instead of serving partial data).
pub fn prometheus() -> Option<&'static PrometheusHandle> {
    rdmalb_base::metrics::prometheus()
}

/// Binds `listen` and serves the admin endpoint until `shutdown`.
pub async fn start(
    listen: SocketAddr,
    state: Arc<AdminState>,
    shutdown: watch::Receiver<bool>,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = TcpListener::bind(listen).await?;
    let addr = listener.local_addr()?;
    Ok((addr, tokio::spawn(accept_loop(listener, state, shutdown))))
}

async fn accept_loop(
    listener: TcpListener,
    state: Arc<AdminState>,
    mut shutdown: watch::Receiver<bool>,
) {
    // Connection tasks hold the state (and so the window memory); they are
    // joined on shutdown so that `Sidecar::stop` returning means the memory
    // is released and the shm file removed.
    let mut conns = tokio::task::JoinSet::new();
    loop {
        while conns.try_join_next().is_some() {}
        let (stream, _) = tokio::select! {
            _ = rdmalb_base::shutdown::requested(&mut shutdown) => {
                // Each connection finishes gracefully on the same signal;
                // bounded in case a client never reads its response.
                let _ = tokio::time::timeout(Duration::from_secs(5), async {
                    while conns.join_next().await.is_some() {}
                })
                .await;
                return;
            }
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(error = %e, "admin accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let state = state.clone();
        let mut sd = shutdown.clone();
        conns.spawn(async move {
            let svc = service_fn(move |req| {
                let state = state.clone();
                async move { Ok::<_, std::convert::Infallible>(route(&state, req)) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(Duration::from_secs(10))
                .serve_connection(TokioIo::new(stream), svc);
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                _ = rdmalb_base::shutdown::requested(&mut sd) => conn.as_mut().graceful_shutdown(),
            }
        });
    }
}

fn route(state: &AdminState, req: Request<Incoming>) -> Response<Full<Bytes>> {
    match (req.method(), req.uri().path()) {
        (&Method::GET, "/status") => {
            let body = serde_json::to_vec_pretty(&status_json(state)).unwrap_or_default();
            reply(StatusCode::OK, "application/json", body)
        }
        (&Method::GET, "/metrics") => match prometheus() {
            Some(h) => {
                refresh_gauges(state);
                reply(
                    StatusCode::OK,
                    "text/plain; version=0.0.4",
                    h.render().into_bytes(),
                )
            }
            None => reply(
                StatusCode::SERVICE_UNAVAILABLE,
                "text/plain",
                b"another metrics recorder is installed in this process\n".to_vec(),
            ),
        },
        (_, "/status" | "/metrics") => reply(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            b"GET only\n".to_vec(),
        ),
        _ => reply(
            StatusCode::NOT_FOUND,
            "text/plain",
            b"not found: try /status or /metrics\n".to_vec(),
        ),
    }
}

fn reply(code: StatusCode, ctype: &'static str, body: Vec<u8>) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = code;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(ctype),
    );
    r
}

/// The owner's own consistent view of its load block. The publisher may be
/// mid-write; a few retries always find a quiet moment (writes take
/// nanoseconds every millisecond).
pub fn own_block(memory: &WindowMemory) -> Option<LoadBlock> {
    (0..100).find_map(|_| seqlock::decode_block(&seqlock::snapshot(memory)).ok())
}

fn load_fields(b: &LoadBlock) -> [(Field, u64); 13] {
    let s = &b.sample;
    [
        (Field::Cpu, s.cpu_util_ppm),
        (Field::RunQueue, s.run_queue_milli),
        (Field::Mem, s.mem_used_ppm),
        (Field::NetRx, s.net_rx_bps),
        (Field::NetTx, s.net_tx_bps),
        (Field::Connections, s.active_connections),
        (Field::IrqRate, s.irq_rate),
        (Field::AppBusy, s.app_busy),
        (Field::AppCapacity, s.app_capacity),
        (Field::RequestsTotal, s.requests_total),
        (Field::AppQueue, s.app_queue_len),
        (Field::AppLatency, s.app_latency_us),
        (Field::AppQueueLimit, s.app_queue_limit),
    ]
}

fn refresh_gauges(state: &AdminState) {
    let node = state.cfg.node.clone();
    if let Some(b) = own_block(&state.memory) {
        for (f, v) in load_fields(&b) {
            metrics::gauge!("rdmalb_sidecar_load", "node" => node.clone(), "field" => f.name())
                .set(v as f64);
        }
        metrics::gauge!("rdmalb_sidecar_load_age_seconds", "node" => node.clone())
            .set(b.age(SystemTime::now()).as_secs_f64());
    }
    metrics::counter!("rdmalb_sidecar_publishes_total", "node" => node.clone())
        .absolute(state.publish.publishes.load(Ordering::Relaxed));
    metrics::counter!("rdmalb_sidecar_publish_late_ticks_total", "node" => node.clone())
        .absolute(state.publish.late_ticks.load(Ordering::Relaxed));
    let role = RoleWord::decode(state.memory.load(word::ROLE).unwrap_or(0)).ok();
    metrics::gauge!("rdmalb_sidecar_role_epoch", "node" => node.clone())
        .set(role.map_or(0.0, |r| r.epoch as f64));
    metrics::gauge!("rdmalb_sidecar_role_applied_epoch", "node" => node.clone())
        .set(state.memory.load(word::ROLE_APPLIED).unwrap_or(0) as f64);
    if let Ok(st) = RoleStatus::decode(state.memory.load(word::ROLE_STATUS).unwrap_or(0)) {
        metrics::gauge!("rdmalb_sidecar_role_status_code", "node" => node.clone())
            .set(f64::from(st.code.code()));
    }
    for s in &state.slots {
        metrics::gauge!("rdmalb_sidecar_collector_up", "node" => node.clone(), "collector" => s.name.clone())
            .set(if s.health().error.is_none() { 1.0 } else { 0.0 });
    }
    for kind in Listen::KINDS {
        metrics::gauge!("rdmalb_sidecar_peers", "node" => node.clone(), "transport" => kind.as_str())
            .set(state.peers.of(kind).len() as f64);
    }
}

fn site_name(cfg: &SidecarConfig, slot: SiteSlot) -> Value {
    match slot.index() {
        None => json!("idle"),
        Some(i) => cfg.sites.get(i).map_or_else(
            || json!(format!("site#{i} (not in the site table)")),
            |s| json!(s),
        ),
    }
}

/// The /status document.
pub fn status_json(state: &AdminState) -> Value {
    let cfg = &state.cfg;
    let now = SystemTime::now();
    let load = match own_block(&state.memory) {
        Some(b) => {
            let mut m = serde_json::Map::new();
            for (f, v) in load_fields(&b) {
                m.insert(f.name().to_string(), json!(v));
            }
            json!({
                "seq": b.seq,
                "updated_at_ns": b.updated_at_ns,
                "age_ms": b.age(now).as_secs_f64() * 1e3,
                "fresh": b.age(now) <= cfg.staleness,
                "fields": m,
            })
        }
        None => Value::Null,
    };
    let raw_role = state.memory.load(word::ROLE).unwrap_or(0);
    let role = match RoleWord::decode(raw_role) {
        Ok(r) => json!({
            "raw": format!("{raw_role:#018x}"),
            // A never-written word (all zero) names no site, not site 0.
            "site": if r.state == RoleState::Unset { Value::Null } else { site_name(cfg, r.site) },
            "state": r.state.as_str(),
            "epoch": r.epoch,
        }),
        Err(e) => json!({ "raw": format!("{raw_role:#018x}"), "error": e.to_string() }),
    };
    let w = |i| state.memory.load(i).unwrap_or(0);
    let raw_status = w(word::ROLE_STATUS);
    let role_status = match RoleStatus::decode(raw_status) {
        Ok(st) => json!({
            "raw": format!("{raw_status:#018x}"),
            "epoch": st.epoch,
            "serving": site_name(cfg, st.serving),
            "code": st.code.as_str(),
        }),
        Err(e) => json!({ "raw": format!("{raw_status:#018x}"), "error": e.to_string() }),
    };
    let report = state.role.lock().map(|r| r.clone()).unwrap_or_default();
    let role_application = json!({
        "enabled": cfg.role.is_some(),
        "file": cfg.role.as_ref().map(|r| r.file.display().to_string()),
        "mode": cfg.role.as_ref().map(|r| if r.mode.gate().is_some() { "warm" } else { "cold" }),
        "gate": cfg.role.as_ref().and_then(|r| r.mode.gate()).map(|g| g.display().to_string()),
        "switches_total": report.switches_total,
        "failures_total": report.failures_total,
        "last_switch": report.last_switch.map(|s| json!({
            "epoch": s.epoch,
            "site": s.site,
            "ms": s.duration.as_secs_f64() * 1e3,
            "at_unix_ms": s.at_unix_ms,
        })),
        "last_failure": report.last_failure.map(|f| json!({
            "epoch": f.epoch,
            "site": f.site,
            "code": f.code.as_str(),
            "reason": f.reason,
            "at_unix_ms": f.at_unix_ms,
        })),
    });
    let addrs = state.addrs.lock().map(|a| a.clone()).unwrap_or_default();
    let mut transports = Vec::new();
    if let Some(p) = &addrs.shm {
        transports.push(json!({ "kind": "shm", "path": p.display().to_string() }));
    }
    transports.extend(state.peers.describe());
    let collectors: Vec<Value> = state
        .slots
        .iter()
        .map(|s| {
            let h = s.health();
            json!({
                "name": s.name,
                "ok": h.error.is_none(),
                "error": h.error,
                "since_unix_ms": h.since.map(unix_ms),
                "samples_total": h.samples_total,
                "errors_total": h.errors_total,
            })
        })
        .collect();
    json!({
        "node": cfg.node,
        "node_id": cfg.node_id,
        "sites": cfg.sites,
        "site_table_hash": format!("{:#018x}", cfg.site_hash),
        "publish_interval": duration::format(cfg.publish_interval),
        "staleness": duration::format(cfg.staleness),
        "publishes_total": state.publish.publishes.load(Ordering::Relaxed),
        "publish_late_ticks": state.publish.late_ticks.load(Ordering::Relaxed),
        "load": load,
        "role": role,
        "role_applied": w(word::ROLE_APPLIED),
        "role_status": role_status,
        "role_application": role_application,
        "claim": { "proxy": w(word::CLAIM_PROXY), "time_unix_ms": w(word::CLAIM_TIME), "epoch": w(word::CLAIM_EPOCH) },
        "transports": transports,
        "push": addrs.push.iter().map(|p| p.to_string()).collect::<Vec<_>>(),
        "peers": Listen::KINDS
            .map(|k| (k.as_str().to_string(), json!(state.peers.of(k))))
            .into_iter()
            .collect::<serde_json::Map<_, _>>(),
        "collectors": collectors,
    })
}
