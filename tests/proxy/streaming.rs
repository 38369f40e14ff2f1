//! Large bodies stream through the proxy in both directions without being
//! buffered: the proxy's peak resident memory grows by far less than the
//! 64 MiB that crosses it (a size check from /proc, not a timing one).

use crate::support::*;

const SIZE: u64 = 64 * 1024 * 1024;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_bodies_stream_both_ways_without_buffering() {
    let www = Backend::start("www").await;
    let (listen, addr, _) = listener_toml();
    let config = format!(
        "{listen}[global]\naccess_log = \"off\"\nworkers = 2\n\n[[site]]\nname = \"www\"\nhosts = [\"www.example.com\"]\n\n{}",
        node_toml("n1", www.addr, "www")
    );
    let proxy = Proxy::start(&config, &[addr]);
    let c = client();
    // Warm up (allocator arenas, pools) before taking the baseline.
    for _ in 0..3 {
        let r = c
            .get(format!("http://{addr}/download/100000"))
            .header("host", "www.example.com")
            .send()
            .await
            .unwrap();
        r.bytes().await.unwrap();
    }
    let (rss_before, _) = proxy.memory_kib();
    assert!(rss_before > 0, "cannot read /proc/{}/status", proxy.pid());

    // Download: the node generates 64 MiB; count it as it arrives.
    let mut resp = c
        .get(format!("http://{addr}/download/{SIZE}"))
        .header("host", "www.example.com")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let mut got: u64 = 0;
    while let Some(chunk) = resp.chunk().await.unwrap() {
        got += chunk.len() as u64;
    }
    assert_eq!(got, SIZE);

    // Upload: 64 MiB generated on the fly by the client.
    let chunk = bytes::Bytes::from(vec![b'u'; 256 * 1024]);
    let n = (SIZE / chunk.len() as u64) as usize;
    let stream =
        futures_util::stream::iter((0..n).map(move |_| Ok::<_, std::io::Error>(chunk.clone())));
    let resp = c
        .post(format!("http://{addr}/upload"))
        .header("host", "www.example.com")
        .body(reqwest::Body::wrap_stream(stream))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(resp.text().await.unwrap(), format!("received {SIZE}"));

    let (_, peak) = proxy.memory_kib();
    let growth_mib = peak.saturating_sub(rss_before) / 1024;
    eprintln!("proxy RSS before {rss_before} KiB, peak after {peak} KiB");
    assert!(
        growth_mib < 24,
        "peak RSS grew by {growth_mib} MiB while moving 2 x 64 MiB: bodies are being buffered (before {rss_before} KiB, peak {peak} KiB)"
    );
}
