//! Every family's model behind one trait, and the dispatch to them generated from the registry
//! ([`experiments::for_each_family!`]): a family without a model in `sim/src/<family>.rs` does
//! not compile.

use experiments::{Calibration, Family, Metrics, Params, Profile, Workload};

use crate::backend::SimError;
use crate::fit::FitError;

/// One family's model: its predictions, the points its profile section was fitted on, its fit,
/// and what `vramlab calibrate` and `vramlab explain` say of it. Implemented by the unit type
/// `FamilyModel` in the family's module.
pub(crate) trait Model {
    /// The family's typed point.
    type Point;

    /// Predicts one point from `profile`.
    fn predict(profile: &Profile, point: &Self::Point) -> Result<Metrics, SimError>;

    /// The points of the family that `profile`'s parameters were fitted on (reports exclude them
    /// from validation).
    fn calibration_points(_profile: &Profile) -> Vec<Params> {
        Vec::new()
    }

    /// Fits the family's part of `profile` from `calibration`, where the calibration measured
    /// it; else keeps `base`'s. `profile` already holds the families before this one in the
    /// registry's order, fitted or kept.
    fn fit(_calibration: &Calibration, _base: Option<&Profile>, _profile: &mut Profile) -> Result<(), FitError> {
        Ok(())
    }

    /// The teaching view of one point, for the families `vramlab explain` knows.
    const EXPLAINS: bool = false;

    /// The working behind one point's prediction; only called when [`Model::EXPLAINS`].
    fn explain(_profile: &Profile, _point: &Self::Point) -> Result<String, experiments::Error> {
        unreachable!("only called for families that explain")
    }

    /// The family's pages of the teaching site (`vramlab teach`), where it has any.
    fn teach(_teacher: &crate::teach::Teacher) -> Result<Vec<experiments::TeachPage>, experiments::Error> {
        Ok(Vec::new())
    }

    /// One line on what `profile` says of the family, after a calibration.
    fn summary(_profile: &Profile) -> Option<String> {
        None
    }
}

/// A family's profile section, or the error that says how to add it.
pub(crate) fn required<'a, T>(profile: &Profile, section: &'a Option<T>, family: Family) -> Result<&'a T, SimError> {
    section
        .as_ref()
        .ok_or_else(|| SimError::new(missing_section(profile, family)))
}

/// What predicting and explaining both say of a profile without the family's section.
fn missing_section(profile: &Profile, family: Family) -> String {
    format!(
        "profile '{}' has no [{name}] section; add one with vramlab calibrate --part {name} --into <profile.toml> on a GPU",
        profile.name,
        name = family.name()
    )
}

/// A family's section from a calibration: fitted when it measured `samples`, else kept from
/// the base profile (`None` when there is none to keep).
pub(crate) fn fitted_or_kept<S, T: Clone>(
    samples: &[S],
    kept: Option<&T>,
    fit: impl FnOnce() -> Result<T, FitError>,
) -> Result<Option<T>, FitError> {
    if samples.is_empty() {
        Ok(kept.cloned())
    } else {
        fit().map(Some)
    }
}

macro_rules! model_dispatch {
    ($( $(#[$doc:meta])* $module:ident : $Variant:ident($Point:ty) $([$Section:ty])? $({$Sample:ty})? ),* $(,)?) => {
        /// Predicts one point with its family's model.
        pub(crate) fn predict(profile: &Profile, workload: &Workload) -> Result<Metrics, SimError> {
            match workload {
                $( Workload::$Variant(point) => <crate::$module::FamilyModel as Model>::predict(profile, point), )*
            }
        }

        /// The points of `family` that `profile` was fitted on.
        pub(crate) fn calibration_points(profile: &Profile, family: Family) -> Vec<Params> {
            match family {
                $( Family::$Variant => <crate::$module::FamilyModel as Model>::calibration_points(profile), )*
            }
        }

        /// Fits every family's part, in the registry's order.
        pub(crate) fn fit_families(
            calibration: &Calibration,
            base: Option<&Profile>,
            profile: &mut Profile,
        ) -> Result<(), FitError> {
            $( <crate::$module::FamilyModel as Model>::fit(calibration, base, profile)?; )*
            Ok(())
        }

        /// The families `vramlab explain` knows.
        pub(crate) fn explaining_families() -> Vec<Family> {
            let mut families = Vec::new();
            $( if <crate::$module::FamilyModel as Model>::EXPLAINS {
                families.push(Family::$Variant);
            } )*
            families
        }

        /// The teaching view of one point.
        pub(crate) fn explain_point(profile: &Profile, workload: &Workload) -> Result<String, experiments::Error> {
            match workload {
                $( Workload::$Variant(point) => <crate::$module::FamilyModel as Model>::explain(profile, point), )*
            }
        }

        /// Every family's teaching pages, in the registry's order.
        pub(crate) fn teaching_pages(
            teacher: &crate::teach::Teacher,
        ) -> Result<Vec<experiments::TeachPage>, experiments::Error> {
            let mut pages = Vec::new();
            $( pages.extend(<crate::$module::FamilyModel as Model>::teach(teacher)?); )*
            Ok(pages)
        }

        /// What `profile` says of each family that says something, one line each, named.
        pub fn profile_summary(profile: &Profile) -> Vec<String> {
            let mut lines = Vec::new();
            $( lines.extend(
                <crate::$module::FamilyModel as Model>::summary(profile).map(|line| format!("{}: {line}", stringify!($module))),
            ); )*
            lines
        }
    };
}
experiments::for_each_family!(model_dispatch);

/// A family's profile section for `vramlab explain`, or the error that says how to add it.
pub(crate) fn explained<'a, T>(
    profile: &Profile,
    section: &'a Option<T>,
    family: Family,
) -> Result<&'a T, experiments::Error> {
    section
        .as_ref()
        .ok_or_else(|| experiments::Error::Invalid(missing_section(profile, family)))
}

/// A whole-number parameter value.
pub(crate) fn int(value: impl Into<u64>) -> experiments::ParamValue {
    experiments::ParamValue::Int(value.into() as i64)
}

/// A point's parameters from `(name, value)` pairs.
pub(crate) fn params<const N: usize>(pairs: [(&str, experiments::ParamValue); N]) -> Params {
    pairs
        .into_iter()
        .map(|(name, value)| (name.to_string(), value))
        .collect()
}

/// One point per size, with the size as its `bytes`.
pub(crate) fn bytes_points(sizes: &[u64]) -> Vec<Params> {
    sizes.iter().map(|&bytes| params([("bytes", int(bytes))])).collect()
}
