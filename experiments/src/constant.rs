//! Constant memory: a warp naming 1..32 distinct words, served one address per pass, warm or cold.
//!
//! family: 7 Constant(ConstantPoint) [ConstantParams] {ConstantSample}

use serde::{Deserialize, Serialize};

use crate::family::{spec, AxisScale, CalibrationInfo, FamilyInfo, ParamKind, ParamReader, ParamSpec};

/// The family's row: name, parameters, axis, compared metric, machine parts, calibration.
pub(crate) const FAMILY: FamilyInfo = FamilyInfo {
    name: "constant",
    params: CONSTANT_PARAMS,
    x_param: "distinct",
    primary_metric: "cycles",
    uses_machine_parts: false,
    axes: (AxisScale::Linear, AxisScale::Linear),
    drawn_as_agreement: false,
    also_plotted: &[],
    calibration: Some(CalibrationInfo {
        measures: "constant-memory reads",
        machine: false,
        in_all: true,
        cases: || constant_calibration_cases().len(),
    }),
    former_name: None,
};

/// The typed point of checked parameters.
pub(crate) fn point(p: &ParamReader<'_>) -> ConstantPoint {
    ConstantPoint {
        distinct: p.int("distinct") as u32,
        cold: p.text("cache") == "cold",
    }
}

const CACHE_STATES: &[&str] = &["warm", "cold"];

const CONSTANT_PARAMS: &[ParamSpec] = &[
    // How many different words one warp access names (1 = every lane the same: a broadcast).
    spec("distinct", ParamKind::Count { min: 1, max: 32 }, None),
    // warm: the same words every access; cold: every access misses the SM's constant cache.
    spec("cache", ParamKind::Choice(CACHE_STATES), Some("warm")),
];

/// One warp's constant-memory read: `distinct` different words, from a warm or cold cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConstantPoint {
    /// Different words the warp's lanes name.
    pub distinct: u32,
    /// Whether every access misses the SM's constant cache.
    pub cold: bool,
}

/// Constant memory serves one address per pass: a warp access naming `n` words takes
/// `first + (n - 1) x per_extra` cycles in a dependent chain, warm or cold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConstantParams {
    /// Where these numbers came from.
    pub source: String,
    /// Cycles of a broadcast (one word) from a warm constant cache.
    pub warm_cycles: f64,
    /// Cycles each further distinct word adds, warm.
    pub warm_per_extra: f64,
    /// Cycles of a broadcast that misses the constant cache.
    pub cold_cycles: f64,
    /// Cycles each further distinct word adds, cold.
    pub cold_per_extra: f64,
    /// Distinct 128-byte lines the SM's constant cache keeps: a warm access naming more, in a
    /// repeating chain, misses on every line (as cold).
    pub capacity_lines: u32,
    /// The (distinct, cold) cases calibration measured; reports exclude them.
    pub calibration_cases: Vec<(u32, bool)>,
}

/// One measured constant-memory pattern.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ConstantSample {
    /// Distinct words per warp access.
    pub distinct: u32,
    /// Whether every access missed the constant cache.
    pub cold: bool,
    /// Median cycles per dependent access.
    pub cycles: f64,
}

/// The constant cases calibration measures: 1 and 2 distinct words, warm and cold (the two
/// lines), and warm chains of 14, 15, 17, 18, 19 and 24 distinct lines (where the cache runs
/// out). The suites' counts (powers of two, 3, 5, 7, 12, 20, 31) are left for validation.
pub fn constant_calibration_cases() -> Vec<(u32, bool)> {
    vec![
        (1, false),
        (2, false),
        (1, true),
        (2, true),
        (14, false),
        (15, false),
        (17, false),
        (18, false),
        (19, false),
        (24, false),
    ]
}

/// Every number is checked by [`crate::Profile::parse`]; nothing more is asked of them together.
impl crate::profile::Section for ConstantParams {}

/// This family's samples have kept their form since calibrations first wrote them.
impl crate::calibration::EarlierSamples for ConstantSample {}

