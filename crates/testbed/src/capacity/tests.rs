use std::sync::Arc;

use super::*;

fn model(slots: u32, queue: u32) -> Model {
    Model {
        slots,
        queue,
        cpu_fraction: 0.0,
        ..Model::default()
    }
}

fn sleep_ms(ms: u64) -> Service {
    Service {
        spin: Duration::ZERO,
        sleep: Duration::from_millis(ms),
    }
}

#[tokio::test(start_paused = true)]
async fn slots_queue_and_overflow() {
    let cap = Arc::new(Capacity::new(model(2, 1)));
    let mut served = Vec::new();
    for _ in 0..3 {
        let c = cap.clone();
        served.push(tokio::spawn(async move { c.serve(sleep_ms(100)).await }));
    }
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(
        cap.usage(),
        Usage {
            busy: 2,
            queue: 1,
            capacity: 2,
            requests_total: 0,
            latency_us: 0,
            queue_limit: 1,
        }
    );
    assert!(
        !cap.serve(sleep_ms(100)).await,
        "beyond slots + queue is refused"
    );
    assert_eq!(cap.rejected_total(), 1, "the refusal is counted");
    tokio::time::sleep(Duration::from_millis(100)).await;
    // The first two finished; the queued one holds a slot now.
    assert_eq!(
        cap.usage(),
        Usage {
            busy: 1,
            queue: 0,
            capacity: 2,
            requests_total: 2,
            latency_us: 100_000,
            queue_limit: 1,
        }
    );
    assert_eq!(
        cap.service_us_total(),
        200_000,
        "two requests each held a slot for their 100 ms"
    );
    for s in served {
        assert!(s.await.unwrap());
    }
    assert_eq!(
        cap.usage(),
        Usage {
            busy: 0,
            queue: 0,
            capacity: 2,
            requests_total: 3,
            // The third waited 100 ms for a slot: 7/8 × 100 + 1/8 × 200 ms.
            latency_us: 112_500,
            queue_limit: 1,
        }
    );
}

#[tokio::test(start_paused = true)]
async fn an_antagonist_shows_as_busy_at_once_and_slows_requests() {
    let cap = Arc::new(Capacity::new(model(4, 16)));
    let (_tx, rx) = tokio::sync::watch::channel(false);
    let a = Antagonist {
        slots: 3,
        on: Duration::from_secs(3600),
        off: Duration::from_millis(10),
        seed: 7,
    };
    tokio::spawn(Arc::clone(&cap).run_antagonist(a, rx));
    // Off for an exponential time of mean 10 ms (at most 20 means).
    tokio::time::sleep(Duration::from_millis(250)).await;
    let u = cap.usage();
    assert_eq!(
        (u.busy, u.queue),
        (3, 0),
        "the co-tenant's slots count as busy"
    );
    // Three requests now share the one slot left: one served, two queued.
    let mut served = Vec::new();
    for _ in 0..3 {
        let c = cap.clone();
        served.push(tokio::spawn(async move { c.serve(sleep_ms(100)).await }));
    }
    tokio::time::sleep(Duration::from_millis(10)).await;
    let u = cap.usage();
    assert_eq!((u.busy, u.queue), (4, 2));
    let start = tokio::time::Instant::now();
    for s in served {
        assert!(s.await.unwrap());
    }
    // One at a time: ~300 ms, not 100 ms.
    assert!(start.elapsed() >= Duration::from_millis(280));
}
