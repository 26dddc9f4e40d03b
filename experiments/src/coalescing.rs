//! Coalescing: global-memory reads with a stride, offset and lane mask, served by the L2 or DRAM.
//!
//! family: 5 Coalescing(CoalescingPoint) [CoalescingParams] {CoalescingSample}

use serde::{Deserialize, Serialize};

use crate::family::{spec, AxisScale, CalibrationInfo, FamilyInfo, ParamKind, ParamReader, ParamSpec};
use crate::*;

/// The family's row: name, parameters, axis, compared metric, machine parts, calibration.
pub(crate) const FAMILY: FamilyInfo = FamilyInfo {
    name: "coalescing",
    params: COALESCING_PARAMS,
    x_param: "stride",
    primary_metric: "gb_per_s",
    uses_machine_parts: false,
    axes: (AxisScale::Linear, AxisScale::Log),
    drawn_as_agreement: false,
    also_plotted: &[],
    calibration: Some(CalibrationInfo {
        measures: "global-memory reads (coalescing, L2 and DRAM)",
        machine: false,
        in_all: true,
        cases: || coalescing_calibration_cases().len(),
    }),
    former_name: Some("global"),
};

/// The typed point of checked parameters.
pub(crate) fn point(p: &ParamReader<'_>) -> CoalescingPoint {
    CoalescingPoint {
        width: p.int("width") as u32,
        stride: p.int("stride") as u32,
        offset: p.int("offset") as u32,
        active_lanes: p.int("active_lanes") as u32,
        bytes: p.int("bytes") as u64,
        dynamic_shared: p.int("dynamic_shared") as u32,
    }
}

const COALESCING_PARAMS: &[ParamSpec] = &[
    // Global loads come in 8-, 16-, 32-, 64- and 128-bit widths.
    spec("width", ParamKind::OneOf(&[1, 2, 4, 8, 16]), Some("4")),
    // Lane i reads element offset + i x stride; a stride of 0 would be a broadcast, not a sweep.
    spec("stride", ParamKind::Count { min: 1, max: 64 }, None),
    spec("offset", ParamKind::Count { min: 0, max: 31 }, Some("0")),
    // Lanes 0 .. active_lanes - 1 read; the rest of the warp is masked off.
    spec("active_lanes", ParamKind::Count { min: 1, max: 32 }, Some("32")),
    // The array every warp of the grid reads through, once.
    spec("bytes", ParamKind::Size, Some("1 GiB")),
    // Shared memory each block of the read kernel asks for, only to limit how many blocks an
    // SM holds (occupancy); the kernel does not use it.
    spec("dynamic_shared", ParamKind::Bytes { max: 227 << 10 }, Some("0")),
];

/// The read kernel's launch: this many blocks per SM of [`READ_KERNEL_THREADS`] threads, in a
/// grid-stride loop, so with nothing else limiting occupancy every SM holds 64 warps.
pub const READ_KERNEL_BLOCKS_PER_SM: u32 = 8;

/// Threads per block of the read kernel.
pub const READ_KERNEL_THREADS: u32 = 256;

/// Global reads: lane `i < active_lanes` of every warp reads `width` bytes at element
/// `warp x 32 x stride + offset + i x stride` of an array of `bytes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CoalescingPoint {
    /// Bytes per lane: 1, 2, 4, 8 or 16.
    pub width: u32,
    /// Elements between neighbouring lanes (>= 1).
    pub stride: u32,
    /// Elements every warp's accesses are shifted by (misalignment).
    pub offset: u32,
    /// Lanes that read.
    pub active_lanes: u32,
    /// The array read, bytes.
    pub bytes: u64,
    /// Dynamic shared memory per block (limits resident blocks; unused by the kernel).
    pub dynamic_shared: u32,
}

impl CoalescingPoint {
    /// The shape calibration reads: every lane active, no misalignment, no shared memory.
    pub fn calibration(width: u32, stride: u32, bytes: u64) -> CoalescingPoint {
        CoalescingPoint {
            width,
            stride,
            offset: 0,
            active_lanes: 32,
            bytes,
            dynamic_shared: 0,
        }
    }

    /// How many times the kernel reads through the array: enough for 1 GiB of requests, so
    /// that an array small enough to stay in the L2 still takes long enough to time.
    pub fn passes(&self) -> u32 {
        ((1u64 << 30) / self.bytes.max(1)).clamp(1, 4096) as u32
    }

    /// Bytes one warp's active lanes ask for.
    pub fn useful_bytes_per_warp(&self) -> u32 {
        self.active_lanes * self.width
    }

    /// Warps needed to read through the whole array once.
    pub fn warps(&self) -> u64 {
        let elements = self.bytes / u64::from(self.width);
        elements.saturating_sub(u64::from(self.offset)) / (32 * u64::from(self.stride))
    }
}

/// The metrics of a coalescing point from its time: `time_us` and `gb_per_s`, the useful
/// bytes (what active lanes asked for) per second, 10^9 B/s.
pub fn coalescing_metrics(time_us: f64, point: &CoalescingPoint) -> Metrics {
    let useful =
        point.warps() as f64 * f64::from(point.active_lanes) * f64::from(point.width) * f64::from(point.passes());
    Metrics::from([
        ("time_us".to_string(), time_us),
        ("gb_per_s".to_string(), useful / time_us / 1e3),
    ])
}

/// Global memory as the coalescing model sees it: reads are served in `sector_bytes` sectors
/// of `line_bytes` lines; the L2 holds `l2_bytes`; DRAM is read in `dram_fetch_bytes` pieces.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CoalescingParams {
    /// Where these numbers came from.
    pub source: String,
    /// Sector size, bytes (32 on every architecture since compute capability 5.0).
    pub sector_bytes: u32,
    /// Cache line size, bytes (128).
    pub line_bytes: u32,
    /// L2 capacity, bytes (CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE).
    pub l2_bytes: u64,
    /// Bytes DRAM delivers for each piece the L2 asks for (fitted: 32, 64 or 128).
    pub dram_fetch_bytes: u32,
    /// Sustained DRAM read bandwidth for the bytes fetched, 10^9 B/s.
    pub dram_gb_per_s: f64,
    /// DRAM page (row) size, bytes: a read opens every page it touches.
    pub dram_page_bytes: u32,
    /// Rate at which DRAM opens the pages a read touches, in page bytes per second (10^9):
    /// the cost sparse reads pay beyond the bytes they fetch.
    pub dram_page_gb_per_s: f64,
    /// Sustained L2 read bandwidth, 10^9 B/s.
    pub l2_gb_per_s: f64,
    /// 128-byte line requests the L2 answers per second, 10^9: what bounds reads that touch
    /// one sector in each of many lines.
    pub l2_lines_g_per_s: f64,
    /// Time one warp waits for a load served by DRAM, nanoseconds, when few are in flight.
    pub dram_latency_ns: f64,
    /// The same for a load served by the L2.
    pub l2_latency_ns: f64,
    /// What each further 128-byte line one warp's load touches adds to its latency, nanoseconds.
    pub line_latency_ns: f64,
    /// How the latency bound and the bandwidth bound combine: time = (lat^p + bw^p)^(1/p).
    pub overlap_exponent: f64,
    /// The same for reads the L2 serves, whose two bounds meet more sharply (an L2 hit's
    /// latency barely grows with load, a DRAM access's does). Fitted once calibration has a
    /// latency-bound L2 case; profiles calibrated without one have none and use
    /// `overlap_exponent` for both.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l2_overlap_exponent: Option<f64>,
    /// Registers per thread of the read kernel (cuFuncGetAttribute), for its occupancy.
    pub read_kernel_registers: u32,
    /// Fixed cost of the read kernel's launch, microseconds.
    pub launch_us: f64,
    /// The (width, stride, bytes) cases calibration measured; reports exclude them.
    pub calibration_cases: Vec<(u32, u32, u64)>,
}

impl CoalescingParams {
    /// DRAM's bandwidth for a dense read, which fetches every byte and opens every page:
    /// what traffic of other kernels (spilled registers) moves at.
    pub fn dense_dram_gb_per_s(&self) -> f64 {
        1.0 / (1.0 / self.dram_gb_per_s + 1.0 / self.dram_page_gb_per_s)
    }
}

/// One measured global read pattern (all lanes active, no offset).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CoalescingSample {
    /// Bytes per lane.
    pub width: u32,
    /// Elements between lanes.
    pub stride: u32,
    /// Array size, bytes.
    pub bytes: u64,
    /// Median kernel time, microseconds.
    pub time_us: f64,
}

/// The global-memory cases calibration measures, as (width, stride, bytes): dense 16-byte
/// reads of 1 GiB and of 16 MiB (DRAM and L2 bandwidth), dense 1-byte reads of both (one small
/// load in flight per warp: latency bound), dense 4-byte reads of 1 GiB (where the two bounds
/// meet), 4- and 16-byte reads at stride 32 (one element per line and per four lines: DRAM's
/// fetch size and the cost of opening pages), 4-byte reads at stride 32 of 16 MiB (one sector
/// in each of 32 lines per request: the L2's line-request rate), 16-byte reads at stride 32 of
/// 2 MiB (128 warps, one 32-line load in flight each: the latency of a 32-line load), and of
/// 16 MiB (1024 warps: where that latency meets the line-request rate, so how sharply the two
/// combine in the L2). Every other point is left for validation.
///
/// Until 2026-11-24 the 16 MiB case alone set the per-line latency: it sits where the two bounds
/// meet, so the fit could trade the latency against the exponent, and took 0.6-0.9 ns a line
/// where latency-bound hold-out reads showed about 4.
pub fn coalescing_calibration_cases() -> Vec<(u32, u32, u64)> {
    vec![
        (16, 1, 1 << 30),
        (16, 1, 16 << 20),
        (1, 1, 1 << 30),
        (1, 1, 16 << 20),
        (4, 1, 1 << 30),
        (4, 32, 1 << 30),
        (16, 32, 1 << 30),
        (4, 32, 16 << 20),
        (16, 32, 16 << 20),
        (16, 32, 2 << 20),
    ]
}

impl crate::profile::Section for CoalescingParams {
    const UPPER_BOUNDS: &'static [(&'static str, f64)] = &[
        ("sector_bytes", 1_048_576.0),
        ("line_bytes", 1_048_576.0),
        ("dram_fetch_bytes", 1_048_576.0),
        ("dram_page_bytes", 1_048_576.0),
    ];

    fn validate(&self, origin: &str) -> crate::Result<()> {
        for (name, value) in [
            ("coalescing.dram_gb_per_s", self.dram_gb_per_s),
            ("coalescing.dram_page_gb_per_s", self.dram_page_gb_per_s),
            ("coalescing.l2_gb_per_s", self.l2_gb_per_s),
            ("coalescing.l2_lines_g_per_s", self.l2_lines_g_per_s),
            ("coalescing.dram_latency_ns", self.dram_latency_ns),
            ("coalescing.l2_latency_ns", self.l2_latency_ns),
            ("coalescing.line_latency_ns", self.line_latency_ns),
        ] {
            if !(value.is_finite() && value > 0.0) {
                return Err(crate::Error::Invalid(format!("{origin}: {name} = {value}: must be positive")));
            }
        }
        for (name, value) in [
            ("coalescing.overlap_exponent", Some(self.overlap_exponent)),
            ("coalescing.l2_overlap_exponent", self.l2_overlap_exponent),
        ] {
            if let Some(value) = value.filter(|v| v.is_nan() || *v < 1.0) {
                return Err(crate::Error::Invalid(format!("{origin}: {name} = {value}: must be at least 1")));
            }
        }
        Ok(())
    }
}

/// Coalescing cases added to the calibration after its nine of c97d9c0 (2026-11-22) that a fit
/// can do without: the latency-bound L2 case of a65985a (2026-11-24), without which the L2's
/// reads share DRAM's overlap exponent (`CoalescingParams::l2_overlap_exponent` is `None`).
pub(crate) const CASES_ADDED_LATER: [(u32, u32, u64); 1] = [(16, 32, 2 << 20)];

/// Coalescing samples without the read kernel's registers or a case of
/// [`coalescing_calibration_cases`] other than those added later (the three 4-byte cases of
/// 5abb136 and the eight of `reports/reference/h100/global-v3/`, both 2026-11-22, before
/// c97d9c0's nine): set aside.
impl crate::calibration::EarlierSamples for CoalescingSample {
    fn set_aside_parsed(samples: &mut Vec<Self>, read_kernel_registers: u32) -> Option<String> {
        if samples.is_empty() {
            return None;
        }
        let have: Vec<(u32, u32, u64)> = samples.iter().map(|s| (s.width, s.stride, s.bytes)).collect();
        let lacks: Vec<(u32, u32, u64)> = coalescing_calibration_cases()
            .into_iter()
            .filter(|case| !CASES_ADDED_LATER.contains(case) && !have.contains(case))
            .collect();
        if lacks.is_empty() && read_kernel_registers != 0 {
            return None;
        }
        let case = |&(width, stride, bytes): &(u32, u32, u64)| {
            format!("{width} B at stride {stride} of {}", crate::format_bytes(bytes))
        };
        let mut missing: Vec<String> = lacks.iter().map(case).collect();
        if read_kernel_registers == 0 {
            missing.push("the read kernel's registers".to_string());
        }
        let count = samples.len();
        samples.clear();
        Some(format!(
            "coalescing: {count} read cases of an earlier list, lacking {}, which the fit needs",
            missing.join(", ")
        ))
    }
}

