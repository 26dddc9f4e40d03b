//! Fitting the transfer model to measurements: the maths half of `vramlab calibrate`.
//!
//! Fits minimise the sum of absolute *relative* errors: relative, so a 1 KiB copy counts as
//! much as a 1 GiB one (the yardstick reports use); absolute rather than squared, so one
//! sample disturbed by something else on the machine cannot drag the whole fit (seen on the
//! first calibration of a freshly started H100, where three of seven sizes ran 2-3x slow).

use experiments::{
    growth_calibration_bytes, median, migration_calibration_bytes, peer_calibration_bytes, BankPoint, BankSample,
    Calibration, CoalescingPoint, ConstantParams, ConstantSample, Direction, GlobalParams, GlobalSample, GrowthCost,
    GrowthParams, GrowthSample, GrowthStrategy, LatencyParams, LatencySample, LinkParams, MigrationParams,
    MigrationSample, PeerParams, PeerSample, Profile, ProfileDevice, Sample, SharedParams, SmAttributes, SmParams,
    SpillParams, SpillPoint, SpillSample, StagedParams, TransferParams, READ_KERNEL_BLOCKS_PER_SM, READ_KERNEL_THREADS,
};

use crate::banks::bank_access;
use crate::coalescing::read_time;
use crate::latency::{chase_cycles, level_shares};
use crate::pcie::pageable_copy_us;
use crate::spills::predict_spills;

/// Why a fit could not be made.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FitError {
    /// Fewer samples than parameters, or a sample that is not a positive time.
    #[error("cannot fit {what}: {reason}")]
    BadSamples {
        /// What was being fitted.
        what: &'static str,
        /// Why the samples do not do.
        reason: String,
    },
}

fn check(what: &'static str, samples: &[Sample], needed: usize) -> Result<(), FitError> {
    if samples.len() < needed {
        return Err(FitError::BadSamples {
            what,
            reason: format!("{} samples, need {needed}", samples.len()),
        });
    }
    if let Some(bad) = samples
        .iter()
        .find(|s| !(s.time_us.is_finite() && s.time_us > 0.0) || s.bytes == 0)
    {
        return Err(FitError::BadSamples {
            what,
            reason: format!("sample {bad:?} is not a positive size and time"),
        });
    }
    Ok(())
}

/// Weighted least squares for `y = intercept + slope * x`, errors relative to y.
fn weighted_line(points: &[(f64, f64)], weights: &[f64]) -> (f64, f64) {
    let (mut sw, mut sx, mut sy, mut sxx, mut sxy) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for ((x, y), weight) in points.iter().zip(weights) {
        let w = weight / (y * y);
        sw += w;
        sx += w * x;
        sy += w * y;
        sxx += w * x * x;
        sxy += w * x * y;
    }
    let slope = (sw * sxy - sx * sy) / (sw * sxx - sx * sx);
    let intercept = (sy - slope * sx) / sw;
    if intercept < 0.0 {
        // Noise can make the best line cross below zero; a fixed cost is physical, so pin it.
        (0.0, sxy / sxx)
    } else {
        (intercept, slope)
    }
}

/// Fits `y = intercept + slope * x` minimising the sum of absolute relative errors, by
/// iteratively reweighted least squares. Returns (intercept, slope).
fn fit_line(points: &[(f64, f64)]) -> (f64, f64) {
    let mut weights = vec![1.0; points.len()];
    let (mut intercept, mut slope) = weighted_line(points, &weights);
    for _ in 0..100 {
        for (w, (x, y)) in weights.iter_mut().zip(points) {
            *w = 1.0 / ((intercept + slope * x - y) / y).abs().max(1e-6);
        }
        (intercept, slope) = weighted_line(points, &weights);
    }
    (intercept, slope)
}

/// Fits `time = latency + bytes / bandwidth` minimising the sum of absolute relative errors.
pub fn fit_link(samples: &[Sample]) -> Result<LinkParams, FitError> {
    check("a pinned link", samples, 2)?;
    let points: Vec<(f64, f64)> = samples.iter().map(|s| (s.bytes as f64, s.time_us)).collect();
    let (latency, slope) = fit_line(&points);
    if !(slope.is_finite() && slope > 0.0) {
        return Err(FitError::BadSamples {
            what: "a pinned link",
            reason: "time does not grow with size".into(),
        });
    }
    Ok(LinkParams {
        latency_us: latency,
        gb_per_s: 1.0 / slope / 1e3,
    })
}

/// Fits a link line on the samples `pick` keeps, as size and time.
fn fit_link_of<T>(samples: &[T], pick: impl Fn(&T) -> Option<Sample>) -> Result<LinkParams, FitError> {
    fit_link(&samples.iter().filter_map(pick).collect::<Vec<_>>())
}

/// Fits shared memory's base and per-wavefront cycles on measured bank patterns.
pub fn fit_shared(samples: &[BankSample], source: String) -> Result<SharedParams, FitError> {
    let what = "shared-memory bank costs";
    let shape = SharedParams {
        source,
        banks: 32,
        bank_bytes: 4,
        base_cycles: 1.0,
        wavefront_cycles: 0.0,
        calibration_cases: Vec::new(),
    };
    let points: Vec<(f64, f64)> = samples
        .iter()
        .map(|s| {
            (
                f64::from(
                    bank_access(
                        &shape,
                        &BankPoint {
                            width: s.width,
                            stride: s.stride,
                        },
                    )
                    .wavefronts
                        - 1,
                ),
                s.cycles,
            )
        })
        .collect();
    if points
        .iter()
        .map(|p| p.0 as u64)
        .collect::<std::collections::BTreeSet<u64>>()
        .len()
        < 2
    {
        return Err(FitError::BadSamples {
            what,
            reason: "need patterns with at least two wavefront counts".into(),
        });
    }
    if let Some(bad) = samples.iter().find(|s| !(s.cycles.is_finite() && s.cycles > 0.0)) {
        return Err(FitError::BadSamples {
            what,
            reason: format!("{bad:?} is not a positive cycle count"),
        });
    }
    let (base_cycles, wavefront_cycles) = fit_line(&points);
    Ok(SharedParams {
        base_cycles,
        wavefront_cycles: wavefront_cycles.max(0.0),
        calibration_cases: samples.iter().map(|s| (s.width, s.stride)).collect(),
        ..shape
    })
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
///   absolute relative error over the spilling cases, with the L2 and DRAM bandwidths of the
///   profile's `[global]` section (fitted on other kernels).
pub fn fit_spills(
    samples: &[SpillSample],
    sm: &SmParams,
    multiprocessors: u32,
    global: &GlobalParams,
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

/// Fits each growth strategy's cost line, `fixed + per GiB x size`, on its calibration grows
/// by least absolute relative error.
pub fn fit_growth(samples: &[GrowthSample], free_bytes: u64, source: String) -> Result<GrowthParams, FitError> {
    let what = "buffer growth";
    let mut costs = Vec::new();
    for strategy in GrowthStrategy::ALL {
        for reserve in [false, true] {
            let points: Vec<(f64, f64)> = samples
                .iter()
                .filter(|s| s.strategy == strategy && s.reserve == reserve)
                .map(|s| (s.bytes as f64 / (1u64 << 30) as f64, s.grow_us))
                .collect();
            if points.len() < 2 || points.iter().any(|p| !(p.1.is_finite() && p.1 > 0.0)) {
                return Err(FitError::BadSamples {
                    what,
                    reason: format!(
                        "{} (reserve {reserve}): need two or more positive grow times, got {points:?}",
                        strategy.name()
                    ),
                });
            }
            // Neither part of a grow can cost less than nothing: a line with a negative part
            // (a grow that costs the same at every size) is refitted with that part at zero.
            let (mut fixed_us, mut us_per_gib) = fit_line(&points);
            if us_per_gib < 0.0 {
                us_per_gib = 0.0;
                fixed_us = weighted_median(points.iter().map(|&(_, t)| (t, 1.0 / t)).collect());
            } else if fixed_us < 0.0 {
                fixed_us = 0.0;
                us_per_gib = weighted_median(points.iter().map(|&(x, t)| (t / x, x / t)).collect());
            }
            costs.push(GrowthCost {
                strategy,
                reserve,
                fixed_us,
                us_per_gib,
            });
        }
    }
    if free_bytes == 0 {
        return Err(FitError::BadSamples {
            what,
            reason: "the device's free memory was not recorded".into(),
        });
    }
    Ok(GrowthParams {
        source,
        free_bytes,
        costs,
        calibration_bytes: growth_calibration_bytes(),
    })
}

/// Minimises `error` over positive parameters by coordinate descent in log space: each
/// parameter in turn is scaled up and down by a step that halves when nothing improves.
fn minimise_positive(start: &[f64], error: impl Fn(&[f64]) -> f64) -> Vec<f64> {
    let mut x = start.to_vec();
    let mut best = error(&x);
    let mut step = 0.5f64;
    while step > 1e-5 {
        let mut improved = false;
        for i in 0..x.len() {
            for factor in [1.0 + step, 1.0 / (1.0 + step)] {
                let mut trial = x.clone();
                trial[i] *= factor;
                let e = error(&trial);
                if e < best {
                    (best, x, improved) = (e, trial, true);
                }
            }
        }
        if !improved {
            step /= 2.0;
        }
    }
    x
}

/// Fits the read kernel's model to the global calibration cases: DRAM and L2 bandwidth, the
/// DRAM page-open rate, the L2's line-request rate, the latency of one warp's load from each
/// level and per extra line, how the two bounds combine, and DRAM's fetch size (32, 64 or 128 bytes, whichever predicts best). Every
/// continuous parameter is fitted jointly by least absolute relative error.
pub fn fit_global(samples: &[GlobalSample], machine: &GlobalMachine, source: String) -> Result<GlobalParams, FitError> {
    let what = "global-memory reads";
    let launch_us = machine.launch_us;
    if let Some(bad) = samples
        .iter()
        .find(|s| !(s.time_us.is_finite() && s.time_us > launch_us))
    {
        return Err(FitError::BadSamples {
            what,
            reason: format!("{bad:?} is not longer than the launch cost ({launch_us} us)"),
        });
    }
    if samples.len() < 9 || machine.read_kernel_registers == 0 {
        return Err(FitError::BadSamples {
            what,
            reason: format!(
                "need the nine calibration cases and the read kernel's registers, got {} cases and {} registers",
                samples.len(),
                machine.read_kernel_registers
            ),
        });
    }
    let as_point = |s: &GlobalSample| CoalescingPoint::calibration(s.width, s.stride, s.bytes);
    let with = |fetch: u32, x: &[f64]| GlobalParams {
        source: source.clone(),
        sector_bytes: 32,
        line_bytes: 128,
        l2_bytes: machine.l2_bytes,
        dram_fetch_bytes: fetch,
        dram_gb_per_s: x[0],
        dram_page_bytes: DRAM_PAGE_BYTES,
        dram_page_gb_per_s: x[1],
        l2_gb_per_s: x[2],
        l2_lines_g_per_s: x[6],
        dram_latency_ns: x[3],
        l2_latency_ns: x[4],
        line_latency_ns: x[7],
        overlap_exponent: 1.0 + x[5],
        read_kernel_registers: machine.read_kernel_registers,
        launch_us,
        calibration_cases: samples.iter().map(|s| (s.width, s.stride, s.bytes)).collect(),
    };
    let error = |params: &GlobalParams| -> f64 {
        samples
            .iter()
            .map(
                |s| match read_time(params, &machine.sm, machine.multiprocessors, &as_point(s)) {
                    Some(t) => ((t.total_us - s.time_us) / s.time_us).abs(),
                    None => f64::INFINITY,
                },
            )
            .sum()
    };
    // Start from what each kind of case says alone (bandwidth from bytes over time, latency
    // from time over loads per warp, with the other bound ignored), at a few exponents; then
    // fit everything together from each start and keep the best.
    let time_of = |width: u32, stride: u32, bytes: u64| {
        samples
            .iter()
            .find(|s| (s.width, s.stride, s.bytes) == (width, stride, bytes))
            .map_or(f64::NAN, |s| s.time_us - launch_us)
    };
    let grid_warps = f64::from(machine.multiprocessors * READ_KERNEL_BLOCKS_PER_SM * (READ_KERNEL_THREADS / 32));
    let loads = |width: u32, bytes: u64| {
        let point = CoalescingPoint::calibration(width, 1, bytes);
        (point.warps() as f64 / grid_warps).ceil() * f64::from(point.passes())
    };
    let guess = |value: f64, fallback: f64| {
        if value.is_finite() && value > 0.0 {
            value
        } else {
            fallback
        }
    };
    let gib = (1u64 << 30) as f64;
    let base = [
        guess(gib / time_of(16, 1, 1 << 30) / 1e3, 3000.0),
        30000.0,
        guess(gib / time_of(16, 1, 16 << 20) / 1e3, 8000.0),
        guess(time_of(1, 1, 1 << 30) / loads(1, 1 << 30) * 1e3, 400.0),
        guess(time_of(1, 1, 16 << 20) / loads(1, 16 << 20) * 1e3, 150.0),
        1.0,
        guess((gib / 128.0) / time_of(4, 32, 16 << 20) / 1e3, 100.0),
        5.0,
    ];
    let mut best: Option<(f64, GlobalParams)> = None;
    for fetch in [32, 64, 128] {
        for exponent in [0.5, 1.5, 3.0] {
            let mut start = base;
            start[5] = exponent;
            let x = minimise_positive(&start, |x| error(&with(fetch, x)));
            let params = with(fetch, &x);
            let e = error(&params);
            if best.as_ref().is_none_or(|(b, _)| e < *b) {
                best = Some((e, params));
            }
        }
    }
    Ok(best.expect("nine starts").1)
}

/// What the global fit needs to know about the machine besides the samples.
#[derive(Debug, Clone)]
pub struct GlobalMachine {
    /// L2 capacity, bytes.
    pub l2_bytes: u64,
    /// Fixed cost of a kernel launch, microseconds.
    pub launch_us: f64,
    /// The SM's limits, for the read kernel's occupancy.
    pub sm: SmParams,
    /// SMs on the device.
    pub multiprocessors: u32,
    /// Registers per thread of the read kernel.
    pub read_kernel_registers: u32,
}

/// HBM3's page (row) size per pseudo-channel: 1 KiB (JEDEC JESD238, HBM3 DRAM standard).
const DRAM_PAGE_BYTES: u32 = 1024;

/// Fits the latency ladder. The L1, L2 and DRAM footprints (the smallest, 6 MiB and the
/// largest sample) fix each level's latency given the others' shares; the footprint just past
/// the L1 fixes how sharply the L1 stops serving; the four where the L2 runs out fix its near
/// capacity, the far half's share and capacity, and the sharpness (jointly, least absolute
/// relative error). Shape and latencies are fitted in turn until they settle.
pub fn fit_latency(
    samples: &[LatencySample],
    l1_bytes: u64,
    l2_bytes: u64,
    source: String,
) -> Result<LatencyParams, FitError> {
    let what = "the latency ladder";
    let mut sorted = samples.to_vec();
    sorted.sort_by_key(|s| s.bytes);
    if sorted.len() != 8 || sorted.iter().any(|s| !(s.cycles.is_finite() && s.cycles > 0.0)) {
        return Err(FitError::BadSamples {
            what,
            reason: format!(
                "need eight positive samples (L1, past-L1, L2, four L2-edge and DRAM footprints), got {sorted:?}"
            ),
        });
    }
    let (l1_sample, past_l1, l2_sample, dram_sample) = (sorted[0], sorted[1], sorted[2], sorted[7]);
    let edges = &sorted[3..7];
    let mut params = LatencyParams {
        source,
        l1_bytes,
        l2_bytes,
        l1_cycles: 0.0,
        l2_cycles: 0.0,
        dram_cycles: 0.0,
        l1_sharpness: 8.0,
        l2_effective_bytes: l2_bytes / 2,
        l2_sharpness: 8.0,
        l2_far_share: 0.5,
        l2_far_bytes: l2_bytes,
        calibration_bytes: sorted.iter().map(|s| s.bytes).collect(),
    };
    for _ in 0..4 {
        for (level, sample) in [l1_sample, l2_sample, dram_sample].iter().enumerate() {
            let shares = level_shares(&params, sample.bytes);
            if shares[level] < 0.5 {
                return Err(FitError::BadSamples {
                    what,
                    reason: format!(
                        "the {} B footprint is not served mostly by level {level} (share {:.2})",
                        sample.bytes, shares[level]
                    ),
                });
            }
            let known = [params.l1_cycles, params.l2_cycles, params.dram_cycles];
            let others: f64 = (0..3).filter(|&l| l != level).map(|l| shares[l] * known[l]).sum();
            let cycles = (sample.cycles - others) / shares[level];
            match level {
                0 => params.l1_cycles = cycles,
                1 => params.l2_cycles = cycles,
                _ => params.dram_cycles = cycles,
            }
        }
        let l1_hit = ((params.l2_cycles - past_l1.cycles) / (params.l2_cycles - params.l1_cycles)).clamp(1e-6, 1.0);
        let ratio = l1_bytes as f64 / past_l1.bytes as f64;
        if l1_hit < 1.0 && ratio < 1.0 {
            params.l1_sharpness = (l1_hit.ln() / ratio.ln()).clamp(0.1, 200.0);
        }
        let mib = (1u64 << 20) as f64;
        let with = |x: &[f64]| LatencyParams {
            l2_effective_bytes: (x[0] * mib) as u64,
            l2_sharpness: x[1],
            l2_far_share: x[2].min(1.0),
            l2_far_bytes: ((x[0] + x[3]) * mib) as u64,
            ..params.clone()
        };
        let error = |x: &[f64]| -> f64 {
            let p = with(x);
            edges
                .iter()
                .map(|s| (chase_cycles(&p, &experiments::LatencyPoint { bytes: s.bytes }) / s.cycles - 1.0).abs())
                .sum()
        };
        // A few starts (sharp or gentle, small or large far share); the best fit wins.
        let current = [
            params.l2_effective_bytes as f64 / mib,
            params.l2_sharpness,
            params.l2_far_share.max(1e-3),
            (params.l2_far_bytes.saturating_sub(params.l2_effective_bytes) as f64 / mib).max(1.0),
        ];
        let half = l2_bytes as f64 / mib / 2.0;
        let mut best = minimise_positive(&current, error);
        for sharpness in [2.0, 6.0, 20.0] {
            for share in [0.2, 0.5] {
                let x = minimise_positive(&[half, sharpness, share, half], error);
                if error(&x) < error(&best) {
                    best = x;
                }
            }
        }
        params = with(&best);
    }
    Ok(params)
}

/// Fits constant memory: for each cache state, the line through its 1- and 2-word samples.
pub fn fit_constant(samples: &[ConstantSample], source: String) -> Result<ConstantParams, FitError> {
    let what = "constant-memory serialization";
    let line = |cold: bool| -> Result<(f64, f64), FitError> {
        let at = |distinct: u32| {
            samples
                .iter()
                .find(|s| s.cold == cold && s.distinct == distinct)
                .map(|s| s.cycles)
                .ok_or_else(|| FitError::BadSamples {
                    what,
                    reason: format!(
                        "no {} sample with {distinct} distinct words",
                        if cold { "cold" } else { "warm" }
                    ),
                })
        };
        let (one, two) = (at(1)?, at(2)?);
        if !(one > 0.0 && two >= one) {
            return Err(FitError::BadSamples {
                what,
                reason: format!("{one} and {two} cycles do not grow with addresses"),
            });
        }
        Ok((one, two - one))
    };
    let (warm_cycles, warm_per_extra) = line(false)?;
    let (cold_cycles, cold_per_extra) = line(true)?;
    // The capacity: one less than the fewest warm lines that cost more like a cold chain than
    // a warm one (or, if every warm case hit, the most lines calibration tried).
    let mut warm_cases: Vec<&ConstantSample> = samples.iter().filter(|s| !s.cold).collect();
    warm_cases.sort_by_key(|s| s.distinct);
    let missed = warm_cases.iter().find(|s| {
        let extra = f64::from(s.distinct - 1);
        let as_warm = warm_cycles + extra * warm_per_extra;
        let as_cold = cold_cycles + extra * cold_per_extra;
        (s.cycles - as_cold).abs() < (s.cycles - as_warm).abs()
    });
    let capacity_lines = match missed {
        Some(s) => s.distinct - 1,
        None => warm_cases.last().map_or(1, |s| s.distinct),
    };
    Ok(ConstantParams {
        source,
        warm_cycles,
        warm_per_extra,
        cold_cycles,
        cold_per_extra,
        capacity_lines,
        calibration_cases: samples.iter().map(|s| (s.distinct, s.cold)).collect(),
    })
}

/// The `value` that minimises the sum of `weight * |value - x|`: a weighted median.
fn weighted_median(mut pairs: Vec<(f64, f64)>) -> f64 {
    pairs.sort_by(|a, b| a.0.total_cmp(&b.0));
    let half = pairs.iter().map(|p| p.1).sum::<f64>() / 2.0;
    let mut running = 0.0;
    for (x, w) in &pairs {
        running += w;
        if running >= half {
            return *x;
        }
    }
    pairs.last().map_or(0.0, |p| p.0)
}

/// Candidate staging chunk sizes: 64 KiB to 16 MiB.
const STAGING_CANDIDATES: std::ops::RangeInclusive<u32> = 16..=24;

/// Fits the pageable pipeline given the pinned link: a grid over staging chunk size and
/// host copy bandwidth, with the latency solved exactly (a weighted median) at each grid point.
pub fn fit_staged(link: &LinkParams, direction: Direction, samples: &[Sample]) -> Result<StagedParams, FitError> {
    check("a pageable pipeline", samples, 3)?;
    let mut best: Option<(f64, StagedParams)> = None;
    for chunk_log in STAGING_CANDIDATES {
        for step in 0..=400 {
            // Host bandwidth from 0.5 to 200 GB/s, log-spaced.
            let host_gb_per_s = 0.5 * (400.0f64).powf(f64::from(step) / 400.0);
            let shape = StagedParams {
                latency_us: 0.0,
                host_gb_per_s,
                staging_bytes: 1 << chunk_log,
            };
            let pipeline: Vec<f64> = samples
                .iter()
                .map(|s| pageable_copy_us(link, &shape, direction, s.bytes))
                .collect();
            // sum |p + L - t| / t is minimised by the 1/t-weighted median of t - p; the
            // objective is convex in L, so clamping at zero keeps the constrained optimum.
            let residuals = samples
                .iter()
                .zip(&pipeline)
                .map(|(s, p)| (s.time_us - p, 1.0 / s.time_us))
                .collect();
            let latency_us = weighted_median(residuals).max(0.0);
            let error: f64 = samples
                .iter()
                .zip(&pipeline)
                .map(|(s, p)| ((p + latency_us - s.time_us) / s.time_us).abs())
                .sum();
            if best.as_ref().is_none_or(|(e, _)| error < *e) {
                best = Some((error, StagedParams { latency_us, ..shape }));
            }
        }
    }
    Ok(best.expect("the grid is not empty").1)
}

/// The SM's unified L1 data cache / shared memory array per compute capability, from NVIDIA's
/// architecture whitepapers: A100 (8.0) 192 KB, GA10x (8.6) 128 KB, Ada (8.9) 128 KB, H100 and
/// H200 (9.0) 256 KB. A device not listed is said to be unknown rather than guessed.
const UNIFIED_L1: [(&str, u64); 4] = [
    ("8.0", 192 << 10),
    ("8.6", 128 << 10),
    ("8.9", 128 << 10),
    ("9.0", 256 << 10),
];

fn unified_l1_bytes(compute_capability: &str) -> Option<u64> {
    UNIFIED_L1
        .iter()
        .find(|(cc, _)| *cc == compute_capability)
        .map(|(_, bytes)| *bytes)
}

/// The SM's occupancy rules: the driver's attributes plus what CUDA's occupancy calculator
/// (cuda_occupancy.h) defines per compute capability. Only 8.x and 9.x are known here.
pub fn sm_params(compute_capability: &str, attributes: &SmAttributes) -> Result<SmParams, FitError> {
    let major: u32 = compute_capability
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    if !(8..=9).contains(&major) {
        return Err(FitError::BadSamples {
            what: "the SM's occupancy rules",
            reason: format!("compute capability {compute_capability} is not one vramlab knows (8.x, 9.x)"),
        });
    }
    let a = attributes;
    Ok(SmParams {
        source: format!(
            "compute capability {compute_capability}: limits from cuDeviceGetAttribute at calibration; register allocation unit (256 per warp), 4 sub-partitions, 128 B shared allocation unit and the 255-register ceiling as cuda_occupancy.h defines them for {major}.x"
        ),
        warp_size: a.warp_size,
        max_threads_per_sm: a.max_threads_per_sm,
        max_threads_per_block: a.max_threads_per_block,
        max_blocks_per_sm: a.max_blocks_per_sm,
        registers_per_sm: a.registers_per_sm,
        registers_per_block: a.registers_per_block,
        max_registers_per_thread: 255,
        register_allocation_unit: 256,
        sub_partitions: 4,
        shared_bytes_per_sm: a.shared_bytes_per_sm,
        shared_bytes_per_block: a.shared_bytes_per_block,
        shared_bytes_per_block_optin: a.shared_bytes_per_block_optin,
        reserved_shared_bytes_per_block: a.reserved_shared_bytes_per_block,
        shared_allocation_unit: 128,
    })
}

/// Fits a profile to a calibration run. Parts the run did not measure (an empty sample list)
/// are taken from `base`, so one part of an existing profile can be re-measured alone.
pub fn fit_profile(name: &str, calibration: &Calibration, base: Option<&Profile>) -> Result<Profile, FitError> {
    let d = &calibration.device;
    let missing = |part: &'static str| FitError::BadSamples {
        what: part,
        reason: "not measured in this calibration, and no profile given to keep it from (--into)".into(),
    };
    let transfer = if calibration.h2d_pinned.is_empty() {
        base.map(|b| b.transfer.clone())
            .ok_or_else(|| missing("the transfer part"))?
    } else {
        fit_transfer(calibration)?
    };
    let shared = if calibration.shared.is_empty() {
        base.and_then(|b| b.shared.clone())
    } else {
        Some(fit_shared(
            &calibration.shared,
            format!(
                "vramlab calibrate on {} ({}): median clock64 cycles per dependent shared load over 4-byte strides 1, 2, 4, 8, fitted by least absolute relative error; 32 banks of 4 bytes as the CUDA C++ Programming Guide gives for compute capability 5.0 and later",
                d.name, calibration.date
            ),
        )?)
    };
    let global = if calibration.global.is_empty() {
        base.and_then(|b| b.global.clone())
    } else {
        let machine = GlobalMachine {
            l2_bytes: calibration.l2_bytes,
            launch_us: transfer.kernel_launch_us,
            sm: sm_params(&d.compute_capability, &calibration.sm)?,
            multiprocessors: d.multiprocessors,
            read_kernel_registers: calibration.read_kernel_registers,
        };
        Some(fit_global(
            &calibration.global,
            &machine,
            format!(
                "vramlab calibrate on {} ({}): median event-timed reads (through the L2 only, ld.global.cg) at calibration_cases, all parameters fitted jointly by least absolute relative error: dense 16-byte reads of 1 GiB and 16 MiB (DRAM and L2 bandwidth), 1-byte dense reads (latency bound: one load in flight per warp), 4-byte dense reads (both bounds: the exponent), 4- and 16-byte reads at stride 32 (fetch size, page-open rate), 4-byte reads at stride 32 of 16 MiB (L2 line-request rate), 16-byte reads at stride 32 of 16 MiB (latency per extra line); 1 KiB DRAM pages (JEDEC JESD238, HBM3); launch cost = the transfer part's kernel_launch_us; 32 B sectors and 128 B lines (CUDA C++ Best Practices Guide); L2 size from cuDeviceGetAttribute",
                d.name, calibration.date
            ),
        )?)
    };
    let latency = if calibration.latency.is_empty() {
        base.and_then(|b| b.latency.clone())
    } else {
        // The L1 a kernel without shared memory gets: the SM's unified L1/shared array less the
        // smallest shared-memory carveout that holds the driver's reserved bytes (8 KiB).
        let unified = unified_l1_bytes(&d.compute_capability).ok_or_else(|| FitError::BadSamples {
            what: "the latency ladder",
            reason: format!(
                "the L1 size of compute capability {} is not known to vramlab (it knows {})",
                d.compute_capability,
                UNIFIED_L1.map(|(cc, _)| cc).join(", ")
            ),
        })?;
        let l1_bytes = unified - (8 << 10);
        Some(fit_latency(
            &calibration.latency,
            l1_bytes,
            calibration.l2_bytes,
            format!(
                "vramlab calibrate on {} ({}): median clock64 cycles per load of a one-thread random pointer chase at calibration_bytes (12 KiB, 6 MiB, 768 MiB: the latencies; 384 KiB: how sharply the L1 stops serving; 28, 40, 56, 80 MiB: the two steps in which the L2 runs out); L1 {} KiB ({} KiB unified L1/shared per SM of compute capability {}, NVIDIA's whitepaper, less an 8 KiB carveout); L2 size from cuDeviceGetAttribute",
                d.name,
                calibration.date,
                l1_bytes >> 10,
                unified >> 10,
                d.compute_capability
            ),
        )?)
    };
    let growth = if calibration.growth.is_empty() {
        base.and_then(|b| b.growth.clone())
    } else {
        Some(fit_growth(
            &calibration.growth,
            calibration.free_bytes,
            format!(
                "vramlab calibrate on {} ({}): host time of each grow (synchronized) while doubling to 3 MiB x 2^k, k = 1..14 (5 repeats up to 1 GiB, 3 above, median), for each strategy with and without a reserve, a line in the size fitted by least absolute relative error; free memory from cuMemGetInfo at the start",
                d.name, calibration.date
            ),
        )?)
    };
    let spills = if calibration.spills.is_empty() {
        base.and_then(|b| b.spills.clone())
    } else {
        Some(fit_spills(
            &calibration.spills,
            &sm_params(&d.compute_capability, &calibration.sm)?,
            d.multiprocessors,
            global.as_ref().ok_or_else(|| missing("the global part (spill traffic moves at its L2 and DRAM bandwidth)"))?,
            format!(
                "vramlab calibrate on {} ({}): kernels/spills.cu compiled by NVRTC and the driver at (live, cap) = calibration_cases, launched to fill every SM (blocks of 128 threads, as many as cuOccupancyMaxActiveBlocksPerMultiprocessor allows); registers and local bytes from cuFuncGetAttribute, median event time of 7 launches of 1000 iterations; issue time from the uncapped cases, frames from the local bytes, the overlap exponent and the L2's hold on reserved local memory by least absolute relative error over the spilling cases; L2 and DRAM bandwidth from [global]",
                d.name, calibration.date
            ),
        )?)
    };
    let migration = if calibration.migration.is_empty() {
        base.and_then(|b| b.migration.clone())
    } else {
        let time = |s: &MigrationSample, prefetch: bool| {
            (s.prefetch == prefetch).then_some(Sample {
                bytes: s.bytes,
                time_us: s.time_us,
            })
        };
        Some(MigrationParams {
            source: format!(
                "vramlab calibrate on {} ({}): event-timed prefetch (if any) plus a kernel reading host-written managed memory at calibration_bytes, median of 5, a line fitted by least absolute relative error",
                d.name, calibration.date
            ),
            on_demand: fit_link_of(&calibration.migration, |s| time(s, false))?,
            prefetch: fit_link_of(&calibration.migration, |s| time(s, true))?,
            calibration_bytes: migration_calibration_bytes(),
        })
    };
    let peer = if calibration.peer.is_empty() {
        base.and_then(|b| b.peer.clone())
    } else {
        let time = |s: &PeerSample, vmm: bool| {
            (s.vmm == vmm).then_some(Sample {
                bytes: s.bytes,
                time_us: s.time_us,
            })
        };
        Some(PeerParams {
            source: format!(
                "vramlab calibrate on two {} ({}): event-timed kernel on the second GPU reading the first's memory at calibration_bytes (ld.global.cg, 16-byte dense reads), median of 7, a line fitted by least absolute relative error",
                d.name, calibration.date
            ),
            vmm: fit_link_of(&calibration.peer, |s| time(s, true))?,
            peer_access: fit_link_of(&calibration.peer, |s| time(s, false))?,
            calibration_bytes: peer_calibration_bytes(),
        })
    };
    let constant = if calibration.constant.is_empty() {
        base.and_then(|b| b.constant.clone())
    } else {
        Some(fit_constant(
            &calibration.constant,
            format!(
                "vramlab calibrate on {} ({}): median clock64 cycles per dependent constant load of one warp at calibration_cases (1 and 2 distinct words, warm and cold), a line through each pair; capacity_lines = one less than the fewest warm lines (14, 15, 17, 18, 19, 24 tried) that cost more like a cold chain",
                d.name, calibration.date
            ),
        )?)
    };
    Ok(Profile {
        name: name.to_string(),
        description: format!(
            "{} (driver {}, PCI {}), measured by vramlab calibrate on {}",
            d.name, d.driver_version, d.pci_bus_id, calibration.date
        ),
        machine: base.and_then(|b| b.machine.clone()),
        uncertainty: base.and_then(|b| b.uncertainty.clone()),
        device: ProfileDevice {
            name: d.name.clone(),
            compute_capability: d.compute_capability.clone(),
            multiprocessors: d.multiprocessors,
            memory_bytes: d.memory_bytes,
            copy_engines: d.copy_engines,
        },
        transfer,
        sm: sm_params(&d.compute_capability, &calibration.sm)?,
        shared,
        global,
        latency,
        constant,
        growth,
        spills,
        migration,
        peer,
    })
}

fn fit_transfer(calibration: &Calibration) -> Result<TransferParams, FitError> {
    let h2d_pinned = fit_link(&calibration.h2d_pinned)?;
    let d2h_pinned = fit_link(&calibration.d2h_pinned)?;
    let h2d_pageable = fit_staged(&h2d_pinned, Direction::HostToDevice, &calibration.h2d_pageable)?;
    let d2h_pageable = fit_staged(&d2h_pinned, Direction::DeviceToHost, &calibration.d2h_pageable)?;
    let mut calibration_bytes: Vec<u64> = [
        &calibration.h2d_pinned,
        &calibration.d2h_pinned,
        &calibration.h2d_pageable,
        &calibration.d2h_pageable,
    ]
    .iter()
    .flat_map(|samples| samples.iter().map(|s| s.bytes))
    .collect();
    calibration_bytes.sort_unstable();
    calibration_bytes.dedup();
    let d = &calibration.device;
    Ok(TransferParams {
        source: format!(
            "vramlab calibrate on {} ({}): medians of event-timed copies at calibration_bytes, fitted by least absolute relative error (pinned: iteratively reweighted least squares; pageable: grid over staging size and host bandwidth)",
            d.name, calibration.date
        ),
        calibration_bytes,
        kernel_launch_us: calibration.kernel_launch_us,
        h2d_pinned,
        d2h_pinned,
        h2d_pageable,
        d2h_pageable,
    })
}

#[cfg(test)]
mod l1_tests {
    use super::unified_l1_bytes;

    #[test]
    fn the_l1_comes_from_the_devices_whitepaper_or_is_unknown() {
        assert_eq!(unified_l1_bytes("9.0"), Some(256 << 10));
        assert_eq!(unified_l1_bytes("8.0"), Some(192 << 10));
        assert_eq!(unified_l1_bytes("8.6"), Some(128 << 10));
        assert_eq!(unified_l1_bytes("10.0"), None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pcie::pinned_copy_us;
    use experiments::Sample;

    #[test]
    fn recovers_a_known_link() {
        let truth = LinkParams {
            latency_us: 3.0,
            gb_per_s: 52.0,
        };
        let samples: Vec<Sample> = (10..30)
            .step_by(3)
            .map(|k| Sample {
                bytes: 3 << k,
                time_us: pinned_copy_us(&truth, 3 << k),
            })
            .collect();
        let fitted = fit_link(&samples).unwrap();
        assert!(
            (fitted.latency_us - 3.0).abs() < 1e-6 && (fitted.gb_per_s - 52.0).abs() < 1e-6,
            "{fitted:?}"
        );
    }

    #[test]
    fn one_disturbed_sample_does_not_move_the_link() {
        let truth = LinkParams {
            latency_us: 2.0,
            gb_per_s: 55.0,
        };
        let mut samples: Vec<Sample> = (10..=28)
            .step_by(2)
            .map(|k| Sample {
                bytes: 3 << k,
                time_us: pinned_copy_us(&truth, 3 << k),
            })
            .collect();
        samples[3].time_us *= 3.0;
        samples[7].time_us *= 1.25;
        let fitted = fit_link(&samples).unwrap();
        assert!(
            (fitted.gb_per_s - 55.0).abs() < 0.05 && (fitted.latency_us - 2.0).abs() < 0.01,
            "{fitted:?}"
        );
    }

    #[test]
    fn recovers_known_bank_costs_and_names_its_cases() {
        let truth = |wavefronts: f64| 29.0 + 2.0 * (wavefronts - 1.0);
        let samples: Vec<BankSample> = [(4, 1, 1.0), (4, 2, 2.0), (4, 4, 4.0), (4, 8, 8.0)]
            .iter()
            .map(|&(width, stride, w)| BankSample {
                width,
                stride,
                cycles: truth(w),
            })
            .collect();
        let fitted = fit_shared(&samples, "test".into()).unwrap();
        assert!(
            (fitted.base_cycles - 29.0).abs() < 1e-6 && (fitted.wavefront_cycles - 2.0).abs() < 1e-6,
            "{fitted:?}"
        );
        assert_eq!(fitted.calibration_cases, vec![(4, 1), (4, 2), (4, 4), (4, 8)]);
        let flat = [
            BankSample {
                width: 4,
                stride: 1,
                cycles: 30.0,
            },
            BankSample {
                width: 4,
                stride: 3,
                cycles: 30.0,
            },
        ];
        assert!(
            fit_shared(&flat, "test".into()).is_err(),
            "one wavefront count cannot fit a slope"
        );
    }

    #[test]
    fn recovers_a_known_latency_ladder() {
        let truth = LatencyParams {
            source: "t".into(),
            l1_bytes: 248 << 10,
            l2_bytes: 50 << 20,
            l1_cycles: 38.0,
            l2_cycles: 270.0,
            dram_cycles: 650.0,
            l1_sharpness: 20.0,
            l2_effective_bytes: 22 << 20,
            l2_sharpness: 4.0,
            l2_far_share: 0.4,
            l2_far_bytes: 50 << 20,
            calibration_bytes: vec![],
        };
        let samples: Vec<LatencySample> = experiments::latency_calibration_bytes()
            .into_iter()
            .map(|bytes| LatencySample {
                bytes,
                cycles: crate::latency::chase_cycles(&truth, &experiments::LatencyPoint { bytes }),
            })
            .collect();
        let fitted = fit_latency(&samples, truth.l1_bytes, truth.l2_bytes, "t".into()).unwrap();
        for (got, want) in [
            (fitted.l1_cycles, 38.0),
            (fitted.l2_cycles, 270.0),
            (fitted.dram_cycles, 650.0),
            (fitted.l1_sharpness, 20.0),
        ] {
            assert!((got / want - 1.0).abs() < 1e-3, "{fitted:?}");
        }
        // The L2's two steps may fit with other parameters; what must hold is the prediction.
        for k in 12..32 {
            let point = experiments::LatencyPoint { bytes: 1 << k };
            let (got, want) = (
                crate::latency::chase_cycles(&fitted, &point),
                crate::latency::chase_cycles(&truth, &point),
            );
            assert!(
                (got / want - 1.0).abs() < 0.03,
                "{} B: {got} vs {want}; {fitted:?}",
                1u64 << k
            );
        }
    }

    #[test]
    fn weighted_median_minimises_weighted_distance() {
        assert_eq!(weighted_median(vec![(1.0, 1.0), (2.0, 1.0), (10.0, 1.0)]), 2.0);
        assert_eq!(weighted_median(vec![(1.0, 5.0), (2.0, 1.0), (10.0, 1.0)]), 1.0);
    }

    #[test]
    fn recovers_a_known_pipeline() {
        let link = LinkParams {
            latency_us: 2.0,
            gb_per_s: 52.0,
        };
        let truth = StagedParams {
            latency_us: 8.0,
            host_gb_per_s: 20.0,
            staging_bytes: 1 << 20,
        };
        let samples: Vec<Sample> = (10..30)
            .step_by(3)
            .map(|k| Sample {
                bytes: 3 << k,
                time_us: pageable_copy_us(&link, &truth, Direction::HostToDevice, 3 << k),
            })
            .collect();
        let fitted = fit_staged(&link, Direction::HostToDevice, &samples).unwrap();
        for s in &samples {
            let p = pageable_copy_us(&link, &fitted, Direction::HostToDevice, s.bytes);
            assert!(
                ((p - s.time_us) / s.time_us).abs() < 0.02,
                "{fitted:?} at {} B",
                s.bytes
            );
        }
    }

    #[test]
    fn refuses_too_few_or_bad_samples() {
        assert!(fit_link(&[Sample { bytes: 1, time_us: 1.0 }]).is_err());
        let bad = [
            Sample { bytes: 1, time_us: 1.0 },
            Sample {
                bytes: 2,
                time_us: f64::NAN,
            },
        ];
        assert!(fit_link(&bad).unwrap_err().to_string().contains("not a positive"));
    }
}

#[cfg(test)]
mod global_tests {
    use super::*;
    use crate::coalescing::read_time;
    use experiments::global_calibration_cases;

    fn h100_sm() -> SmParams {
        sm_params(
            "9.0",
            &SmAttributes {
                warp_size: 32,
                max_threads_per_sm: 2048,
                max_threads_per_block: 1024,
                max_blocks_per_sm: 32,
                registers_per_sm: 65536,
                registers_per_block: 65536,
                shared_bytes_per_sm: 233472,
                shared_bytes_per_block: 49152,
                shared_bytes_per_block_optin: 232448,
                reserved_shared_bytes_per_block: 1024,
            },
        )
        .unwrap()
    }

    #[test]
    fn recovers_a_known_read_model_from_the_calibration_cases() {
        let machine = GlobalMachine {
            l2_bytes: 50 << 20,
            launch_us: 4.0,
            sm: h100_sm(),
            multiprocessors: 132,
            read_kernel_registers: 16,
        };
        let truth = GlobalParams {
            source: "truth".into(),
            sector_bytes: 32,
            line_bytes: 128,
            l2_bytes: machine.l2_bytes,
            dram_fetch_bytes: 64,
            dram_gb_per_s: 3200.0,
            dram_page_bytes: 1024,
            dram_page_gb_per_s: 30000.0,
            l2_gb_per_s: 9000.0,
            l2_lines_g_per_s: 90.0,
            dram_latency_ns: 380.0,
            l2_latency_ns: 160.0,
            line_latency_ns: 4.0,
            overlap_exponent: 2.5,
            read_kernel_registers: 16,
            launch_us: 4.0,
            calibration_cases: vec![],
        };
        let samples: Vec<GlobalSample> = global_calibration_cases()
            .into_iter()
            .map(|(width, stride, bytes)| {
                let point = CoalescingPoint::calibration(width, stride, bytes);
                GlobalSample {
                    width,
                    stride,
                    bytes,
                    time_us: read_time(&truth, &machine.sm, 132, &point).unwrap().total_us,
                }
            })
            .collect();
        let fitted = fit_global(&samples, &machine, "fit".into()).unwrap();
        assert_eq!(fitted.dram_fetch_bytes, 64, "{fitted:?}");
        for (name, got, want) in [
            ("dram", fitted.dram_gb_per_s, 3200.0),
            ("l2", fitted.l2_gb_per_s, 9000.0),
            ("dram latency", fitted.dram_latency_ns, 380.0),
            ("l2 latency", fitted.l2_latency_ns, 160.0),
            ("exponent", fitted.overlap_exponent, 2.5),
            ("pages", fitted.dram_page_gb_per_s, 30000.0),
            ("lines", fitted.l2_lines_g_per_s, 90.0),
            ("line latency", fitted.line_latency_ns, 4.0),
        ] {
            assert!((got / want - 1.0).abs() < 0.03, "{name}: {got} vs {want}; {fitted:?}");
        }
    }
}
