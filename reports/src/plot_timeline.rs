//! Plot kind 4: reserved and allocated bytes over a replayed trace, one colour per policy, in
//! two panels over the same events (reserved above, allocated below), so that neither set of
//! lines hides the other and each policy keeps its full colour in both.

use plotters::coord::Shift;
use plotters::prelude::*;

use experiments::PolicyResult;

use crate::chart::{draw_line, legend_beside, series_style, Chart, Entry, Mark, Scale, FONT_FAMILY};

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
    fn size(&self) -> (u32, u32) {
        (1040, 680)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String>
    where
        DB::ErrorType: 'static,
    {
        let e = |err: DrawingAreaErrorKind<DB::ErrorType>| err.to_string();
        root.fill(&WHITE).map_err(e)?;
        let points = || self.results.iter().flat_map(|r| r.timeline.iter());
        let last = points().map(|p| p.event).max().unwrap_or(1).max(1) as f64;
        let top = points().map(|p| p.reserved.max(p.allocated)).max().unwrap_or(1) as f64 / GIB * 1.08;
        let mut entries: Vec<Entry> = self
            .results
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let style = series_style(i);
                // PyTorch's settings by the setting alone: `(defaults)`, `expandable_segments:True`.
                let label = match experiments::pytorch::alloc_conf_of(&r.policy) {
                    Some(_) => r.setting_label().to_string(),
                    None => r.policy.clone(),
                };
                Entry::new(
                    label,
                    Mark::Line {
                        color: style.color.to_rgba(),
                        width: 2,
                        dashed: style.dashed,
                        marker: None,
                    },
                )
            })
            .collect();
        if self.results.len() > 1 {
            entries.push(Entry::new("", Mark::Text));
            entries.push(Entry::new("allocated lines lie on one", Mark::Text));
            entries.push(Entry::new("another where policies agree", Mark::Text));
        }
        let titled = root.titled(&self.title, (FONT_FAMILY, 20)).map_err(e)?;
        let area = legend_beside(&titled, &entries, 14)?;
        let (_, height) = area.dim_in_pixel();
        let (upper, lower) = area.split_vertically(height * 52 / 100);
        let panels = [(&upper, "reserved, GiB", false), (&lower, "allocated, GiB", true)];
        for (panel, title, allocated) in panels {
            let mut chart = ChartBuilder::on(panel)
                .margin(10)
                .x_label_area_size(if allocated { 44 } else { 24 })
                .y_label_area_size(60)
                .build_cartesian_2d(
                    Scale::Linear.axis(0.0..last, true),
                    Scale::Linear.axis(0.0..top.max(1e-3), false),
                )
                .map_err(e)?;
            let label = |v: &f64| Scale::Linear.label(*v);
            let blank = |_: &f64| String::new();
            // The lower panel labels the shared axis.
            let x_labels: &dyn Fn(&f64) -> String = if allocated { &label } else { &blank };
            let mut mesh = chart.configure_mesh();
            mesh.y_desc(title)
                .x_label_formatter(x_labels)
                .y_label_formatter(&label)
                .label_style((FONT_FAMILY, 13))
                .axis_desc_style((FONT_FAMILY, 15))
                .light_line_style(BLACK.mix(0.04))
                .bold_line_style(BLACK.mix(0.18));
            if allocated {
                mesh.x_desc("trace event");
            }
            mesh.draw().map_err(e)?;
            for (i, result) in self.results.iter().enumerate() {
                let style = series_style(i);
                let series: Vec<(f64, f64)> = result
                    .timeline
                    .iter()
                    .map(|p| {
                        let bytes = if allocated { p.allocated } else { p.reserved };
                        (p.event as f64, bytes as f64 / GIB)
                    })
                    .collect();
                let width = if allocated { 1 } else { 2 };
                draw_line(&mut chart, series, style.color.stroke_width(width), style.dashed)?;
            }
        }
        Ok(())
    }
}
