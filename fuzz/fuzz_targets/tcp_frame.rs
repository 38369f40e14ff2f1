//! Fuzz the tcp transport's frame decoder with arbitrary bytes from the
//! network: it must never panic, never claim more bytes than it was given,
//! and whatever it accepts must re-encode to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rdmalb_window::tcp::frame;

fuzz_target!(|data: &[u8]| {
    let mut rest = data;
    // Decode a stream of frames the way a connection does.
    while let Ok(Some(d)) = frame::decode(rest) {
        assert!(d.consumed <= rest.len());
        assert!(d.consumed > 0);
        let mut again = Vec::new();
        frame::encode_unsealed(&d.frame, &mut again);
        assert_eq!(again.as_slice(), d.authenticated);
        rest = &rest[d.consumed..];
    }
});
