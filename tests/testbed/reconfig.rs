//! `rdmalb cluster` with `mode = "reconfigure"`, everything real: 2 sites
//! on 2:2 nodes plus 1 idle node (each a `rdmalb testsrv` with its `rdmalb
//! sidecar` whose `[role]` rewrites the node's site file and sends it
//! SIGHUP), one `rdmalb proxy` running the reconfiguration agent, and one
//! sustained burst to site `a`. Checks that a node was claimed for `a` and
//! its sidecar applied it (role word and `ROLE_APPLIED` read back from the
//! node windows, site file rewritten), and that no request was misrouted:
//! testsrv answers a Host of another site with 421, and none came back.
//! Bounded (a few seconds of load); no timing thresholds.

use std::process::Command;

#[test]
fn sustained_burst_claims_a_node_and_nothing_is_misrouted() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("spec.toml");
    // One burst longer than the run: only site a gets requests. 24
    // connections on a's 2 nodes × 2 slots keep its load far above the
    // high watermark; b's nodes and the idle one stay at 0.
    std::fs::write(
        &spec,
        "sites = [\"a\", \"b\"]\nsplit = \"2:2\"\nidle = 1\nmode = \"reconfigure\"\nduration = \"4s\"\nrequests = 1000000\n\
         [trace]\nkind = \"bursty\"\nburst = 1000000\nmode = \"sites\"\n\
         [node]\nslots = 2\nqueue = 16\nstatic_base = \"5ms\"\n\
         [load]\nconnections = 24\ninterval = \"500ms\"\n\
         [guarantee]\na = 100\n\
         [proxy.reconfig]\nsensitivity = \"50ms\"\nhistory = \"200ms\"\ncooldown = \"1s\"\n",
    )
    .unwrap();
    let out = dir.path().join("out");
    let o = Command::new(crate::support::testbed_bin())
        .args(["cluster", "-c"])
        .arg(&spec)
        .arg("-o")
        .arg(&out)
        .output()
        .expect("run rdmalb cluster");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "cluster failed:\n{stderr}");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("node moves"), "{stdout}");

    // The generated configs: the sidecars have a [role] reloading testsrv,
    // the proxy runs the agent.
    let sidecar = std::fs::read_to_string(out.join("conf/n5.sidecar.toml")).unwrap();
    assert!(sidecar.contains("site = \"idle\""), "{sidecar}");
    assert!(sidecar.contains("kill -HUP $(cat "), "{sidecar}");
    let proxy = std::fs::read_to_string(out.join("conf/proxy1.toml")).unwrap();
    assert!(proxy.contains("mode = \"reconfigure\""), "{proxy}");
    // The spec's guarantee reaches the proxy's [[site]] (QoS policy).
    assert!(proxy.contains("guarantee = 100.0"), "{proxy}");

    let outcome: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("cluster.json")).unwrap()).unwrap();
    let nodes = outcome["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 5);
    // What the components used while the load ran: the proxy and the
    // nodes served 24 connections for the run, so both used some CPU.
    assert!(
        stdout.contains("CPU while the load ran: proxies "),
        "{stdout}"
    );
    for kind in ["proxies_s", "nodes_s", "sidecars_s"] {
        assert!(
            outcome["cpu"][kind].as_f64().is_some(),
            "cpu.{kind}: {outcome}"
        );
    }
    assert!(
        outcome["cpu"]["proxies_s"].as_f64().unwrap() > 0.0,
        "{outcome}"
    );
    let moved: Vec<&serde_json::Value> = nodes
        .iter()
        .filter(|n| n["initial_site"] != "a" && n["site"] == "a")
        .collect();
    assert!(
        !moved.is_empty(),
        "no node was claimed for site a: {outcome:#}\n{stderr}"
    );
    assert!(outcome["moves"].as_u64().unwrap() >= moved.len() as u64);
    for n in &moved {
        assert_eq!(n["applied"], true, "claimed but not applied: {n}");
        // The sidecar rendered the node's site file for a.
        let name = n["node"].as_str().unwrap();
        let file = std::fs::read_to_string(out.join(format!("conf/{name}.site.toml"))).unwrap();
        assert!(file.contains("site = \"a\""), "{name}: {file}");
    }
    // The nodes a keeps were never moved.
    for n in nodes.iter().filter(|n| n["initial_site"] == "a") {
        assert_eq!(
            (&n["site"], &n["moves"]),
            (&serde_json::json!("a"), &serde_json::json!(0))
        );
    }
    // QoS accounting was produced for the guaranteed site.
    assert_eq!(outcome["qos"][0]["site"], "a");

    // No misrouting: testsrv answers a request for another site with 421.
    let csv = std::fs::read_to_string(out.join("load.csv")).unwrap();
    let mut served = 0u64;
    for line in csv.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        assert!(!f[9].contains("421"), "misrouted request: {line}");
        if f[1] == "a" {
            served += f[3].parse::<u64>().unwrap();
        }
    }
    assert!(served > 0, "{csv}");
}
