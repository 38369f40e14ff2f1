use std::collections::HashSet;

use super::*;
use crate::layout::LOAD_BLOCK;

#[test]
fn every_field_has_its_own_word_name_and_value() {
    let mut s = LoadSample::default();
    for (i, f) in Field::ALL.into_iter().enumerate() {
        assert_eq!(f.index(), i);
        f.set(&mut s, 1000 + i as u64);
    }
    for (i, f) in Field::ALL.into_iter().enumerate() {
        assert_eq!(f.get(&s), 1000 + i as u64, "{f:?}");
        // Inside the load block, between the sequence words.
        assert!(LOAD_BLOCK.contains(&f.word()), "{f:?}");
        assert!(f.word() > word::UPDATED_AT && f.word() < word::SEQ_END);
    }
    let words: HashSet<usize> = Field::ALL.iter().map(|f| f.word()).collect();
    let names: HashSet<&str> = Field::ALL.iter().map(|f| f.name()).collect();
    assert_eq!(words.len(), Field::ALL.len(), "one word per field");
    assert_eq!(names.len(), Field::ALL.len(), "one name per field");
    assert_eq!(s.requests_total, 1000 + Field::RequestsTotal.index() as u64);
}

#[test]
fn a_sample_round_trips_through_the_window() {
    let mem = crate::WindowMemory::anonymous(1, 2).unwrap();
    let mut s = LoadSample::default();
    for (i, f) in Field::ALL.into_iter().enumerate() {
        f.set(&mut s, 7 * i as u64 + 1);
    }
    crate::seqlock::publish(&mem, &s);
    let block = crate::decode_block(&crate::seqlock::snapshot(&mem)).unwrap();
    assert_eq!(block.sample, s);
}
