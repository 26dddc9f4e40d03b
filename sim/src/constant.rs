//! Constant memory: one address per pass, so a warp access naming `n` different words is
//! served `n` times over; a broadcast (one word) is one pass.

use experiments::{TeachControl, TeachFact, TeachPage, TeachPanel, TeachView, Workload};
use serde_json::json;
use crate::teach::{args, gpu_class, metric, strings, Teacher};
use experiments::{Calibration, Family, Metrics, Params, Profile};

use crate::backend::SimError;
use crate::fit::FitError;
use crate::models::{explained, fitted_or_kept, int, params, required, Model};

use std::fmt::Write as _;

use experiments::ConstantSample;

use experiments::{ConstantParams, ConstantPoint};

/// Predicted cycles of one dependent constant access. A warm chain naming more lines than
/// the cache keeps evicts each line before it comes round again, so it costs what a cold one does.
pub(crate) fn constant_cycles(params: &ConstantParams, point: &ConstantPoint) -> f64 {
    let misses = point.cold || point.distinct > params.capacity_lines;
    let (first, per_extra) = if misses {
        (params.cold_cycles, params.cold_per_extra)
    } else {
        (params.warm_cycles, params.warm_per_extra)
    };
    first + f64::from(point.distinct.max(1) - 1) * per_extra
}

/// Fits constant memory: for each cache state, the line through its 1- and 2-word samples.
pub fn fit_constant(samples: &[ConstantSample], source: String) -> Result<ConstantParams, FitError> {
    let what = "constant-memory serialization";
    let line = |cold: bool| -> Result<(f64, f64), FitError> {
        let at = |distinct: u32| {
            samples
                .iter()
                .find(|s| s.cold == cold && s.distinct == distinct)
                .map(|s| s.cycles)
                .ok_or_else(|| FitError::BadSamples {
                    what,
                    reason: format!(
                        "no {} sample with {distinct} distinct words",
                        if cold { "cold" } else { "warm" }
                    ),
                })
        };
        let (one, two) = (at(1)?, at(2)?);
        if !(one > 0.0 && two >= one) {
            return Err(FitError::BadSamples {
                what,
                reason: format!("{one} and {two} cycles do not grow with addresses"),
            });
        }
        Ok((one, two - one))
    };
    let (warm_cycles, warm_per_extra) = line(false)?;
    let (cold_cycles, cold_per_extra) = line(true)?;
    // The capacity: one less than the fewest warm lines that cost more like a cold chain than
    // a warm one (or, if every warm case hit, the most lines calibration tried).
    let mut warm_cases: Vec<&ConstantSample> = samples.iter().filter(|s| !s.cold).collect();
    warm_cases.sort_by_key(|s| s.distinct);
    let missed = warm_cases.iter().find(|s| {
        let extra = f64::from(s.distinct - 1);
        let as_warm = warm_cycles + extra * warm_per_extra;
        let as_cold = cold_cycles + extra * cold_per_extra;
        (s.cycles - as_cold).abs() < (s.cycles - as_warm).abs()
    });
    let capacity_lines = match missed {
        Some(s) => s.distinct - 1,
        None => warm_cases.last().map_or(1, |s| s.distinct),
    };
    Ok(ConstantParams {
        source,
        warm_cycles,
        warm_per_extra,
        cold_cycles,
        cold_per_extra,
        capacity_lines,
        calibration_cases: samples.iter().map(|s| (s.distinct, s.cold)).collect(),
    })
}

/// Which word each lane of one warp reads from constant memory, and what that costs.
pub(crate) fn explain_constant(params: &ConstantParams, device: &str, point: &ConstantPoint) -> String {
    let mut out = String::new();
    let state = if point.cold {
        "cold (every access misses)"
    } else {
        "warm"
    };
    let _ = writeln!(
        out,
        "One warp reading {} distinct word(s) of __constant__ memory, each in its own 128-byte line, cache {state}, on {device}\n",
        point.distinct
    );
    let _ = writeln!(out, "  lane -> word");
    let lanes: Vec<u32> = (0..32).collect();
    for row in lanes.chunks(8) {
        let cells: Vec<String> = row
            .iter()
            .map(|&lane| format!("{:>2}->{:<2}", lane, lane % point.distinct.max(1)))
            .collect();
        let _ = writeln!(out, "  {}", cells.join("  "));
    }
    let overflows = !point.cold && point.distinct > params.capacity_lines;
    let (first, extra) = if point.cold || overflows {
        (params.cold_cycles, params.cold_per_extra)
    } else {
        (params.warm_cycles, params.warm_per_extra)
    };
    let _ = writeln!(
        out,
        "\n{} address(es): served one after another, {} pass(es); about {:.0} cycles per dependent access ({:.0} + {} x {:.0}).",
        point.distinct,
        point.distinct,
        constant_cycles(params, point),
        first,
        point.distinct.saturating_sub(1),
        extra
    );
    if overflows {
        let _ = writeln!(
            out,
            "{} lines are more than the constant cache keeps ({}): each is evicted before its turn comes again, so this warm chain costs what a cold one does.",
            point.distinct, params.capacity_lines
        );
    }
    let why = if point.distinct == 1 {
        "Why: every lane reads the same word, which the constant cache broadcasts to the whole warp in one pass."
    } else {
        "Why: the constant cache serves one address per pass; a warp whose lanes name different words waits for each in turn. Constant memory pays off when a warp reads one word (a loop bound, a coefficient)."
    };
    let _ = writeln!(out, "{why}");
    out
}

/// The constant-memory model.
pub(crate) struct FamilyModel;

impl Model for FamilyModel {
    type Point = ConstantPoint;

    fn teach(t: &Teacher) -> Result<Vec<TeachPage>, experiments::Error> {
        Ok(vec![teach_page(t)?])
    }

    fn predict(profile: &Profile, point: &ConstantPoint) -> Result<Metrics, SimError> {
        let params = required(profile, &profile.constant, Family::Constant)?;
        Ok(experiments::cycles_metrics(constant_cycles(params, point)))
    }

    fn calibration_points(profile: &Profile) -> Vec<Params> {
        let cases = profile.constant.iter().flat_map(|c| c.calibration_cases.iter());
        cases
            .map(|&(distinct, cold)| {
                let cache = experiments::ParamValue::Text(if cold { "cold" } else { "warm" }.to_string());
                params([("distinct", int(distinct)), ("cache", cache)])
            })
            .collect()
    }

    fn fit(calibration: &Calibration, base: Option<&Profile>, profile: &mut Profile) -> Result<(), FitError> {
        let d = &calibration.device;
        profile.constant = fitted_or_kept(&calibration.constant, base.and_then(|b| b.constant.as_ref()), || {
            fit_constant(
                &calibration.constant,
                format!(
                    "vramlab calibrate on {} ({}): median clock64 cycles per dependent constant load of one warp at calibration_cases (1 and 2 distinct words, warm and cold), a line through each pair; capacity_lines = one less than the fewest warm lines (14, 15, 17, 18, 19, 24 tried) that cost more like a cold chain",
                    d.name, calibration.date
                ),
            )
        })?;
        Ok(())
    }

    const EXPLAINS: bool = true;

    fn explain(profile: &Profile, point: &ConstantPoint) -> Result<String, experiments::Error> {
        let params = explained(profile, &profile.constant, Family::Constant)?;
        Ok(explain_constant(params, &profile.device.name, point))
    }

    fn summary(profile: &Profile) -> Option<String> {
        let c = profile.constant.as_ref()?;
        Some(format!(
            "warm {:.1} + {:.1} per extra word, cold {:.1} + {:.1}",
            c.warm_cycles, c.warm_per_extra, c.cold_cycles, c.cold_per_extra
        ))
    }
}

/// The family's page of the teaching site (`vramlab teach`).
pub(crate) fn teach_page(t: &Teacher) -> Result<TeachPage, experiments::Error> {
    let distinct: Vec<u32> = (1..=32).collect();
    let controls = vec![
        TeachControl::new(
            "distinct",
            "Distinct addresses in the warp",
            "range",
            strings(&distinct),
            strings(&distinct),
            "1",
        ),
        TeachControl::new(
            "cache",
            "Constant cache",
            "select",
            strings(&["warm", "cold"]),
            strings(&["warm (hit)", "cold (miss)"]),
            "warm",
        ),
    ];
    let mut curves: std::collections::BTreeMap<String, Vec<(f64, f64)>> = std::collections::BTreeMap::new();
    for cache in ["warm", "cold"] {
        for d in &distinct {
            let w = t.point(
                experiments::Family::Constant,
                &args(&["distinct", "cache"], &[d.to_string(), cache.to_string()]),
            )?;
            curves
                .entry(cache.to_string())
                .or_default()
                .push((f64::from(*d), metric(&t.predict(&w)?, "cycles")?));
        }
    }
    let panel = TeachPanel::build("constant", "One warp reading __constant__ memory", controls, |values| {
        let a = args(&["distinct", "cache"], values);
        let workload = t.point(experiments::Family::Constant, &a)?;
        let cycles = metric(&t.predict(&workload)?, "cycles")?;
        let (text, command) = t.explain("constant", &a)?;
        let cache = values[1].clone();
        let mut series =
            vec![json!({"name": format!("model, {cache}"), "class": "pinned", "line": true, "points": curves[&cache]})];
        let cold = cache == "cold";
        for (gpu, points) in t.measured_series(
            |w| match w {
                Workload::Constant(p) if p.cold == cold => Some(f64::from(p.distinct)),
                _ => None,
            },
            "cycles",
        ) {
            series.push(json!({"name": format!("measured, {gpu}"), "class": gpu_class(&gpu), "line": false, "points": points}));
        }
        Ok(TeachView {
            facts: vec![
                TeachFact::new("passes", "Passes (one per distinct address)", values[0].clone()),
                TeachFact::new(
                    "cycles",
                    "Predicted cycles per dependent access",
                    format!("{cycles:.0}"),
                )
                .strong()
                .bad_if(values[0] != "1"),
            ],
            measured: t.measured(&workload, "cycles", "cycles", |v| format!("{v:.1}")),
            command,
            text,
            picture: json!({"kind": "curve", "title": "cycles against distinct addresses", "xlabel": "distinct addresses per warp",
                            "ylabel": "cycles per access", "xlog": false, "ylog": false, "series": series,
                            "xticks": [[1, "1"], [4, "4"], [8, "8"], [12, "12"], [16, "16"], [20, "20"], [24, "24"], [28, "28"], [32, "32"]],
                            "marks": [[values[0].parse::<f64>().unwrap_or(1.0), cycles]]}),
        })
    })?;
    Ok(TeachPage {
        slug: "constant".into(),
        title: "Constant memory: serialisation".into(),
        intro: vec![
            "The constant cache serves one address per pass. A warp whose lanes all read one word is served at once; each further distinct word adds a pass. Move the slider and watch the cost climb.".into(),
        ],
        terminal: panel.initial_command(),
        panels: vec![panel],
        notes: vec![format!("Model: sim/src/constant.rs with profile '{}'.", t.profile.name)],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn constant_view_serializes_and_knows_the_capacity() {
        let params = experiments::Profile::find("h100").unwrap().constant.unwrap();
        let one = explain_constant(
            &params,
            "H100",
            &ConstantPoint {
                distinct: 1,
                cold: false,
            },
        );
        assert!(one.contains("broadcasts"), "{one}");
        let many = explain_constant(
            &params,
            "H100",
            &ConstantPoint {
                distinct: 24,
                cold: false,
            },
        );
        assert!(
            many.contains("24 address(es)") && many.contains("costs what a cold one does"),
            "{many}"
        );
    }

    fn params() -> ConstantParams {
        ConstantParams {
            source: "t".into(),
            warm_cycles: 20.0,
            warm_per_extra: 4.0,
            cold_cycles: 60.0,
            cold_per_extra: 30.0,
            capacity_lines: 16,
            calibration_cases: vec![],
        }
    }

    proptest! {
        #[test]
        fn more_addresses_serialize_more(distinct in 1u32..32, cold in any::<bool>()) {
            let p = params();
            let fewer = constant_cycles(&p, &ConstantPoint { distinct, cold });
            let more = constant_cycles(&p, &ConstantPoint { distinct: distinct + 1, cold });
            prop_assert!(more > fewer);
        }

        #[test]
        fn past_the_capacity_warm_costs_what_cold_does(distinct in 17u32..=32) {
            let p = params();
            let cold = constant_cycles(&p, &ConstantPoint { distinct, cold: true });
            prop_assert_eq!(constant_cycles(&p, &ConstantPoint { distinct, cold: false }), cold);
        }

        #[test]
        fn a_cold_cache_is_never_faster(distinct in 1u32..=32) {
            let p = params();
            let cold = constant_cycles(&p, &ConstantPoint { distinct, cold: true });
            let warm = constant_cycles(&p, &ConstantPoint { distinct, cold: false });
            prop_assert!(cold >= warm, "{} words: cold {}, warm {}", distinct, cold, warm);
        }
    }
}
