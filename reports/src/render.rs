//! The render stage: analysis.json -> plots, report.md, report.html.

use std::path::{Path, PathBuf};

use experiments::{format_bytes, write_atomically, DeviceInfo, Family, ParamValue, Params};

use crate::analysis::{Analysis, ErrorStats, ExperimentAnalysis};
use crate::chart::render_both;
use crate::document::{anchor, table_folded, to_html, to_markdown, Block, Table};
use crate::error::Result;
use crate::names::{metric_title, param_title};
use crate::plot_agreement::AgreementChart;
use crate::plot_error::ErrorChart;
use crate::plot_sweep::SweepChart;

/// What [`render`] wrote.
#[derive(Debug, Clone)]
pub struct Rendered {
    /// report.md
    pub markdown: PathBuf,
    /// report.html
    pub html: PathBuf,
    /// Every PNG and SVG.
    pub plots: Vec<PathBuf>,
}

/// Analyses the records under `dir` and writes analysis.json, plots/, report.md, report.html.
pub fn render_report(dir: &Path) -> Result<Rendered> {
    let analysis = Analysis::from_dir(dir)?;
    analysis.save(dir)?;
    render(dir, &analysis)
}

/// As [`render_report`], of the experiments `only` names: a run's report, in a folder that may
/// also hold the records of earlier runs.
pub fn render_report_of(dir: &Path, only: &[String]) -> Result<Rendered> {
    let analysis = Analysis::from_dir_only(dir, Some(only))?;
    analysis.save(dir)?;
    render(dir, &analysis)
}

/// Every family in the order of the hierarchy a report walks: first those that live on the host
/// side of the link (copies, overlap, growth, migration, peer: the families whose figures depend
/// on the machine's parts), then those on the chip, each group in the registry's order.
fn families_in_order() -> Vec<Family> {
    let (host, chip): (Vec<Family>, Vec<Family>) = Family::ALL.into_iter().partition(|f| f.uses_machine_parts());
    host.into_iter().chain(chip).collect()
}

/// The error vramlab aims for: the error plots draw it.
const AIM: f64 = 0.10;

/// The heading of a family's section.
fn family_heading(family: Family) -> String {
    format!("{} family", family.name())
}

/// Renders an analysis into `dir`.
pub fn render(dir: &Path, analysis: &Analysis) -> Result<Rendered> {
    let plot_dir = dir.join("plots");
    let mut plots = Vec::new();
    let mut blocks = vec![Block::Heading(1, "vramlab report".into())];
    blocks.extend(overview(analysis));
    blocks.extend(summary(analysis));
    blocks.extend(error_detail(analysis));
    for family in families_in_order() {
        let members: Vec<&ExperimentAnalysis> = analysis.experiments.iter().filter(|e| e.family == family).collect();
        if members.is_empty() {
            continue;
        }
        blocks.push(Block::Heading(2, family_heading(family)));
        if let Some(chart) = ErrorChart::new(family, &analysis.experiments) {
            let stem = format!("error_{}", family.name());
            plots.extend(render_both(&plot_dir, &stem, &chart)?);
            blocks.push(Block::Image {
                alt: format!("model error, {} experiments", family.name()),
                png: format!("plots/{stem}.png"),
                svg: format!("plots/{stem}.svg"),
            });
        }
        for experiment in members {
            blocks.extend(experiment_section(experiment, &plot_dir, &mut plots)?);
        }
    }
    let markdown = dir.join("report.md");
    let html = dir.join("report.html");
    write_atomically(&markdown, to_markdown(&blocks).as_bytes())?;
    write_atomically(&html, to_html("vramlab report", &blocks).as_bytes())?;
    Ok(Rendered { markdown, html, plots })
}

/// One experiment: what it is, its plots, its points (folded when many).
fn experiment_section(e: &ExperimentAnalysis, plot_dir: &Path, plots: &mut Vec<PathBuf>) -> Result<Vec<Block>> {
    let stem = e.experiment.clone();
    let mut blocks = vec![Block::Heading(3, e.experiment.clone()), Block::Paragraph(describe(e))];
    let image = |stem: &str, alt: String| Block::Image {
        alt,
        png: format!("plots/{stem}.png"),
        svg: format!("plots/{stem}.svg"),
    };
    // Many-parameter sweeps of an exact model read best as predicted against measured; with
    // nothing measured there is nothing to draw that way.
    if e.family.drawn_as_agreement() {
        let chart = AgreementChart::new(e);
        if chart.has_pairs() {
            plots.extend(render_both(plot_dir, &stem, &chart)?);
            blocks.push(image(&stem, stem.clone()));
        } else {
            blocks.push(Block::Paragraph(format!(
                "Nothing to compare: no point of `{}` was measured in this run, so there is no predicted-against-measured plot. The predictions are in the table below; `--backend both` on a GPU measures them.",
                e.experiment
            )));
        }
    } else {
        plots.extend(render_both(plot_dir, &stem, &SweepChart::new(e))?);
        blocks.push(image(&stem, stem.clone()));
    }
    for &(metric, title) in e.family.also_plotted() {
        // `peak_bytes` is drawn as `<experiment>_peak`.
        let name = metric.split('_').next().unwrap_or(metric);
        let extra = format!("{stem}_{name}");
        plots.extend(render_both(plot_dir, &extra, &SweepChart::of_metric(e, metric))?);
        blocks.push(image(&extra, format!("{stem}: {title}")));
    }
    let table = points_table(e);
    let summary = format!(
        "All {} points of `{}` ({} rows)",
        e.points.len(),
        e.experiment,
        table.rows.len()
    );
    blocks.push(table_folded(summary, table));
    Ok(blocks)
}

/// One row per family, in [`families_in_order`]: how many points, the error, a verdict; and the
/// contents, each family's experiments linked.
fn summary(analysis: &Analysis) -> Vec<Block> {
    let mut rows = Vec::new();
    let mut contents = Vec::new();
    for family in families_in_order() {
        let members: Vec<&ExperimentAnalysis> = analysis.experiments.iter().filter(|e| e.family == family).collect();
        if members.is_empty() {
            continue;
        }
        let heading = family_heading(family);
        let link = format!("[{}](#{})", family.name(), anchor(&heading));
        let stats = analysis.by_family.iter().find(|(f, _)| *f == family).map(|(_, s)| s);
        let predicted: usize = members
            .iter()
            .map(|e| e.points.iter().filter(|p| p.predicted.is_some()).count())
            .sum();
        let beyond = members
            .iter()
            .flat_map(|e| e.points.iter())
            .filter(|p| !p.calibration)
            .filter(|p| p.relative_error.is_some_and(|x| x.abs() > AIM))
            .count();
        rows.push(vec![
            link.clone(),
            members.len().to_string(),
            predicted.to_string(),
            stats.map_or("-".into(), |s| s.validation_points.to_string()),
            stats.map_or("-".into(), |s| percent(s.median_abs_error)),
            stats.map_or("-".into(), |s| percent(s.worst_abs_error)),
            verdict(stats, beyond),
        ]);
        contents.push(format!(
            "{link}: {}",
            members
                .iter()
                .map(|e| format!("[{}](#{})", e.experiment, anchor(&e.experiment)))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let header = [
        "family",
        "experiments",
        "points predicted",
        "points compared",
        "median |error|",
        "worst |error|",
        "verdict",
    ];
    let titles = [
        "the kind of experiment; the link goes to its section",
        "experiments of the family in this report",
        "sweep points the model predicted",
        "validation points both predicted and measured (points used to fit the profile are left out)",
        "median of |predicted - measured| / measured over the points compared",
        "largest |predicted - measured| / measured over the points compared",
        "against the 10% vramlab aims for",
    ];
    // With nothing measured, the error columns would be dashes only.
    let keep: Vec<usize> = if analysis.by_family.is_empty() {
        vec![0, 1, 2, 6]
    } else {
        (0..header.len()).collect()
    };
    let pick = |row: &[String]| keep.iter().map(|&i| row[i].clone()).collect::<Vec<_>>();
    let table = Table::new(pick(&header.map(String::from)), rows.iter().map(|r| pick(r)).collect())
        .titles(pick(&titles.map(String::from)))
        .wrap(&[keep.len() - 1]);
    let about = if analysis.by_family.is_empty() {
        "Each family's experiments, in the order of the memory hierarchy from the host inwards. Nothing was measured, so there is no error to show: the sections below plot the predictions."
    } else {
        "Each family's model against the measurements, in the order of the memory hierarchy from the host inwards. Error is (predicted - measured) / measured of the family's primary metric, over the points the profile was not fitted on."
    };
    vec![
        Block::Heading(2, "Summary".into()),
        Block::Paragraph(about.into()),
        Block::Table(table),
        Block::Heading(3, "Contents".into()),
        Block::List(contents),
    ]
}

/// A family's verdict in a few words, against the 10% vramlab aims for.
fn verdict(stats: Option<&ErrorStats>, beyond: usize) -> String {
    match stats {
        None => "predicted only: nothing measured".into(),
        Some(s) if s.worst_abs_error == 0.0 => "exact at every point".into(),
        Some(s) if s.worst_abs_error <= AIM => "within 10% at every point".into(),
        Some(s) if s.median_abs_error <= AIM => {
            format!("median within 10%; {beyond} of {} points beyond", s.validation_points)
        }
        Some(s) => format!("median beyond 10%; {beyond} of {} points beyond", s.validation_points),
    }
}

fn percent(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

fn show_params(params: &Params) -> String {
    params
        .iter()
        .map(|(k, v)| format!("{k}={}", show_value(k, v)))
        .collect::<Vec<_>>()
        .join(", ")
}

fn show_value(name: &str, value: &ParamValue) -> String {
    match (name, value) {
        ("bytes", ParamValue::Int(b)) => format_bytes(*b as u64),
        _ => value.to_string(),
    }
}

fn stats_row(label: String, s: &ErrorStats) -> Vec<String> {
    vec![
        label,
        s.validation_points.to_string(),
        s.calibration_points.to_string(),
        percent(s.median_abs_error),
        percent(s.worst_abs_error),
        show_params(&s.worst_point),
    ]
}

fn device_line(d: &DeviceInfo) -> String {
    format!(
        "Measured on **{}** (compute capability {}, {} SMs, {}, {} copy engines, driver {}, PCI {}, SM clock {} MHz, memory clock {} MHz).",
        d.name,
        d.compute_capability,
        d.multiprocessors,
        format_bytes(d.memory_bytes),
        d.copy_engines,
        d.driver_version,
        d.pci_bus_id,
        d.clock_mhz,
        d.memory_clock_mhz
    )
}

fn overview(analysis: &Analysis) -> Vec<Block> {
    let mut blocks = Vec::new();
    let profiles: Vec<String> = {
        let mut p: Vec<String> = analysis.experiments.iter().filter_map(|e| e.profile.clone()).collect();
        // Each profile once, however the experiments interleave them.
        p.sort();
        p.dedup();
        p
    };
    let measured: Vec<&DeviceInfo> = analysis
        .experiments
        .iter()
        .filter_map(|e| e.measured_device.as_ref())
        .collect();
    blocks.push(Block::Paragraph(format!(
        "{} experiments. Predictions from profile `{}`.",
        analysis.experiments.len(),
        if profiles.is_empty() {
            "none".to_string()
        } else {
            profiles.join("`, `")
        }
    )));
    match measured.first() {
        Some(device) => blocks.push(Block::Paragraph(device_line(device))),
        None => blocks.push(Block::Paragraph(
            "No measurements in this run: predictions only. Run with `--backend both` on a GPU to compare.".into(),
        )),
    }
    blocks
}

/// The families' pooled statistics, in [`families_in_order`].
fn by_family_in_order(analysis: &Analysis) -> Vec<&(Family, ErrorStats)> {
    families_in_order()
        .into_iter()
        .filter_map(|family| analysis.by_family.iter().find(|(f, _)| *f == family))
        .collect()
}

/// The experiments, grouped by family in [`families_in_order`].
fn experiments_in_order(analysis: &Analysis) -> Vec<&ExperimentAnalysis> {
    families_in_order()
        .into_iter()
        .flat_map(|family| analysis.experiments.iter().filter(move |e| e.family == family))
        .collect()
}

/// The model's error by family and by experiment, with where the worst point is, the groups
/// of points apart and the measurement band: folded, since the summary says the gist.
fn error_detail(analysis: &Analysis) -> Vec<Block> {
    let mut rows: Vec<Vec<String>> = by_family_in_order(analysis)
        .into_iter()
        .map(|(family, s)| stats_row(format!("all {} experiments", family.name()), s))
        .collect();
    rows.extend(experiments_in_order(analysis).into_iter().filter_map(|e| {
        e.stats
            .as_ref()
            .map(|s| stats_row(format!("{} ({})", e.experiment, e.metric), s))
    }));
    if rows.is_empty() {
        return Vec::new();
    }
    let table = Table::new(
        [
            "experiments",
            "validation points",
            "calibration points",
            "median |error|",
            "worst |error|",
            "worst at",
        ]
        .map(String::from)
        .to_vec(),
        rows,
    )
    .wrap(&[5]);
    let mut blocks = vec![
        Block::Heading(2, "Model error".into()),
        Block::Paragraph(
            "Relative error of the family's primary metric, (predicted - measured) / measured. Validation points are those the profile was not fitted on; calibration points are listed in each table and excluded here.".into(),
        ),
        table_folded(format!("By family and by experiment ({} rows)", table.rows.len()), table),
    ];
    blocks.extend(groups_table(analysis));
    blocks.extend(band_table(analysis));
    blocks
}

/// How many validation points the model predicted within the spread of repeated measurements
/// (the profile's `[uncertainty]`): nothing when the profile has none.
fn band_table(analysis: &Analysis) -> Vec<Block> {
    let rows: Vec<Vec<String>> = by_family_in_order(analysis)
        .into_iter()
        .filter_map(|(family, s)| {
            let b = s.band?;
            Some(vec![
                family.name().to_string(),
                format!("±{}", percent(b.spread)),
                b.inside.to_string(),
                b.outside.to_string(),
            ])
        })
        .collect();
    if rows.is_empty() {
        return Vec::new();
    }
    vec![
        Block::Heading(3, "Within the measurements' own spread".into()),
        Block::Paragraph(
            "The band is how much measurements of the same point differed between runs and machines of this GPU (the profile's `[uncertainty]`, 90th percentile); inside it, a measurement cannot tell the model wrong. The error plots shade it.".into(),
        ),
        Block::Table(Table::new(
            ["family", "band", "validation points inside", "outside"]
                .map(String::from)
                .to_vec(),
            rows,
        )),
    ]
}

/// The error of each group of points apart: used to fit, seen while designing, held out; and
/// for each hold-out, the commits that let anyone check it was registered before it ran.
fn groups_table(analysis: &Analysis) -> Vec<Block> {
    let mut rows = Vec::new();
    let labelled = by_family_in_order(analysis)
        .into_iter()
        .map(|(family, s)| (format!("all {} experiments", family.name()), s))
        .chain(
            experiments_in_order(analysis)
                .into_iter()
                .filter_map(|e| e.stats.as_ref().map(|s| (e.experiment.clone(), s))),
        );
    for (label, s) in labelled {
        for g in &s.groups {
            rows.push(vec![
                label.clone(),
                g.group.label().to_string(),
                g.points.to_string(),
                percent(g.median_abs_error),
                percent(g.worst_abs_error),
            ]);
        }
    }
    if rows.is_empty() {
        return Vec::new();
    }
    let mut blocks = vec![
        Block::Heading(3, "By what the points are".into()),
        Block::Paragraph(
            "Used to fit: the profile's parameters were fitted there. Held out: the suite was registered (`holdout_registered`) in a commit before it was measured, the model frozen there. Seen while designing: every other point, since nothing shows the model was not shaped with it in view.".into(),
        ),
    ];
    let table = Table::new(
        ["experiments", "group", "points", "median |error|", "worst |error|"]
            .map(String::from)
            .to_vec(),
        rows,
    );
    blocks.push(table_folded(format!("By group ({} rows)", table.rows.len()), table));
    for e in &analysis.experiments {
        if let Some(h) = e.stats.as_ref().and_then(|s| s.holdout.as_ref()) {
            blocks.push(Block::Paragraph(format!(
                "`{}` is a hold-out registered in `{}`; predicted by code at `{}`, measured by code at `{}` (`git merge-base --is-ancestor {} <measuring commit>` checks the order).",
                e.experiment, h.registered, h.predicted_by, h.measured_by, h.registered
            )));
        }
    }
    blocks
}

fn describe(e: &ExperimentAnalysis) -> String {
    let mut text = format!(
        "Family `{}`, suite `{}`, compared on `{}`.",
        e.family.name(),
        e.suite,
        e.metric
    );
    if let Some(s) = &e.stats {
        text.push_str(&format!(
            " Median |error| {} over {} validation points, worst {} at {}.",
            percent(s.median_abs_error),
            s.validation_points,
            percent(s.worst_abs_error),
            show_params(&s.worst_point)
        ));
    }
    text
}

/// Every point of an experiment; the measured and error columns only where something was
/// measured.
fn points_table(e: &ExperimentAnalysis) -> Table {
    let param_names: Vec<String> = e
        .points
        .first()
        .map(|p| p.params.keys().cloned().collect())
        .unwrap_or_default();
    let varying: Vec<String> = param_names
        .into_iter()
        .filter(|k| e.points.iter().any(|p| p.params.get(k) != e.points[0].params.get(k)))
        .collect();
    let measured = e.points.iter().any(|p| p.measured.is_some());
    let metric = metric_title(e.family, &e.metric);
    let mut header: Vec<String> = varying.iter().map(|k| param_title(e.family, k)).collect();
    header.push(format!("predicted {metric}"));
    if measured {
        header.extend([format!("measured {metric}"), "error".into()]);
    }
    header.push("use".into());
    let value = |m: &Option<experiments::Metrics>| {
        m.as_ref()
            .and_then(|m| m.get(&e.metric))
            .map(|v| format!("{v:.4}"))
            .unwrap_or_else(|| "-".into())
    };
    let rows = e
        .points
        .iter()
        .map(|p| {
            let mut row: Vec<String> = varying
                .iter()
                .map(|k| p.params.get(k).map(|v| show_value(k, v)).unwrap_or_default())
                .collect();
            row.push(value(&p.predicted));
            if measured {
                row.push(value(&p.measured));
                row.push(
                    p.relative_error
                        .map(|x| format!("{:+.1}%", x * 100.0))
                        .unwrap_or_else(|| "-".into()),
                );
            }
            row.push(if p.calibration { "calibration" } else { "validation" }.into());
            row
        })
        .collect();
    Table::new(header, rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_has_its_place_in_the_order_once() {
        let order = families_in_order();
        assert_eq!(order.len(), Family::ALL.len());
        for family in Family::ALL {
            assert_eq!(order.iter().filter(|f| **f == family).count(), 1, "{family:?}");
        }
    }

    #[test]
    fn verdicts_read_against_the_aim() {
        let stats = |median: f64, worst: f64| ErrorStats {
            validation_points: 10,
            calibration_points: 0,
            median_abs_error: median,
            worst_abs_error: worst,
            worst_point: Params::new(),
            groups: Vec::new(),
            band: None,
            holdout: None,
        };
        assert_eq!(verdict(None, 0), "predicted only: nothing measured");
        assert_eq!(verdict(Some(&stats(0.0, 0.0)), 0), "exact at every point");
        assert_eq!(verdict(Some(&stats(0.02, 0.08)), 0), "within 10% at every point");
        assert_eq!(
            verdict(Some(&stats(0.02, 6.8)), 3),
            "median within 10%; 3 of 10 points beyond"
        );
        assert_eq!(
            verdict(Some(&stats(0.25, 2.3)), 7),
            "median beyond 10%; 7 of 10 points beyond"
        );
    }
}
