use super::*;

#[test]
fn execute_confines_atomics_to_the_control_area() {
    let mem = WindowMemory::anonymous(1, 2).unwrap();
    let before = seqlock::snapshot(&mem);
    for word in [0u32, 3, 8, 31, 192, 511, 512, u32::MAX] {
        for req in [
            Request::ReadWord { word },
            Request::Cas {
                word,
                expected: before.get(word as usize).copied().unwrap_or(0),
                new: 99,
            },
            Request::Faa { word, delta: 1 },
        ] {
            assert_eq!(
                execute(&mem, req),
                Reply::Error {
                    code: ErrorCode::Refused,
                    word
                },
                "{req:?}"
            );
        }
    }
    assert_eq!(seqlock::snapshot(&mem), before);
    assert_eq!(mem.load(192), Some(0));
    assert_eq!(
        execute(
            &mem,
            Request::Cas {
                word: 32,
                expected: 0,
                new: 5
            }
        ),
        Reply::Word(0)
    );
    assert_eq!(
        execute(
            &mem,
            Request::Faa {
                word: 191,
                delta: 2
            }
        ),
        Reply::Word(0)
    );
    assert_eq!(
        execute(&mem, Request::ReadWord { word: 32 }),
        Reply::Word(5)
    );
    assert_eq!(execute(&mem, Request::Read), Reply::Block(before));
}
