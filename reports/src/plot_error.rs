//! Plot kind 2: the model's relative error at every compared point of one family, with the
//! +-10% band vramlab aims for and, shaded, the spread of repeated measurements when the profile
//! gives one; calibration points are drawn hollow.

use plotters::coord::Shift;
use plotters::prelude::*;

use experiments::{AxisScale, Family};

use crate::analysis::ExperimentAnalysis;
use crate::chart::{all_whole, draw_markers, legend_beside, series_style, Chart, Entry, Mark, Scale, FONT_FAMILY};
use crate::names::param_title;

pub(crate) struct ErrorChart<'a> {
    family: Family,
    experiments: Vec<&'a ExperimentAnalysis>,
    x_scale: Scale,
}

impl<'a> ErrorChart<'a> {
    /// `None` when no experiment of the family has both a prediction and a measurement.
    pub(crate) fn new(family: Family, all: &'a [ExperimentAnalysis]) -> Option<ErrorChart<'a>> {
        let experiments: Vec<&ExperimentAnalysis> = all
            .iter()
            .filter(|e| e.family == family && e.points.iter().any(|p| p.relative_error.is_some()))
            .collect();
        let x_scale = match family.axes().0 {
            AxisScale::Bytes => Scale::Bytes,
            AxisScale::Linear | AxisScale::Log => Scale::Linear,
        };
        (!experiments.is_empty()).then_some(ErrorChart {
            family,
            experiments,
            x_scale,
        })
    }

    fn points(&self, e: &ExperimentAnalysis) -> Vec<(f64, f64, bool)> {
        e.points
            .iter()
            .filter_map(|p| {
                let x = p.params.get(&e.x_param)?.as_f64()?;
                Some((self.x_scale.to_axis(x), p.relative_error? * 100.0, p.calibration))
            })
            .collect()
    }
}

impl Chart for ErrorChart<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String>
    where
        DB::ErrorType: 'static,
    {
        let e = |err: DrawingAreaErrorKind<DB::ErrorType>| err.to_string();
        root.fill(&WHITE).map_err(e)?;
        let all: Vec<(f64, f64, bool)> = self.experiments.iter().flat_map(|x| self.points(x)).collect();
        let x_range = Scale::Linear.range(all.iter().map(|p| p.0), false);
        let limit = all.iter().map(|p| p.1.abs()).fold(12.0f64, f64::max) * 1.1;
        // The spread of repeated measurements, when the profile gives one: shaded.
        let spread = self
            .experiments
            .iter()
            .find_map(|x| x.stats.as_ref()?.band.map(|b| b.spread * 100.0));
        let band = BLUE.mix(0.12);
        let aim = BLACK.mix(0.45);
        let mut entries: Vec<Entry> = self
            .experiments
            .iter()
            .enumerate()
            .map(|(i, x)| {
                let style = series_style(i);
                Entry::new(
                    x.experiment.clone(),
                    Mark::Marker {
                        color: style.color.to_rgba(),
                        shape: style.shape,
                        filled: true,
                    },
                )
            })
            .collect();
        entries.push(Entry::new("", Mark::Text));
        entries.push(Entry::new(
            "validation point",
            Mark::Marker {
                color: BLACK.to_rgba(),
                shape: crate::chart::Shape::Circle,
                filled: true,
            },
        ));
        if all.iter().any(|p| p.2) {
            entries.push(Entry::new(
                "used to fit (hollow)",
                Mark::Marker {
                    color: BLACK.to_rgba(),
                    shape: crate::chart::Shape::Circle,
                    filled: false,
                },
            ));
        }
        entries.push(Entry::new(
            "±10%",
            Mark::Line {
                color: aim,
                width: 1,
                dashed: false,
                marker: None,
            },
        ));
        if let Some(spread) = spread {
            entries.push(Entry::new(
                format!("measurement spread ±{}%", crate::chart::number(spread)),
                Mark::Band(band),
            ));
        }
        let area = legend_beside(root, &entries, 46)?;
        let xs = self.x_scale;
        let x_whole = xs == Scale::Linear
            && all_whole(
                self.experiments
                    .iter()
                    .flat_map(|x| x.points.iter().filter_map(|p| p.params.get(&x.x_param)?.as_f64())),
            );
        let mut chart = ChartBuilder::on(&area)
            .caption(
                format!("model error, {} experiments", self.family.name()),
                (FONT_FAMILY, 22),
            )
            .margin(14)
            .x_label_area_size(48)
            .y_label_area_size(72)
            .build_cartesian_2d(
                Scale::Linear.axis(x_range.clone(), x_whole),
                Scale::Linear.axis(-limit..limit, false),
            )
            .map_err(e)?;
        chart
            .configure_mesh()
            .x_desc(param_title(self.family, &self.experiments[0].x_param))
            .y_desc("(predicted - measured) / measured, %")
            .x_label_formatter(&|v| xs.label(*v))
            .y_label_formatter(&|v| Scale::Linear.label(*v))
            .label_style((FONT_FAMILY, 13))
            .axis_desc_style((FONT_FAMILY, 15))
            .light_line_style(BLACK.mix(0.04))
            .bold_line_style(BLACK.mix(0.18))
            .draw()
            .map_err(e)?;
        if let Some(spread) = spread {
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(x_range.start, -spread), (x_range.end, spread)],
                    band.filled(),
                )))
                .map_err(e)?;
        }
        for bound in [-10.0, 10.0] {
            chart
                .draw_series(LineSeries::new(
                    vec![(x_range.start, bound), (x_range.end, bound)],
                    aim.stroke_width(1),
                ))
                .map_err(e)?;
        }
        for (i, experiment) in self.experiments.iter().enumerate() {
            let style = series_style(i);
            let points = self.points(experiment);
            for calibration in [false, true] {
                let these: Vec<(f64, f64)> = points
                    .iter()
                    .filter(|p| p.2 == calibration)
                    .map(|p| (p.0, p.1))
                    .collect();
                let look = if calibration {
                    style.color.stroke_width(2)
                } else {
                    style.color.filled()
                };
                draw_markers(&mut chart, &these, style.shape, look)?;
            }
        }
        Ok(())
    }
}
