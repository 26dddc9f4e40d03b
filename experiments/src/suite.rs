//! Experiment files: a suite of named experiments, each a family plus a sweep of parameters.
//!
//! ```toml
//! name = "transfers"
//! description = "Host <-> device copies"
//!
//! [[experiment]]
//! name = "h2d_pinned"
//! family = "transfer"
//! description = "Pinned uploads"
//! [experiment.sweep]
//! direction = "h2d"
//! host = "pinned"
//! bytes = { log2 = ["1 KiB", "1 GiB"] }   # or a list: [4096, "1 MiB"], or one value
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use toml::Spanned;

use crate::error::{Error, Result};
use crate::family::{Family, ParamKind, ParamSpec, Workload};
use crate::params::{ParamValue, Params};
use crate::units::parse_bytes;

/// A sweep expands to at most this many points, so a typo cannot ask for billions.
const MAX_POINTS: usize = 100_000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SuiteFile {
    name: String,
    #[serde(default)]
    description: String,
    /// A pre-registered hold-out: the commit that registered its points with the model frozen.
    #[serde(default)]
    holdout_registered: Option<Spanned<String>>,
    #[serde(rename = "experiment", default)]
    experiments: Vec<ExperimentFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExperimentFile {
    name: Spanned<String>,
    family: Spanned<String>,
    #[serde(default)]
    description: String,
    #[serde(default)]
    sweep: BTreeMap<String, Spanned<toml::Value>>,
}

/// One point of an experiment's sweep: its parameters as recorded, and the typed work.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// The parameters, as they go into records.
    pub params: Params,
    /// What a backend runs.
    pub workload: Workload,
}

/// A named experiment with its sweep expanded into points.
#[derive(Debug, Clone)]
pub struct Experiment {
    /// Unique name across the suites loaded together.
    pub name: String,
    /// The suite it came from.
    pub suite: String,
    /// Which family of model and kernel runs it.
    pub family: Family,
    /// One sentence for `vramlab list` and reports.
    pub description: String,
    /// Every point of the sweep, in the order the file's parameters nest.
    pub points: Vec<Point>,
    /// For a pre-registered hold-out: the commit that registered its points (the suite's
    /// `holdout_registered`), with the model and profiles as they were frozen there.
    pub holdout_registered: Option<String>,
}

/// A parsed experiment file.
#[derive(Debug, Clone)]
pub struct Suite {
    /// The suite's name (`vramlab run NAME`).
    pub name: String,
    /// One sentence for `vramlab list`.
    pub description: String,
    /// Where it came from: a path or `builtin:NAME`.
    pub origin: String,
    /// Its experiments.
    pub experiments: Vec<Experiment>,
}

impl Suite {
    /// Parses an experiment file's text; `origin` names it in errors.
    pub fn parse(origin: &str, text: &str) -> Result<Suite> {
        let file: SuiteFile = toml::from_str(text).map_err(|e| Error::from_toml(origin, text, &e))?;
        let mut experiments = Vec::with_capacity(file.experiments.len());
        for raw in file.experiments {
            if experiments.iter().any(|e: &Experiment| e.name == *raw.name.get_ref()) {
                return Err(at(
                    origin,
                    text,
                    raw.name.span().start,
                    format!("experiment '{}' is defined twice", raw.name.get_ref()),
                ));
            }
            let span = raw.name.span().start;
            let experiment = parse_experiment(origin, text, &file.name, raw)?;
            // What a run of the whole suite takes, bounded as each sweep is: a file of many
            // sweeps each under the cap must not add up to millions of points.
            let total =
                experiments.iter().map(|e: &Experiment| e.points.len()).sum::<usize>() + experiment.points.len();
            if total > MAX_POINTS {
                return Err(at(
                    origin,
                    text,
                    span,
                    format!(
                        "experiment '{}' brings the suite to {total} points, more than the {MAX_POINTS} a suite may hold",
                        experiment.name
                    ),
                ));
            }
            experiments.push(experiment);
        }
        if let Some(commit) = &file.holdout_registered {
            let hex = commit.get_ref();
            if !(7..=40).contains(&hex.len()) || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
                return Err(at(
                    origin,
                    text,
                    commit.span().start,
                    format!("holdout_registered = \"{hex}\": expected a commit hash (7 to 40 hex digits)"),
                ));
            }
            for experiment in &mut experiments {
                experiment.holdout_registered = Some(hex.clone());
            }
        }
        Ok(Suite {
            name: file.name,
            description: file.description,
            origin: origin.to_string(),
            experiments,
        })
    }

    /// Reads and parses an experiment file from disk.
    pub fn load(path: &Path) -> Result<Suite> {
        let text = crate::files::read_input_text(path)?;
        Suite::parse(&path.display().to_string(), &text)
    }
}

/// One point of `family` from `name=value` arguments (as `vramlab explain` takes them), checked
/// exactly as an experiment file's sweep is; missing parameters take the family's defaults.
pub fn point_from_args(family: Family, args: &[String]) -> Result<Point> {
    let specs = family.params();
    let mut given: BTreeMap<&str, toml::Value> = BTreeMap::new();
    for arg in args {
        let (name, text) = arg
            .split_once('=')
            .ok_or_else(|| Error::Invalid(format!("'{arg}': expected name=value, e.g. threads=256")))?;
        let spec = specs.iter().find(|s| s.name == name).ok_or_else(|| {
            let valid: Vec<&str> = specs.iter().map(|s| s.name).collect();
            Error::Invalid(format!(
                "{} takes no parameter '{name}'; it takes: {}",
                family.name(),
                valid.join(", ")
            ))
        })?;
        if given.insert(spec.name, text_value(text)).is_some() {
            return Err(Error::Invalid(format!("{name} is given twice")));
        }
    }
    let mut params = Params::new();
    for spec in specs {
        let value = match (given.get(spec.name), spec.default) {
            (Some(value), _) => check(spec, value),
            (None, Some(default)) => check(spec, &text_value(default)),
            (None, None) => {
                // The caller names the family ("explain occupancy: ..."); saying it again repeats it.
                return Err(Error::Invalid(format!("missing parameter {}=...", spec.name)));
            }
        }
        .map_err(|(shown, reason)| Error::Invalid(format!("{} = {shown}: {reason}", spec.name)))?;
        params.insert(spec.name.to_string(), value);
    }
    Ok(Point {
        workload: family.workload(&params),
        params,
    })
}

/// A value written as text (a default, a command-line argument): a number if it reads as one.
fn text_value(text: &str) -> toml::Value {
    text.parse::<i64>()
        .map(toml::Value::Integer)
        .or_else(|_| text.parse::<f64>().map(toml::Value::Float))
        .unwrap_or_else(|_| toml::Value::String(text.to_string()))
}

fn at(origin: &str, text: &str, offset: usize, message: String) -> Error {
    let before = &text[..offset.min(text.len())];
    Error::Syntax {
        file: origin.to_string(),
        line: before.matches('\n').count() + 1,
        column: before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1,
        message,
    }
}

fn parse_experiment(origin: &str, text: &str, suite: &str, raw: ExperimentFile) -> Result<Experiment> {
    let name = raw.name.get_ref().clone();
    if let Some(why) = crate::files::unsafe_name(&name) {
        return Err(at(
            origin,
            text,
            raw.name.span().start,
            format!("experiment name: {why}"),
        ));
    }
    let family = Family::from_name(raw.family.get_ref()).ok_or_else(|| {
        let valid: Vec<&str> = Family::ALL.iter().map(|f| f.name()).collect();
        at(
            origin,
            text,
            raw.family.span().start,
            format!(
                "experiment '{name}': unknown family '{}'; valid families: {}",
                raw.family.get_ref(),
                valid.join(", ")
            ),
        )
    })?;
    let specs = family.params();
    for (key, value) in &raw.sweep {
        if !specs.iter().any(|s| s.name == key) {
            let valid: Vec<&str> = specs.iter().map(|s| s.name).collect();
            return Err(at(
                origin,
                text,
                value.span().start,
                format!(
                    "experiment '{name}': family '{}' takes no parameter '{key}'; it takes: {}",
                    family.name(),
                    valid.join(", ")
                ),
            ));
        }
    }
    let mut axes: Vec<(&'static str, Vec<ParamValue>)> = Vec::with_capacity(specs.len());
    for spec in specs {
        let values = match raw.sweep.get(spec.name) {
            Some(value) => expand(spec, value.get_ref()).map_err(|(shown, reason)| {
                at(
                    origin,
                    text,
                    value.span().start,
                    format!("experiment '{name}': {} = {shown}: {reason}", spec.name),
                )
            })?,
            None => match spec.default {
                Some(default) => {
                    vec![check(spec, &text_value(default)).expect("built-in defaults are valid")]
                }
                None => {
                    return Err(at(
                        origin,
                        text,
                        raw.name.span().start,
                        format!(
                            "experiment '{name}': missing parameter '{}' (family '{}')",
                            spec.name,
                            family.name()
                        ),
                    ))
                }
            },
        };
        axes.push((spec.name, values));
    }
    // Counted without overflow: four axes of 65,536 values must not wrap under the cap.
    let within_cap = axes
        .iter()
        .try_fold(1usize, |n, (_, v)| n.checked_mul(v.len()).filter(|&n| n <= MAX_POINTS));
    if within_cap.is_none() {
        let shown: Vec<String> = axes.iter().map(|(_, v)| v.len().to_string()).collect();
        return Err(at(
            origin,
            text,
            raw.name.span().start,
            format!(
                "experiment '{name}': the sweep has {} points, more than the {MAX_POINTS} allowed",
                shown.join(" x ")
            ),
        ));
    }
    let points = cartesian(&axes)
        .into_iter()
        .map(|params| Point {
            workload: family.workload(&params),
            params,
        })
        .collect();
    Ok(Experiment {
        name,
        suite: suite.to_string(),
        family,
        description: raw.description,
        points,
        holdout_registered: None,
    })
}

/// A rejected value, shown as written, with the reason.
type Rejection = (String, String);

fn expand(spec: &ParamSpec, value: &toml::Value) -> std::result::Result<Vec<ParamValue>, Rejection> {
    match value {
        toml::Value::Array(items) if items.is_empty() => {
            Err((value.to_string(), "an empty list sweeps nothing".into()))
        }
        toml::Value::Array(items) => items.iter().map(|item| check(spec, item)).collect(),
        toml::Value::Table(table) => {
            let range = table
                .get("log2")
                .filter(|_| table.len() == 1)
                .ok_or_else(|| (value.to_string(), "a table must be { log2 = [from, to] }".to_string()))?;
            let bounds = match range {
                toml::Value::Array(b) if b.len() == 2 => b,
                _ => return Err((value.to_string(), "log2 takes [from, to]".into())),
            };
            if !matches!(
                spec.kind,
                ParamKind::Size | ParamKind::Bytes { .. } | ParamKind::Count { .. }
            ) {
                return Err((value.to_string(), "log2 ranges are for sizes and counts".into()));
            }
            let from = integer(spec, &bounds[0])?;
            let to = integer(spec, &bounds[1])?;
            if from > to {
                return Err((value.to_string(), format!("from ({from}) is larger than to ({to})")));
            }
            let mut values = Vec::new();
            let mut v = from;
            while v <= to {
                values.push(ParamValue::Int(v));
                v = v
                    .checked_mul(2)
                    .ok_or_else(|| (value.to_string(), "range overflows".to_string()))?;
            }
            Ok(values)
        }
        single => Ok(vec![check(spec, single)?]),
    }
}

fn integer(spec: &ParamSpec, value: &toml::Value) -> std::result::Result<i64, Rejection> {
    match check(spec, value)? {
        ParamValue::Int(v) => Ok(v),
        other => Err((other.to_string(), "expected a whole number".into())),
    }
}

fn check(spec: &ParamSpec, value: &toml::Value) -> std::result::Result<ParamValue, Rejection> {
    let shown = value.to_string();
    match spec.kind {
        ParamKind::Size => {
            let bytes = match value {
                toml::Value::Integer(v) if *v > 0 => *v as u64,
                toml::Value::Integer(_) => return Err((shown, "a size must be a positive number of bytes".into())),
                toml::Value::String(s) => parse_bytes(s).map_err(|reason| (shown.clone(), reason))?,
                _ => return Err((shown, "expected a byte size such as 4096 or \"256 MiB\"".into())),
            };
            if bytes == 0 {
                return Err((shown, "a size must be a positive number of bytes".into()));
            }
            i64::try_from(bytes)
                .map(ParamValue::Int)
                .map_err(|_| (shown, "size too large".into()))
        }
        ParamKind::Bytes { max } => {
            let bytes = match value {
                toml::Value::Integer(v) if *v >= 0 => *v as u64,
                toml::Value::Integer(_) => return Err((shown, "a byte count cannot be negative".into())),
                toml::Value::String(s) => parse_bytes(s).map_err(|reason| (shown.clone(), reason))?,
                _ => return Err((shown, "expected a byte count such as 0, 4096 or \"12 KiB\"".into())),
            };
            if bytes > max {
                return Err((shown, format!("at most {} here", crate::units::format_bytes(max))));
            }
            Ok(ParamValue::Int(bytes as i64))
        }
        ParamKind::OneOf(allowed) => match value {
            toml::Value::Integer(v) if allowed.contains(v) => Ok(ParamValue::Int(*v)),
            _ => Err((
                shown,
                format!(
                    "expected one of: {}",
                    allowed.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(", ")
                ),
            )),
        },
        ParamKind::Count { min, max } => match value {
            toml::Value::Integer(v) if (min..=max).contains(v) => Ok(ParamValue::Int(*v)),
            toml::Value::Integer(_) => Err((shown, format!("must be between {min} and {max}"))),
            _ => Err((shown, "expected a whole number".into())),
        },
        ParamKind::NonNegative => {
            let v = match value {
                toml::Value::Integer(v) => *v as f64,
                toml::Value::Float(v) => *v,
                _ => return Err((shown, "expected a number".into())),
            };
            if v.is_finite() && v >= 0.0 {
                Ok(ParamValue::Float(v))
            } else {
                Err((shown, "must be a finite number >= 0".into()))
            }
        }
        ParamKind::Choice(choices) => match value {
            toml::Value::String(s) if choices.contains(&s.as_str()) => Ok(ParamValue::Text(s.clone())),
            _ => Err((shown, format!("expected one of: {}", choices.join(", ")))),
        },
    }
}

fn cartesian(axes: &[(&'static str, Vec<ParamValue>)]) -> Vec<Params> {
    let mut points = vec![Params::new()];
    for (name, values) in axes {
        points = points
            .into_iter()
            .flat_map(|params| {
                values.iter().map(move |v| {
                    let mut p = params.clone();
                    p.insert((*name).to_string(), v.clone());
                    p
                })
            })
            .collect();
    }
    points
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Direction, HostMemory};

    const GOOD: &str = r#"
name = "t"
[[experiment]]
name = "up"
family = "transfer"
[experiment.sweep]
direction = ["h2d", "d2h"]
bytes = { log2 = ["1 KiB", "1 MiB"] }
"#;

    #[test]
    fn expands_sweeps() {
        let suite = Suite::parse("t.toml", GOOD).unwrap();
        let exp = &suite.experiments[0];
        assert_eq!(exp.points.len(), 2 * 11);
        match exp.points[0].workload {
            Workload::Transfer(p) => {
                assert_eq!(p.bytes, 1024);
                assert_eq!(p.direction, Direction::HostToDevice);
                assert_eq!(p.host, HostMemory::Pinned, "default applies");
            }
            _ => panic!("wrong family"),
        }
    }

    fn error_of(text: &str) -> String {
        Suite::parse("x.toml", text).unwrap_err().to_string()
    }

    #[test]
    fn malformed_toml_names_the_line() {
        let err = error_of("name = \"t\"\n[[experiment]\nname = 1\n");
        assert!(err.starts_with("x.toml:2:"), "{err}");
        assert!(!err.contains('\n'), "one line: {err}");
    }

    #[test]
    fn zero_and_negative_sizes_are_rejected_with_their_line() {
        let zero = GOOD.replace("{ log2 = [\"1 KiB\", \"1 MiB\"] }", "0");
        let err = error_of(&zero);
        assert!(err.starts_with("x.toml:8:") && err.contains("bytes = 0"), "{err}");
        let negative = GOOD.replace("{ log2 = [\"1 KiB\", \"1 MiB\"] }", "[1024, -4]");
        assert!(error_of(&negative).contains("bytes = -4"), "{}", error_of(&negative));
    }

    #[test]
    fn huge_sweeps_are_refused_without_wrapping() {
        let list = |n: u64, from: u64| {
            let values: Vec<String> = (from..from + n).map(|v| v.to_string()).collect();
            format!("[{}]", values.join(", "))
        };
        let text = format!(
            "name = \"t\"\n[[experiment]]\nname = \"big\"\nfamily = \"overlap\"\n[experiment.sweep]\n\
             bytes = {}\nchunks = {}\nstreams = {}\nkernel_us = {}\n",
            list(65_536, 1),
            list(4096, 1),
            list(64, 1),
            list(65_536, 0)
        );
        let err = error_of(&text);
        assert!(
            err.contains("65536 x 4096 x 64 x 65536 points") && err.contains("100000 allowed"),
            "{err}"
        );
    }

    #[test]
    fn unknown_family_and_parameter_list_valid_names() {
        let err = error_of(&GOOD.replace("\"transfer\"", "\"teleport\""));
        assert!(err.contains("teleport") && err.contains("transfer, overlap"), "{err}");
        let err = error_of(&GOOD.replace("direction", "way"));
        assert!(err.contains("'way'") && err.contains("direction"), "{err}");
    }

    #[test]
    fn explain_arguments_are_checked_like_files() {
        let point = point_from_args(Family::Occupancy, &["threads=256".into(), "registers=64".into()]).unwrap();
        assert!(matches!(point.workload, Workload::Occupancy(p) if p.threads == 256 && p.dynamic_shared == 0));
        let err = point_from_args(Family::Occupancy, &["threads=2048".into(), "registers=64".into()]).unwrap_err();
        assert_eq!(err.to_string(), "threads = 2048: must be between 1 and 1024");
        let err = point_from_args(Family::Occupancy, &["threads=256".into()]).unwrap_err();
        assert!(err.to_string().contains("registers"), "{err}");
        let err = point_from_args(Family::Occupancy, &["warps=2".into()]).unwrap_err();
        assert!(
            err.to_string().contains("'warps'") && err.to_string().contains("threads"),
            "{err}"
        );
    }

    #[test]
    fn missing_parameter_is_named() {
        let err = error_of(&GOOD.replace("direction = [\"h2d\", \"d2h\"]\n", ""));
        assert!(err.contains("missing parameter 'direction'"), "{err}");
    }

    mod properties {
        use proptest::prelude::*;

        use super::super::*;

        proptest! {
            /// A sweep has exactly the product of its axes' lengths in points, each distinct.
            #[test]
            fn sweeps_expand_to_the_product_of_their_axes(
                chunks in prop::collection::btree_set(1u64..4096, 1..6),
                streams in prop::collection::btree_set(1u64..64, 1..5),
                sizes in prop::collection::btree_set(1u64..(1 << 30), 1..6),
            ) {
                let list = |v: &std::collections::BTreeSet<u64>| {
                    format!("[{}]", v.iter().map(u64::to_string).collect::<Vec<_>>().join(", "))
                };
                let text = format!(
                    "name = \"p\"\n[[experiment]]\nname = \"e\"\nfamily = \"overlap\"\n[experiment.sweep]\n\
                     bytes = {}\nchunks = {}\nstreams = {}\nkernel_us = 5\n",
                    list(&sizes), list(&chunks), list(&streams)
                );
                let suite = Suite::parse("p.toml", &text).unwrap();
                let points = &suite.experiments[0].points;
                prop_assert_eq!(points.len(), sizes.len() * chunks.len() * streams.len());
                let distinct: std::collections::BTreeSet<String> =
                    points.iter().map(|p| serde_json::to_string(&p.params).unwrap()).collect();
                prop_assert_eq!(distinct.len(), points.len());
            }
        }
    }
}
