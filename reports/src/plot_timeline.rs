//! Plot kind 4: allocated and reserved bytes over a replayed trace, one colour per policy
//! (reserved as a solid line, allocated as a thin light one).

use plotters::coord::Shift;
use plotters::prelude::*;

use experiments::PolicyResult;

use crate::chart::{draw_legend, Chart, FONT_FAMILY, PALETTE};

const GIB: f64 = (1u64 << 30) as f64;

pub(crate) struct TimelineChart<'a> {
    title: String,
    results: &'a [PolicyResult],
}

impl<'a> TimelineChart<'a> {
    pub(crate) fn new(title: String, results: &'a [PolicyResult]) -> TimelineChart<'a> {
        TimelineChart { title, results }
    }
}

impl Chart for TimelineChart<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String>
    where
        DB::ErrorType: 'static,
    {
        let e = |err: DrawingAreaErrorKind<DB::ErrorType>| err.to_string();
        root.fill(&WHITE).map_err(e)?;
        let points = || self.results.iter().flat_map(|r| r.timeline.iter());
        let last = points().map(|p| p.event).max().unwrap_or(1).max(1) as f64;
        let top = points().map(|p| p.reserved.max(p.allocated)).max().unwrap_or(1) as f64 / GIB * 1.08;
        let mut chart = ChartBuilder::on(root)
            .caption(&self.title, (FONT_FAMILY, 20))
            .margin(14)
            .x_label_area_size(44)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..last, 0.0..top.max(1e-3))
            .map_err(e)?;
        chart
            .configure_mesh()
            .x_desc("trace event")
            .y_desc("GiB (solid: reserved, light: allocated)")
            .label_style((FONT_FAMILY, 13))
            .draw()
            .map_err(e)?;
        for (i, result) in self.results.iter().enumerate() {
            let color = PALETTE[i % PALETTE.len()];
            let series = |value: fn(&experiments::TimelinePoint) -> u64| {
                result
                    .timeline
                    .iter()
                    .map(move |p| (p.event as f64, value(p) as f64 / GIB))
                    .collect::<Vec<_>>()
            };
            chart
                .draw_series(LineSeries::new(
                    series(|p| p.allocated),
                    color.mix(0.35).stroke_width(1),
                ))
                .map_err(e)?;
            chart
                .draw_series(LineSeries::new(series(|p| p.reserved), color.stroke_width(2)))
                .map_err(e)?
                .label(result.policy.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
        }
        draw_legend(&mut chart, SeriesLabelPosition::UpperLeft)
    }
}
