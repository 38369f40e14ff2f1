use super::*;

#[test]
fn every_offset_is_pinned() {
    assert_eq!(WINDOW_BYTES, 4096);
    assert_eq!(WINDOW_WORDS, 512);
    assert_eq!(MAGIC.to_le_bytes(), *b"RDMALBW1");
    assert_eq!(LAYOUT_VERSION, 1);
    assert_eq!(MAX_SITES, 64);

    assert_eq!(HEADER, 0..8);
    assert_eq!(word::MAGIC, 0);
    assert_eq!(word::VERSION, 1);
    assert_eq!(word::NODE_ID, 2);
    assert_eq!(word::SITE_HASH, 3);
    assert_eq!(word::SIZE, 4);

    assert_eq!(LOAD_BLOCK, 8..32);
    assert_eq!(word::SEQ_BEGIN, 8);
    assert_eq!(word::UPDATED_AT, 9);
    assert_eq!(word::CPU_UTIL, 10);
    assert_eq!(word::RUN_QUEUE, 11);
    assert_eq!(word::MEM_USED, 12);
    assert_eq!(word::NET_RX, 13);
    assert_eq!(word::NET_TX, 14);
    assert_eq!(word::ACTIVE_CONNS, 15);
    assert_eq!(word::IRQ_RATE, 16);
    assert_eq!(word::APP_BUSY, 17);
    assert_eq!(word::APP_CAPACITY, 18);
    assert_eq!(word::REQUESTS_TOTAL, 19);
    assert_eq!(word::APP_QUEUE, 20);
    assert_eq!(word::APP_LATENCY, 21);
    assert_eq!(word::APP_QUEUE_LIMIT, 22);
    assert_eq!(word::SEQ_END, 31);

    assert_eq!(CONTROL, 32..64);
    assert_eq!(word::ROLE, 32);
    assert_eq!(word::ROLE_APPLIED, 33);
    assert_eq!(word::CLAIM_PROXY, 34);
    assert_eq!(word::CLAIM_TIME, 35);
    assert_eq!(word::CLAIM_EPOCH, 36);
    assert_eq!(word::ROLE_STATUS, 37);

    assert_eq!(SITE_LOCKS, 64..128);
    assert_eq!(UPDATE_COUNTERS, 128..192);
    assert_eq!(REMOTE_ATOMIC, 32..192);
    assert_eq!(READ_WORDS, 32);
    assert_eq!(READ_ONLY_BYTES, 0..256);
    assert_eq!(ATOMIC_BYTES, 256..1536);
}

#[test]
fn per_site_words() {
    assert_eq!(site_lock_word(0), Some(64));
    assert_eq!(site_lock_word(63), Some(127));
    assert_eq!(site_lock_word(64), None);
    assert_eq!(update_counter_word(0), Some(128));
    assert_eq!(update_counter_word(63), Some(191));
    assert_eq!(update_counter_word(64), None);
}

#[test]
fn remote_atomic_area_excludes_header_and_load_block() {
    for w in 0..WINDOW_WORDS {
        assert_eq!(is_remote_atomic(w), (32..192).contains(&w), "word {w}");
    }
    assert!(!is_remote_atomic(usize::MAX));
}

#[test]
fn site_table_hash_matches_fnv1a_reference() {
    // FNV-1a 64 of the empty input is the offset basis.
    assert_eq!(site_table_hash::<&str>(&[]), 0xcbf2_9ce4_8422_2325);
    // FNV-1a 64 of the single byte "a" is 0xaf63dc4c8601ec8c; the site
    // table ["a"] hashes "a\0".
    let mut h: u64 = 0xaf63_dc4c_8601_ec8c;
    h ^= 0;
    h = h.wrapping_mul(0x0000_0100_0000_01b3);
    assert_eq!(site_table_hash(&["a"]), h);
    // Order and boundaries matter.
    assert_ne!(site_table_hash(&["a", "b"]), site_table_hash(&["b", "a"]));
    assert_ne!(site_table_hash(&["ab"]), site_table_hash(&["a", "b"]));
    assert_eq!(
        site_table_hash(&["shop".to_string(), "blog".to_string()]),
        site_table_hash(&["shop", "blog"])
    );
}
