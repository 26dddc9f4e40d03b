//! Plot kind 1: an experiment's primary metric along its sweep, predicted (lines) against
//! measured (markers), one colour per combination of the other parameters.

use plotters::coord::Shift;
use plotters::prelude::*;

use experiments::{AxisScale, Params};

use crate::analysis::ExperimentAnalysis;
use crate::chart::{
    all_whole, draw_line, draw_markers, legend_beside, series_style, Chart, Entry, Mark, Scale, Shape, FONT_FAMILY,
};
use crate::names::{metric_title, param_title, param_value};

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
                    .map(|(k, v)| param_value(k, v))
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
        let measured = self.series.iter().any(|s| !s.measured.is_empty());
        // With one series the key is drawn in its colour; with several, in black.
        let (black, key_shape) = match self.series.len() {
            1 => (series_style(0).color.to_rgba(), series_style(0).shape),
            _ => (BLACK.to_rgba(), Shape::Circle),
        };
        // The legend sits beside the plot, never on its data: first what lines and markers
        // mean, then each series.
        let mut entries = vec![Entry::new(
            "model (sim)",
            Mark::Line {
                color: black,
                width: 2,
                dashed: false,
                marker: None,
            },
        )];
        if measured {
            entries.push(Entry::new(
                "measured (hw)",
                Mark::Marker {
                    color: black,
                    shape: key_shape,
                    filled: true,
                },
            ));
        }
        if self.series.len() > 1 {
            entries.push(Entry::new("", Mark::Text));
            entries.extend(self.series.iter().enumerate().map(|(i, s)| {
                let style = series_style(i);
                Entry::new(
                    s.label.clone(),
                    Mark::Line {
                        color: style.color.to_rgba(),
                        width: 2,
                        dashed: style.dashed,
                        marker: measured.then_some(style.shape),
                    },
                )
            }));
        }
        let area = legend_beside(root, &entries, 46)?;
        let (xs, ys) = (self.x_scale, self.y_scale);
        let x_whole = xs == Scale::Linear && all_whole(all().map(|p| p.0));
        let y_whole = ys == Scale::Linear && all_whole(all().map(|p| p.1));
        // A further metric (growth's peak memory) says which in its title.
        let caption = if self.metric == self.experiment.metric {
            format!("{}{device}", self.experiment.experiment)
        } else {
            format!(
                "{}: {}{device}",
                self.experiment.experiment,
                metric_title(self.experiment.family, self.metric)
            )
        };
        let mut chart = ChartBuilder::on(&area)
            .caption(caption, (FONT_FAMILY, 22))
            .margin(14)
            .x_label_area_size(48)
            .y_label_area_size(72)
            .build_cartesian_2d(xs.axis(x_range, x_whole), ys.axis(y_range, y_whole))
            .map_err(e)?;
        chart
            .configure_mesh()
            .x_desc(param_title(self.experiment.family, &self.experiment.x_param))
            .y_desc(metric_title(self.experiment.family, self.metric))
            .x_label_formatter(&|v| xs.label(*v))
            .y_label_formatter(&|v| ys.label(*v))
            .label_style((FONT_FAMILY, 13))
            .axis_desc_style((FONT_FAMILY, 15))
            .light_line_style(BLACK.mix(0.04))
            .bold_line_style(BLACK.mix(0.18))
            .draw()
            .map_err(e)?;
        for (i, s) in self.series.iter().enumerate() {
            let style = series_style(i);
            let to_axis = |pts: &[(f64, f64)]| -> Vec<(f64, f64)> {
                pts.iter().map(|(x, y)| (xs.to_axis(*x), ys.to_axis(*y))).collect()
            };
            if !s.predicted.is_empty() {
                draw_line(
                    &mut chart,
                    to_axis(&s.predicted),
                    style.color.stroke_width(2),
                    style.dashed,
                )?;
            }
            if !s.measured.is_empty() {
                draw_markers(&mut chart, &to_axis(&s.measured), style.shape, style.color.filled())?;
            }
        }
        Ok(())
    }
}
