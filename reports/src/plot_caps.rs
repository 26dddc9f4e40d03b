//! tune's figure: for each setting, the cap from which it fits at every larger cap (and, where
//! fitting is not monotone, the smallest cap that fits), beside the cap asked about. One row per
//! setting, named by its rank and its setting in full; coloured by whether it fits under the cap.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use experiments::{PolicyResult, ReplayRecord};

use crate::chart::{Axis, Chart, Scale, FONT_FAMILY, PALETTE};

const MIB: f64 = (1u64 << 20) as f64;
/// Fits under the cap (bluish green), does not (vermillion), no cap given (blue): Okabe-Ito.
pub(crate) const FITS: RGBColor = PALETTE[2];
pub(crate) const MISFITS: RGBColor = PALETTE[1];
pub(crate) const UNCAPPED: RGBColor = PALETTE[0];
/// A row label's longest line, in characters: longer settings wrap at their commas.
const LABEL_LINE: usize = 56;
const LABEL_FONT: u32 = 13;
/// A label line's height, in pixels.
const LINE: u32 = LABEL_FONT + 3;
/// The strip under the plot that holds the key.
const KEY: u32 = 26;

/// One row: the label's lines, and the caps in MiB.
struct Row {
    lines: Vec<String>,
    /// "fits at every cap from", and whether it is exact (not a bound where the search stopped).
    always: Option<(f64, bool)>,
    /// "the smallest cap that fits".
    smallest: Option<f64>,
    fits: bool,
}

pub(crate) struct CapsChart {
    title: String,
    rows: Vec<Row>,
    cap: Option<f64>,
}

/// `text` in lines of at most [`LABEL_LINE`] characters, broken after commas where it can be.
fn wrap(text: &str) -> Vec<String> {
    let mut lines = vec![String::new()];
    for piece in text.split_inclusive(',') {
        let last = lines.last_mut().expect("one line at least");
        if !last.is_empty() && last.len() + piece.len() > LABEL_LINE {
            lines.push(format!("   {piece}"));
        } else {
            last.push_str(piece);
        }
    }
    lines
}

impl CapsChart {
    /// The chart of `record`'s results, in rank order.
    pub(crate) fn new(title: String, record: &ReplayRecord) -> CapsChart {
        let rows = record
            .results
            .iter()
            .enumerate()
            .map(|(i, r): (usize, &PolicyResult)| Row {
                lines: wrap(&format!("{}. {}", i + 1, r.quoted_label())),
                always: r
                    .always_fits_bytes
                    .map(|b| (b as f64 / MIB, r.always_fits_exact != Some(false))),
                smallest: r.min_capacity_bytes.map(|b| b as f64 / MIB),
                fits: r.failed_allocs == 0,
            })
            .collect();
        CapsChart {
            title,
            rows,
            cap: record.capacity_bytes.map(|b| b as f64 / MIB),
        }
    }

    /// A row's height: room for the longest label, and a gap.
    fn row_height(&self) -> u32 {
        let lines = self.rows.iter().map(|r| r.lines.len()).max().unwrap_or(1) as u32;
        (LINE * lines + 10).max(30)
    }

    fn colour(&self, row: &Row) -> RGBColor {
        match (self.cap, row.fits) {
            (None, _) => UNCAPPED,
            (Some(_), true) => FITS,
            (Some(_), false) => MISFITS,
        }
    }
}

impl Chart for CapsChart {
    fn size(&self) -> (u32, u32) {
        (1040, 120 + KEY + self.row_height() * self.rows.len().max(1) as u32)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String>
    where
        DB::ErrorType: 'static,
    {
        let e = |err: DrawingAreaErrorKind<DB::ErrorType>| err.to_string();
        root.fill(&WHITE).map_err(e)?;
        let font = (FONT_FAMILY, LABEL_FONT).into_font();
        let label_style = TextStyle::from(font.clone()).color(&BLACK);
        let mut widest = 0;
        for line in self.rows.iter().flat_map(|r| r.lines.iter()) {
            widest = widest.max(root.estimate_text_size(line, &label_style).map_err(e)?.0);
        }
        let values: Vec<f64> = self
            .rows
            .iter()
            .flat_map(|r| r.always.map(|(v, _)| v).into_iter().chain(r.smallest))
            .chain(self.cap)
            .collect();
        let (lo, hi) = values.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(*v), hi.max(*v))
        });
        let (lo, hi) = if lo.is_finite() { (lo, hi) } else { (0.0, 1.0) };
        // Room for each value's label at the right of its marker.
        let pad = ((hi - lo) * 0.04).max(hi * 0.005).max(1.0);
        // Room for the labels of values left of the cap (drawn at their left) and right of it.
        let room = (hi - lo) * 0.14 + 3.0 * pad;
        let x_range = (lo - pad - if self.cap.is_some() { room } else { 0.0 })..(hi + room);
        let n = self.rows.len().max(1) as f64;
        let (width, height) = root.dim_in_pixel();
        let (plot, key_strip) = root.split_vertically(height - KEY);
        let mut chart = ChartBuilder::on(&plot)
            .caption(&self.title, (FONT_FAMILY, 19))
            .margin(14)
            .x_label_area_size(48)
            .y_label_area_size(widest + 16)
            .build_cartesian_2d(
                Scale::Linear.axis(x_range.clone(), false),
                // Rank 1 at the top.
                Axis::new(-(n - 0.5)..0.5, Vec::new(), Vec::new()),
            )
            .map_err(e)?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .x_label_formatter(&|v| Scale::Linear.label(*v))
            .x_desc("cap, MiB (the axis does not start at zero)")
            .label_style((FONT_FAMILY, 13))
            .axis_desc_style((FONT_FAMILY, 14))
            .light_line_style(BLACK.mix(0.04))
            .bold_line_style(BLACK.mix(0.15))
            .draw()
            .map_err(e)?;
        let y_of = |i: usize| -(i as f64);
        // The label of each row, right-aligned against the plot.
        let plot_left = chart.backend_coord(&(x_range.start, 0.0)).0;
        for (i, row) in self.rows.iter().enumerate() {
            let (_, y) = chart.backend_coord(&(x_range.start, y_of(i)));
            let lines = row.lines.len() as i32;
            for (k, line) in row.lines.iter().enumerate() {
                let dy = (k as i32 * 2 - (lines - 1)) * LINE as i32 / 2;
                root.draw(&Text::new(
                    line.clone(),
                    (plot_left - 8, y + dy),
                    label_style.pos(Pos::new(HPos::Right, VPos::Center)),
                ))
                .map_err(e)?;
            }
        }
        if let Some(cap) = self.cap {
            chart
                .draw_series(DashedLineSeries::new(
                    vec![(cap, 0.5), (cap, -(n - 0.5))],
                    6,
                    4,
                    BLACK.stroke_width(2),
                ))
                .map_err(e)?;
            let (x, y) = chart.backend_coord(&(cap, 0.5));
            root.draw(&Text::new(
                format!("cap {} MiB", Scale::Linear.label(cap)),
                (x + 4, y + 2),
                TextStyle::from(font.clone())
                    .color(&BLACK)
                    .pos(Pos::new(HPos::Left, VPos::Top)),
            ))
            .map_err(e)?;
        }
        for (i, row) in self.rows.iter().enumerate() {
            let y = y_of(i);
            let colour = self.colour(row);
            // A light guide from the axis, so that the eye finds the row's marker.
            if let Some(first) = row.always.map(|(v, _)| v).or(row.smallest) {
                chart
                    .draw_series([PathElement::new(
                        vec![(x_range.start, y), (first.min(row.smallest.unwrap_or(first)), y)],
                        BLACK.mix(0.12).stroke_width(1),
                    )])
                    .map_err(e)?;
            }
            match (row.smallest, row.always) {
                // Fitting is not monotone: the span of caps where it sometimes fails.
                (Some(smallest), Some((always, _))) if smallest < always => {
                    chart
                        .draw_series([PathElement::new(
                            vec![(smallest, y), (always, y)],
                            colour.stroke_width(2),
                        )])
                        .map_err(e)?;
                    chart
                        .draw_series([Circle::new((smallest, y), 5, colour.stroke_width(2))])
                        .map_err(e)?;
                }
                _ => {}
            }
            let text = match row.always {
                Some((always, exact)) => {
                    let marker = if exact {
                        Circle::new((always, y), 7, colour.filled())
                    } else {
                        // A bound (the search stopped): hollow.
                        Circle::new((always, y), 7, colour.stroke_width(3))
                    };
                    chart.draw_series([marker]).map_err(e)?;
                    format!(
                        "{}{} MiB",
                        if exact { "" } else { "<= " },
                        Scale::Linear.label(always.round())
                    )
                }
                None => "fails at every cap searched".to_string(),
            };
            let at = row.always.map_or(row.smallest.unwrap_or(x_range.start), |(v, _)| v);
            let (x, py) = chart.backend_coord(&(at, y));
            // Left of the marker where the value is below the cap: the cap's line stays clear.
            let (x, side) = match self.cap {
                Some(cap) if at < cap => (x - 12, HPos::Right),
                _ => (x + 12, HPos::Left),
            };
            root.draw(&Text::new(
                text,
                (x, py),
                TextStyle::from(font.clone())
                    .color(&colour)
                    .pos(Pos::new(side, VPos::Center)),
            ))
            .map_err(e)?;
        }
        // The key, under the axis's title.
        let key = match self.cap {
            Some(_) => "filled dot: fits at every cap from here up (green: fits under the cap; orange: does not); hollow dot and line: smallest cap that fits, not at every cap above it",
            None => "filled dot: fits at every cap from here up; hollow dot and line: smallest cap that fits, not at every cap above it",
        };
        key_strip
            .draw(&Text::new(
                key,
                (width as i32 / 2, KEY as i32 - 8),
                TextStyle::from((FONT_FAMILY, 12).into_font())
                    .color(&BLACK.mix(0.75))
                    .pos(Pos::new(HPos::Center, VPos::Bottom)),
            ))
            .map_err(e)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_settings_wrap_at_their_commas() {
        let lines = wrap("16. 'max_split_size_mb:256,roundup_power2_divisions:4,garbage_collection_threshold:0.8'");
        assert!(lines.len() > 1, "{lines:?}");
        assert!(lines.iter().all(|l| l.len() <= LABEL_LINE + 3), "{lines:?}");
        assert_eq!(
            lines.concat().replace("   ", ""),
            "16. 'max_split_size_mb:256,roundup_power2_divisions:4,garbage_collection_threshold:0.8'"
        );
        assert_eq!(wrap("1. (defaults)"), ["1. (defaults)"]);
    }
}
