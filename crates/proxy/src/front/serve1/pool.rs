//! Each worker's read buffers of idle connections, lent to the next
//! connection that has bytes to read (a worker is one thread).

use std::cell::RefCell;

use bytes::BytesMut;

/// Most buffers a worker keeps.
const KEEP: usize = 256;

thread_local! {
    static FREE: RefCell<Vec<BytesMut>> = const { RefCell::new(Vec::new()) };
}

/// A buffer with room for `want` bytes.
pub fn take(want: usize) -> BytesMut {
    let mut b = FREE
        .with(|f| f.borrow_mut().pop())
        .unwrap_or_else(|| BytesMut::with_capacity(want));
    // Reclaims the whole allocation when nothing shares it any more.
    b.reserve(want);
    b
}

/// Gives an empty buffer back.
pub fn put(mut b: BytesMut) {
    if b.capacity() == 0 {
        return;
    }
    b.clear();
    FREE.with(|f| {
        let mut f = f.borrow_mut();
        if f.len() < KEEP {
            f.push(b);
        }
    });
}
