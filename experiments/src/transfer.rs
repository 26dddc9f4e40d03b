//! Transfers: one host <-> device copy, pinned or pageable, and what it costs.
//!
//! family: 1 Transfer(TransferPoint)

use serde::{Deserialize, Serialize};

use crate::family::{spec, AxisScale, CalibrationInfo, FamilyInfo, ParamKind, ParamReader, ParamSpec};
use crate::*;

/// The family's row: name, parameters, axis, compared metric, machine parts, calibration.
pub(crate) const FAMILY: FamilyInfo = FamilyInfo {
    name: "transfer",
    params: TRANSFER_PARAMS,
    x_param: "bytes",
    primary_metric: "gb_per_s",
    uses_machine_parts: true,
    axes: (AxisScale::Bytes, AxisScale::Log),
    drawn_as_agreement: false,
    also_plotted: &[],
    calibration: Some(CalibrationInfo {
        measures: "pinned and pageable copies both ways, and the kernel launch overhead",
        machine: true,
        in_all: true,
        cases: || 4 * calibration_sizes().len(),
    }),
    former_name: None,
};

/// The typed point of checked parameters.
pub(crate) fn point(p: &ParamReader<'_>) -> TransferPoint {
    TransferPoint {
        direction: if p.text("direction") == "h2d" {
            Direction::HostToDevice
        } else {
            Direction::DeviceToHost
        },
        host: if p.text("host") == "pinned" {
            HostMemory::Pinned
        } else {
            HostMemory::Pageable
        },
        bytes: p.int("bytes") as u64,
    }
}

const DIRECTIONS: &[&str] = &["h2d", "d2h"];

const HOST_MEMORY: &[&str] = &["pinned", "pageable"];

const TRANSFER_PARAMS: &[ParamSpec] = &[
    spec("direction", ParamKind::Choice(DIRECTIONS), None),
    spec("host", ParamKind::Choice(HOST_MEMORY), Some("pinned")),
    spec("bytes", ParamKind::Size, None),
];

/// Which way a copy goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Direction {
    /// Host to device (upload).
    HostToDevice,
    /// Device to host (download).
    DeviceToHost,
}

/// How the host side of a copy was allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum HostMemory {
    /// Page-locked memory (cuMemAllocHost with flags 0): the copy engine reads it directly.
    Pinned,
    /// Ordinary malloc'd memory: the driver stages it through pinned buffers.
    Pageable,
}

/// One host <-> device copy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TransferPoint {
    /// Which way the bytes go.
    pub direction: Direction,
    /// How the host buffer was allocated.
    pub host: HostMemory,
    /// Bytes copied.
    pub bytes: u64,
}

/// A pageable copy, which the driver pipelines through pinned staging buffers:
/// the host copies one staging chunk while the copy engine moves the previous one.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StagedParams {
    /// Fixed cost per copy, microseconds.
    pub latency_us: f64,
    /// Bandwidth of the host-side copy between pageable and staging memory, 10^9 B/s.
    pub host_gb_per_s: f64,
    /// Size of one staging chunk, bytes.
    pub staging_bytes: u64,
}

/// Transfer parameters, fitted by `vramlab calibrate` on sizes the transfer suite never uses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TransferParams {
    /// Where these numbers came from (command, machine, date).
    pub source: String,
    /// The copy sizes calibration measured; reports exclude them from validation.
    pub calibration_bytes: Vec<u64>,
    /// Cost of launching one kernel behind another on a stream, microseconds.
    pub kernel_launch_us: f64,
    /// Pinned uploads.
    pub h2d_pinned: LinkParams,
    /// Pinned downloads.
    pub d2h_pinned: LinkParams,
    /// Pageable uploads (the DMA stage uses `h2d_pinned`'s bandwidth).
    pub h2d_pageable: StagedParams,
    /// Pageable downloads (the DMA stage uses `d2h_pinned`'s bandwidth).
    pub d2h_pageable: StagedParams,
}

/// One measured copy: its size and its median time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Bytes copied.
    pub bytes: u64,
    /// Median time, microseconds.
    pub time_us: f64,
}

/// The copy sizes calibration measures: 3 x 2^k for k = 10, 12, ..., 28 (3 KiB to 768 MiB).
/// None is a power of two, so none coincides with a point of the transfer suite.
pub fn calibration_sizes() -> Vec<u64> {
    (10..=28).step_by(2).map(|k| 3u64 << k).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn calibration_sizes_are_never_powers_of_two() {
        let sizes = super::calibration_sizes();
        assert_eq!(sizes.len(), 10);
        assert!(sizes.iter().all(|s| !s.is_power_of_two()));
    }
}
