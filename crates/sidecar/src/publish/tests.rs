use super::*;

#[test]
fn every_field_maps_to_its_own_load_block_word() {
    let mut r = Reading::default();
    for (i, f) in Field::ALL.iter().enumerate() {
        r.set(*f, 100 + i as u64);
    }
    let s = to_load_sample(&r);
    let got = [
        s.cpu_util_ppm,
        s.run_queue_milli,
        s.mem_used_ppm,
        s.net_rx_bps,
        s.net_tx_bps,
        s.active_connections,
        s.irq_rate,
        s.app_busy,
        s.app_capacity,
        s.requests_total,
        s.app_queue_len,
    ];
    assert_eq!(got, [100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110]);
    assert_eq!(to_load_sample(&Reading::default()), LoadSample::default());
}
