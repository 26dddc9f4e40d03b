//! The latency ladder: one thread chasing a random cycle of pointers through a footprint.
//!
//! A cache of capacity `C` serves a chase through `F <= C` bytes entirely. Beyond it, it serves
//! `(C / F)^k` of the loads: `k = 1` if every line were equally likely to be kept, while a
//! replacement close to LRU keeps almost nothing of a cyclic chase longer than itself (large
//! `k`). Both `k` and the L2 capacity one SM sees are fitted on footprints where the levels
//! run out. The L2 runs out in two steps: past what its near half holds for a chase, the far
//! half still serves a share of the lines, until it runs out as well. A chase through `F` takes, per load, each level's latency weighted by its share.

use experiments::{LatencyParams, LatencyPoint};

/// The share of a chase through `footprint` bytes a cache of `capacity` bytes serves.
fn served(capacity: f64, footprint: f64, sharpness: f64) -> f64 {
    (capacity / footprint).min(1.0).powf(sharpness)
}

/// Shares of loads served by the L1, the L2 and DRAM for a random chase through `bytes`.
pub fn level_shares(params: &LatencyParams, bytes: u64) -> [f64; 3] {
    let footprint = bytes.max(1) as f64;
    let l2_capacity = if params.l2_effective_bytes > 0 {
        params.l2_effective_bytes
    } else {
        params.l2_bytes
    };
    let l1 = served(params.l1_bytes as f64, footprint, params.l1_sharpness);
    let near = served(l2_capacity as f64, footprint, params.l2_sharpness);
    // Past the near half, the far half still serves its share of the lines until it runs out too.
    let far = params.l2_far_share.clamp(0.0, 1.0) * served(params.l2_far_bytes as f64, footprint, params.l2_sharpness);
    let l1_or_l2 = (near + (1.0 - near) * far).max(l1);
    [l1, l1_or_l2 - l1, 1.0 - l1_or_l2]
}

/// Predicted cycles per dependent load.
pub fn chase_cycles(params: &LatencyParams, point: &LatencyPoint) -> f64 {
    let [l1, l2, dram] = level_shares(params, point.bytes);
    l1 * params.l1_cycles + l2 * params.l2_cycles + dram * params.dram_cycles
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn params() -> LatencyParams {
        LatencyParams {
            source: "test".into(),
            l1_bytes: 256 << 10,
            l2_bytes: 50 << 20,
            l1_cycles: 35.0,
            l2_cycles: 260.0,
            dram_cycles: 600.0,
            l1_sharpness: 1.0,
            l2_effective_bytes: 0,
            l2_sharpness: 1.0,
            l2_far_share: 0.0,
            l2_far_bytes: 0,
            calibration_bytes: vec![],
        }
    }

    #[test]
    fn plateaus() {
        let p = params();
        assert_eq!(chase_cycles(&p, &LatencyPoint { bytes: 16 << 10 }), 35.0);
        let in_l2 = chase_cycles(&p, &LatencyPoint { bytes: 16 << 20 });
        assert!((in_l2 - (35.0 / 64.0 + 260.0 * 63.0 / 64.0)).abs() < 1e-9);
        let huge = chase_cycles(&p, &LatencyPoint { bytes: 1 << 40 });
        assert!((huge - 600.0).abs() < 1.0);
    }

    proptest! {
        #[test]
        fn latency_never_falls_as_the_footprint_grows(bytes in 1u64..(1 << 34), extra in 1u64..(1 << 30)) {
            let p = params();
            let smaller = chase_cycles(&p, &LatencyPoint { bytes });
            let larger = chase_cycles(&p, &LatencyPoint { bytes: bytes + extra });
            prop_assert!(larger >= smaller - 1e-9, "{} B: {}, {} B: {}", bytes, smaller, bytes + extra, larger);
        }

        #[test]
        fn shares_sum_to_one(bytes in 1u64..(1 << 40)) {
            let s = level_shares(&params(), bytes);
            prop_assert!((s.iter().sum::<f64>() - 1.0).abs() < 1e-12 && s.iter().all(|x| *x >= 0.0));
        }
    }
}
