//! The latency ladder: one thread chasing pointers through a footprint, served by the L1, L2 or DRAM.
//!
//! family: 6 Latency(LatencyPoint) [LatencyParams] {LatencySample}

use serde::{Deserialize, Serialize};

use crate::family::{spec, AxisScale, CalibrationInfo, FamilyInfo, ParamKind, ParamReader, ParamSpec};

/// The family's row: name, parameters, axis, compared metric, machine parts, calibration.
pub(crate) const FAMILY: FamilyInfo = FamilyInfo {
    name: "latency",
    params: LATENCY_PARAMS,
    x_param: "bytes",
    primary_metric: "cycles",
    uses_machine_parts: false,
    axes: (AxisScale::Bytes, AxisScale::Linear),
    drawn_as_agreement: false,
    also_plotted: &[],
    calibration: Some(CalibrationInfo {
        measures: "pointer chases (the latency ladder)",
        machine: false,
        in_all: true,
        cases: || latency_calibration_bytes().len(),
    }),
    former_name: None,
};

/// The typed point of checked parameters.
pub(crate) fn point(p: &ParamReader<'_>) -> LatencyPoint {
    LatencyPoint {
        bytes: p.int("bytes") as u64,
    }
}

const LATENCY_PARAMS: &[ParamSpec] = &[
    // The chase visits one node per 128-byte line of this many bytes, in a random cycle.
    spec("bytes", ParamKind::Size, None),
];

/// A pointer chase through `bytes`: one node per 128-byte line, visited in a random cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LatencyPoint {
    /// Footprint, bytes.
    pub bytes: u64,
}

impl LatencyPoint {
    /// Bytes between nodes: one cache line, so no two nodes share a line.
    pub const NODE_BYTES: u64 = 128;

    /// Nodes in the cycle (at least 2).
    pub fn nodes(&self) -> u64 {
        (self.bytes / Self::NODE_BYTES).max(2)
    }
}

/// The latency ladder: cycles of one dependent load served by each level, and the capacities
/// that decide which level serves a random chase through a footprint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LatencyParams {
    /// Where these numbers came from.
    pub source: String,
    /// L1 data cache capacity a kernel without shared memory gets, bytes.
    pub l1_bytes: u64,
    /// L2 capacity, bytes.
    pub l2_bytes: u64,
    /// Cycles of a load that hits the L1.
    pub l1_cycles: f64,
    /// Cycles of a load that misses the L1 and hits the L2 (near and far halves averaged).
    pub l2_cycles: f64,
    /// Cycles of a load served by DRAM.
    pub dram_cycles: f64,
    /// How sharply the L1 stops serving a chase longer than it: it serves (l1_bytes / F)^k of
    /// a footprint F beyond it (1: every line equally likely kept; large: an LRU cliff).
    #[serde(default = "one")]
    pub l1_sharpness: f64,
    /// The L2 capacity a chase from one SM sees (the near half, mostly), bytes; 0: `l2_bytes`.
    #[serde(default)]
    pub l2_effective_bytes: u64,
    /// As `l1_sharpness`, for the L2 and `l2_effective_bytes`.
    #[serde(default = "one")]
    pub l2_sharpness: f64,
    /// Share of the lines a chase past `l2_effective_bytes` still finds in the L2 (those held
    /// in the far half), up to `l2_far_bytes`; 0: none.
    #[serde(default)]
    pub l2_far_share: f64,
    /// Footprint up to which the far half keeps serving its share, bytes.
    #[serde(default)]
    pub l2_far_bytes: u64,
    /// The footprints calibration measured; reports exclude them.
    pub calibration_bytes: Vec<u64>,
}

fn one() -> f64 {
    1.0
}

/// One measured pointer-chase footprint.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LatencySample {
    /// Footprint, bytes.
    pub bytes: u64,
    /// Median cycles per dependent load.
    pub cycles: f64,
}

/// The footprints calibration chases: 12 KiB (well inside the L1), 6 MiB (inside the L2, far
/// beyond the L1) and 768 MiB (far beyond the L2) for the three latencies; 384 KiB (just past
/// the L1) for how sharply the L1 stops serving; 28, 40, 56 and 80 MiB for the two steps in
/// which the L2 runs out. None is a point of the latency suites.
pub fn latency_calibration_bytes() -> Vec<u64> {
    vec![
        12 << 10,
        384 << 10,
        6 << 20,
        28 << 20,
        40 << 20,
        56 << 20,
        80 << 20,
        768 << 20,
    ]
}

/// Every number is checked by [`crate::Profile::parse`]; nothing more is asked of them together.
impl crate::profile::Section for LatencyParams {}

/// Latency samples without every footprint of [`latency_calibration_bytes`] (the three-footprint
/// ladder of 69946a9 and the six of d6ec550, both 2026-11-22; eight since 6729823 that day): the
/// fit places each footprint on the ladder, so they are set aside.
impl crate::calibration::EarlierSamples for LatencySample {
    fn set_aside_parsed(samples: &mut Vec<Self>, _read_kernel_registers: u32) -> Option<String> {
        if samples.is_empty() {
            return None;
        }
        let have: Vec<u64> = samples.iter().map(|s| s.bytes).collect();
        let needed = latency_calibration_bytes();
        let lacks: Vec<u64> = needed.iter().copied().filter(|b| !have.contains(b)).collect();
        if lacks.is_empty() {
            return None;
        }
        let list = |bytes: &[u64]| bytes.iter().map(|&b| crate::format_bytes(b)).collect::<Vec<_>>().join(", ");
        let mut sorted = have.clone();
        sorted.sort_unstable();
        samples.clear();
        Some(format!(
            "latency: {} footprints of an earlier ladder ({}), lacking {} of the {} the fit needs",
            sorted.len(),
            list(&sorted),
            list(&lacks),
            needed.len()
        ))
    }
}

