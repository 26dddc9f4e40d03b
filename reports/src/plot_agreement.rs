//! Plot kind 3: predicted against measured for every point of an experiment, with the
//! diagonal where they agree. For exact models (occupancy) every point should sit on it.

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::analysis::ExperimentAnalysis;
use crate::chart::{all_whole, Chart, Scale, FONT_FAMILY, PALETTE};
use crate::names::metric_title;

pub(crate) struct AgreementChart<'a> {
    experiment: &'a ExperimentAnalysis,
    pairs: Vec<(f64, f64)>,
}

impl<'a> AgreementChart<'a> {
    pub(crate) fn new(experiment: &'a ExperimentAnalysis) -> AgreementChart<'a> {
        let metric = experiment.metric.as_str();
        let pairs = experiment
            .points
            .iter()
            .filter_map(|p| Some((*p.predicted.as_ref()?.get(metric)?, *p.measured.as_ref()?.get(metric)?)))
            .collect();
        AgreementChart { experiment, pairs }
    }

    /// Whether there is anything to compare: a point both predicted and measured. Reports say
    /// so in words rather than draw an empty square.
    pub(crate) fn has_pairs(&self) -> bool {
        !self.pairs.is_empty()
    }
}

impl Chart for AgreementChart<'_> {
    fn size(&self) -> (u32, u32) {
        (640, 600)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String>
    where
        DB::ErrorType: 'static,
    {
        let e = |err: DrawingAreaErrorKind<DB::ErrorType>| err.to_string();
        root.fill(&WHITE).map_err(e)?;
        let exact = self.pairs.iter().filter(|(p, m)| p == m).count();
        let top = self.pairs.iter().flat_map(|(p, m)| [*p, *m]).fold(1.0f64, f64::max) * 1.08;
        let caption = if self.pairs.is_empty() {
            format!("{}: predictions only", self.experiment.experiment)
        } else {
            format!(
                "{}: {exact} of {} exactly equal",
                self.experiment.experiment,
                self.pairs.len()
            )
        };
        let whole = all_whole(self.pairs.iter().flat_map(|(p, m)| [*p, *m]));
        let mut chart = ChartBuilder::on(root)
            .caption(caption, (FONT_FAMILY, 20))
            .margin(14)
            .x_label_area_size(48)
            .y_label_area_size(64)
            .build_cartesian_2d(Scale::Linear.axis(0.0..top, whole), Scale::Linear.axis(0.0..top, whole))
            .map_err(e)?;
        let metric = metric_title(self.experiment.family, &self.experiment.metric);
        chart
            .configure_mesh()
            .x_desc(format!("predicted {metric}"))
            .y_desc(format!("measured {metric}"))
            .x_label_formatter(&|v| Scale::Linear.label(*v))
            .y_label_formatter(&|v| Scale::Linear.label(*v))
            .label_style((FONT_FAMILY, 13))
            .axis_desc_style((FONT_FAMILY, 15))
            .light_line_style(BLACK.mix(0.04))
            .bold_line_style(BLACK.mix(0.18))
            .draw()
            .map_err(e)?;
        chart
            .draw_series(LineSeries::new(vec![(0.0, 0.0), (top, top)], BLACK.mix(0.4)))
            .map_err(e)?;
        let color = PALETTE[0];
        chart
            .draw_series(
                self.pairs
                    .iter()
                    .map(|(p, m)| Circle::new((*p, *m), 5, color.mix(0.35).filled())),
            )
            .map_err(e)?;
        Ok(())
    }
}
