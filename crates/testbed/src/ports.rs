//! Loopback ports for the processes a test or a cluster starts.
//!
//! A port chosen here is released before the process binds it, so another
//! socket may take it in between. Ports from the kernel's ephemeral range
//! (what binding port 0 gives) are the ones every outgoing connection on
//! the machine draws its source port from, and a busy cluster or test run
//! makes thousands; so ports are taken below that range, walking from a
//! start that differs by process, and a port is handed out once per process
//! (until the walk wraps). The testbed's clusters and the end-to-end tests
//! draw from the same walk, so they never get each other's ports.

use std::net::SocketAddr;

/// A loopback address whose port nobody listened on a moment ago, below the
/// ephemeral range when any is free there (else one the kernel chooses).
pub fn free_loopback_addr() -> std::io::Result<SocketAddr> {
    static NEXT: std::sync::Mutex<Option<u16>> = std::sync::Mutex::new(None);
    let (low, high) = below_ephemeral();
    let span = u32::from(high - low);
    let mut next = NEXT.lock().unwrap_or_else(|e| e.into_inner());
    let start = *next.get_or_insert_with(|| {
        // Spread concurrent runs over the range by process id.
        low + (std::process::id().wrapping_mul(7919) % span) as u16
    });
    let mut port = start;
    for _ in 0..span {
        port = if port + 1 >= high { low } else { port + 1 };
        if let Ok(l) = std::net::TcpListener::bind(("127.0.0.1", port)) {
            *next = Some(port);
            if let Ok(addr) = l.local_addr() {
                return Ok(addr);
            }
        }
    }
    // Nothing free below the ephemeral range: let the kernel choose.
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr())
}

/// The ports [`free_loopback_addr`] walks: from 10000 up to the start of
/// the kernel's ephemeral range (`net.ipv4.ip_local_port_range`; 32768 when
/// it cannot be read or leaves fewer than 1000 ports below it).
pub fn below_ephemeral() -> (u16, u16) {
    const LOW: u16 = 10_000;
    let start = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse::<u16>().ok())
        .filter(|s| *s >= LOW + 1000)
        .unwrap_or(32_768);
    (LOW, start)
}
