//! Constant memory: one address per pass, so a warp access naming `n` different words is
//! served `n` times over; a broadcast (one word) is one pass.

use experiments::{ConstantParams, ConstantPoint};

/// Predicted cycles of one dependent constant access. A warm chain naming more lines than
/// the cache keeps evicts each line before it comes round again, so it costs what a cold one does.
pub fn constant_cycles(params: &ConstantParams, point: &ConstantPoint) -> f64 {
    let misses = point.cold || point.distinct > params.capacity_lines;
    let (first, per_extra) = if misses {
        (params.cold_cycles, params.cold_per_extra)
    } else {
        (params.warm_cycles, params.warm_per_extra)
    };
    first + f64::from(point.distinct.max(1) - 1) * per_extra
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn params() -> ConstantParams {
        ConstantParams {
            source: "t".into(),
            warm_cycles: 20.0,
            warm_per_extra: 4.0,
            cold_cycles: 60.0,
            cold_per_extra: 30.0,
            capacity_lines: 16,
            calibration_cases: vec![],
        }
    }

    proptest! {
        #[test]
        fn more_addresses_serialize_more(distinct in 1u32..32, cold in any::<bool>()) {
            let p = params();
            let fewer = constant_cycles(&p, &ConstantPoint { distinct, cold });
            let more = constant_cycles(&p, &ConstantPoint { distinct: distinct + 1, cold });
            prop_assert!(more > fewer);
        }

        #[test]
        fn past_the_capacity_warm_costs_what_cold_does(distinct in 17u32..=32) {
            let p = params();
            let cold = constant_cycles(&p, &ConstantPoint { distinct, cold: true });
            prop_assert_eq!(constant_cycles(&p, &ConstantPoint { distinct, cold: false }), cold);
        }

        #[test]
        fn a_cold_cache_is_never_faster(distinct in 1u32..=32) {
            let p = params();
            let cold = constant_cycles(&p, &ConstantPoint { distinct, cold: true });
            let warm = constant_cycles(&p, &ConstantPoint { distinct, cold: false });
            prop_assert!(cold >= warm, "{} words: cold {}, warm {}", distinct, cold, warm);
        }
    }
}
