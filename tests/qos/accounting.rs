//! QoS accounting end to end through a real `rdmalb proxy`: real HTTP
//! backends for the "hot" site, none reachable for the "cold" one (every
//! request answered 503 by the proxy). The data path counts offered and
//! served requests per site, the agent (in `rigid` mode: accounting runs in
//! every mode, nothing moves) turns them into per-interval rates, kept or
//! missed intervals and the QoS-meeting percentage, shown in `/status` and
//! `/metrics`.

use std::time::Duration;

use crate::support::reconfig::{Endpoint, Nodes};
use crate::support::{eventually, Backend};

/// The sum of the `/metrics` samples of `name` whose labels contain every
/// one of `labels`.
fn metric(text: &str, name: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) && labels.iter().all(|x| l.contains(x)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offered_served_and_kept_intervals_per_site() {
    // n0 serves hot; n1 is cold's only node and nothing listens at its
    // address, so cold's requests are offered but never served.
    let nodes = Nodes::start("qos", &[Some(0), Some(1)], false);
    let hot = Backend::start("n0").await;
    let dead = crate::support::free_port();
    let (listener, listen, admin) = crate::support::listener_toml();
    let mut config = format!("[health]\ninterval = \"100ms\"\nrise = 1\n\n{listener}");
    config.push_str(
        "[[site]]\nname = \"hot\"\nhosts = [\"hot.test\"]\npriority = 5\nguarantee = 2.0\n\n",
    );
    config.push_str("[[site]]\nname = \"cold\"\nhosts = [\"cold.test\"]\nguarantee = 2.0\n\n");
    let addrs = [hot.addr.to_string(), format!("127.0.0.1:{dead}")];
    for (i, e) in nodes.endpoints.iter().enumerate() {
        let Endpoint::Shm(path) = e else {
            unreachable!()
        };
        let site = ["hot", "cold"][i];
        config.push_str(&format!(
            "[[node]]\nname = \"n{i}\"\naddress = \"{}\"\nsite = \"{site}\"\ntransport = \"shm\"\nsidecar = \"{}\"\n\n",
            addrs[i],
            path.display()
        ));
    }
    config.push_str("[reconfig]\nmode = \"rigid\"\nsensitivity = \"100ms\"\nhistory = \"100ms\"\n");
    let proxy = crate::support::Proxy::start(&config, &[listen, admin]);
    let client = crate::support::client();

    let status = eventually(
        "kept and missed intervals",
        Duration::from_secs(30),
        || async {
            // One interval's worth of traffic to each site (bounded).
            for _ in 0..10 {
                for host in ["hot.test", "cold.test"] {
                    let _ = client
                        .get(format!("http://{listen}/"))
                        .header("host", host)
                        .send()
                        .await;
                }
            }
            let text = client
                .get(format!("http://{admin}/status"))
                .send()
                .await
                .map_err(|e| e.to_string())?
                .text()
                .await
                .map_err(|e| e.to_string())?;
            let status: serde_json::Value =
                serde_json::from_str(&text).map_err(|e| e.to_string())?;
            let sites = &status["reconfig"]["sites"];
            let kept = sites[0]["qos"]["kept_intervals"].as_u64().unwrap_or(0);
            let missed = sites[1]["qos"]["counted"].as_u64().unwrap_or(0);
            if kept > 0 && missed > 0 {
                Ok(status)
            } else {
                Err(format!("{sites}"))
            }
        },
    )
    .await;
    let sites = &status["reconfig"]["sites"];
    assert_eq!(sites[0]["priority"], 5);
    assert_eq!(sites[0]["qos"]["guarantee_rps"], 2.0);
    // Cold was never served: every counted interval was missed.
    assert_eq!(sites[1]["qos"]["kept_intervals"], 0, "{sites}");
    assert_eq!(sites[1]["qos_meeting_percent"], 0.0, "{sites}");
    assert_eq!(status["reconfig"]["counters"]["moves"], 0);

    let metrics = crate::support::admin_text(admin, "/metrics").await;
    let hot_site = "site=\"hot\"";
    let cold_site = "site=\"cold\"";
    assert_eq!(
        metric(&metrics, "rdmalb_site_guarantee_rps", &[hot_site]),
        2.0,
        "{metrics}"
    );
    assert!(
        metric(
            &metrics,
            "rdmalb_site_qos_intervals_total",
            &[hot_site, "kept=\"true\""]
        ) >= 1.0,
        "{metrics}"
    );
    assert!(
        metric(
            &metrics,
            "rdmalb_site_qos_intervals_total",
            &[cold_site, "kept=\"false\""]
        ) >= 1.0,
        "{metrics}"
    );
    assert_eq!(
        metric(
            &metrics,
            "rdmalb_site_qos_intervals_total",
            &[cold_site, "kept=\"true\""]
        ),
        0.0,
        "{metrics}"
    );
    assert_eq!(
        metric(&metrics, "rdmalb_site_served_rps", &[cold_site]),
        0.0,
        "{metrics}"
    );
    drop(proxy);
    drop(nodes);
}
