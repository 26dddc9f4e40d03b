//! The analysis stage: join predicted and measured records point by point, and compute the
//! model's error. Reads `<experiment>/{sim,hw}.json`, writes `analysis.json`.

use std::collections::HashMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use experiments::{median, write_atomically, BackendKind, DeviceInfo, Family, Metrics, Params, Record};

use crate::error::{ReportError, Result};

/// One sweep point with what each backend said about it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComparedPoint {
    /// The sweep point.
    pub params: Params,
    /// The model's figures, if predicted.
    pub predicted: Option<Metrics>,
    /// The GPU's figures, if measured.
    pub measured: Option<Metrics>,
    /// (predicted - measured) / measured of the family's primary metric.
    pub relative_error: Option<f64>,
    /// Whether the model's parameters were fitted at this point (so it does not validate it).
    pub calibration: bool,
    /// Whether the point belongs to a pre-registered hold-out (its suite's
    /// `holdout_registered`); every other point that was not fitted counts as seen while the
    /// model was designed, since nothing shows otherwise.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub held_out: bool,
}

/// What a point is to the model: used to fit it, seen while designing it, or truly held out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PointGroup {
    /// The profile's parameters were fitted at this point.
    Fit,
    /// Not fitted, but the model may have been shaped with it in view.
    Seen,
    /// Registered in a commit before it was measured, with the model frozen there.
    HeldOut,
}

impl PointGroup {
    /// Every group, in the order reports show them.
    pub const ALL: [PointGroup; 3] = [PointGroup::Fit, PointGroup::Seen, PointGroup::HeldOut];

    /// How reports name it.
    pub fn label(self) -> &'static str {
        match self {
            PointGroup::Fit => "used to fit",
            PointGroup::Seen => "seen while designing",
            PointGroup::HeldOut => "held out",
        }
    }
}

impl ComparedPoint {
    /// The point's group.
    pub fn group(&self) -> PointGroup {
        if self.calibration {
            PointGroup::Fit
        } else if self.held_out {
            PointGroup::HeldOut
        } else {
            PointGroup::Seen
        }
    }
}

/// The error over one group of points.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupStats {
    /// Which points.
    pub group: PointGroup,
    /// How many were compared.
    pub points: usize,
    /// Median of |relative error|.
    pub median_abs_error: f64,
    /// Largest |relative error|.
    pub worst_abs_error: f64,
}

/// Error statistics over the validation points of one experiment (or of several).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorStats {
    /// Points compared that calibration did not use.
    pub validation_points: usize,
    /// Points excluded because calibration used them.
    pub calibration_points: usize,
    /// Median of |relative error| over validation points.
    pub median_abs_error: f64,
    /// Largest |relative error| over validation points.
    pub worst_abs_error: f64,
    /// Where the largest error is.
    pub worst_point: Params,
    /// The error of each group apart (fitted points included here, and only here).
    #[serde(default)]
    pub groups: Vec<GroupStats>,
    /// Validation points within the spread of repeated measurements (the profile's
    /// `[uncertainty]`), and outside it; absent when the profile has none for the family.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub band: Option<BandCount>,
    /// For a hold-out: the commit that registered it, and the commits of the code that made
    /// the prediction and the measurement (for anyone to check the order with git).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holdout: Option<HoldoutCommits>,
}

/// How many validation points the model predicted within the measurements' own spread.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BandCount {
    /// The spread, a fraction (the profile's `[uncertainty.spread]` for the family).
    pub spread: f64,
    /// Points with |relative error| at most the spread.
    pub inside: usize,
    /// Points beyond it.
    pub outside: usize,
}

/// The commits that make a hold-out checkable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HoldoutCommits {
    /// The commit that registered the points with the model frozen.
    pub registered: String,
    /// The commits of the records that predicted and measured them.
    pub predicted_by: String,
    /// The commit of the code that measured them.
    pub measured_by: String,
}

/// One experiment's joined results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExperimentAnalysis {
    /// The experiment's name.
    pub experiment: String,
    /// Its suite.
    pub suite: String,
    /// Its family.
    pub family: Family,
    /// The metric compared (the family's primary metric).
    pub metric: String,
    /// The parameter along the x axis.
    pub x_param: String,
    /// The profile the prediction used.
    pub profile: Option<String>,
    /// The GPU measured, if any.
    pub measured_device: Option<DeviceInfo>,
    /// Every point, in sweep order.
    pub points: Vec<ComparedPoint>,
    /// Error statistics, when both backends ran.
    pub stats: Option<ErrorStats>,
}

/// The whole run's analysis: what the report renders.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Analysis {
    /// Each experiment found in the run folder, by name.
    pub experiments: Vec<ExperimentAnalysis>,
    /// Pooled over every validation point of each family that has measurements.
    pub by_family: Vec<(Family, ErrorStats)>,
}

impl Analysis {
    /// Reads every record under `dir` and joins them.
    pub fn from_dir(dir: &Path) -> Result<Analysis> {
        Analysis::from_dir_only(dir, None)
    }

    /// The names of the experiments whose records `dir` holds.
    pub fn recorded_in(dir: &Path) -> Result<Vec<String>> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .map_err(|e| experiments::Error::io(dir, e))?
            .filter_map(|entry| entry.ok())
            .filter(|entry| entry.path().is_dir())
            .filter_map(|entry| entry.file_name().into_string().ok())
            .filter(|name| {
                [BackendKind::Sim, BackendKind::Hw]
                    .iter()
                    .any(|b| Record::json_path(dir, name, *b).exists())
            })
            .collect();
        names.sort();
        Ok(names)
    }

    /// As [`Analysis::from_dir`], keeping only the experiments `only` names (all where none).
    pub fn from_dir_only(dir: &Path, only: Option<&[String]>) -> Result<Analysis> {
        let mut names = Analysis::recorded_in(dir)?;
        if let Some(only) = only {
            names.retain(|name| only.contains(name));
        }
        if names.is_empty() {
            return Err(ReportError::Empty(dir.to_path_buf()));
        }
        let mut experiments = Vec::with_capacity(names.len());
        // The folder's records together are bounded as one record is: a folder of thousands of
        // records each within the limit would otherwise be held whole.
        let most = experiments::max_record_values()?;
        let mut values = 0u64;
        for name in names {
            let mut load = |backend| -> Result<Option<Record>> {
                let path = Record::json_path(dir, &name, backend);
                let Some(record) = path.exists().then(|| Record::load(&path)).transpose()? else {
                    return Ok(None);
                };
                values = values.saturating_add(record.values());
                if values > most {
                    return Err(experiments::Error::Invalid(format!(
                        "{}: the records hold more than {most} parameters and metrics in all, {} reached at {} (VRAMLAB_MAX_RECORD_VALUES raises the limit)",
                        dir.display(),
                        values,
                        path.display()
                    ))
                    .into());
                }
                Ok(Some(record))
            };
            let sim = load(BackendKind::Sim)?;
            let hw = load(BackendKind::Hw)?;
            experiments.push(join(sim, hw));
        }
        let by_family = Family::ALL
            .into_iter()
            .filter_map(|family| {
                let points: Vec<&ComparedPoint> = experiments
                    .iter()
                    .filter(|e| e.family == family)
                    .flat_map(|e| e.points.iter())
                    .collect();
                let mut pooled = stats(&points)?;
                let bands: Vec<BandCount> = experiments
                    .iter()
                    .filter(|e| e.family == family)
                    .filter_map(|e| e.stats.as_ref()?.band)
                    .collect();
                pooled.band = bands.first().map(|first| BandCount {
                    spread: first.spread,
                    inside: bands.iter().map(|b| b.inside).sum(),
                    outside: bands.iter().map(|b| b.outside).sum(),
                });
                Some((family, pooled))
            })
            .collect();
        Ok(Analysis { experiments, by_family })
    }

    /// Writes `analysis.json` atomically.
    pub fn save(&self, dir: &Path) -> Result<()> {
        let json = serde_json::to_vec_pretty(self).expect("analysis always serializes");
        Ok(write_atomically(&dir.join("analysis.json"), &json)?)
    }
}

/// The family's usual x axis, unless it does not vary in this experiment: then the first
/// numeric parameter that does (occupancy_bandwidth sweeps shared memory at one stride).
fn x_param(family: Family, points: &[ComparedPoint]) -> String {
    let varies = |name: &str| {
        let mut values = points.iter().filter_map(|p| p.params.get(name)?.as_f64());
        let first = values.next();
        values.any(|v| Some(v) != first)
    };
    let usual = family.x_param();
    if varies(usual) {
        return usual.to_string();
    }
    points
        .first()
        .and_then(|p| p.params.keys().find(|k| varies(k)).cloned())
        .unwrap_or_else(|| usual.to_string())
}

/// Joins a prediction and a measurement of the same experiment (either may be missing).
pub fn join(sim: Option<Record>, hw: Option<Record>) -> ExperimentAnalysis {
    let base = sim.as_ref().or(hw.as_ref()).expect("at least one record");
    let family = base.family;
    let metric = family.primary_metric();

    let holdout = sim
        .as_ref()
        .and_then(|r| r.holdout_registered.clone())
        .or_else(|| hw.as_ref().and_then(|r| r.holdout_registered.clone()));
    let mut points: Vec<ComparedPoint> = Vec::new();
    // Points are matched by their parameters' canonical JSON (values may be floats, which do not
    // hash): one lookup each, so a 100,000-point sweep joins in linear time.
    let mut index_of: HashMap<String, usize> = HashMap::new();
    for (record, is_sim) in [(&sim, true), (&hw, false)] {
        for p in record.iter().flat_map(|r| r.points.iter()) {
            let key = serde_json::to_string(&p.params).expect("parameters serialise");
            let index = match index_of.get(&key) {
                Some(&i) => i,
                None => {
                    index_of.insert(key, points.len());
                    let calibration = sim.as_ref().is_some_and(|r| r.is_calibration_point(&p.params));
                    points.push(ComparedPoint {
                        params: p.params.clone(),
                        predicted: None,
                        measured: None,
                        relative_error: None,
                        calibration,
                        held_out: holdout.is_some(),
                    });
                    points.len() - 1
                }
            };
            let slot = if is_sim {
                &mut points[index].predicted
            } else {
                &mut points[index].measured
            };
            *slot = Some(p.metrics.clone());
        }
    }
    for point in &mut points {
        if let (Some(p), Some(m)) = (&point.predicted, &point.measured) {
            if let (Some(p), Some(m)) = (p.get(metric), m.get(metric)) {
                point.relative_error = Some(relative_error(*p, *m));
            }
        }
    }
    let mut stats = stats(&points.iter().collect::<Vec<_>>());
    if let (Some(stats), Some(spread)) = (stats.as_mut(), sim.as_ref().and_then(|r| r.uncertainty)) {
        stats.band = Some(band_count(&points.iter().collect::<Vec<_>>(), spread));
    }
    if let (Some(stats), Some(registered)) = (stats.as_mut(), holdout) {
        let commit = |r: &Option<Record>| r.as_ref().map(|r| r.commit.clone()).unwrap_or_default();
        stats.holdout = Some(HoldoutCommits {
            registered,
            predicted_by: commit(&sim),
            measured_by: commit(&hw),
        });
    }
    ExperimentAnalysis {
        experiment: base.experiment.clone(),
        suite: base.suite.clone(),
        family,
        metric: metric.to_string(),
        x_param: x_param(family, &points),
        profile: sim.as_ref().map(|r| r.profile.clone()),
        measured_device: hw.as_ref().map(|r| r.device.clone()),
        points,
        stats,
    }
}

/// (predicted - measured) / measured. A measured zero is a real answer for counts (no block
/// fits): predicting it exactly is no error, predicting anything else counts as 100%.
fn relative_error(predicted: f64, measured: f64) -> f64 {
    if measured != 0.0 {
        (predicted - measured) / measured
    } else if predicted == 0.0 {
        0.0
    } else {
        predicted.signum()
    }
}

/// The validation points within `spread` of the measurement, and beyond it.
fn band_count(points: &[&ComparedPoint], spread: f64) -> BandCount {
    let errors: Vec<f64> = points
        .iter()
        .filter(|p| !p.calibration)
        .filter_map(|p| p.relative_error.map(f64::abs))
        .collect();
    let inside = errors.iter().filter(|&&e| e <= spread).count();
    BandCount {
        spread,
        inside,
        outside: errors.len() - inside,
    }
}

fn stats(points: &[&ComparedPoint]) -> Option<ErrorStats> {
    let errors: Vec<(f64, &Params)> = points
        .iter()
        .filter(|p| !p.calibration)
        .filter_map(|p| p.relative_error.map(|e| (e.abs(), &p.params)))
        .collect();
    if errors.is_empty() {
        return None;
    }
    let median = median(&mut errors.iter().map(|e| e.0).collect::<Vec<_>>());
    let n = errors.len();
    let (worst, worst_point) = errors
        .iter()
        .copied()
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .expect("not empty");
    let groups = PointGroup::ALL
        .into_iter()
        .filter_map(|group| {
            let mut errors: Vec<f64> = points
                .iter()
                .filter(|p| p.group() == group)
                .filter_map(|p| p.relative_error.map(f64::abs))
                .collect();
            (!errors.is_empty()).then(|| GroupStats {
                group,
                points: errors.len(),
                worst_abs_error: errors.iter().copied().fold(0.0, f64::max),
                median_abs_error: experiments::median(&mut errors),
            })
        })
        .collect();
    Some(ErrorStats {
        validation_points: n,
        calibration_points: points
            .iter()
            .filter(|p| p.calibration && p.relative_error.is_some())
            .count(),
        median_abs_error: median,
        worst_abs_error: worst,
        worst_point: worst_point.clone(),
        groups,
        band: None,
        holdout: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use experiments::{ParamValue, PointRecord};

    fn record(backend: BackendKind, values: &[(i64, f64)], calibration_bytes: Vec<i64>) -> Record {
        Record {
            experiment: "e".into(),
            suite: "s".into(),
            family: Family::Transfer,
            backend,
            device: DeviceInfo::default(),
            profile: "p".into(),
            seed: 0,
            calibration_points: calibration_bytes
                .into_iter()
                .map(|b| Params::from([("bytes".to_string(), ParamValue::Int(b))]))
                .collect(),
            vramlab_version: "0".into(),
            commit: String::new(),
            uncertainty: None,
            holdout_registered: None,
            points: values
                .iter()
                .map(|(bytes, gbps)| PointRecord {
                    params: Params::from([("bytes".to_string(), ParamValue::Int(*bytes))]),
                    metrics: Metrics::from([("gb_per_s".to_string(), *gbps)]),
                })
                .collect(),
        }
    }

    #[test]
    fn joins_points_and_excludes_calibration_sizes() {
        let sim = record(BackendKind::Sim, &[(1, 11.0), (2, 18.0), (3, 30.0), (4, 40.0)], vec![3]);
        let hw = record(BackendKind::Hw, &[(1, 10.0), (2, 20.0), (3, 10.0), (4, 40.0)], vec![]);
        let a = join(Some(sim), Some(hw));
        let s = a.stats.unwrap();
        assert_eq!((s.validation_points, s.calibration_points), (3, 1));
        // |errors| 0.1, 0.1, 0.0 -> median 0.1; the 200% error at bytes=3 is a calibration point.
        assert!((s.median_abs_error - 0.1).abs() < 1e-12);
        assert!((s.worst_abs_error - 0.1).abs() < 1e-12);
    }

    #[test]
    fn each_group_of_points_has_its_own_error() {
        let sim = record(BackendKind::Sim, &[(1, 11.0), (2, 18.0), (3, 30.0), (4, 40.0)], vec![3]);
        let hw = record(BackendKind::Hw, &[(1, 10.0), (2, 20.0), (3, 10.0), (4, 40.0)], vec![]);
        let seen = join(Some(sim.clone()), Some(hw.clone())).stats.unwrap();
        let groups: Vec<(PointGroup, usize)> = seen.groups.iter().map(|g| (g.group, g.points)).collect();
        assert_eq!(groups, [(PointGroup::Fit, 1), (PointGroup::Seen, 3)]);
        // The fitted point's 200% error is reported, in its own group only.
        assert!((seen.groups[0].median_abs_error - 2.0).abs() < 1e-12);
        assert!(seen.holdout.is_none());
        let registered = Record {
            holdout_registered: Some("21009d7".into()),
            commit: "abc".into(),
            ..sim
        };
        let held = join(Some(registered), Some(hw)).stats.unwrap();
        let groups: Vec<(PointGroup, usize)> = held.groups.iter().map(|g| (g.group, g.points)).collect();
        assert_eq!(groups, [(PointGroup::Fit, 1), (PointGroup::HeldOut, 3)]);
        assert_eq!(held.holdout.unwrap().registered, "21009d7");
    }

    #[test]
    fn points_inside_and_outside_the_measurement_spread_are_counted() {
        let sim = Record {
            uncertainty: Some(0.05),
            ..record(BackendKind::Sim, &[(1, 10.4), (2, 18.0), (3, 30.0), (4, 40.0)], vec![3])
        };
        let hw = record(BackendKind::Hw, &[(1, 10.0), (2, 20.0), (3, 10.0), (4, 40.0)], vec![]);
        // Errors 4%, 10%, (fitted point), 0%: two within 5%, one beyond.
        let band = join(Some(sim), Some(hw)).stats.unwrap().band.unwrap();
        assert_eq!((band.inside, band.outside), (2, 1));
    }

    #[test]
    fn a_lone_prediction_has_no_stats() {
        let a = join(Some(record(BackendKind::Sim, &[(1, 1.0)], vec![])), None);
        assert!(a.stats.is_none() && a.points[0].measured.is_none());
    }
}
