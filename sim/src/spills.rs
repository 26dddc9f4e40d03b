//! Register spills: what the compiler spills under a register cap (its rule, read off the
//! SASS), and what moving the spilled words through the L2 (or DRAM) costs a full GPU.

use experiments::{Calibration, Family, Metrics, Params, Profile};

use crate::backend::SimError;
use crate::fit::FitError;
use crate::models::{fitted_or_kept, int, params, required, Model};

use experiments::{median, SpillSample};

use experiments::{CoalescingParams, OccupancyPoint, SmParams, SpillParams, SpillPoint, SPILL_KERNEL_THREADS};

use crate::occupancy::occupancy;

/// What the model says about one capped loop on a full GPU.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct SpillPrediction {
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
pub(crate) fn predict_spills(
    params: &SpillParams,
    sm: &SmParams,
    multiprocessors: u32,
    global: &CoalescingParams,
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
    let traffic_ns = traffic_bytes * (l2_share / global.l2_gb_per_s + (1.0 - l2_share) / global.dense_dram_gb_per_s());
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

/// The compiler's spill rule for `kernels/spills.cu`, read off its SASS (LDL/STL and
/// instructions in the iteration loop) by `scripts/spill_sass.py` for 84 caps at 40 and 96 live
/// values and a 15 x 15 grid (299 cases), with NVRTC, ptxas and nvdisasm 13.5 (PyPI's
/// nvidia-cuda-nvrtc, -nvcc, -nvdisasm). The registers and frame bytes ptxas chose equal the
/// H100 driver's JIT at all 108 points both measured. Loads: `min(10 + 2 g, 23 + g)`, exact at
/// all 153 cases with `g = live - cap >= -1`; 4 loop instructions besides the FMAs and spills.
const SPILL_SASS_SOURCE: &str = "SASS of kernels/spills.cu (NVRTC + ptxas + nvdisasm 13.5, scripts/spill_sass.py): spilled loads per iteration min(10 + 2g, 23 + g), g = live - cap, stores one fewer, 4 loop instructions besides the FMAs and spills; registers and frames equal the H100 driver's at all 108 points both measured (reports/reference/compiler/spills-sass.json, reports/reference/h100/spills-v2/explore/)";
const SPILL_LOADS_AT_EQUAL: f64 = 10.0;
const SPILL_LOADS_PER_REGISTER_SMALL: f64 = 2.0;
const SPILL_LOADS_BEYOND_DEFICIT: f64 = 23.0;
const SPILL_LOOP_INSTRUCTIONS: f64 = 4.0;

/// Fits the spill model on the calibration cases:
/// - overhead registers and the issue time per warp instruction from the uncapped cases;
/// - the frame at `cap = live` and the large-deficit frame base from the local bytes measured;
/// - how issue and traffic combine, and the reserved local memory the L2 holds, by least
///   absolute relative error over the spilling cases, with the L2's bandwidth and DRAM's
///   dense-read bandwidth of the profile's `[coalescing]` section (fitted on other kernels).
pub(crate) fn fit_spills(
    samples: &[SpillSample],
    sm: &SmParams,
    multiprocessors: u32,
    global: &CoalescingParams,
    source: String,
) -> Result<SpillParams, FitError> {
    let what = "register spills";
    let bad = |reason: String| FitError::BadSamples { what, reason };
    if let Some(s) = samples
        .iter()
        .find(|s| !s.ns_per_iteration.is_finite() || s.ns_per_iteration <= 0.0 || s.warps_per_sm == 0)
    {
        return Err(bad(format!(
            "the case with {} live values under a cap of {} did not run ({} ns, {} warps per SM)",
            s.live, s.registers, s.ns_per_iteration, s.warps_per_sm
        )));
    }
    let uncapped: Vec<&SpillSample> = samples.iter().filter(|s| s.local_bytes == 0).collect();
    let g = |s: &SpillSample| f64::from(s.live) - f64::from(s.registers);
    let mut at_equal: Vec<f64> = samples
        .iter()
        .filter(|s| s.live == s.registers && s.local_bytes > 0)
        .map(|s| f64::from(s.local_bytes))
        .collect();
    let mut large: Vec<f64> = samples
        .iter()
        .filter(|s| g(s) >= 32.0 && s.local_bytes > 0)
        .map(|s| f64::from(s.local_bytes) - 4.0 * g(s))
        .collect();
    if uncapped.is_empty() || at_equal.is_empty() || large.is_empty() {
        return Err(bad(
            "needs uncapped cases, cases capped at their live count, and cases 32 or more registers short".into(),
        ));
    }
    let overhead_registers = uncapped
        .iter()
        .map(|s| s.registers_used.saturating_sub(s.live))
        .max()
        .unwrap_or(0);
    let instruction_ns = uncapped
        .iter()
        .map(|s| s.ns_per_iteration / (f64::from(s.warps_per_sm) * (f64::from(s.live) + SPILL_LOOP_INSTRUCTIONS)))
        .sum::<f64>()
        / uncapped.len() as f64;
    let mut params = SpillParams {
        source,
        compiler_source: SPILL_SASS_SOURCE.into(),
        overhead_registers,
        loads_at_equal: SPILL_LOADS_AT_EQUAL,
        loads_per_register_small: SPILL_LOADS_PER_REGISTER_SMALL,
        loads_beyond_deficit: SPILL_LOADS_BEYOND_DEFICIT,
        frame_bytes_at_equal: median(&mut at_equal),
        frame_bytes_large_base: median(&mut large),
        loop_instructions: SPILL_LOOP_INSTRUCTIONS,
        instruction_ns,
        overlap_exponent: 2.0,
        local_capacity_bytes: global.l2_bytes as f64,
        local_sharpness: 1.0,
        calibration_cases: samples.iter().map(|s| (s.live, s.registers)).collect(),
    };
    let spilling: Vec<&SpillSample> = samples.iter().filter(|s| s.local_bytes > 0).collect();
    let error = |p: &SpillParams| -> f64 {
        spilling
            .iter()
            .map(|s| {
                let point = SpillPoint {
                    live: s.live,
                    registers: s.registers,
                };
                (predict_spills(p, sm, multiprocessors, global, &point).ns_per_iteration / s.ns_per_iteration - 1.0)
                    .abs()
            })
            .sum()
    };
    let l2 = global.l2_bytes as f64;
    let mut best = (f64::INFINITY, params.clone());
    for exponent in [1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0] {
        for step in 0..=175 {
            // 0.5x to 4x the L2, 2% apart
            let capacity = l2 * 0.5 * 1.02f64.powi(step);
            for sharpness in [1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0] {
                params.overlap_exponent = exponent;
                params.local_capacity_bytes = capacity;
                params.local_sharpness = sharpness;
                let e = error(&params);
                if e < best.0 {
                    best = (e, params.clone());
                }
            }
        }
    }
    Ok(best.1)
}

/// The spills model: the compiler's rule, then the issue and traffic time.
pub(crate) struct FamilyModel;

impl Model for FamilyModel {
    type Point = SpillPoint;

    fn predict(profile: &Profile, point: &SpillPoint) -> Result<Metrics, SimError> {
        let params = required(profile, &profile.spills, Family::Spills)?;
        let memory = required(profile, &profile.coalescing, Family::Coalescing)?;
        let p = predict_spills(params, &profile.sm, profile.device.multiprocessors, memory, point);
        Ok(experiments::spill_metrics(
            p.ns_per_iteration,
            p.warps_per_sm,
            p.registers_used,
            p.frame_bytes,
        ))
    }

    fn calibration_points(profile: &Profile) -> Vec<Params> {
        let cases = profile.spills.iter().flat_map(|s| s.calibration_cases.iter());
        cases
            .map(|&(live, registers)| params([("live", int(live)), ("registers", int(registers))]))
            .collect()
    }

    fn fit(calibration: &Calibration, base: Option<&Profile>, profile: &mut Profile) -> Result<(), FitError> {
        let d = &calibration.device;
        let spills = fitted_or_kept(&calibration.spills, base.and_then(|b| b.spills.as_ref()), || {
            fit_spills(
                &calibration.spills,
                &profile.sm,
                d.multiprocessors,
                profile.coalescing.as_ref().ok_or_else(|| FitError::BadSamples {
                    what: "the coalescing part (spill traffic moves at its L2 and DRAM bandwidth)",
                    reason: "not measured in this calibration, and no profile given to keep it from (--into)".into(),
                })?,
                format!(
                    "vramlab calibrate on {} ({}): kernels/spills.cu compiled by NVRTC and the driver at (live, cap) = calibration_cases, launched to fill every SM (blocks of 128 threads, as many as cuOccupancyMaxActiveBlocksPerMultiprocessor allows); registers and local bytes from cuFuncGetAttribute, median event time of 7 launches of 1000 iterations; issue time from the uncapped cases, frames from the local bytes, the overlap exponent and the L2's hold on reserved local memory by least absolute relative error over the spilling cases; L2 bandwidth and DRAM's dense-read bandwidth (fetches and page openings) from [coalescing]",
                    d.name, calibration.date
                ),
            )
        })?;
        profile.spills = spills;
        Ok(())
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
            profile.coalescing.as_ref().unwrap(),
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
