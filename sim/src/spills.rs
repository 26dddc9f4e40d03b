//! Register spills: what the compiler spills under a register cap (its rule, read off the
//! SASS), and what moving the spilled words through the L2 (or DRAM) costs a full GPU.

use experiments::{GlobalParams, OccupancyPoint, SmParams, SpillParams, SpillPoint, SPILL_KERNEL_THREADS};

use crate::occupancy::occupancy;

/// What the model says about one capped loop on a full GPU.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpillPrediction {
    /// Registers the compiler uses.
    pub registers_used: u32,
    /// Spill frame per thread, bytes.
    pub frame_bytes: u32,
    /// Spilled words each warp loads per iteration (it stores one fewer).
    pub loads: u32,
    /// Warps resident per SM.
    pub warps_per_sm: u32,
    /// Time to issue one iteration of every resident warp, ns.
    pub issue_ns: f64,
    /// Time to move one iteration's spill traffic, ns.
    pub traffic_ns: f64,
    /// Share of the spill traffic the L2 serves.
    pub l2_share: f64,
    /// Kernel time per loop iteration, ns.
    pub ns_per_iteration: f64,
}

/// The compiler's side: registers used, spilled loads per iteration and frame bytes per thread.
pub fn compiled_spills(params: &SpillParams, point: &SpillPoint) -> (u32, u32, u32) {
    let registers_used = point.registers.min(point.live + params.overhead_registers);
    let g = f64::from(point.live) - f64::from(point.registers);
    let loads = (params.loads_at_equal + params.loads_per_register_small * g)
        .min(params.loads_beyond_deficit + g)
        .max(0.0);
    let frame = if loads == 0.0 {
        0.0
    } else {
        (params.frame_bytes_at_equal + 8.0 * g)
            .min(params.frame_bytes_large_base + 4.0 * g)
            .max(0.0)
    };
    (registers_used, loads.round() as u32, frame.round() as u32)
}

/// Predicts the spill kernel at `point` with every one of `multiprocessors` SMs holding as many
/// blocks as fit.
pub fn predict_spills(
    params: &SpillParams,
    sm: &SmParams,
    multiprocessors: u32,
    global: &GlobalParams,
    point: &SpillPoint,
) -> SpillPrediction {
    let (registers_used, loads, frame_bytes) = compiled_spills(params, point);
    let fit = occupancy(
        sm,
        &OccupancyPoint {
            threads: SPILL_KERNEL_THREADS,
            registers: registers_used,
            static_shared: 0,
            dynamic_shared: 0,
        },
    );
    let warps_per_sm = fit.blocks_per_sm * fit.warps_per_block;
    let stores = loads.saturating_sub(1);
    let warps = f64::from(warps_per_sm);
    let instructions = f64::from(point.live + loads + stores) + params.loop_instructions;
    let issue_ns = warps * instructions * params.instruction_ns;
    let reserved = f64::from(frame_bytes) * f64::from(sm.max_threads_per_sm) * f64::from(multiprocessors);
    let l2_share = if reserved == 0.0 {
        1.0
    } else {
        (params.local_capacity_bytes / reserved)
            .powf(params.local_sharpness)
            .min(1.0)
    };
    let traffic_bytes = f64::from(loads + stores) * 128.0 * warps * f64::from(multiprocessors);
    // bytes / (10^9 B/s) = ns
    let traffic_ns = traffic_bytes * (l2_share / global.l2_gb_per_s + (1.0 - l2_share) / global.dram_gb_per_s);
    let p = params.overlap_exponent;
    SpillPrediction {
        registers_used,
        frame_bytes,
        loads,
        warps_per_sm,
        issue_ns,
        traffic_ns,
        l2_share,
        ns_per_iteration: (issue_ns.powf(p) + traffic_ns.powf(p)).powf(1.0 / p),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use experiments::Profile;
    use proptest::prelude::*;

    /// The built-in H100 profile's prediction.
    fn predict(live: u32, registers: u32) -> SpillPrediction {
        let profile = Profile::find("h100").unwrap();
        predict_spills(
            profile.spills.as_ref().unwrap(),
            &profile.sm,
            profile.device.multiprocessors,
            profile.global.as_ref().unwrap(),
            &SpillPoint { live, registers },
        )
    }

    proptest! {
        #[test]
        fn a_lower_cap_never_spills_less(live in 8u32..160, registers in 17u32..255) {
            let tighter = predict(live, registers - 1);
            let looser = predict(live, registers);
            prop_assert!(tighter.loads >= looser.loads);
            prop_assert!(tighter.frame_bytes >= looser.frame_bytes);
            prop_assert!(looser.registers_used <= registers);
            prop_assert!(tighter.warps_per_sm >= looser.warps_per_sm);
        }

        #[test]
        fn time_is_at_least_each_bound(live in 8u32..160, registers in 16u32..255) {
            let t = predict(live, registers);
            prop_assert!(t.ns_per_iteration >= t.issue_ns.max(t.traffic_ns) * (1.0 - 1e-12));
            prop_assert!(t.l2_share > 0.0 && t.l2_share <= 1.0);
            prop_assert!(t.warps_per_sm > 0);
        }
    }

    #[test]
    fn enough_registers_spill_nothing() {
        let free = predict(64, 255);
        let overhead = Profile::find("h100").unwrap().spills.unwrap().overhead_registers;
        assert_eq!((free.loads, free.frame_bytes, free.traffic_ns), (0, 0, 0.0));
        assert_eq!(free.registers_used, 64 + overhead);
    }

    #[test]
    fn a_frame_too_large_for_the_l2_goes_to_dram() {
        let small = predict(64, 56);
        let huge = predict(160, 32);
        assert_eq!(small.l2_share, 1.0);
        assert!(huge.l2_share < 0.5, "{huge:?}");
    }
}
