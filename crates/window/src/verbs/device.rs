//! Opening an RDMA device and moving RC queue pairs through INIT → RTR → RTS.
//!
//! Both sides of the verbs transport use this: pick the device (first one or
//! by name), its first ACTIVE port, and a GID both ends agree on; then create
//! and connect queue pairs from the peer's [`QpEndpoint`].
//!
//! GID choice: RoCEv2 with an IPv4-mapped address first (this is what
//! Soft-RoCE and most RoCE fabrics route), then RoCEv2 with a routable IPv6
//! address, then any RoCEv1/InfiniBand GID that is not link-local, then the
//! first non-zero GID (InfiniBand's default `fe80::` GID at index 0). Both
//! ends apply the same rule, so they end up with the same GID type.
//!
//! sideway panics on some "impossible" values returned by the driver (unknown
//! MTU, GID type, link layer …); this module reads the raw fields instead,
//! and [`open`] additionally contains any panic from the library so a strange
//! driver becomes an error, not a crashed sidecar.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use sideway::ibverbs::address::{AddressHandleAttribute, Gid};
use sideway::ibverbs::completion::GenericCompletionQueue;
use sideway::ibverbs::device::{DeviceInfo, DeviceList};
use sideway::ibverbs::device_context::{DeviceContext, Mtu};
use sideway::ibverbs::protection_domain::ProtectionDomain;
use sideway::ibverbs::queue_pair::{BasicQueuePair, QueuePair, QueuePairAttribute, QueuePairState};
use sideway::ibverbs::AccessFlags;

use super::wire::QpEndpoint;

/// `ibv_port_state::IBV_PORT_ACTIVE`.
const PORT_ACTIVE: u32 = 4;
/// Deepest RDMA READ / atomic pipeline we ask for (the device may allow less).
const MAX_RD_ATOMIC: i32 = 16;
/// `ibv_gid_type_sysfs` value of a RoCEv2 GID.
const GID_TYPE_ROCE_V2: u32 = 1;

/// Why the device could not be used. `Missing` means "no usable RDMA here";
/// the caller maps it to `WindowError::NoDevice`.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DeviceError {
    /// No device, no libibverbs, or the named device does not exist.
    #[error("{0}")]
    Missing(String),
    /// A verbs call failed on an existing device.
    #[error("{0}")]
    Failed(String),
}

/// An opened device with the port and GID this process uses.
pub(crate) struct Device {
    /// The device context (keeps the device open).
    pub ctx: Arc<DeviceContext>,
    /// One protection domain for all queue pairs and regions of this process side.
    pub pd: Arc<ProtectionDomain>,
    /// Device name, e.g. `rxe0` or `mlx5_0`.
    pub name: String,
    /// Port number (1-based).
    pub port: u8,
    /// Port LID (0 on RoCE).
    pub lid: u16,
    /// Active MTU, verbs enum value 1..=5.
    pub mtu: u8,
    /// Chosen GID and its table index.
    pub gid: Gid,
    /// Index of [`Self::gid`] in the port's GID table.
    pub gid_index: u8,
    /// Largest RDMA READ / atomic depth this device supports per QP (capped at 16).
    pub max_rd_atomic: u8,
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Device")
            .field("name", &self.name)
            .field("port", &self.port)
            .field("gid_index", &self.gid_index)
            .field("gid", &self.gid.to_string())
            .finish()
    }
}

/// Opens `name` (or the first device) and selects port and GID.
pub(crate) fn open(name: Option<&str>) -> Result<Device, DeviceError> {
    match catch_unwind(AssertUnwindSafe(|| open_inner(name))) {
        Ok(r) => r,
        Err(_) => Err(DeviceError::Failed(
            "the verbs library panicked while opening the device (unexpected value from the driver)".into(),
        )),
    }
}

/// [`open`], but shared: windows of one process that name the same device
/// share one device context and protection domain (opening a context per
/// peer node would multiply kernel resources for nothing). The device is
/// closed when the last window using it is gone.
pub(crate) fn shared(name: Option<&str>) -> Result<Arc<Device>, DeviceError> {
    type Cache = Mutex<Vec<(Option<String>, Weak<Device>)>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let mut cache = CACHE
        .get_or_init(Cache::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    cache.retain(|(_, w)| w.strong_count() > 0);
    if let Some(d) = cache
        .iter()
        .find(|(n, _)| n.as_deref() == name)
        .and_then(|(_, w)| w.upgrade())
    {
        return Ok(d);
    }
    let d = Arc::new(open(name)?);
    cache.push((name.map(str::to_string), Arc::downgrade(&d)));
    Ok(d)
}

fn open_inner(name: Option<&str>) -> Result<Device, DeviceError> {
    let list = DeviceList::new().map_err(|e| DeviceError::Missing(list_error(&e)))?;
    if list.is_empty() {
        return Err(DeviceError::Missing(
            "no RDMA device found (ibv_get_device_list returned 0 devices)".into(),
        ));
    }
    let names: Vec<String> = list.iter().map(|d| d.name()).collect();
    let index = match name {
        None => 0,
        Some(want) => names.iter().position(|n| n == want).ok_or_else(|| {
            DeviceError::Missing(format!(
                "RDMA device {want:?} not found (available: {})",
                names.join(", ")
            ))
        })?,
    };
    let dev = list
        .get(index)
        .ok_or_else(|| DeviceError::Missing("RDMA device list changed while opening".into()))?;
    let dev_name = names[index].clone();
    let ctx = dev.open().map_err(|e| {
        DeviceError::Missing(format!(
            "cannot open RDMA device {dev_name}: {} (permissions on /dev/infiniband?)",
            rdmalb_base::error::chain(&e)
        ))
    })?;
    let attr = ctx
        .query_device()
        .map_err(|e| DeviceError::Failed(format!("{dev_name}: ibv_query_device failed: {e:?}")))?;
    let ports = attr.phys_port_cnt();
    let max_rd_atomic = attr
        .max_qp_rd_atom()
        .min(attr.max_qp_init_rd_atom())
        .clamp(1, MAX_RD_ATOMIC) as u8;

    let mut chosen = None;
    for port in 1..=ports {
        let Ok(p) = ctx.query_port(port) else {
            continue;
        };
        if p.attr.state == PORT_ACTIVE {
            chosen = Some((port, p.attr.lid, p.attr.active_mtu, p.attr.gid_tbl_len));
            break;
        }
    }
    let (port, lid, mtu, gid_len) = chosen.ok_or_else(|| {
        DeviceError::Missing(format!(
            "RDMA device {dev_name} has no ACTIVE port ({ports} port(s))"
        ))
    })?;
    let mtu = u8::try_from(mtu)
        .ok()
        .filter(|m| (1..=5).contains(m))
        .unwrap_or(1);

    let mut best: Option<(u8, u8, Gid)> = None; // (score, index, gid)
    for i in 0..gid_len.clamp(0, 256) as u32 {
        let Ok(gid) = ctx.query_gid(port, i) else {
            continue;
        };
        if gid.is_zero() {
            continue;
        }
        let roce_v2 = gid_type(&ctx, &dev_name, port, i) == Some(GID_TYPE_ROCE_V2);
        let score = gid_score(&gid, roce_v2);
        if best.as_ref().is_none_or(|(s, _, _)| score > *s) {
            best = Some((score, i as u8, gid));
        }
    }
    let (_, gid_index, gid) = best.ok_or_else(|| {
        DeviceError::Missing(format!(
            "RDMA device {dev_name} port {port} has no GID (no IP address on its network device?)"
        ))
    })?;
    let pd = ctx
        .alloc_pd()
        .map_err(|e| DeviceError::Failed(format!("{dev_name}: ibv_alloc_pd failed: {e:?}")))?;
    Ok(Device {
        ctx,
        pd,
        name: dev_name,
        port,
        lid,
        mtu,
        gid,
        gid_index,
        max_rd_atomic,
    })
}

/// Explains a failed `ibv_get_device_list` by its errno.
fn list_error(e: &sideway::ibverbs::device::GetDeviceListError) -> String {
    let sideway::ibverbs::device::GetDeviceListErrorKind::Ibverbs(io) = &e.0 else {
        return format!("cannot list RDMA devices: {}", rdmalb_base::error::chain(e));
    };
    match io.raw_os_error() {
        // libibverbs: the kernel has no verbs support (no /sys/class/infiniband).
        Some(libc::ENOSYS) => {
            "no RDMA device found (ibv_get_device_list: the kernel has no RDMA verbs \
             support, /sys/class/infiniband is missing)"
                .into()
        }
        // sideway's loader: libibverbs.so.1 could not be loaded.
        Some(libc::EOPNOTSUPP) => {
            "libibverbs.so.1 could not be loaded (install rdma-core's libibverbs1 \
             and a provider, e.g. ibverbs-providers)"
                .into()
        }
        _ => format!("cannot list RDMA devices: ibv_get_device_list failed: {io}"),
    }
}

/// The GID type as `ibv_gid_type_sysfs` (0 IB/RoCEv1, 1 RoCEv2), from the
/// library or, where the library lacks the call, from sysfs.
fn gid_type(ctx: &DeviceContext, dev: &str, port: u8, index: u32) -> Option<u32> {
    if let Ok(t) = ctx.query_gid_type(port, index) {
        return Some(t);
    }
    let path = format!("/sys/class/infiniband/{dev}/ports/{port}/gid_attrs/types/{index}");
    let text = std::fs::read_to_string(path).ok()?;
    Some(if text.trim().eq_ignore_ascii_case("RoCE v2") {
        GID_TYPE_ROCE_V2
    } else {
        0
    })
}

/// Preference of a GID: higher is better (see the module doc).
pub(crate) fn gid_score(gid: &Gid, roce_v2: bool) -> u8 {
    let ipv4_mapped =
        gid.raw[..10].iter().all(|&b| b == 0) && gid.raw[10] == 0xff && gid.raw[11] == 0xff;
    match (roce_v2, ipv4_mapped, gid.is_unicast_link_local()) {
        (true, true, _) => 4,
        (true, false, false) => 3,
        (false, _, false) => 2,
        (true, false, true) => 1,
        (false, _, true) => 0,
    }
}

impl Device {
    /// This side's endpoint description for the peer.
    pub fn endpoint(&self, qpn: u32, psn: u32, rd_atomic: u8) -> QpEndpoint {
        QpEndpoint {
            qpn,
            psn,
            lid: self.lid,
            mtu: self.mtu,
            gid_index: self.gid_index,
            rd_atomic,
            gid: self.gid.raw,
        }
    }

    /// Creates an RC queue pair with `max_send_wr` send slots on `cq` and moves
    /// it to INIT with the given remote access (the sidecar allows READ and
    /// atomics; the proxy allows nothing).
    pub fn create_qp(
        &self,
        cq: &GenericCompletionQueue,
        max_send_wr: u32,
        access: AccessFlags,
    ) -> Result<BasicQueuePair, DeviceError> {
        let mut b = self.pd.create_qp_builder();
        b.setup_max_send_wr(max_send_wr.max(1))
            .setup_max_recv_wr(1)
            .setup_max_send_sge(1)
            .setup_max_recv_sge(1)
            .setup_max_inline_data(0)
            .setup_send_cq(cq.clone())
            .setup_recv_cq(cq.clone());
        let mut qp = b.build().map_err(|e| {
            DeviceError::Failed(format!("{}: ibv_create_qp failed: {e:?}", self.name))
        })?;
        let mut a = QueuePairAttribute::new();
        a.setup_state(QueuePairState::Init)
            .setup_pkey_index(0)
            .setup_port(self.port)
            .setup_access_flags(access);
        qp.modify(&a).map_err(|e| {
            DeviceError::Failed(format!(
                "{}: QP → INIT failed: {}",
                self.name,
                rdmalb_base::error::chain(&e)
            ))
        })?;
        Ok(qp)
    }

    /// INIT → RTR → RTS against `remote`. `responder_depth` is how many
    /// incoming READ/atomics this QP serves at once, `initiator_depth` how many
    /// it issues at once.
    pub fn connect_qp(
        &self,
        qp: &mut BasicQueuePair,
        local_psn: u32,
        remote: &QpEndpoint,
        responder_depth: u8,
        initiator_depth: u8,
    ) -> Result<(), DeviceError> {
        let mtu = mtu_enum(self.mtu.min(remote.mtu));
        let mut ah = AddressHandleAttribute::new();
        ah.setup_dest_lid(remote.lid)
            .setup_port(self.port)
            .setup_service_level(0)
            .setup_grh_src_gid_index(self.gid_index)
            .setup_grh_dest_gid(&Gid { raw: remote.gid })
            .setup_grh_hop_limit(64);
        let mut a = QueuePairAttribute::new();
        a.setup_state(QueuePairState::ReadyToReceive)
            .setup_path_mtu(mtu)
            .setup_dest_qp_num(remote.qpn)
            .setup_rq_psn(remote.psn)
            .setup_max_dest_read_atomic(responder_depth.max(1))
            .setup_min_rnr_timer(12)
            .setup_address_vector(&ah);
        qp.modify(&a).map_err(|e| {
            DeviceError::Failed(format!(
                "{}: QP → RTR failed: {}",
                self.name,
                rdmalb_base::error::chain(&e)
            ))
        })?;
        let mut a = QueuePairAttribute::new();
        // timeout 14 ≈ 67 ms per try, 7 retries: a dead peer surfaces as an
        // error completion within about half a second.
        a.setup_state(QueuePairState::ReadyToSend)
            .setup_sq_psn(local_psn)
            .setup_timeout(14)
            .setup_retry_cnt(7)
            .setup_rnr_retry(7)
            .setup_max_read_atomic(initiator_depth.max(1));
        qp.modify(&a).map_err(|e| {
            DeviceError::Failed(format!(
                "{}: QP → RTS failed: {}",
                self.name,
                rdmalb_base::error::chain(&e)
            ))
        })?;
        Ok(())
    }
}

/// Moves a queue pair to the ERROR state: every outstanding work request
/// completes with a flush error, so nothing waits forever.
pub(crate) fn set_error(qp: &mut BasicQueuePair) -> Result<(), String> {
    let mut a = QueuePairAttribute::new();
    a.setup_state(QueuePairState::Error);
    qp.modify(&a).map_err(|e| rdmalb_base::error::chain(&e))
}

fn mtu_enum(v: u8) -> Mtu {
    match v {
        5 => Mtu::Mtu4096,
        4 => Mtu::Mtu2048,
        3 => Mtu::Mtu1024,
        2 => Mtu::Mtu512,
        _ => Mtu::Mtu256,
    }
}

/// A random 24-bit packet sequence number.
pub(crate) fn random_psn() -> u32 {
    rand::random::<u32>() & 0x00ff_ffff
}

#[cfg(test)]
mod tests;
