//! Shared-memory banks: which bank each lane's bytes fall in, and how many passes
//! (wavefronts) the banks need to serve one warp-wide load.
//!
//! Shared memory is `banks` banks of `bank_bytes`-byte words; word `w` lives in bank
//! `w mod banks`. A load is served in phases of `banks x bank_bytes` bytes' worth of lanes
//! (the whole warp for 4-byte loads, half-warps for 8-byte, quarter-warps for 16-byte). In one
//! phase, lanes that touch the same word share it (broadcast), and lanes that touch different
//! words of one bank are served one word per pass: the busiest bank sets the passes.

use experiments::{BankPoint, SharedParams};

/// What one warp-wide shared load costs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BankAccess {
    /// Passes over the banks, summed over phases.
    pub wavefronts: u32,
    /// Phases the warp is split into (1 for 4-byte loads, 2 for 8, 4 for 16).
    pub phases: u32,
    /// The worst phase's conflict degree: distinct words in its busiest bank (1 = no conflict).
    pub conflict_degree: u32,
    /// For each lane, the bank of its first word.
    pub lane_banks: Vec<u32>,
}

impl BankAccess {
    /// Passes beyond the minimum the width needs: what conflicts cost.
    pub fn replays(&self) -> u32 {
        self.wavefronts - self.phases
    }
}

/// Threads in a warp.
const WARP: u32 = 32;

/// The banks one warp-wide load touches and the wavefronts it needs.
pub fn bank_access(shared: &SharedParams, point: &BankPoint) -> BankAccess {
    let words_per_lane = (point.width / shared.bank_bytes).max(1);
    let phase_bytes = shared.banks * shared.bank_bytes;
    let phases = (WARP * point.width).div_ceil(phase_bytes).max(1);
    let lanes_per_phase = WARP / phases;
    let first_word = |lane: u32| u64::from(lane) * u64::from(point.stride) * u64::from(words_per_lane);
    let mut wavefronts = 0;
    let mut conflict_degree = 1;
    // Distinct words per bank in this phase; lanes sharing a word count once (broadcast).
    let mut words_in_bank: Vec<Vec<u64>> = vec![Vec::new(); shared.banks as usize];
    for phase in 0..phases {
        words_in_bank.iter_mut().for_each(Vec::clear);
        for lane in phase * lanes_per_phase..(phase + 1) * lanes_per_phase {
            for word in first_word(lane)..first_word(lane) + u64::from(words_per_lane) {
                let bank = &mut words_in_bank[(word % u64::from(shared.banks)) as usize];
                if !bank.contains(&word) {
                    bank.push(word);
                }
            }
        }
        let busiest = words_in_bank.iter().map(Vec::len).max().unwrap_or(1).max(1) as u32;
        wavefronts += busiest;
        conflict_degree = conflict_degree.max(busiest);
    }
    let lane_banks = (0..WARP)
        .map(|lane| (first_word(lane) % u64::from(shared.banks)) as u32)
        .collect();
    BankAccess {
        wavefronts,
        phases,
        conflict_degree,
        lane_banks,
    }
}

/// Predicted cycles of one dependent load with this pattern.
pub fn bank_cycles(shared: &SharedParams, point: &BankPoint) -> f64 {
    let access = bank_access(shared, point);
    shared.base_cycles + f64::from(access.wavefronts - 1) * shared.wavefront_cycles
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn shared() -> SharedParams {
        SharedParams {
            source: "test".into(),
            banks: 32,
            bank_bytes: 4,
            base_cycles: 30.0,
            wavefront_cycles: 2.0,
            calibration_cases: vec![],
        }
    }

    fn access(width: u32, stride: u32) -> BankAccess {
        bank_access(&shared(), &BankPoint { width, stride })
    }

    #[test]
    fn classic_cases() {
        assert_eq!(access(4, 1).conflict_degree, 1, "consecutive words");
        assert_eq!(access(4, 2).conflict_degree, 2, "stride 2: two-way");
        assert_eq!(access(4, 32).conflict_degree, 32, "transpose column, no padding");
        assert_eq!(access(4, 33).conflict_degree, 1, "one word of padding removes it");
        assert_eq!(access(4, 0).wavefronts, 1, "broadcast");
        assert_eq!(
            (access(8, 1).wavefronts, access(8, 1).replays()),
            (2, 0),
            "64-bit: two half-warp phases"
        );
        assert_eq!(
            (access(16, 1).wavefronts, access(16, 1).replays()),
            (4, 0),
            "128-bit: four phases"
        );
    }

    proptest! {
        #[test]
        fn conflict_degree_is_between_1_and_32(width in prop::sample::select(vec![4u32, 8, 16]), stride in 0u32..=64) {
            let a = access(width, stride);
            prop_assert!((1..=32).contains(&a.conflict_degree));
            prop_assert!(a.wavefronts >= a.phases && a.wavefronts <= a.phases * 32);
        }

        #[test]
        fn broadcast_never_conflicts(width in prop::sample::select(vec![4u32, 8, 16])) {
            prop_assert_eq!(access(width, 0).replays(), 0);
        }

        #[test]
        fn odd_strides_of_words_never_conflict(stride in (0u32..32).prop_map(|s| 2 * s + 1)) {
            // An odd stride is coprime with 32 banks: 32 lanes land in 32 different banks.
            prop_assert_eq!(access(4, stride).conflict_degree, 1);
        }

        #[test]
        fn degree_is_the_power_of_two_in_the_stride(shift in 0u32..=5, odd in (0u32..4).prop_map(|s| 2 * s + 1)) {
            let stride = odd << shift;
            prop_assert_eq!(access(4, stride).conflict_degree, 1 << shift);
        }

        #[test]
        fn cycles_grow_with_wavefronts(width in prop::sample::select(vec![4u32, 8, 16]), a in 0u32..=64, b in 0u32..=64) {
            let s = shared();
            let (pa, pb) = (BankPoint { width, stride: a }, BankPoint { width, stride: b });
            let (wa, wb) = (bank_access(&s, &pa).wavefronts, bank_access(&s, &pb).wavefronts);
            if wa < wb {
                prop_assert!(bank_cycles(&s, &pa) < bank_cycles(&s, &pb));
            }
        }
    }
}
