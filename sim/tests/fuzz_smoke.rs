//! The fuzz targets (fuzz/targets.rs) on stable Rust, as CI runs them: every committed corpus
//! file, then seeded mutations of them (bit flips, byte changes, insertions, deletions,
//! truncations, splices of two files) for a bounded number of runs per target. A panic fails
//! the test and names the target and the input's seed; `cargo fuzz run TARGET` (nightly) goes
//! deeper (fuzz/RECORD.md).

#[path = "../../fuzz/targets.rs"]
mod targets;

use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Runs per target (and at most this long): bounded so CI stays quick.
const RUNS: usize = 5000;
const BUDGET: Duration = Duration::from_secs(8);

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Values that break parsers: boundaries of integer widths, separators, pickle opcodes.
const INTERESTING: &[&[u8]] = &[
    b"18446744073709551615",
    b"-1",
    b"0",
    b"nan",
    b"4294967295",
    b":",
    b",",
    b"[",
    b"]",
    b"\xff\xff\xff\xff\xff\xff\xff\x7f",
    b"\x00\x00\x00\x80",
    b"\x94",
    b"h\x00",
    b"j\xff\xff\xff\x7f",
    b"}(",
    b"e",
];

fn mutate(rng: &mut Rng, input: &[u8], other: &[u8]) -> Vec<u8> {
    let mut data = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(data.len() + 1);
        match rng.below(7) {
            0 if !data.is_empty() => {
                let i = at.min(data.len() - 1);
                data[i] ^= 1 << rng.below(8);
            }
            1 if !data.is_empty() => {
                let i = at.min(data.len() - 1);
                data[i] = rng.next() as u8;
            }
            2 => data.insert(at, rng.next() as u8),
            3 if !data.is_empty() => {
                let end = (at + 1 + rng.below(16)).min(data.len());
                data.drain(at.min(end)..end);
            }
            4 => data.truncate(at),
            5 => {
                let token = INTERESTING[rng.below(INTERESTING.len())];
                data.splice(at..at, token.iter().copied());
            }
            _ if !other.is_empty() => {
                let from = rng.below(other.len());
                let len = rng.below(other.len() - from + 1).min(256);
                data.splice(at..at, other[from..from + len].iter().copied());
            }
            _ => {}
        }
    }
    data
}

/// CI's machines have Python (pip needs it): the snapshot differential must not pass by having
/// no oracle to ask.
#[test]
fn the_python_oracle_answers() {
    assert!(
        targets::python_oracle_available(),
        "python3 could not be started for fuzz/pickle_oracle.py (VRAMLAB_FUZZ_PYTHON names another)"
    );
}

#[test]
fn fuzz_targets_survive_their_corpora_and_mutations() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus");
    for &(name, target) in targets::TARGETS {
        let folder = targets::corpus_of(name);
        let mut corpus: Vec<Vec<u8>> = std::fs::read_dir(root.join(folder))
            .unwrap_or_else(|e| panic!("fuzz/corpus/{folder}: {e}"))
            .map(|entry| std::fs::read(entry.unwrap().path()).unwrap())
            .collect();
        corpus.sort();
        assert!(!corpus.is_empty(), "fuzz/corpus/{folder} is empty");
        for input in &corpus {
            target(input);
        }
        let started = Instant::now();
        let mut rng = Rng(0x5eed ^ name.len() as u64);
        for run in 0..RUNS {
            if started.elapsed() > BUDGET {
                break;
            }
            let seed = rng.0;
            let input = &corpus[rng.below(corpus.len())];
            let other = &corpus[rng.below(corpus.len())];
            let data = mutate(&mut rng, input, other);
            let outcome = std::panic::catch_unwind(|| target(&data));
            if outcome.is_err() {
                let kept = std::env::temp_dir().join(format!("vramlab-fuzz-{name}-{seed:x}"));
                let _ = std::fs::write(&kept, &data);
                panic!(
                    "target {name} panicked at run {run} (rng state {seed:#x}); the input is in {}",
                    kept.display()
                );
            }
        }
    }
}

/// The `segments` target's snapshots read where their segments agree (one small segment with
/// an allocated block freed in the window), so its mutations reach the replay.
#[test]
fn the_segments_target_writes_snapshots_that_read() {
    let seed =
        std::fs::read(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/segments/one-small")).unwrap();
    let traces =
        experiments::Trace::all_from_bytes("one-small.pickle", &targets::segments_snapshot(&seed), None).unwrap();
    assert_eq!(traces.len(), 1);
    assert_eq!(traces[0].final_segments.len(), 1);
    assert!(!traces[0].events.is_empty());
    let repeated =
        std::fs::read(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/segments/repeated")).unwrap();
    let err = experiments::Trace::all_from_bytes("r.pickle", &targets::segments_snapshot(&repeated), None).unwrap_err();
    assert!(err.to_string().contains("segments[1] repeats segments[0]"), "{err}");
}
