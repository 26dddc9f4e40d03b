//! Plot kind 1: an experiment's primary metric along its sweep, predicted (lines) against
//! measured (markers), one colour per combination of the other parameters.

use plotters::coord::Shift;
use plotters::prelude::*;

use experiments::{AxisScale, Params};

use crate::analysis::ExperimentAnalysis;
use crate::chart::{draw_legend, Chart, Scale, FONT_FAMILY, PALETTE};

/// One line of the chart: the points that share every parameter but the x one.
struct Series {
    label: String,
    predicted: Vec<(f64, f64)>,
    measured: Vec<(f64, f64)>,
}

pub(crate) struct SweepChart<'a> {
    experiment: &'a ExperimentAnalysis,
    metric: &'a str,
    x_scale: Scale,
    y_scale: Scale,
    series: Vec<Series>,
}

fn metric_title(metric: &str) -> &str {
    match metric {
        "gb_per_s" => "bandwidth (GB/s)",
        "speedup" => "speed-up over copy-then-compute",
        "time_us" => "time (us)",
        "cycles" => "cycles per dependent load",
        "grow_us" => "time per grow (us)",
        "peak_bytes" => "peak device memory",
        other => other,
    }
}

impl<'a> SweepChart<'a> {
    pub(crate) fn new(experiment: &'a ExperimentAnalysis) -> SweepChart<'a> {
        SweepChart::of_metric(experiment, &experiment.metric)
    }

    /// The same chart for another metric the records carry (growth draws `peak_bytes` too).
    pub(crate) fn of_metric(experiment: &'a ExperimentAnalysis, metric: &'a str) -> SweepChart<'a> {
        let scale = |axis| match axis {
            AxisScale::Linear => Scale::Linear,
            AxisScale::Log => Scale::Log,
            AxisScale::Bytes => Scale::Bytes,
        };
        let (x_scale, y_scale) = if metric.ends_with("_bytes") {
            (Scale::Bytes, Scale::Bytes)
        } else {
            let (x, y) = experiment.family.axes();
            (scale(x), scale(y))
        };
        let x_name = experiment.x_param.as_str();
        let mut series: Vec<(Params, Series)> = Vec::new();
        for point in &experiment.points {
            let Some(x) = point.params.get(x_name).and_then(|v| v.as_f64()) else {
                continue;
            };
            let mut rest = point.params.clone();
            rest.remove(x_name);
            let index = series.iter().position(|(p, _)| *p == rest).unwrap_or_else(|| {
                let varying: Vec<String> = rest
                    .iter()
                    .filter(|(k, v)| experiment.points.iter().any(|q| q.params.get(*k) != Some(*v)))
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                let label = if varying.is_empty() {
                    experiment.experiment.clone()
                } else {
                    varying.join(", ")
                };
                series.push((
                    rest,
                    Series {
                        label,
                        predicted: Vec::new(),
                        measured: Vec::new(),
                    },
                ));
                series.len() - 1
            });
            let s = &mut series[index].1;
            if let Some(y) = point.predicted.as_ref().and_then(|m| m.get(metric)) {
                s.predicted.push((x, *y));
            }
            if let Some(y) = point.measured.as_ref().and_then(|m| m.get(metric)) {
                s.measured.push((x, *y));
            }
        }
        SweepChart {
            experiment,
            metric,
            x_scale,
            y_scale,
            series: series.into_iter().map(|(_, s)| s).collect(),
        }
    }
}

impl Chart for SweepChart<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String>
    where
        DB::ErrorType: 'static,
    {
        let e = |err: DrawingAreaErrorKind<DB::ErrorType>| err.to_string();
        root.fill(&WHITE).map_err(e)?;
        let all = || self.series.iter().flat_map(|s| s.predicted.iter().chain(&s.measured));
        let x_range = self.x_scale.range(all().map(|p| p.0), false);
        let y_range = self.y_scale.range(all().map(|p| p.1), self.y_scale == Scale::Linear);
        let device = self
            .experiment
            .measured_device
            .as_ref()
            .map(|d| format!(" on {}", d.name))
            .unwrap_or_default();
        let mut chart = ChartBuilder::on(root)
            .caption(format!("{}{device}", self.experiment.experiment), (FONT_FAMILY, 22))
            .margin(14)
            .x_label_area_size(48)
            .y_label_area_size(64)
            .build_cartesian_2d(x_range, y_range)
            .map_err(e)?;
        let (xs, ys) = (self.x_scale, self.y_scale);
        chart
            .configure_mesh()
            .x_desc(self.experiment.x_param.as_str())
            .y_desc(metric_title(self.metric))
            .x_label_formatter(&|v| xs.label(*v))
            .y_label_formatter(&|v| ys.label(*v))
            .x_labels(12)
            .label_style((FONT_FAMILY, 13))
            .draw()
            .map_err(e)?;
        for (i, s) in self.series.iter().enumerate() {
            let color = PALETTE[i % PALETTE.len()];
            let to_axis = |pts: &[(f64, f64)]| -> Vec<(f64, f64)> {
                pts.iter().map(|(x, y)| (xs.to_axis(*x), ys.to_axis(*y))).collect()
            };
            if !s.predicted.is_empty() {
                chart
                    .draw_series(LineSeries::new(to_axis(&s.predicted), color.stroke_width(2)))
                    .map_err(e)?
                    .label(format!("{} (sim)", s.label))
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
            }
            if !s.measured.is_empty() {
                chart
                    .draw_series(
                        to_axis(&s.measured)
                            .into_iter()
                            .map(|p| Circle::new(p, 4, color.filled())),
                    )
                    .map_err(e)?
                    .label(format!("{} (hw)", s.label))
                    .legend(move |(x, y)| Circle::new((x + 10, y), 4, color.filled()));
            }
        }
        draw_legend(&mut chart, SeriesLabelPosition::LowerRight)
    }
}
