//! The teaching site's pages (`vramlab teach`): each family with a page builds it in its own
//! module (its `FamilyModel::teach`), from its model and the committed measurements of its
//! points; this file holds what they share and picks them in the registry's order.

use experiments::{Metrics, Profile, TeachPage, Workload};

use crate::models::{predict, teaching_pages};

/// One measured point of a committed GPU record, typed as the model's points are.
#[derive(Debug, Clone)]
pub struct Measured {
    /// The GPU, as the record names it.
    pub gpu: String,
    /// Where the record lives (shown beside the number).
    pub source: String,
    /// The point.
    pub workload: Workload,
    /// What was measured.
    pub metrics: Metrics,
}

/// What a family's page is built from: the profile, its model and the measurements.
pub(crate) struct Teacher<'a> {
    /// The profile the models read.
    pub(crate) profile: &'a Profile,
    measured: &'a [Measured],
    /// ` --gpu NAME` where the profile is not the default, for the commands shown.
    pub(crate) profile_flag: String,
}

/// Every family's teaching page for `profile` (named on the command line as `profile_arg`), in
/// the registry's order, pages of one topic joined; `measured` are the committed GPU points set
/// beside the model.
pub fn teach_pages(
    profile: &Profile,
    profile_arg: &str,
    measured: &[Measured],
) -> Result<Vec<TeachPage>, experiments::Error> {
    let teacher = Teacher {
        profile,
        measured,
        profile_flag: if profile_arg == experiments::DEFAULT_PROFILE {
            String::new()
        } else {
            format!(" --gpu {profile_arg}")
        },
    };
    Ok(TeachPage::merge(teaching_pages(&teacher)?))
}

/// A failure to build a page, said in one line.
pub(crate) fn fail(message: impl Into<String>) -> experiments::Error {
    experiments::Error::Invalid(format!("teach: {}", message.into()))
}

impl Teacher<'_> {
    /// A point of `family` from `name=value` pairs, as `vramlab explain` reads them.
    pub(crate) fn point(&self, family: experiments::Family, args: &[String]) -> Result<Workload, experiments::Error> {
        Ok(experiments::point_from_args(family, args)
            .map_err(|e| fail(format!("{} {}: {e}", family.name(), args.join(" "))))?
            .workload)
    }

    /// The model's prediction of one point.
    pub(crate) fn predict(&self, workload: &Workload) -> Result<Metrics, experiments::Error> {
        predict(self.profile, workload).map_err(|e| fail(e.to_string()))
    }

    /// `vramlab explain`'s text and command for one point.
    pub(crate) fn explain(&self, topic: &str, args: &[String]) -> Result<(String, String), experiments::Error> {
        let text = crate::explain(topic, args, self.profile)?;
        Ok((
            text,
            format!("vramlab explain {topic} {}{}", args.join(" "), self.profile_flag),
        ))
    }

    /// The committed measurements of `workload`'s very point, one line each, with `metric`
    /// formatted by `show`; or the line saying there is none.
    pub(crate) fn measured(
        &self,
        workload: &Workload,
        what: &str,
        metric: &str,
        show: impl Fn(f64) -> String,
    ) -> Vec<String> {
        let lines: Vec<String> = self
            .measured
            .iter()
            .filter(|m| m.workload == *workload)
            .filter_map(|m| {
                // Another GPU's number beside this profile's prediction says which is which.
                let other = if m.gpu == self.profile.device.name {
                    String::new()
                } else {
                    format!("; the model shown is of the {}", self.profile.device.name)
                };
                m.metrics
                    .get(metric)
                    .map(|v| format!("Measured on {}: {what} {} ({}{other})", m.gpu, show(*v), m.source))
            })
            .collect();
        if lines.is_empty() {
            vec![format!(
                "No committed GPU measurement of this point: the H100 and H200 runs built into vramlab did not measure it, so only the model's {what} is shown."
            )]
        } else {
            lines
        }
    }

    /// The measured points `keep` places on a curve's x axis, by GPU: (gpu, [(x, metric)]).
    pub(crate) fn measured_series(
        &self,
        keep: impl Fn(&Workload) -> Option<f64>,
        metric: &str,
    ) -> std::collections::BTreeMap<String, Vec<(f64, f64)>> {
        let mut series: std::collections::BTreeMap<String, Vec<(f64, f64)>> = std::collections::BTreeMap::new();
        for m in self.measured {
            if let (Some(x), Some(y)) = (keep(&m.workload), m.metrics.get(metric)) {
                series.entry(m.gpu.clone()).or_default().push((x, *y));
            }
        }
        for points in series.values_mut() {
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
        series
    }
}

/// The values as strings, for a control.
pub(crate) fn strings<T: ToString>(values: &[T]) -> Vec<String> {
    values.iter().map(T::to_string).collect()
}

/// One metric of a prediction.
pub(crate) fn metric(metrics: &Metrics, name: &str) -> Result<f64, experiments::Error> {
    metrics
        .get(name)
        .copied()
        .ok_or_else(|| fail(format!("the model gave no '{name}'")))
}

/// `name=value` pairs from the controls' names and values.
pub(crate) fn args(names: &[&str], values: &[String]) -> Vec<String> {
    names.iter().zip(values).map(|(n, v)| format!("{n}={v}")).collect()
}

/// Sizes 2^k and 3 x 2^(k-1) from `from` to `to`.
pub(crate) fn ladder(from: u64, to: u64) -> Vec<u64> {
    let mut sizes = Vec::new();
    let mut s = from;
    while s <= to {
        sizes.push(s);
        if s + s / 2 <= to {
            sizes.push(s + s / 2);
        }
        s *= 2;
    }
    sizes
}

/// Axis ticks at `from`, `from` x 2^every, ... up to `to`, labelled in bytes.
pub(crate) fn byte_ticks(from: u64, to: u64, every: u32) -> Vec<serde_json::Value> {
    let mut ticks = Vec::new();
    let mut s = from;
    while s <= to {
        ticks.push(serde_json::json!([s as f64, experiments::format_bytes(s)]));
        s <<= every;
    }
    ticks
}

/// The class a measured series is drawn in: one per GPU.
pub(crate) fn gpu_class(gpu: &str) -> &'static str {
    if gpu.contains("H200") {
        "block2"
    } else {
        "measured"
    }
}
