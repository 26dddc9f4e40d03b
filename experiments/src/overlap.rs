//! Copy/compute overlap: a pinned upload cut into chunks over several streams, each chunk followed by a kernel.
//!
//! family: 2 Overlap(OverlapPoint)

use crate::family::{spec, AxisScale, FamilyInfo, ParamKind, ParamReader, ParamSpec};
use crate::*;

/// The family's row: name, parameters, axis, compared metric, machine parts, calibration.
pub(crate) const FAMILY: FamilyInfo = FamilyInfo {
    name: "overlap",
    params: OVERLAP_PARAMS,
    x_param: "streams",
    primary_metric: "speedup",
    uses_machine_parts: true,
    axes: (AxisScale::Linear, AxisScale::Linear),
    drawn_as_agreement: false,
    also_plotted: &[],
    calibration: None,
    former_name: None,
};

/// The typed point of checked parameters.
pub(crate) fn point(p: &ParamReader<'_>) -> OverlapPoint {
    OverlapPoint {
        bytes: p.int("bytes") as u64,
        chunks: p.int("chunks") as u32,
        streams: p.int("streams") as u32,
        kernel_us: p.float("kernel_us"),
    }
}

const OVERLAP_PARAMS: &[ParamSpec] = &[
    spec("bytes", ParamKind::Size, None),
    spec("chunks", ParamKind::Count { min: 1, max: 4096 }, None),
    spec("streams", ParamKind::Count { min: 1, max: 64 }, None),
    spec("kernel_us", ParamKind::NonNegative, None),
];

/// A pinned upload of `bytes` split into `chunks`, issued round-robin on `streams`,
/// each chunk followed on its stream by a kernel of `kernel_us / chunks` microseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OverlapPoint {
    /// Total bytes uploaded.
    pub bytes: u64,
    /// How many pieces the upload is cut into.
    pub chunks: u32,
    /// How many streams the pieces are spread over.
    pub streams: u32,
    /// Total kernel time over all chunks, in microseconds.
    pub kernel_us: f64,
}

impl OverlapPoint {
    /// The byte size of chunk `index`; the last chunk takes the remainder.
    pub fn chunk_bytes(&self, index: u32) -> u64 {
        let base = self.bytes / u64::from(self.chunks);
        if index + 1 == self.chunks {
            self.bytes - base * u64::from(self.chunks - 1)
        } else {
            base
        }
    }
}

/// The metrics of an overlap point: `time_us`, `serial_time_us` and `speedup` (serial / overlapped).
pub fn overlap_metrics(time_us: f64, serial_time_us: f64) -> Metrics {
    Metrics::from([
        ("time_us".to_string(), time_us),
        ("serial_time_us".to_string(), serial_time_us),
        ("speedup".to_string(), serial_time_us / time_us),
    ])
}
