//! Growth: a device buffer doubled by copying, managed memory or VMM, with or without a reserve.
//!
//! family: 8 Growth(GrowthPoint) [GrowthParams] {GrowthSample}

use serde::{Deserialize, Serialize};

use crate::family::{spec, AxisScale, CalibrationInfo, FamilyInfo, ParamKind, ParamReader, ParamSpec};
use crate::*;

/// The family's row: name, parameters, axis, compared metric, machine parts, calibration.
pub(crate) const FAMILY: FamilyInfo = FamilyInfo {
    name: "growth",
    params: GROWTH_PARAMS,
    x_param: "bytes",
    primary_metric: "grow_us",
    uses_machine_parts: true,
    axes: (AxisScale::Bytes, AxisScale::Log),
    drawn_as_agreement: false,
    also_plotted: &[("peak_bytes", "peak device memory")],
    calibration: Some(CalibrationInfo {
        measures: "buffer grows, three strategies with and without a reserve",
        machine: true,
        in_all: true,
        cases: || 6 * growth_calibration_bytes().len(),
    }),
    former_name: None,
};

/// The typed point of checked parameters.
pub(crate) fn point(p: &ParamReader<'_>) -> GrowthPoint {
    GrowthPoint {
        strategy: match p.text("strategy").as_str() {
            "copy" => GrowthStrategy::Copy,
            "managed" => GrowthStrategy::Managed,
            _ => GrowthStrategy::Vmm,
        },
        reserve: p.text("reserve") == "yes",
        bytes: p.int("bytes") as u64,
    }
}

const GROWTH_STRATEGIES: &[&str] = &["copy", "managed", "vmm"];

const YES_NO: &[&str] = &["no", "yes"];

const GROWTH_PARAMS: &[ParamSpec] = &[
    // copy: cuMemAlloc the new size, copy, free the old; managed: managed memory prefetched to
    // the device; vmm: physical chunks mapped into a reserved virtual range.
    spec("strategy", ParamKind::Choice(GROWTH_STRATEGIES), None),
    // yes: room for the largest size is set aside before the first grow.
    spec("reserve", ParamKind::Choice(YES_NO), Some("no")),
    // The size the buffer is doubled to (from half of it).
    spec("bytes", ParamKind::Size, None),
];

/// How a device buffer grows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GrowthStrategy {
    /// cuMemAlloc the new size, copy the contents, cuMemFree the old.
    Copy,
    /// Managed memory (cuMemAllocManaged), prefetched to the device (cuMemPrefetchAsync).
    Managed,
    /// Physical chunks mapped into a reserved virtual range (cuMemCreate, cuMemMap).
    Vmm,
}

impl GrowthStrategy {
    /// Every strategy, in the order reports show them.
    pub const ALL: [GrowthStrategy; 3] = [GrowthStrategy::Copy, GrowthStrategy::Managed, GrowthStrategy::Vmm];

    /// The name experiment files use.
    pub fn name(self) -> &'static str {
        match self {
            GrowthStrategy::Copy => "copy",
            GrowthStrategy::Managed => "managed",
            GrowthStrategy::Vmm => "vmm",
        }
    }
}

/// One grow: the buffer, made by `strategy`, is doubled from `bytes / 2` to `bytes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GrowthPoint {
    /// How it grows.
    pub strategy: GrowthStrategy,
    /// Whether room for the largest size was set aside before the first grow.
    pub reserve: bool,
    /// The size it grows to.
    pub bytes: u64,
}

/// The metrics of a grow: `ok` (1 if it succeeded), `grow_us` (only when it did), and
/// `peak_bytes`, the device memory the strategy held at its highest during the grow.
pub fn growth_metrics(grow_us: Option<f64>, peak_bytes: u64) -> Metrics {
    let mut metrics = Metrics::from([
        ("ok".to_string(), f64::from(u8::from(grow_us.is_some()))),
        ("peak_bytes".to_string(), peak_bytes as f64),
    ]);
    if let Some(us) = grow_us {
        metrics.insert("grow_us".to_string(), us);
    }
    metrics
}

/// What one grow costs with one strategy: `fixed_us + us_per_gib x (size grown to, GiB)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GrowthCost {
    /// The strategy.
    pub strategy: GrowthStrategy,
    /// Whether room was reserved up front.
    pub reserve: bool,
    /// Calls and synchronization, microseconds.
    pub fixed_us: f64,
    /// What each GiB of the new size adds (allocating, mapping, copying the old half), microseconds.
    pub us_per_gib: f64,
}

/// Growing a device buffer by doubling: what each strategy's grow costs, and the memory the
/// device has free when a series starts (which decides where a strategy runs out).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GrowthParams {
    /// Where these numbers came from.
    pub source: String,
    /// Device memory free at the start of a series (cuMemGetInfo), bytes.
    pub free_bytes: u64,
    /// One cost per strategy and reserve choice.
    pub costs: Vec<GrowthCost>,
    /// The sizes calibration grew to; reports exclude them.
    pub calibration_bytes: Vec<u64>,
}

impl GrowthParams {
    /// The cost line of one strategy and reserve choice.
    pub fn cost(&self, strategy: GrowthStrategy, reserve: bool) -> Option<&GrowthCost> {
        self.costs
            .iter()
            .find(|c| c.strategy == strategy && c.reserve == reserve)
    }
}

/// The share of free device memory `reserve = yes` sets aside before the first grow (vramlab's
/// choice: room for every size a series tries, short of the whole device).
pub(crate) const GROWTH_RESERVE_FRACTION: f64 = 0.85;

/// VMM and the driver hand out memory in 2 MiB granules (cuMemGetAllocationGranularity on
/// the H100 and H200, GPU.md).
pub const VMM_GRANULE: u64 = 2 << 20;

/// Bytes a growth point's `reserve = yes` sets aside, given the device's free memory.
pub fn reserved_bytes(free_bytes: u64) -> u64 {
    ((free_bytes as f64 * GROWTH_RESERVE_FRACTION) as u64) / VMM_GRANULE * VMM_GRANULE
}

/// The sizes a grow to `bytes` goes from and to: `bytes` rounded up to the granule, and half that.
pub fn grow_sizes(bytes: u64) -> (u64, u64) {
    let new = bytes.div_ceil(VMM_GRANULE) * VMM_GRANULE;
    (new / 2, new)
}

/// Managed memory is never asked for beyond this share of free device memory: oversubscribing
/// managed memory can hang a shared GPU (see GPU.md), so a managed grow that would stops there.
pub const MANAGED_LIMIT_FRACTION: f64 = 0.95;

/// One measured grow.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GrowthSample {
    /// The strategy.
    pub strategy: GrowthStrategy,
    /// Whether room was reserved up front.
    pub reserve: bool,
    /// The size grown to (from half of it).
    pub bytes: u64,
    /// Host time of the grow, synchronized, microseconds.
    pub grow_us: f64,
}

/// The sizes the growth calibration doubles to: 3 MiB x 2^k, 6 MiB to 48 GiB (the suites
/// double through powers of two, so none of these is a validation point, yet they span the
/// same range).
pub fn growth_calibration_bytes() -> Vec<u64> {
    (1..=14).map(|k| (3u64 << 20) << k).collect()
}

/// Every number is checked by [`crate::Profile::parse`]; nothing more is asked of them together.
impl crate::profile::Section for GrowthParams {}

/// This family's samples have kept their form since calibrations first wrote them.
impl crate::calibration::EarlierSamples for GrowthSample {}

