//! HAProxy's hash functions (`hash-type ... sdbm|djb2|wt6|crc32`) and its
//! integer mix `full_hash` (the `avalanche` modifier and the ring points),
//! written from their definitions so that keys land where HAProxy puts
//! them.

use crate::config::HashFunction;

/// `function` over `key`.
pub fn hash(function: HashFunction, key: &[u8]) -> u32 {
    match function {
        HashFunction::Sdbm => sdbm(key),
        HashFunction::Djb2 => djb2(key),
        HashFunction::Wt6 => wt6(key),
        HashFunction::Crc32 => crc32(key),
    }
}

/// sdbm: `h = c + (h << 6) + (h << 16) - h` per byte (HAProxy's default).
pub fn sdbm(key: &[u8]) -> u32 {
    key.iter().fold(0u32, |h, &c| {
        u32::from(c)
            .wrapping_add(h << 6)
            .wrapping_add(h << 16)
            .wrapping_sub(h)
    })
}

/// djb2: `h = h × 33 + c`, from 5381.
pub fn djb2(key: &[u8]) -> u32 {
    key.iter().fold(5381u32, |h, &c| {
        h.wrapping_mul(33).wrapping_add(u32::from(c))
    })
}

/// Willy Tarreau's wt6: two 32-bit states rotated by amounts taken from
/// the data.
pub fn wt6(key: &[u8]) -> u32 {
    let (mut h0, mut h1) = (0xa53c_965a_u32, 0x5ca6_953a_u32);
    let (mut step0, mut step1) = (6u32, 18u32);
    for &c in key {
        let t = u32::from(c);
        h0 = !(h0 ^ t);
        h1 = !(h1.wrapping_add(t));
        let t = h1.rotate_left(step0);
        h1 = h0.rotate_left(step1);
        h0 = t;
        let t = ((h0 >> 16) ^ h1) & 0xffff;
        step0 = t & 0x1f;
        step1 = t >> 11;
    }
    h0 ^ h1
}

/// CRC-32 (IEEE, reflected polynomial 0xedb88320), bit by bit.
pub fn crc32(key: &[u8]) -> u32 {
    let mut h = !0u32;
    for &c in key {
        h ^= u32::from(c);
        for _ in 0..8 {
            h = (h >> 1) ^ if h & 1 != 0 { 0xedb8_8320 } else { 0 };
        }
    }
    !h
}

/// Bob Jenkins' 32-bit integer mix times a prime near ¾ of the space, as
/// HAProxy's `full_hash`.
pub fn full_hash(mut a: u32) -> u32 {
    a = a.wrapping_add(0x7ed5_5d16).wrapping_add(a << 12);
    a = (a ^ 0xc761_c23c) ^ (a >> 19);
    a = a.wrapping_add(0x1656_67b1).wrapping_add(a << 5);
    a = a.wrapping_add(0xd3a2_646c) ^ (a << 9);
    a = a.wrapping_add(0xfd70_46c5).wrapping_add(a << 3);
    a = (a ^ 0xb55a_4f09) ^ (a >> 16);
    a.wrapping_mul(3_221_225_473)
}
