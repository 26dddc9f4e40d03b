//! Experiment families: what every family has (its row, its parameters' kinds), and the
//! [`Family`] and [`Workload`] enums made from the registry. Each family's own parts live in its
//! module (`transfer.rs`, `banks.rs`, ...).

use serde::{Deserialize, Serialize};

use crate::params::{Metrics, ParamValue, Params};

macro_rules! family_enums {
    ($( $(#[$doc:meta])* $module:ident : $Variant:ident($Point:ty) $([$Section:ty])? $({$Sample:ty})? ),* $(,)?) => {
        /// The kinds of experiment vramlab knows how to predict and measure
        /// ([`crate::for_each_family!`] lists them).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum Family {
            $( $(#[$doc])* $Variant, )*
        }

        /// The typed work at one point: what a backend actually runs.
        #[derive(Debug, Clone, Copy, PartialEq)]
        pub enum Workload {
            $( $(#[$doc])* $Variant($Point), )*
        }

        /// Every family's row, in the enum's order.
        const FAMILIES: &[FamilyInfo] = &[ $( crate::$module::FAMILY, )* ];

        /// Each family's module name, as the registry gives it.
        #[cfg(test)]
        const MODULES: &[&str] = &[ $( stringify!($module), )* ];

        impl Family {
            /// Every family, in the order `vramlab list` shows them.
            pub const ALL: [Family; FAMILIES.len()] = [ $( Family::$Variant, )* ];

            /// Builds the typed point from checked parameters.
            pub(crate) fn workload(self, params: &Params) -> Workload {
                let reader = ParamReader { params };
                match self {
                    $( Family::$Variant => Workload::$Variant(crate::$module::point(&reader)), )*
                }
            }
        }

        impl Workload {
            /// The family this point belongs to.
            pub fn family(&self) -> Family {
                match self {
                    $( Workload::$Variant(_) => Family::$Variant, )*
                }
            }
        }
    };
}
for_each_family!(family_enums);

/// How a parameter's values are written and checked.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ParamKind {
    /// A positive byte count; accepts "256 MiB" and `log2` ranges.
    Size,
    /// A byte count that may be zero, at most `max`.
    Bytes { max: u64 },
    /// One of a few whole numbers.
    OneOf(&'static [i64]),
    /// A whole number in `min..=max`.
    Count { min: i64, max: i64 },
    /// A non-negative real number.
    NonNegative,
    /// One word of a fixed set.
    Choice(&'static [&'static str]),
}

/// One parameter a family takes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ParamSpec {
    pub(crate) name: &'static str,
    pub(crate) kind: ParamKind,
    pub(crate) default: Option<&'static str>,
}

pub(crate) const fn spec(name: &'static str, kind: ParamKind, default: Option<&'static str>) -> ParamSpec {
    ParamSpec { name, kind, default }
}

/// How a family's sweeps are drawn along an axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AxisScale {
    /// Evenly spaced values.
    Linear,
    /// Powers of ten.
    Log,
    /// Byte counts, in powers of two.
    Bytes,
}

/// What `vramlab calibrate --part NAME` measures for a family, beside its name.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CalibrationInfo {
    pub(crate) measures: &'static str,
    pub(crate) machine: bool,
    pub(crate) in_all: bool,
    pub(crate) cases: fn() -> usize,
}

/// What the rest of vramlab needs to know of a family: its name, parameters, axis, compared
/// metric, whether its model reads the machine's parts of a profile, how its sweeps are drawn,
/// and what its calibration part measures. Each family's row lives in its own module.
pub(crate) struct FamilyInfo {
    pub(crate) name: &'static str,
    pub(crate) params: &'static [ParamSpec],
    pub(crate) x_param: &'static str,
    pub(crate) primary_metric: &'static str,
    pub(crate) uses_machine_parts: bool,
    pub(crate) axes: (AxisScale, AxisScale),
    /// Whether reports draw it as predicted against measured, which reads best for an exact
    /// model swept over many parameters, rather than along its axis.
    pub(crate) drawn_as_agreement: bool,
    /// Further metrics reports plot along its axis, beside the compared one, with their titles.
    pub(crate) also_plotted: &'static [(&'static str, &'static str)],
    pub(crate) calibration: Option<CalibrationInfo>,
    /// The name its profile section and calibration part had before each family had one name
    /// in every layer, still read.
    pub(crate) former_name: Option<&'static str>,
}

/// Checked parameters, read by name as the kind their spec gave them.
pub(crate) struct ParamReader<'a> {
    params: &'a Params,
}

impl ParamReader<'_> {
    pub(crate) fn text(&self, name: &str) -> String {
        match &self.params[name] {
            ParamValue::Text(t) => t.clone(),
            other => other.to_string(),
        }
    }

    pub(crate) fn int(&self, name: &str) -> i64 {
        match self.params[name] {
            ParamValue::Int(v) => v,
            ParamValue::Float(v) => v as i64,
            ParamValue::Text(_) => unreachable!("checked as a number"),
        }
    }

    pub(crate) fn float(&self, name: &str) -> f64 {
        self.params[name].as_f64().expect("checked as a number")
    }
}

impl Family {
    pub(crate) const fn info(self) -> &'static FamilyInfo {
        &FAMILIES[self as usize]
    }

    /// Whether its model reads a profile's machine parts ([`crate::machine_parts`]): copies,
    /// copy/compute overlap, buffer growth, managed migration.
    pub fn uses_machine_parts(self) -> bool {
        self.info().uses_machine_parts
    }

    /// The name used in experiment files, and the name of its module in every layer.
    pub fn name(self) -> &'static str {
        self.info().name
    }

    /// Looks a family up by the name used in experiment files.
    pub fn from_name(name: &str) -> Option<Family> {
        Family::ALL.into_iter().find(|f| f.name() == name)
    }

    pub(crate) fn params(self) -> &'static [ParamSpec] {
        self.info().params
    }

    /// The parameter plotted along the x axis.
    pub fn x_param(self) -> &'static str {
        self.info().x_param
    }

    /// The metric that reports compare between prediction and measurement.
    pub fn primary_metric(self) -> &'static str {
        self.info().primary_metric
    }

    /// The name its profile section and calibration part had before, if it had another.
    pub fn former_name(self) -> Option<&'static str> {
        self.info().former_name
    }

    /// How its sweeps are drawn: the x axis, then the compared metric's.
    pub fn axes(self) -> (AxisScale, AxisScale) {
        self.info().axes
    }

    /// Whether reports draw it as predicted against measured rather than along its axis.
    pub fn drawn_as_agreement(self) -> bool {
        self.info().drawn_as_agreement
    }

    /// Further metrics reports plot along its axis, beside the compared one, with their titles.
    pub fn also_plotted(self) -> &'static [(&'static str, &'static str)] {
        self.info().also_plotted
    }
}

/// The metrics of a point that moves `bytes` in `time_us`: `time_us` and `gb_per_s` (10^9 bytes/s).
pub fn throughput_metrics(time_us: f64, bytes: u64) -> Metrics {
    Metrics::from([
        ("time_us".to_string(), time_us),
        ("gb_per_s".to_string(), bytes as f64 / time_us / 1e3),
    ])
}

/// The metrics of a point measured in clock cycles per access: `cycles`.
pub fn cycles_metrics(cycles: f64) -> Metrics {
    Metrics::from([("cycles".to_string(), cycles)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_family_finds_its_own_row() {
        for (i, row) in FAMILIES.iter().enumerate() {
            assert_eq!(row.name, MODULES[i], "a family's name is its module's");
            assert_eq!(Family::from_name(row.name), Some(Family::ALL[i]));
            assert!(
                row.params.iter().any(|p| p.name == row.x_param),
                "{}: its axis {} is not one of its parameters",
                row.name,
                row.x_param
            );
        }
        let mut names: Vec<_> = FAMILIES.iter().map(|row| row.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), FAMILIES.len());
    }
}
