//! The load fields a node publishes, defined once: [`LoadSample`] holds
//! their values and [`Field`] names each one, with its word in the load
//! block ([`crate::layout::word`]), its name in `/status`, metric labels and
//! the sidecar's push protocol, and its accessors. The publisher, the
//! decoder, the sidecar's collectors and the proxy's load index all take the
//! fields from here, so adding one is one edit in this file (and a word in
//! the layout).

use crate::layout::word;

/// What a node publishes: one value per [`Field`]; [`publish`](crate::seqlock::publish)
/// stamps it with the time. Serialised (for `/status`) with these names.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct LoadSample {
    /// CPU utilisation, parts per million.
    pub cpu_util_ppm: u64,
    /// Run queue length, milli-tasks.
    pub run_queue_milli: u64,
    /// Memory used, parts per million.
    pub mem_used_ppm: u64,
    /// Network receive rate, bytes per second.
    pub net_rx_bps: u64,
    /// Network transmit rate, bytes per second.
    pub net_tx_bps: u64,
    /// Active connections to the application.
    pub active_connections: u64,
    /// Pending interrupt rate, per second.
    pub irq_rate: u64,
    /// Application workers busy.
    pub app_busy: u64,
    /// Application worker capacity.
    pub app_capacity: u64,
    /// Requests served in total.
    pub requests_total: u64,
    /// Application queue length.
    pub app_queue_len: u64,
    /// The app's recent response time, microseconds (0: not reported).
    pub app_latency_us: u64,
    /// The most requests the app's queue holds beyond its busy workers
    /// (0: not reported); a request beyond is refused (503).
    pub app_queue_limit: u64,
}

/// One load field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Field {
    /// CPU utilisation, parts per million.
    Cpu,
    /// Runnable tasks, in milli-tasks.
    RunQueue,
    /// Memory used, parts per million.
    Mem,
    /// Received bytes per second.
    NetRx,
    /// Transmitted bytes per second.
    NetTx,
    /// Active (established) connections to the app.
    Connections,
    /// Hardware + soft interrupts per second.
    IrqRate,
    /// Requests the app is serving right now.
    AppBusy,
    /// Requests the app can serve at once.
    AppCapacity,
    /// Requests served since the app started.
    RequestsTotal,
    /// Requests waiting in the app's queue.
    AppQueue,
    /// The app's recent response time, microseconds.
    AppLatency,
    /// The app's queue limit.
    AppQueueLimit,
}

impl Field {
    /// Every field, in load-block order.
    pub const ALL: [Field; 13] = [
        Field::Cpu,
        Field::RunQueue,
        Field::Mem,
        Field::NetRx,
        Field::NetTx,
        Field::Connections,
        Field::IrqRate,
        Field::AppBusy,
        Field::AppCapacity,
        Field::RequestsTotal,
        Field::AppQueue,
        Field::AppLatency,
        Field::AppQueueLimit,
    ];

    /// Name used in the sidecar's /status, metric labels and the push
    /// protocol.
    pub fn name(self) -> &'static str {
        match self {
            Field::Cpu => "cpu_ppm",
            Field::RunQueue => "run_queue_milli",
            Field::Mem => "mem_ppm",
            Field::NetRx => "net_rx_bps",
            Field::NetTx => "net_tx_bps",
            Field::Connections => "connections",
            Field::IrqRate => "irq_rate",
            Field::AppBusy => "busy",
            Field::AppCapacity => "capacity",
            Field::RequestsTotal => "requests_total",
            Field::AppQueue => "queue",
            Field::AppLatency => "latency_us",
            Field::AppQueueLimit => "queue_limit",
        }
    }

    /// Its word in the window ([`crate::layout::word`]).
    pub fn word(self) -> usize {
        match self {
            Field::Cpu => word::CPU_UTIL,
            Field::RunQueue => word::RUN_QUEUE,
            Field::Mem => word::MEM_USED,
            Field::NetRx => word::NET_RX,
            Field::NetTx => word::NET_TX,
            Field::Connections => word::ACTIVE_CONNS,
            Field::IrqRate => word::IRQ_RATE,
            Field::AppBusy => word::APP_BUSY,
            Field::AppCapacity => word::APP_CAPACITY,
            Field::RequestsTotal => word::REQUESTS_TOTAL,
            Field::AppQueue => word::APP_QUEUE,
            Field::AppLatency => word::APP_LATENCY,
            Field::AppQueueLimit => word::APP_QUEUE_LIMIT,
        }
    }

    /// Its position in [`Field::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// Its value in `s`.
    pub fn get(self, s: &LoadSample) -> u64 {
        *self.slot(s)
    }

    /// Sets its value in `s`.
    pub fn set(self, s: &mut LoadSample, v: u64) {
        *self.slot_mut(s) = v;
    }

    fn slot(self, s: &LoadSample) -> &u64 {
        match self {
            Field::Cpu => &s.cpu_util_ppm,
            Field::RunQueue => &s.run_queue_milli,
            Field::Mem => &s.mem_used_ppm,
            Field::NetRx => &s.net_rx_bps,
            Field::NetTx => &s.net_tx_bps,
            Field::Connections => &s.active_connections,
            Field::IrqRate => &s.irq_rate,
            Field::AppBusy => &s.app_busy,
            Field::AppCapacity => &s.app_capacity,
            Field::RequestsTotal => &s.requests_total,
            Field::AppQueue => &s.app_queue_len,
            Field::AppLatency => &s.app_latency_us,
            Field::AppQueueLimit => &s.app_queue_limit,
        }
    }

    fn slot_mut(self, s: &mut LoadSample) -> &mut u64 {
        match self {
            Field::Cpu => &mut s.cpu_util_ppm,
            Field::RunQueue => &mut s.run_queue_milli,
            Field::Mem => &mut s.mem_used_ppm,
            Field::NetRx => &mut s.net_rx_bps,
            Field::NetTx => &mut s.net_tx_bps,
            Field::Connections => &mut s.active_connections,
            Field::IrqRate => &mut s.irq_rate,
            Field::AppBusy => &mut s.app_busy,
            Field::AppCapacity => &mut s.app_capacity,
            Field::RequestsTotal => &mut s.requests_total,
            Field::AppQueue => &mut s.app_queue_len,
            Field::AppLatency => &mut s.app_latency_us,
            Field::AppQueueLimit => &mut s.app_queue_limit,
        }
    }
}

#[cfg(test)]
mod tests;
