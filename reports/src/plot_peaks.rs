//! Plot kind 5: peak reserved memory per policy, beside the peak the trace itself needs.

use plotters::coord::Shift;
use plotters::prelude::*;

use experiments::PolicyResult;

use crate::chart::{Axis, Chart, Scale, FONT_FAMILY, PALETTE};

const GIB: f64 = (1u64 << 30) as f64;

pub(crate) struct PeaksChart<'a> {
    title: String,
    results: &'a [PolicyResult],
}

impl<'a> PeaksChart<'a> {
    pub(crate) fn new(title: String, results: &'a [PolicyResult]) -> PeaksChart<'a> {
        PeaksChart { title, results }
    }
}

impl Chart for PeaksChart<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String>
    where
        DB::ErrorType: 'static,
    {
        let e = |err: DrawingAreaErrorKind<DB::ErrorType>| err.to_string();
        root.fill(&WHITE).map_err(e)?;
        let n = self.results.len().max(1);
        let top = self
            .results
            .iter()
            .map(|r| r.peak_reserved_bytes.max(r.peak_requested_bytes))
            .max()
            .unwrap_or(1) as f64
            / GIB
            * 1.15;
        let names: Vec<String> = self.results.iter().map(|r| r.policy.clone()).collect();
        let mut chart = ChartBuilder::on(root)
            .caption(&self.title, (FONT_FAMILY, 20))
            .margin(14)
            .x_label_area_size(44)
            .y_label_area_size(60)
            .build_cartesian_2d(
                Axis::new(-0.5..(n as f64 - 0.5), (0..n).map(|i| i as f64).collect(), Vec::new()),
                Scale::Linear.axis(0.0..top.max(1e-3), false),
            )
            .map_err(e)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_label_formatter(&|x| {
                let i = x.round();
                if (x - i).abs() < 0.01 && i >= 0.0 {
                    names.get(i as usize).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .y_label_formatter(&|v| Scale::Linear.label(*v))
            .y_desc("peak reserved, GiB (dark line: peak requested)")
            .label_style((FONT_FAMILY, 12))
            .draw()
            .map_err(e)?;
        for (i, result) in self.results.iter().enumerate() {
            let x = i as f64;
            let color = PALETTE[i % PALETTE.len()];
            let reserved = result.peak_reserved_bytes as f64 / GIB;
            chart
                .draw_series([Rectangle::new([(x - 0.35, 0.0), (x + 0.35, reserved)], color.filled())])
                .map_err(e)?;
            let requested = result.peak_requested_bytes as f64 / GIB;
            // A white edge keeps the line seen on a black bar.
            for style in [WHITE.stroke_width(5), BLACK.stroke_width(2)] {
                chart
                    .draw_series([PathElement::new(
                        vec![(x - 0.4, requested), (x + 0.4, requested)],
                        style,
                    )])
                    .map_err(e)?;
            }
            chart
                .draw_series([Text::new(
                    format!("{reserved:.2}"),
                    (x - 0.2, reserved + top * 0.02),
                    (FONT_FAMILY, 13),
                )])
                .map_err(e)?;
        }
        Ok(())
    }
}
