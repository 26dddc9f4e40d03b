//! The render stage: analysis.json -> plots, report.md, report.html.

use std::path::{Path, PathBuf};

use experiments::{format_bytes, write_atomically, DeviceInfo, Family, ParamValue, Params};

use crate::analysis::{Analysis, ErrorStats, ExperimentAnalysis};
use crate::chart::render_both;
use crate::document::{to_html, to_markdown, Block};
use crate::error::Result;
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

/// Renders an analysis into `dir`.
pub fn render(dir: &Path, analysis: &Analysis) -> Result<Rendered> {
    let plot_dir = dir.join("plots");
    let mut plots = Vec::new();
    let mut blocks = vec![Block::Heading(1, "vramlab report".into())];
    blocks.extend(overview(analysis));
    for family in Family::ALL {
        if let Some(chart) = ErrorChart::new(family, &analysis.experiments) {
            let stem = format!("error_{}", family.name());
            plots.extend(render_both(&plot_dir, &stem, &chart)?);
            blocks.push(Block::Image {
                alt: format!("model error, {} experiments", family.name()),
                png: format!("plots/{stem}.png"),
                svg: format!("plots/{stem}.svg"),
            });
        }
    }
    for experiment in &analysis.experiments {
        let stem = experiment.experiment.clone();
        // Many-parameter sweeps of an exact model read best as predicted against measured.
        if experiment.family.drawn_as_agreement() {
            plots.extend(render_both(&plot_dir, &stem, &AgreementChart::new(experiment))?);
        } else {
            plots.extend(render_both(&plot_dir, &stem, &SweepChart::new(experiment))?);
        }
        blocks.push(Block::Heading(2, experiment.experiment.clone()));
        blocks.push(Block::Paragraph(describe(experiment)));
        blocks.push(Block::Image {
            alt: stem.clone(),
            png: format!("plots/{stem}.png"),
            svg: format!("plots/{stem}.svg"),
        });
        for &(metric, title) in experiment.family.also_plotted() {
            // `peak_bytes` is drawn as `<experiment>_peak`.
            let name = metric.split('_').next().unwrap_or(metric);
            let extra = format!("{stem}_{name}");
            plots.extend(render_both(
                &plot_dir,
                &extra,
                &SweepChart::of_metric(experiment, metric),
            )?);
            blocks.push(Block::Image {
                alt: format!("{stem}: {title}"),
                png: format!("plots/{extra}.png"),
                svg: format!("plots/{extra}.svg"),
            });
        }
        blocks.push(points_table(experiment));
    }
    let markdown = dir.join("report.md");
    let html = dir.join("report.html");
    write_atomically(&markdown, to_markdown(&blocks).as_bytes())?;
    write_atomically(&html, to_html("vramlab report", &blocks).as_bytes())?;
    Ok(Rendered { markdown, html, plots })
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
    let mut rows: Vec<Vec<String>> = analysis
        .by_family
        .iter()
        .map(|(family, s)| stats_row(format!("all {} experiments", family.name()), s))
        .collect();
    rows.extend(analysis.experiments.iter().filter_map(|e| {
        e.stats
            .as_ref()
            .map(|s| stats_row(format!("{} ({})", e.experiment, e.metric), s))
    }));
    if !rows.is_empty() {
        blocks.push(Block::Heading(2, "Model error".into()));
        blocks.push(Block::Paragraph(
            "Relative error of the family's primary metric, (predicted - measured) / measured. Validation points are those the profile was not fitted on; calibration points are listed in each table and excluded here.".into(),
        ));
        blocks.push(Block::Table {
            header: [
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
        });
        blocks.extend(groups_table(analysis));
        blocks.extend(band_table(analysis));
    }
    blocks
}

/// How many validation points the model predicted within the spread of repeated measurements
/// (the profile's `[uncertainty]`): nothing when the profile has none.
fn band_table(analysis: &Analysis) -> Vec<Block> {
    let rows: Vec<Vec<String>> = analysis
        .by_family
        .iter()
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
        Block::Table {
            header: ["family", "band", "validation points inside", "outside"]
                .map(String::from)
                .to_vec(),
            rows,
        },
    ]
}

/// The error of each group of points apart: used to fit, seen while designing, held out; and
/// for each hold-out, the commits that let anyone check it was registered before it ran.
fn groups_table(analysis: &Analysis) -> Vec<Block> {
    let mut rows = Vec::new();
    let labelled = analysis
        .by_family
        .iter()
        .map(|(family, s)| (format!("all {} experiments", family.name()), s))
        .chain(
            analysis
                .experiments
                .iter()
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
        Block::Table {
            header: ["experiments", "group", "points", "median |error|", "worst |error|"]
                .map(String::from)
                .to_vec(),
            rows,
        },
    ];
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

fn points_table(e: &ExperimentAnalysis) -> Block {
    let param_names: Vec<String> = e
        .points
        .first()
        .map(|p| p.params.keys().cloned().collect())
        .unwrap_or_default();
    let varying: Vec<String> = param_names
        .into_iter()
        .filter(|k| e.points.iter().any(|p| p.params.get(k) != e.points[0].params.get(k)))
        .collect();
    let mut header = varying.clone();
    header.extend([
        format!("predicted {}", e.metric),
        format!("measured {}", e.metric),
        "error".into(),
        "use".into(),
    ]);
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
            row.push(value(&p.measured));
            row.push(
                p.relative_error
                    .map(|x| format!("{:+.1}%", x * 100.0))
                    .unwrap_or_else(|| "-".into()),
            );
            row.push(if p.calibration { "calibration" } else { "validation" }.into());
            row
        })
        .collect();
    Block::Table { header, rows }
}
