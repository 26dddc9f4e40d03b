//! Plot kind 2: the model's relative error at every compared point of one family, with the
//! +-10% band vramlab aims for and, shaded, the spread of repeated measurements when the profile
//! gives one; calibration points are drawn hollow.

use plotters::coord::Shift;
use plotters::prelude::*;

use experiments::{AxisScale, Family};

use crate::analysis::ExperimentAnalysis;
use crate::chart::{draw_legend, Chart, Scale, FONT_FAMILY, PALETTE};

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
        let mut chart = ChartBuilder::on(root)
            .caption(
                format!("model error, {} experiments", self.family.name()),
                (FONT_FAMILY, 22),
            )
            .margin(14)
            .x_label_area_size(48)
            .y_label_area_size(64)
            .build_cartesian_2d(x_range.clone(), -limit..limit)
            .map_err(e)?;
        let xs = self.x_scale;
        chart
            .configure_mesh()
            .x_desc(self.experiments[0].x_param.as_str())
            .y_desc("(predicted - measured) / measured, %")
            .x_label_formatter(&|v| xs.label(*v))
            .x_labels(12)
            .label_style((FONT_FAMILY, 13))
            .draw()
            .map_err(e)?;
        // The spread of repeated measurements, when the profile gives one: shaded.
        if let Some(spread) = self
            .experiments
            .iter()
            .find_map(|x| x.stats.as_ref()?.band.map(|b| b.spread * 100.0))
        {
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(x_range.start, -spread), (x_range.end, spread)],
                    BLUE.mix(0.12).filled(),
                )))
                .map_err(e)?;
        }
        for bound in [-10.0, 10.0] {
            chart
                .draw_series(LineSeries::new(
                    vec![(x_range.start, bound), (x_range.end, bound)],
                    BLACK.mix(0.4).stroke_width(1),
                ))
                .map_err(e)?;
        }
        for (i, experiment) in self.experiments.iter().enumerate() {
            let color = PALETTE[i % PALETTE.len()];
            let points = self.points(experiment);
            chart
                .draw_series(points.iter().map(|(x, y, calibration)| {
                    let style = if *calibration {
                        color.stroke_width(2)
                    } else {
                        color.filled()
                    };
                    Circle::new((*x, *y), 4, style)
                }))
                .map_err(e)?
                .label(experiment.experiment.as_str())
                .legend(move |(x, y)| Circle::new((x + 10, y), 4, color.filled()));
        }
        draw_legend(&mut chart, SeriesLabelPosition::UpperRight)
    }
}
