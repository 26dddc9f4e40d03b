//! Teaching views: what the models decide for one case, with the working shown.
//!
//! Each family's view lives beside its model (its `FamilyModel::explain`); this file only picks
//! one by topic.

use experiments::{Family, Profile};

use crate::models::{explain_point, explaining_families};

/// The topics [`explain`] knows: the families whose model has a teaching view.
pub fn explain_topics() -> Vec<&'static str> {
    explaining_families().into_iter().map(Family::name).collect()
}

/// One case's teaching view: `topic` is one of [`explain_topics`], `params` its `name=value`
/// pairs (as `vramlab explain` takes them), read against `profile`.
pub fn explain(topic: &str, params: &[String], profile: &Profile) -> Result<String, experiments::Error> {
    let family = explaining_families()
        .into_iter()
        .find(|f| f.name() == topic)
        .ok_or_else(|| experiments::Error::Unknown {
            kind: "topic",
            name: topic.to_string(),
            valid: explain_topics().into_iter().map(String::from).collect(),
        })?;
    let point = experiments::point_from_args(family, params)
        .map_err(|e| experiments::Error::Invalid(format!("explain {topic}: {e}")))?;
    explain_point(profile, &point.workload)
}
