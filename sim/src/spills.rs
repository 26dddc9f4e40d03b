//! Register spills: how many words the compiler moves to local memory under a register cap,
//! and what loading and storing them each iteration costs.

use experiments::{SpillParams, SpillPoint};

/// What the model says about one capped loop.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpillPrediction {
    /// Registers the compiler uses.
    pub registers_used: u32,
    /// 4-byte words spilled per thread.
    pub spilled_words: u32,
    /// Cycles per loop iteration.
    pub cycles: f64,
}

/// Predicts the spill kernel at `point`.
pub fn predict_spills(params: &SpillParams, point: &SpillPoint) -> SpillPrediction {
    let need = point.live + params.overhead_registers;
    let deficit = need.saturating_sub(point.registers);
    let spilled_words = match deficit {
        0 => 0,
        d if d <= params.heavy_deficit => d,
        d => d + params.heavy_extra_words,
    };
    SpillPrediction {
        registers_used: need.min(point.registers),
        spilled_words,
        cycles: params.base_cycles
            + params.cycles_per_value * f64::from(point.live)
            + params.cycles_per_spilled_word * f64::from(spilled_words),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn params() -> SpillParams {
        SpillParams {
            source: "t".into(),
            overhead_registers: 14,
            heavy_deficit: 14,
            heavy_extra_words: 28,
            base_cycles: 10.0,
            cycles_per_value: 2.0,
            cycles_per_spilled_word: 20.0,
            calibration_cases: vec![],
        }
    }

    proptest! {
        #[test]
        fn a_lower_cap_never_spills_less(live in 8u32..160, registers in 17u32..255) {
            let p = params();
            let tighter = predict_spills(&p, &SpillPoint { live, registers: registers - 1 });
            let looser = predict_spills(&p, &SpillPoint { live, registers });
            prop_assert!(tighter.spilled_words >= looser.spilled_words);
            prop_assert!(tighter.cycles >= looser.cycles);
            prop_assert!(looser.registers_used <= registers);
        }
    }

    #[test]
    fn enough_registers_spill_nothing() {
        let p = params();
        let free = predict_spills(
            &p,
            &SpillPoint {
                live: 64,
                registers: 255,
            },
        );
        assert_eq!((free.registers_used, free.spilled_words), (78, 0));
        assert_eq!(
            predict_spills(
                &p,
                &SpillPoint {
                    live: 64,
                    registers: 70
                }
            )
            .spilled_words,
            8
        );
        assert_eq!(
            predict_spills(
                &p,
                &SpillPoint {
                    live: 64,
                    registers: 48
                }
            )
            .spilled_words,
            30 + 28
        );
    }
}
