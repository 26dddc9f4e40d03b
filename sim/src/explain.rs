//! Teaching views: what the models decide for one case, with the working shown.
//!
//! Each family's view lives beside its model (`explain_occupancy` in `occupancy.rs`, and so on);
//! this file only picks one by topic.

use experiments::{Family, Profile, Workload};

use crate::banks::explain_banks;
use crate::coalescing::explain_coalescing;
use crate::constant::explain_constant;
use crate::occupancy::explain_occupancy;

/// The topics [`explain`] knows.
pub const EXPLAIN_TOPICS: [&str; 4] = ["occupancy", "banks", "coalescing", "constant"];

/// One case's teaching view: `topic` is one of [`EXPLAIN_TOPICS`], `params` its `name=value`
/// pairs (as `vramlab explain` takes them), read against `profile`.
pub fn explain(topic: &str, params: &[String], profile: &Profile) -> Result<String, experiments::Error> {
    let family = match topic {
        "occupancy" => Family::Occupancy,
        "banks" => Family::Banks,
        "coalescing" => Family::Coalescing,
        "constant" => Family::Constant,
        other => {
            return Err(experiments::Error::Unknown {
                kind: "topic",
                name: other.to_string(),
                valid: EXPLAIN_TOPICS.iter().map(|t| t.to_string()).collect(),
            })
        }
    };
    let point = experiments::point_from_args(family, params)
        .map_err(|e| experiments::Error::Invalid(format!("explain {topic}: {e}")))?;
    let device = &profile.device.name;
    let missing = |name: &str| {
        experiments::Error::Invalid(format!(
            "profile '{}' has no [{name}] section (vramlab calibrate --part {name} --into FILE)",
            profile.name
        ))
    };
    Ok(match point.workload {
        Workload::Occupancy(kernel) => explain_occupancy(&profile.sm, device, &kernel),
        Workload::Banks(access) => {
            explain_banks(profile.banks.as_ref().ok_or_else(|| missing("banks"))?, device, &access)
        }
        Workload::Coalescing(read) => explain_coalescing(
            profile.coalescing.as_ref().ok_or_else(|| missing("coalescing"))?,
            &profile.sm,
            profile.device.multiprocessors,
            device,
            &read,
        ),
        Workload::Constant(read) => explain_constant(
            profile.constant.as_ref().ok_or_else(|| missing("constant"))?,
            device,
            &read,
        ),
        _ => unreachable!("point_from_args gives a point of the family asked for"),
    })
}
