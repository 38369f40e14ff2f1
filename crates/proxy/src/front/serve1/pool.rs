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

#[cfg(test)]
mod tests {
    use super::*;

    /// A buffer given back is lent again whole (its allocation reused),
    /// and the pool keeps at most `KEEP` of them.
    #[test]
    fn buffers_given_back_are_lent_again_and_the_pool_is_bounded() {
        let mut b = take(8192);
        let at = b.as_ptr();
        b.extend_from_slice(b"GET / HTTP/1.1\r\n\r\n");
        let head = b.split_to(18).freeze();
        drop(head);
        put(b);
        let again = take(8192);
        assert_eq!(
            again.as_ptr(),
            at,
            "the idle buffer's allocation was not reused"
        );
        assert!(again.capacity() >= 8192 && again.is_empty());
        for _ in 0..KEEP + 10 {
            put(BytesMut::with_capacity(64));
        }
        assert_eq!(FREE.with(|f| f.borrow().len()), KEEP);
        put(BytesMut::new());
        assert_eq!(
            FREE.with(|f| f.borrow().len()),
            KEEP,
            "an empty buffer is not kept"
        );
    }
}
