//! Register spills: a loop keeping values live under a register cap, and its local-memory traffic.
//!
//! family: 9 Spills(SpillPoint) [SpillParams] {SpillSample}

use serde::{Deserialize, Serialize};

use crate::family::{spec, AxisScale, CalibrationInfo, FamilyInfo, ParamKind, ParamReader, ParamSpec};
use crate::*;

/// The family's row: name, parameters, axis, compared metric, machine parts, calibration.
pub(crate) const FAMILY: FamilyInfo = FamilyInfo {
    name: "spills",
    params: SPILL_PARAMS,
    x_param: "registers",
    primary_metric: "ns_per_iteration",
    uses_machine_parts: false,
    axes: (AxisScale::Linear, AxisScale::Log),
    drawn_as_agreement: false,
    also_plotted: &[],
    calibration: Some(CalibrationInfo {
        measures: "the spill kernel under register caps",
        machine: false,
        in_all: true,
        cases: || spill_calibration_cases().len(),
    }),
    former_name: None,
};

/// The typed point of checked parameters.
pub(crate) fn point(p: &ParamReader<'_>) -> SpillPoint {
    SpillPoint {
        live: p.int("live") as u32,
        registers: p.int("registers") as u32,
    }
}

const SPILL_PARAMS: &[ParamSpec] = &[
    // Floats each thread keeps live across the loop.
    spec("live", ParamKind::Count { min: 8, max: 160 }, None),
    // The register cap the kernel is compiled with (__maxnreg__); ptxas needs at least 16.
    spec("registers", ParamKind::Count { min: 16, max: 255 }, None),
];

/// Threads per block of the spill kernel when it fills the GPU.
pub const SPILL_KERNEL_THREADS: u32 = 128;

/// A loop keeping `live` floats per thread live, compiled with at most `registers` registers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpillPoint {
    /// Values kept live across the loop.
    pub live: u32,
    /// The register cap.
    pub registers: u32,
}

/// The metrics of a spill point, with every SM holding as many blocks as fit:
/// `ns_per_iteration` of the loop, `warps_per_sm`, `registers_used`, and `local_bytes` of spill
/// frame per thread.
pub fn spill_metrics(ns_per_iteration: f64, warps_per_sm: u32, registers_used: u32, local_bytes: u32) -> Metrics {
    Metrics::from([
        ("ns_per_iteration".to_string(), ns_per_iteration),
        ("warps_per_sm".to_string(), f64::from(warps_per_sm)),
        ("registers_used".to_string(), f64::from(registers_used)),
        ("local_bytes".to_string(), f64::from(local_bytes)),
    ])
}

/// Register spills, in two parts. The compiler: `spills.cu` uncapped uses `live +
/// overhead_registers` registers; with `g = live - cap` it loads
/// `max(0, min(loads_at_equal + loads_per_register_small x g, loads_beyond_deficit + g))` spilled
/// words per iteration (and stores one fewer), in a frame of
/// `min(frame_bytes_at_equal + 8 g, frame_bytes_large_base + 4 g)` bytes per thread. The GPU:
/// with every SM full (blocks of 128 threads, warps per SM from the occupancy calculator), an
/// iteration takes the issue time `W x (live + loads + stores + loop_instructions) x
/// instruction_ns` combined, `(a^p + b^p)^(1/p)`, with the time to move the spill traffic
/// (128 bytes per warp load or store) at the profile's L2 bandwidth, or at its DRAM bandwidth
/// for the share the L2 cannot hold: the local memory the driver sets aside (frame x threads
/// per SM x SMs) is served from the L2 with probability `min(1, (local_capacity_bytes /
/// reserved)^local_sharpness)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpillParams {
    /// Where these numbers came from.
    pub source: String,
    /// Where the compiler's rule (loads, frame, loop instructions) came from.
    pub compiler_source: String,
    /// Registers the kernel needs beyond its live values (calibration, uncapped cases).
    pub overhead_registers: u32,
    /// Spilled loads per iteration when the cap equals the live values.
    pub loads_at_equal: f64,
    /// Loads each register of deficit adds while the deficit is small.
    pub loads_per_register_small: f64,
    /// For large deficits, loads per iteration are the deficit plus this.
    pub loads_beyond_deficit: f64,
    /// Spill frame per thread when the cap equals the live values, bytes.
    pub frame_bytes_at_equal: f64,
    /// For large deficits the frame is this plus 4 bytes per register of deficit.
    pub frame_bytes_large_base: f64,
    /// Instructions of the loop besides the live values' FMAs and the spill loads and stores.
    pub loop_instructions: f64,
    /// Time one SM takes per warp instruction issued, ns (calibration, uncapped cases).
    pub instruction_ns: f64,
    /// How the issue time and the traffic time combine (calibration).
    pub overlap_exponent: f64,
    /// Reserved local memory the L2 holds for spills, bytes (calibration).
    pub local_capacity_bytes: f64,
    /// How sharply the L2 stops holding it (calibration).
    pub local_sharpness: f64,
    /// The (live, registers) cases calibration measured; reports exclude them.
    pub calibration_cases: Vec<(u32, u32)>,
}

/// One measured spill case.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SpillSample {
    /// Live values.
    pub live: u32,
    /// Register cap.
    pub registers: u32,
    /// Registers the compiler used (CU_FUNC_ATTRIBUTE_NUM_REGS).
    pub registers_used: u32,
    /// Local bytes per thread (CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES).
    pub local_bytes: u32,
    /// Warps resident per SM with the GPU full.
    pub warps_per_sm: u32,
    /// Median kernel time per loop iteration with the GPU full, ns.
    pub ns_per_iteration: f64,
}

/// The spill calibration cases, as (live, registers). 40 and 120 live values uncapped give the
/// issue rate; 104 and 120 at their own count give how issue and spill traffic overlap; 104 and
/// 120 under caps of 32 to 64 reserve 90 to 140 MB of local memory, around where the L2 stops
/// holding it. The suite keeps other live counts, so none of these is a validation point.
pub fn spill_calibration_cases() -> Vec<(u32, u32)> {
    vec![
        (40, 255),
        (120, 255),
        (104, 104),
        (120, 120),
        (104, 32),
        (104, 40),
        (104, 48),
        (120, 40),
        (120, 48),
        (120, 56),
        (120, 64),
    ]
}

/// Every number is checked by [`crate::Profile::parse`]; nothing more is asked of them together.
impl crate::profile::Section for SpillParams {}

/// Spill samples of the first spill calibration (cycles per iteration of one warp, until
/// f712bfb of 2026-11-22 made the kernel fill the GPU and timed it in ns per iteration with the
/// resident warps counted): another experiment than the model's, set aside.
impl crate::calibration::EarlierSamples for SpillSample {
    fn set_aside_raw(samples: &mut serde_json::Value) -> Option<String> {
        let first = |s: &serde_json::Value| s.get("cycles").is_some() && s.get("ns_per_iteration").is_none();
        let count = samples.as_array()?.iter().filter(|s| first(s)).count();
        if count == 0 {
            return None;
        }
        *samples = serde_json::Value::Array(Vec::new());
        Some(format!(
            "spills: {count} cases of the first spill calibration (one warp's cycles per iteration, until 2026-11-22), not the full GPU's ns per iteration the model fits"
        ))
    }
}

