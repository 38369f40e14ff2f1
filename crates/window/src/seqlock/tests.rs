use super::*;
use proptest::prelude::*;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// A sample whose every field is derived from `k`, so a reader can tell
/// a mix of two writes from a whole one.
fn sample(k: u64) -> LoadSample {
    LoadSample {
        cpu_util_ppm: k,
        run_queue_milli: k.wrapping_mul(3),
        mem_used_ppm: k ^ 0x5555,
        net_rx_bps: k.wrapping_add(7),
        net_tx_bps: k.rotate_left(13),
        active_connections: !k,
        irq_rate: k.wrapping_mul(0x9E37_79B9),
        app_busy: k >> 1,
        app_capacity: k | 1,
        requests_total: k.wrapping_sub(11),
        app_queue_len: k.swap_bytes(),
        app_latency_us: k.wrapping_mul(5),
        app_queue_limit: k.rotate_left(7),
    }
}

#[test]
fn publish_then_decode() {
    let m = WindowMemory::anonymous(9, 1).unwrap();
    assert_eq!(decode_block(&snapshot(&m)), Err(Torn::NeverPublished));
    publish_at(&m, &sample(42), 1234);
    let b = decode_block(&snapshot(&m)).unwrap();
    assert_eq!(b.node_id, 9);
    assert_eq!(b.seq, 2);
    assert_eq!(b.updated_at_ns, 1234);
    assert_eq!(b.sample, sample(42));
    publish(&m, &sample(43));
    let b = decode_block(&snapshot(&m)).unwrap();
    assert_eq!(b.seq, 4);
    assert_eq!(b.sample, sample(43));
    assert!(b.age(SystemTime::now()) < Duration::from_secs(60));
}

#[test]
fn writer_recovers_from_odd_sequence() {
    let m = WindowMemory::anonymous(1, 1).unwrap();
    m.words()[word::SEQ_BEGIN].store(7, Ordering::Relaxed);
    m.words()[word::SEQ_END].store(5, Ordering::Relaxed);
    publish_at(&m, &sample(1), 1);
    let b = decode_block(&snapshot(&m)).unwrap();
    assert_eq!(b.seq, 8);
}

#[test]
fn decode_rejects_torn_and_bad_header() {
    let m = WindowMemory::anonymous(1, 1).unwrap();
    publish_at(&m, &sample(1), 1);
    let good = snapshot(&m);
    let mut r = good;
    r[word::SEQ_END] += 2;
    assert!(matches!(decode_block(&r), Err(Torn::Mismatch { .. })));
    let mut r = good;
    r[word::SEQ_BEGIN] = 3;
    r[word::SEQ_END] = 3;
    assert_eq!(decode_block(&r), Err(Torn::InProgress { seq: 3 }));
    let mut r = good;
    r[word::MAGIC] = 0;
    assert!(matches!(decode_block(&r), Err(Torn::BadHeader { .. })));
    let mut r = good;
    r[word::VERSION] = 2;
    assert!(matches!(decode_block(&r), Err(Torn::BadHeader { .. })));
    assert!(!Torn::NeverPublished.is_retryable());
    assert!(Torn::Mismatch { begin: 1, end: 2 }.is_retryable());
}

proptest! {
    /// Whatever a transport hands over, decode accepts only equal, even,
    /// non-zero sequence words and never panics.
    #[test]
    fn decode_accepts_only_consistent_sequence(mut raw in proptest::array::uniform32(any::<u64>()), same in any::<bool>()) {
        raw[word::MAGIC] = layout::MAGIC;
        raw[word::VERSION] = layout::LAYOUT_VERSION;
        if same { raw[word::SEQ_END] = raw[word::SEQ_BEGIN]; }
        let ok = decode_block(&raw).is_ok();
        let b = raw[word::SEQ_BEGIN];
        prop_assert_eq!(ok, b == raw[word::SEQ_END] && b % 2 == 0 && b != 0);
    }
}

/// A reader that fetches the block from the top down (`seq_end` first),
/// as some DMA engines may: the writer marks both ends odd, so this
/// order is checked as soundly as the ascending one.
fn snapshot_descending(mem: &WindowMemory) -> [u64; READ_WORDS] {
    let w = mem.words();
    let mut out = [0u64; READ_WORDS];
    out[word::SEQ_END] = w[word::SEQ_END].load(Ordering::Acquire);
    for i in (word::SEQ_BEGIN + 1..word::SEQ_END).rev() {
        out[i] = w[i].load(Ordering::Relaxed);
    }
    fence(Ordering::Acquire);
    out[word::SEQ_BEGIN] = w[word::SEQ_BEGIN].load(Ordering::Relaxed);
    for (i, o) in out.iter_mut().enumerate().take(word::SEQ_BEGIN) {
        *o = w[i].load(Ordering::Relaxed);
    }
    out
}

proptest! {
    /// Model check of the protocol under every interleaving proptest
    /// picks: the writer's plan is applied store by store while a reader
    /// copies the load block in ascending or descending order, each word at
    /// some step of the writer (non-decreasing along the reader's order).
    /// Whatever the interleaving, an accepted block is one whole sample.
    #[test]
    fn no_interleaving_yields_an_accepted_torn_block(
        mut steps in proptest::collection::vec(0..=PLAN_LEN, 16),
        descending in any::<bool>(),
        prior in 0u64..4,
    ) {
        steps.sort_unstable();
        let mut mem = [0u64; READ_WORDS];
        mem[word::MAGIC] = layout::MAGIC;
        mem[word::VERSION] = layout::LAYOUT_VERSION;
        // A completed earlier write of sample(prior + 1) ...
        for (i, v) in write_plan(mem[word::SEQ_BEGIN], &sample(prior + 1), prior + 1) {
            mem[i] = v;
        }
        // ... and the next write, in flight.
        let plan = write_plan(mem[word::SEQ_BEGIN], &sample(prior + 2), prior + 2);
        // The words that change (reserved words 23..31 never do).
        let mut order: Vec<usize> = (word::SEQ_BEGIN..=word::APP_QUEUE_LIMIT).collect();
        order.push(word::SEQ_END);
        if descending {
            order.reverse();
        }
        let mut seen = mem;
        let mut applied = 0;
        for (&w, &step) in order.iter().zip(&steps) {
            while applied < step {
                let (i, v) = plan[applied];
                mem[i] = v;
                applied += 1;
            }
            seen[w] = mem[w];
        }
        if let Ok(b) = decode_block(&seen) {
            let k = b.sample.cpu_util_ppm;
            prop_assert_eq!(b.sample, sample(k));
            prop_assert_eq!(b.updated_at_ns, k);
        }
    }
}

#[test]
fn concurrent_readers_never_accept_a_torn_block() {
    stress(snapshot);
}

#[test]
fn descending_readers_never_accept_a_torn_block() {
    stress(snapshot_descending);
}

/// Stress: one writer publishing continuously, readers checking that
/// every accepted block is one whole sample. Bounded by write count.
fn stress(read: fn(&WindowMemory) -> [u64; READ_WORDS]) {
    let m = Arc::new(WindowMemory::anonymous(1, 1).unwrap());
    publish_at(&m, &sample(0), 0);
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let m = m.clone();
            let stop = stop.clone();
            std::thread::spawn(move || {
                let (mut accepted, mut torn) = (0u64, 0u64);
                let mut last_seq = 0;
                while !stop.load(Ordering::Relaxed) {
                    match decode_block(&read(&m)) {
                        Ok(b) => {
                            let k = b.sample.cpu_util_ppm;
                            assert_eq!(b.sample, sample(k), "torn block accepted");
                            assert_eq!(b.updated_at_ns, k, "timestamp from another write");
                            assert!(b.seq >= last_seq, "sequence went backwards");
                            last_seq = b.seq;
                            accepted += 1;
                        }
                        Err(t) => {
                            assert!(t.is_retryable(), "{t}");
                            torn += 1;
                        }
                    }
                }
                (accepted, torn)
            })
        })
        .collect();
    for k in 1..=200_000u64 {
        publish_at(&m, &sample(k), k);
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        let (accepted, _torn) = r.join().unwrap();
        assert!(accepted > 0);
    }
}

proptest! {
    /// `read_block` returns exactly what decoding a full snapshot returns,
    /// for any published block.
    #[test]
    fn read_block_matches_decode_of_snapshot(k in any::<u64>(), at in any::<u64>(), node in any::<u64>()) {
        let m = WindowMemory::anonymous(node, 1).unwrap();
        prop_assert_eq!(read_block(&m), decode_block(&snapshot(&m)));
        publish_at(&m, &sample(k), at);
        let b = read_block(&m);
        prop_assert_eq!(b, decode_block(&snapshot(&m)));
        prop_assert_eq!(b.unwrap().sample, sample(k));
        prop_assert_eq!(b.unwrap().node_id, node);
    }
}

#[test]
fn read_block_detects_torn_and_bad_blocks() {
    let m = WindowMemory::anonymous(1, 1).unwrap();
    assert_eq!(read_block(&m), Err(Torn::NeverPublished));
    publish_at(&m, &sample(1), 1);
    let w = m.words();
    // A write in progress: both ends odd.
    w[word::SEQ_BEGIN].store(3, Ordering::Relaxed);
    w[word::SEQ_END].store(3, Ordering::Relaxed);
    assert_eq!(read_block(&m), Err(Torn::InProgress { seq: 3 }));
    // The ends differ: the read overlapped a write.
    w[word::SEQ_END].store(4, Ordering::Relaxed);
    assert_eq!(read_block(&m), Err(Torn::Mismatch { begin: 3, end: 4 }));
    assert_eq!(read_block(&m), decode_block(&snapshot(&m)));
    // A foreign header is not retryable.
    w[word::SEQ_BEGIN].store(4, Ordering::Relaxed);
    assert!(read_block(&m).is_ok());
    w[word::VERSION].store(99, Ordering::Relaxed);
    assert!(matches!(
        read_block(&m),
        Err(Torn::BadHeader { version: 99, .. })
    ));
}

/// Against a writer publishing as fast as it can, `read_block` never
/// returns a mix of two writes (every field derives from one `k`).
#[test]
fn read_block_never_returns_a_torn_mix() {
    let m = Arc::new(WindowMemory::anonymous(1, 1).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (m, stop) = (Arc::clone(&m), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut k = 1u64;
            while !stop.load(Ordering::Relaxed) && k < 5_000_000 {
                publish_at(&m, &sample(k), k);
                k += 1;
            }
        })
    };
    let mut good = 0;
    for _ in 0..200_000 {
        if let Ok(b) = read_block(&m) {
            assert_eq!(b.sample, sample(b.updated_at_ns), "a torn mix was accepted");
            good += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    assert!(good > 0);
}
