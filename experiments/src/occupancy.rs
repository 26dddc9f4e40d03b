//! Occupancy: how many blocks of a kernel shape one SM holds.
//!
//! family: 3 Occupancy(OccupancyPoint)

use crate::family::{spec, AxisScale, FamilyInfo, ParamKind, ParamReader, ParamSpec};
use crate::*;

/// The family's row: name, parameters, axis, compared metric, machine parts, calibration.
pub(crate) const FAMILY: FamilyInfo = FamilyInfo {
    name: "occupancy",
    params: OCCUPANCY_PARAMS,
    x_param: "threads",
    primary_metric: "blocks_per_sm",
    uses_machine_parts: false,
    axes: (AxisScale::Linear, AxisScale::Linear),
    drawn_as_agreement: true,
    also_plotted: &[],
    calibration: None,
    former_name: None,
};

/// The typed point of checked parameters.
pub(crate) fn point(p: &ParamReader<'_>) -> OccupancyPoint {
    OccupancyPoint {
        threads: p.int("threads") as u32,
        registers: p.int("registers") as u32,
        static_shared: p.int("static_shared") as u32,
        dynamic_shared: p.int("dynamic_shared") as u32,
    }
}

const OCCUPANCY_PARAMS: &[ParamSpec] = &[
    // CUDA's per-block thread limit on every architecture since compute capability 2.0.
    spec("threads", ParamKind::Count { min: 1, max: 1024 }, None),
    // ptxas accepts --maxrregcount up to 255.
    spec("registers", ParamKind::Count { min: 1, max: 255 }, None),
    // Static __shared__ arrays are limited to 48 KiB.
    spec("static_shared", ParamKind::Bytes { max: 48 << 10 }, Some("0")),
    spec("dynamic_shared", ParamKind::Bytes { max: 1 << 20 }, Some("0")),
];

/// One kernel shape for the occupancy calculator. Kernels are assumed to have opted in to the
/// device's largest dynamic shared memory per block (cuFuncSetAttribute), as vramlab's do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OccupancyPoint {
    /// Threads per block.
    pub threads: u32,
    /// Registers per thread.
    pub registers: u32,
    /// Static `__shared__` bytes per block.
    pub static_shared: u32,
    /// Dynamic shared bytes per block, given at launch.
    pub dynamic_shared: u32,
}

/// The metrics of an occupancy point: resident `blocks_per_sm`, `warps_per_sm`, and
/// `occupancy` (resident warps over the SM's maximum).
pub fn occupancy_metrics(blocks_per_sm: u32, threads: u32, warp_size: u32, max_warps_per_sm: u32) -> Metrics {
    let warps = blocks_per_sm * threads.div_ceil(warp_size);
    Metrics::from([
        ("blocks_per_sm".to_string(), f64::from(blocks_per_sm)),
        ("warps_per_sm".to_string(), f64::from(warps)),
        ("occupancy".to_string(), f64::from(warps) / f64::from(max_warps_per_sm)),
    ])
}
