//! Managed-memory migration: a kernel reading host-written managed memory, on demand or prefetched.
//!
//! family: 10 Migration(MigrationPoint) [MigrationParams] {MigrationSample}

use serde::{Deserialize, Serialize};

use crate::family::{spec, AxisScale, CalibrationInfo, FamilyInfo, ParamKind, ParamReader, ParamSpec};
use crate::*;

/// The family's row: name, parameters, axis, compared metric, machine parts, calibration.
pub(crate) const FAMILY: FamilyInfo = FamilyInfo {
    name: "migration",
    params: MIGRATION_PARAMS,
    x_param: "bytes",
    primary_metric: "gb_per_s",
    uses_machine_parts: true,
    axes: (AxisScale::Bytes, AxisScale::Log),
    drawn_as_agreement: false,
    also_plotted: &[],
    calibration: Some(CalibrationInfo {
        measures: "managed-memory reads, with and without prefetch",
        machine: true,
        in_all: true,
        cases: || 2 * migration_calibration_bytes().len(),
    }),
    former_name: None,
};

/// The typed point of checked parameters.
pub(crate) fn point(p: &ParamReader<'_>) -> MigrationPoint {
    MigrationPoint {
        bytes: p.int("bytes") as u64,
        prefetch: p.text("mode") == "prefetch",
    }
}

const MIGRATION_MODES: &[&str] = &["on-demand", "prefetch"];

const MIGRATION_PARAMS: &[ParamSpec] = &[
    // Managed bytes the host writes and a kernel then reads.
    spec("bytes", ParamKind::Size, None),
    // on-demand: the kernel's page faults move the pages; prefetch: cuMemPrefetchAsync first.
    spec("mode", ParamKind::Choice(MIGRATION_MODES), None),
];

/// A kernel reads `bytes` of managed memory the host wrote last; with `prefetch` the pages are
/// moved to the device first (cuMemPrefetchAsync), else the kernel's page faults move them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MigrationPoint {
    /// Managed bytes read.
    pub bytes: u64,
    /// Whether they are prefetched before the kernel runs.
    pub prefetch: bool,
}

/// A kernel reading host-written managed memory: `latency + bytes / bandwidth` with the pages
/// moved by the kernel's faults or prefetched first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MigrationParams {
    /// Where these numbers came from.
    pub source: String,
    /// Pages moved by faults.
    pub on_demand: LinkParams,
    /// Pages prefetched, then read.
    pub prefetch: LinkParams,
    /// The sizes calibration measured; reports exclude them.
    pub calibration_bytes: Vec<u64>,
}

/// One measured read of host-written managed memory.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MigrationSample {
    /// Bytes read.
    pub bytes: u64,
    /// Whether they were prefetched first.
    pub prefetch: bool,
    /// Median time of prefetch (if any) plus the kernel, microseconds.
    pub time_us: f64,
}

/// The migration calibration sizes: 3 x 4^k MiB, 3 MiB to 3 GiB (the suite reads powers of two).
pub fn migration_calibration_bytes() -> Vec<u64> {
    (0..6).map(|k| (3u64 << 20) << (2 * k)).collect()
}

/// Every number is checked by [`crate::Profile::parse`]; nothing more is asked of them together.
impl crate::profile::Section for MigrationParams {}

/// This family's samples have kept their form since calibrations first wrote them.
impl crate::calibration::EarlierSamples for MigrationSample {}

