use super::*;

fn sites(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("s{i}")).collect()
}

#[test]
fn single_file_is_one_url_per_site_spread_evenly() {
    let g = Generator::SingleFile { size: "1k".into() };
    let t = g.generate(&sites(3), 30_000, 1).unwrap();
    assert_eq!(t.requests.len(), 30_000);
    assert!(t.requests.iter().all(|(_, p)| p == "/static/1k"));
    for s in 0..3 {
        let n = t.requests.iter().filter(|(i, _)| *i == s).count();
        // Binomial(30000, 1/3): sd ≈ 82; 6 sd either side.
        assert!((9_500..=10_500).contains(&n), "site {s}: {n}");
    }
    // Same seed, same trace; another seed, another one.
    assert_eq!(t, g.generate(&sites(3), 30_000, 1).unwrap());
    assert_ne!(t, g.generate(&sites(3), 30_000, 2).unwrap());
}

#[test]
fn zipf_rank_frequencies_follow_the_law() {
    for alpha in [0.25, 0.5, 0.9] {
        let g = Generator::Zipf {
            alpha,
            files: 100,
            min_size: "1k".into(),
            max_size: "1k".into(),
            dynamic_share: 0.0,
            cost: "10ms".into(),
        };
        let n = 200_000;
        let t = g.generate(&sites(1), n, 2).unwrap();
        let mut counts: HashMap<&str, u64> = HashMap::new();
        for (_, p) in &t.requests {
            *counts.entry(p.as_str()).or_default() += 1;
        }
        let h: f64 = (1..=100).map(|i| 1.0 / f64::from(i).powf(alpha)).sum();
        for rank in [1u32, 2, 10, 50] {
            let path = format!("/static/1024?file={}", rank - 1);
            let got = counts.get(path.as_str()).copied().unwrap_or(0) as f64 / n as f64;
            let want = 1.0 / f64::from(rank).powf(alpha) / h;
            assert!(
                (got - want).abs() < 0.15 * want,
                "alpha {alpha} rank {rank}: {got} vs {want}"
            );
        }
        // Frequency ratio of ranks 1 and 10 ≈ 10^alpha.
        let f = |r: u32| counts[format!("/static/1024?file={}", r - 1).as_str()] as f64;
        let ratio = f(1) / f(10);
        assert!(
            (ratio / 10f64.powf(alpha) - 1.0).abs() < 0.15,
            "alpha {alpha}: ratio {ratio}"
        );
    }
}

#[test]
fn zipf_file_set_mixes_static_and_dynamic() {
    let g = Generator::Zipf {
        alpha: 0.5,
        files: 1000,
        min_size: "512".into(),
        max_size: "64k".into(),
        dynamic_share: 0.3,
        cost: "5ms".into(),
    };
    let t = g.generate(&sites(2), 20_000, 2).unwrap();
    let dynamic = t
        .requests
        .iter()
        .filter(|(_, p)| p.starts_with("/dynamic/"))
        .count() as f64
        / 20_000.0;
    assert!((0.15..0.45).contains(&dynamic), "{dynamic}");
    assert!(t.requests.iter().any(|(_, p)| p.contains("cost=5ms")));
}

/// Lengths of the runs of equal keys.
fn runs<K: PartialEq>(keys: impl Iterator<Item = K>) -> Vec<u64> {
    let mut out: Vec<u64> = Vec::new();
    let mut last = None;
    for k in keys {
        if last.as_ref() == Some(&k) {
            *out.last_mut().unwrap() += 1;
        } else {
            out.push(1);
            last = Some(k);
        }
    }
    out
}

#[test]
fn bursts_between_sites_are_exactly_l_long_in_turn() {
    for burst in [512u64, 1024, 4096, 65536] {
        let g = Generator::Bursty {
            burst,
            mode: BurstMode::Sites,
            size: "1k".into(),
            cost: "10ms".into(),
        };
        let t = g.generate(&sites(3), burst * 7 + 5, 1).unwrap();
        let r = runs(t.requests.iter().map(|(s, _)| *s));
        assert_eq!(r.len(), 8);
        assert!(r[..7].iter().all(|&l| l == burst), "{r:?}");
        assert_eq!(r[7], 5);
        let order: Vec<usize> = (0..8).map(|b| t.requests[(b * burst) as usize].0).collect();
        assert_eq!(order, [0, 1, 2, 0, 1, 2, 0, 1]);
    }
}

#[test]
fn bursts_between_content_classes_alternate() {
    let g = Generator::Bursty {
        burst: 512,
        mode: BurstMode::Content,
        size: "2k".into(),
        cost: "20ms".into(),
    };
    let t = g.generate(&sites(2), 512 * 4, 3).unwrap();
    let r = runs(t.requests.iter().map(|(_, p)| p.starts_with("/dynamic/")));
    assert_eq!(r, [512, 512, 512, 512]);
    assert_eq!(t.requests[0].1, "/static/2k");
    assert_eq!(t.requests[512].1, "/dynamic/cgi?cost=20ms&size=2k");
    assert!(t.requests.iter().any(|(s, _)| *s == 1));
}

#[test]
fn world_cup_is_two_thirds_dynamic_in_long_bursts() {
    let g = Generator::WorldCup {
        dynamic_share: 2.0 / 3.0,
        mean_burst: 1000,
        files: 100,
        cost: "10ms".into(),
    };
    let t = g.generate(&sites(2), 600_000, 3).unwrap();
    let dynamic: Vec<bool> = t
        .requests
        .iter()
        .map(|(_, p)| p.starts_with("/dynamic/"))
        .collect();
    let share = dynamic.iter().filter(|&&d| d).count() as f64 / dynamic.len() as f64;
    assert!((0.6..0.73).contains(&share), "dynamic share {share}");
    let r = runs(dynamic.iter().copied());
    let first_dynamic = dynamic[0];
    let (mut dyn_runs, mut stat_runs) = (Vec::new(), Vec::new());
    for (i, len) in r.iter().enumerate() {
        if (i % 2 == 0) == first_dynamic {
            dyn_runs.push(*len as f64);
        } else {
            stat_runs.push(*len as f64);
        }
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    assert!(
        (800.0..1250.0).contains(&mean(&dyn_runs)),
        "dynamic runs {}",
        mean(&dyn_runs)
    );
    assert!(
        (380.0..640.0).contains(&mean(&stat_runs)),
        "static runs {}",
        mean(&stat_runs)
    );
}

#[test]
fn generators_reject_bad_parameters() {
    let s = sites(1);
    let bad = |g: Generator| g.generate(&s, 10, 1).unwrap_err().to_string();
    assert!(bad(Generator::SingleFile {
        size: "huge".into()
    })
    .contains("size"));
    let zipf = |alpha: f64, files: u32, min: &str| Generator::Zipf {
        alpha,
        files,
        min_size: min.into(),
        max_size: "1k".into(),
        dynamic_share: 0.0,
        cost: "1ms".into(),
    };
    assert!(bad(zipf(-1.0, 10, "1")).contains("alpha"));
    assert!(bad(zipf(0.5, 0, "1")).contains("files"));
    assert!(bad(zipf(0.5, 10, "4k")).contains("min_size"));
    assert!(bad(Generator::Bursty {
        burst: 0,
        mode: BurstMode::Sites,
        size: "1k".into(),
        cost: "1ms".into()
    })
    .contains("burst"));
    assert!(bad(Generator::Bursty {
        burst: 1,
        mode: BurstMode::Sites,
        size: "1k".into(),
        cost: "x".into()
    })
    .contains("cost"));
    assert!(bad(Generator::WorldCup {
        dynamic_share: 1.0,
        mean_burst: 1,
        files: 1,
        cost: "1ms".into()
    })
    .contains("dynamic_share"));
    assert!(Generator::SingleFile { size: "1k".into() }
        .generate(&[], 10, 1)
        .is_err());
    assert!(Generator::SingleFile { size: "1k".into() }
        .generate(&s, 0, 1)
        .is_err());
}

#[test]
fn trace_text_round_trips_and_bad_lines_are_named() {
    let g = Generator::Bursty {
        burst: 2,
        mode: BurstMode::Content,
        size: "1k".into(),
        cost: "10ms".into(),
    };
    let t = g.generate(&sites(2), 10, 1).unwrap();
    let text = t.to_text("made by a test\nformat: <site><TAB><path>");
    assert!(text.starts_with("# made by a test\n# format"));
    let back = Trace::parse(&text, "t").unwrap();
    assert_eq!(back.requests.len(), 10);
    assert_eq!(back.to_text(""), t.to_text(""));
    let e = Trace::parse("shop\t/a\nshop /b\n", "t.txt")
        .unwrap_err()
        .to_string();
    assert!(e.contains("t.txt, line 2"), "{e}");
    assert!(Trace::parse("shop\tnoslash\n", "t").is_err());
    assert!(Trace::parse("# only a comment\n", "t").is_err());
}

#[test]
fn host_map_defaults_and_overrides() {
    let m = HostMap::parse("shop=www.shop.example, blog=blog.example").unwrap();
    assert_eq!(m.host("shop"), "www.shop.example");
    assert_eq!(m.host("news"), "news.localhost");
    assert!(HostMap::parse("shop").is_err());
    assert!(HostMap::parse("=x").is_err());
    assert_eq!(HostMap::parse("").unwrap().host("a"), "a.localhost");
}
