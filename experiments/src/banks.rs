//! Shared-memory banks: one warp's load, its wavefronts and what a conflict costs.
//!
//! family: 4 Banks(BankPoint) [BankParams] {BankSample}

use serde::{Deserialize, Serialize};

use crate::family::{spec, AxisScale, CalibrationInfo, FamilyInfo, ParamKind, ParamReader, ParamSpec};

/// The family's row: name, parameters, axis, compared metric, machine parts, calibration.
pub(crate) const FAMILY: FamilyInfo = FamilyInfo {
    name: "banks",
    params: BANK_PARAMS,
    x_param: "stride",
    primary_metric: "cycles",
    uses_machine_parts: false,
    axes: (AxisScale::Linear, AxisScale::Linear),
    drawn_as_agreement: false,
    also_plotted: &[],
    calibration: Some(CalibrationInfo {
        measures: "dependent shared-memory loads (banks)",
        machine: false,
        in_all: true,
        cases: || bank_calibration_cases().len(),
    }),
    former_name: Some("shared"),
};

/// The typed point of checked parameters.
pub(crate) fn point(p: &ParamReader<'_>) -> BankPoint {
    BankPoint {
        width: p.int("width") as u32,
        stride: p.int("stride") as u32,
    }
}

const BANK_PARAMS: &[ParamSpec] = &[
    // Shared loads come in 32-, 64- and 128-bit widths.
    spec("width", ParamKind::OneOf(&[4, 8, 16]), Some("4")),
    // Lane i loads element i x stride; 0 makes every lane load the same element.
    spec("stride", ParamKind::Count { min: 0, max: 64 }, None),
];

/// One warp's shared-memory load: lane `i` loads `width` bytes at element `i x stride`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BankPoint {
    /// Bytes per lane: 4, 8 or 16.
    pub width: u32,
    /// Elements between neighbouring lanes; 0 means every lane loads the same element.
    pub stride: u32,
}

/// Shared memory: `banks` banks of `bank_bytes` each; a warp access that needs `w` wavefronts
/// (passes over the banks) takes `base_cycles + (w - 1) x wavefront_cycles` in a dependent chain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BankParams {
    /// Where these numbers came from.
    pub source: String,
    /// Banks (32 on every architecture since compute capability 2.0).
    pub banks: u32,
    /// Bytes per bank word.
    pub bank_bytes: u32,
    /// Cycles of one dependent 4-byte shared load that needs one wavefront.
    pub base_cycles: f64,
    /// Cycles each further wavefront adds.
    pub wavefront_cycles: f64,
    /// The (width, stride) cases calibration measured; reports exclude them from validation.
    pub calibration_cases: Vec<(u32, u32)>,
}

/// One measured shared-memory access pattern.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BankSample {
    /// Bytes each lane loads (4, 8 or 16).
    pub width: u32,
    /// Distance between neighbouring lanes, in elements of `width` (0: all lanes the same).
    pub stride: u32,
    /// Median cycles per dependent load.
    pub cycles: f64,
}

/// The shared-memory cases calibration measures: 4-byte loads at strides 1, 2, 4 and 8
/// (1 to 8 wavefronts). Every other width, stride and broadcast is left for validation.
pub fn bank_calibration_cases() -> Vec<(u32, u32)> {
    vec![(4, 1), (4, 2), (4, 4), (4, 8)]
}

impl crate::profile::Section for BankParams {
    const UPPER_BOUNDS: &'static [(&'static str, f64)] = &[("banks", 1024.0), ("bank_bytes", 1024.0)];

    fn validate(&self, origin: &str) -> crate::Result<()> {
        // Written so that NaN fails too.
        let physical = self.base_cycles > 0.0 && self.wavefront_cycles >= 0.0;
        if self.banks == 0 || self.bank_bytes == 0 || !physical {
            return Err(crate::Error::Invalid(format!(
                "{origin}: [banks] needs banks, bank_bytes and base_cycles > 0 and wavefront_cycles >= 0"
            )));
        }
        Ok(())
    }
}

/// This family's samples have kept their form since calibrations first wrote them.
impl crate::calibration::EarlierSamples for BankSample {}

