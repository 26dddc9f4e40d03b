//! Peer reads: one GPU reading another's memory through a VMM mapping or peer access.
//!
//! family: 11 Peer(PeerPoint) [PeerParams] {PeerSample}

use serde::{Deserialize, Serialize};

use crate::family::{spec, AxisScale, CalibrationInfo, FamilyInfo, ParamKind, ParamReader, ParamSpec};
use crate::*;

/// The family's row: name, parameters, axis, compared metric, machine parts, calibration.
pub(crate) const FAMILY: FamilyInfo = FamilyInfo {
    name: "peer",
    params: PEER_PARAMS,
    x_param: "bytes",
    primary_metric: "gb_per_s",
    uses_machine_parts: false,
    axes: (AxisScale::Bytes, AxisScale::Log),
    drawn_as_agreement: false,
    also_plotted: &[],
    calibration: Some(CalibrationInfo {
        measures: "one GPU reading another's memory (two GPUs)",
        machine: false,
        in_all: false,
        cases: || 2 * peer_calibration_bytes().len(),
    }),
    former_name: None,
};

/// The typed point of checked parameters.
pub(crate) fn point(p: &ParamReader<'_>) -> PeerPoint {
    PeerPoint {
        bytes: p.int("bytes") as u64,
        vmm: p.text("mapping") == "vmm",
    }
}

const PEER_MAPPINGS: &[&str] = &["vmm", "peer-access"];

const PEER_PARAMS: &[ParamSpec] = &[
    // Bytes of the first GPU's memory the second reads.
    spec("bytes", ParamKind::Size, None),
    // vmm: cuMemCreate on the first GPU, cuMemSetAccess for both; peer-access: cuMemAlloc and
    // cuCtxEnablePeerAccess.
    spec("mapping", ParamKind::Choice(PEER_MAPPINGS), None),
];

/// The second GPU reads `bytes` of the first's memory, mapped for it by VMM or peer access.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerPoint {
    /// Bytes read.
    pub bytes: u64,
    /// VMM mapping (else cuMemAlloc + cuCtxEnablePeerAccess).
    pub vmm: bool,
}

/// A GPU reading a peer GPU's memory: `latency + bytes / bandwidth` per mapping.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeerParams {
    /// Where these numbers came from.
    pub source: String,
    /// A VMM allocation mapped for both devices.
    pub vmm: LinkParams,
    /// A cuMemAlloc buffer with peer access enabled.
    pub peer_access: LinkParams,
    /// The sizes calibration measured; reports exclude them.
    pub calibration_bytes: Vec<u64>,
}

/// One measured peer read.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PeerSample {
    /// Bytes read.
    pub bytes: u64,
    /// VMM mapping (else peer access).
    pub vmm: bool,
    /// Median kernel time, microseconds.
    pub time_us: f64,
}

/// The peer calibration sizes: 3 x 4^k MiB, 3 MiB to 3 GiB (the suite reads powers of two).
pub fn peer_calibration_bytes() -> Vec<u64> {
    (0..6).map(|k| (3u64 << 20) << (2 * k)).collect()
}

/// Every number is checked by [`crate::Profile::parse`]; nothing more is asked of them together.
impl crate::profile::Section for PeerParams {}

/// This family's samples have kept their form since calibrations first wrote them.
impl crate::calibration::EarlierSamples for PeerSample {}

