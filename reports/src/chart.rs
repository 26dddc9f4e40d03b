//! What every plot shares: the embedded font, axes in transformed space, PNG + SVG output.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::cartesian::Cartesian2d;
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;

use experiments::format_bytes;

use crate::error::{ReportError, Result};

/// DejaVu Sans (Bitstream Vera licence, see assets/DejaVuSans-LICENSE.txt): plotters is built
/// without its system-font feature, so PNG text needs a font shipped with vramlab.
const FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");

pub(crate) const FONT_FAMILY: &str = "sans-serif";

/// Registers the embedded font once; false if plotters rejected it.
fn register_font() -> bool {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    *REGISTERED.get_or_init(|| plotters::style::register_font(FONT_FAMILY, FontStyle::Normal, FONT).is_ok())
}

/// How values map onto an axis: plotted in a transformed space, labelled in real units.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Scale {
    /// Plain numbers.
    Linear,
    /// Byte sizes on a log2 axis, labelled "1 KiB", "1 MiB".
    Bytes,
    /// Positive numbers on a log10 axis.
    Log,
}

impl Scale {
    pub(crate) fn to_axis(self, value: f64) -> f64 {
        match self {
            Scale::Linear => value,
            Scale::Bytes => value.log2(),
            Scale::Log => value.log10(),
        }
    }

    fn value_at(self, axis_value: f64) -> f64 {
        match self {
            Scale::Linear => axis_value,
            Scale::Bytes => 2f64.powf(axis_value),
            Scale::Log => 10f64.powf(axis_value),
        }
    }

    pub(crate) fn label(self, axis_value: f64) -> String {
        match self {
            Scale::Linear => number(axis_value),
            Scale::Bytes => format_bytes(2f64.powf(axis_value).round() as u64),
            Scale::Log => number(10f64.powf(axis_value)),
        }
    }

    /// An axis range covering `values` with a margin.
    pub(crate) fn range(self, values: impl Iterator<Item = f64>, from_zero: bool) -> std::ops::Range<f64> {
        let (lo, hi) = values
            .map(|v| self.to_axis(v))
            .filter(|v| v.is_finite())
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)));
        if !lo.is_finite() {
            return 0.0..1.0;
        }
        let lo = if from_zero { lo.min(0.0) } else { lo };
        let pad = ((hi - lo) * 0.06).max(0.05);
        (lo - if from_zero && lo == 0.0 { 0.0 } else { pad })..(hi + pad)
    }

    /// Where an axis over `range` (in axis space) is labelled, and where its lighter grid lines
    /// go: steps of 1, 2 or 5 times a power of ten for plain numbers (whole numbers only, where
    /// `whole`: counts of streams or events have no 1.5), 1-2-5 or powers of ten on a log axis
    /// (never 2512 or 631), powers of two for bytes.
    pub(crate) fn ticks(self, range: &std::ops::Range<f64>, whole: bool) -> (Vec<f64>, Vec<f64>) {
        let (lo, hi) = (range.start.min(range.end), range.start.max(range.end));
        if !(lo.is_finite() && hi.is_finite()) || hi <= lo {
            return (vec![lo], Vec::new());
        }
        match self {
            Scale::Linear => linear_ticks(lo, hi, whole),
            Scale::Log => {
                let decades = hi - lo;
                let mantissas: &[f64] = if decades > 4.0 {
                    &[1.0]
                } else if decades > 0.8 {
                    &[1.0, 2.0, 5.0]
                } else {
                    &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]
                };
                // Past eight decades, every other power of ten (or every third ...).
                let every = (decades / 8.0).ceil().max(1.0) as i64;
                let bold: Vec<f64> = decade_points(lo, hi, mantissas)
                    .into_iter()
                    .filter(|v| mantissas.len() > 1 || (v.round() as i64).rem_euclid(every) == 0)
                    .collect();
                if bold.len() < 2 {
                    // Less than a decade with too few round mantissas: round numbers in value space.
                    let (bold, light) = linear_ticks(10f64.powf(lo), 10f64.powf(hi), false);
                    let to_axis = |v: Vec<f64>| v.into_iter().filter(|v| *v > 0.0).map(f64::log10).collect();
                    return (to_axis(bold), to_axis(light));
                }
                let light = if decades <= 8.0 {
                    decade_points(lo, hi, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0])
                } else {
                    decade_points(lo, hi, &[1.0])
                };
                (bold, light)
            }
            Scale::Bytes => {
                let (first, last) = (lo.ceil() as i64, hi.floor() as i64);
                if last - first < 1 {
                    let (bold, light) = linear_ticks(self.value_at(lo), self.value_at(hi), true);
                    let to_axis = |v: Vec<f64>| v.into_iter().filter(|v| *v > 0.0).map(f64::log2).collect();
                    return (to_axis(bold), to_axis(light));
                }
                // The finest step that labels at most eleven powers.
                let step = [1, 2, 4, 10, 20]
                    .into_iter()
                    .find(|s| (first..=last).filter(|e| e % s == 0).count() <= 11)
                    .unwrap_or(20);
                let bold = (first..=last).filter(|e| e % step == 0).map(|e| e as f64).collect();
                let light = if step > 1 {
                    (first..=last).map(|e| e as f64).collect()
                } else {
                    Vec::new()
                };
                (bold, light)
            }
        }
    }

    /// The coordinate of an axis over `range` (axis space), labelled where [`Scale::ticks`] says.
    pub(crate) fn axis(self, range: std::ops::Range<f64>, whole: bool) -> Axis {
        let (bold, light) = self.ticks(&range, whole);
        Axis::new(range, bold, light)
    }
}

/// Whether every value is a whole number (counts: streams, strides, events).
pub(crate) fn all_whole(mut values: impl Iterator<Item = f64>) -> bool {
    values.all(|v| v.is_finite() && v.fract() == 0.0)
}

/// `m * 10^k` for every mantissa `m` and power `k` with log10 in `lo..=hi`, in log10 space.
fn decade_points(lo: f64, hi: f64, mantissas: &[f64]) -> Vec<f64> {
    let mut points = Vec::new();
    for power in (lo.floor() as i64)..=(hi.ceil() as i64) {
        for m in mantissas {
            let v = m.log10() + power as f64;
            if v >= lo - 1e-9 && v <= hi + 1e-9 {
                points.push(v);
            }
        }
    }
    points
}

/// Multiples of a 1-2-5 step, about eight over `lo..hi`, and the lighter grid's (fifths or
/// quarters of the step; only whole ones where `whole`).
fn linear_ticks(lo: f64, hi: f64, whole: bool) -> (Vec<f64>, Vec<f64>) {
    let raw = (hi - lo) / 8.0;
    let power = 10f64.powf(raw.log10().floor());
    let mantissa = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .find(|m| m * power >= raw * 0.999)
        .unwrap_or(10.0);
    let mut step = mantissa * power;
    if whole {
        step = step.max(1.0).round();
    }
    let mut light_step = if mantissa == 2.0 { step / 4.0 } else { step / 5.0 };
    if whole {
        light_step = if step >= 5.0 { (step / 5.0).round() } else { 1.0 };
    }
    let multiples = |step: f64| -> Vec<f64> {
        let (first, last) = ((lo / step).ceil() as i64, (hi / step).floor() as i64);
        if last - first > 2000 {
            return Vec::new();
        }
        (first..=last).map(|k| k as f64 * step).collect()
    };
    let light = if light_step < step {
        multiples(light_step)
    } else {
        Vec::new()
    };
    (multiples(step), light)
}

/// A tick label: three significant digits, no trailing zeros, thousands grouped ("5,000", not
/// "5000.0").
pub(crate) fn number(value: f64) -> String {
    if value == 0.0 || !value.is_finite() {
        return "0".to_string();
    }
    let magnitude = value.abs().log10().floor() as i32;
    let decimals = (2 - magnitude).clamp(0, 9) as usize;
    let mut text = format!("{value:.decimals$}");
    if text.contains('.') {
        text = text.trim_end_matches('0').trim_end_matches('.').to_string();
    }
    if text == "-0" {
        return "0".to_string();
    }
    let (sign, rest) = match text.strip_prefix('-') {
        Some(rest) => ("-", rest.to_string()),
        None => ("", text.clone()),
    };
    let (whole, fraction) = rest.split_at(rest.find('.').unwrap_or(rest.len()));
    let mut grouped = String::new();
    for (i, digit) in whole.chars().enumerate() {
        if i > 0 && (whole.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(digit);
    }
    format!("{sign}{grouped}{fraction}")
}

/// Colours for series, in order (colour-blind friendly: Okabe-Ito, then grey and wine).
pub(crate) const PALETTE: [RGBColor; 9] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(0, 0, 0),
    RGBColor(153, 153, 153),
    RGBColor(136, 34, 85),
];

/// One axis: plain f64 coordinates, labelled (and its grid's bold lines drawn) at the points
/// given, its light grid lines at others. (plotters' `WithKeyPoints` over f64 coordinates has
/// no value formatter, which meshes need.)
#[derive(Clone)]
pub(crate) struct Axis {
    coordinates: RangedCoordf64,
    bold: Vec<f64>,
    light: Vec<f64>,
}

impl Axis {
    pub(crate) fn new(range: std::ops::Range<f64>, bold: Vec<f64>, light: Vec<f64>) -> Axis {
        Axis {
            coordinates: range.into(),
            bold,
            light,
        }
    }
}

impl Ranged for Axis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.coordinates.map(value, limit)
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            self.light.clone()
        } else {
            self.bold.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.coordinates.range()
    }
}

/// The coordinate system every vramlab chart draws in (axes already transformed by [`Scale`]).
pub(crate) type Plane = Cartesian2d<Axis, Axis>;

/// A marker's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    Circle,
    Triangle,
    Square,
    Cross,
}

const SHAPES: [Shape; 4] = [Shape::Circle, Shape::Triangle, Shape::Square, Shape::Cross];

/// How the `i`-th series of a chart is told from the others: its colour; past the palette's nine,
/// a dashed line; and a marker shape of its own, so that no two series of 36 look alike.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SeriesStyle {
    pub(crate) color: RGBColor,
    pub(crate) dashed: bool,
    pub(crate) shape: Shape,
}

pub(crate) fn series_style(i: usize) -> SeriesStyle {
    SeriesStyle {
        color: PALETTE[i % PALETTE.len()],
        dashed: (i / PALETTE.len()) % 2 == 1,
        shape: SHAPES[i % SHAPES.len()],
    }
}

/// Draws `shape` centred on `at` (pixels) onto `area`.
fn marker_at<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    at: (i32, i32),
    shape: Shape,
    style: ShapeStyle,
) -> std::result::Result<(), String>
where
    DB::ErrorType: 'static,
{
    let (x, y) = at;
    match shape {
        Shape::Circle => area.draw(&Circle::new(at, 4, style)),
        Shape::Triangle => area.draw(&TriangleMarker::new(at, 5, style)),
        Shape::Square => area.draw(&Rectangle::new([(x - 4, y - 4), (x + 4, y + 4)], style)),
        Shape::Cross => area.draw(&Cross::new(at, 4, style)),
    }
    .map_err(|e| e.to_string())
}

/// Draws `shape` at every point of `points` (chart coordinates).
pub(crate) fn draw_markers<DB: DrawingBackend>(
    chart: &mut ChartContext<'_, DB, Plane>,
    points: &[(f64, f64)],
    shape: Shape,
    style: ShapeStyle,
) -> std::result::Result<(), String>
where
    DB::ErrorType: 'static,
{
    let e = |err: DrawingAreaErrorKind<DB::ErrorType>| err.to_string();
    match shape {
        Shape::Circle => chart
            .draw_series(points.iter().map(|p| Circle::new(*p, 4, style)))
            .map(|_| ()),
        Shape::Triangle => chart
            .draw_series(points.iter().map(|p| TriangleMarker::new(*p, 5, style)))
            .map(|_| ()),
        Shape::Square => chart
            .draw_series(
                points
                    .iter()
                    .map(|p| EmptyElement::at(*p) + Rectangle::new([(-4, -4), (4, 4)], style)),
            )
            .map(|_| ()),
        Shape::Cross => chart
            .draw_series(points.iter().map(|p| Cross::new(*p, 4, style)))
            .map(|_| ()),
    }
    .map_err(e)
}

/// Draws a line through `points` (chart coordinates), dashed where asked.
pub(crate) fn draw_line<DB: DrawingBackend>(
    chart: &mut ChartContext<'_, DB, Plane>,
    points: Vec<(f64, f64)>,
    style: ShapeStyle,
    dashed: bool,
) -> std::result::Result<(), String>
where
    DB::ErrorType: 'static,
{
    let e = |err: DrawingAreaErrorKind<DB::ErrorType>| err.to_string();
    if dashed {
        chart
            .draw_series(DashedLineSeries::new(points, 9, 5, style))
            .map_err(e)?;
    } else {
        chart.draw_series(LineSeries::new(points, style)).map_err(e)?;
    }
    Ok(())
}

/// What a legend entry shows beside its label.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Mark {
    /// A line, dashed or not, with a marker on it or not.
    Line {
        color: RGBAColor,
        width: u32,
        dashed: bool,
        marker: Option<Shape>,
    },
    /// A marker alone, filled or hollow.
    Marker {
        color: RGBAColor,
        shape: Shape,
        filled: bool,
    },
    /// A shaded band.
    Band(RGBAColor),
    /// Nothing: a heading or an explanation.
    Text,
}

/// One line of a legend.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub(crate) label: String,
    pub(crate) mark: Mark,
}

impl Entry {
    pub(crate) fn new(label: impl Into<String>, mark: Mark) -> Entry {
        Entry {
            label: label.into(),
            mark,
        }
    }
}

const LEGEND_FONT: u32 = 13;
const LEGEND_ROW: i32 = 19;
const LEGEND_SAMPLE: i32 = 30;

/// Splits `root` into the plot's part and a strip at its right that holds the legend, so that
/// no legend covers data; draws the legend there (top aligned with the plot, `top` pixels down)
/// and returns the plot's part. Without entries, `root` whole.
pub(crate) fn legend_beside<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    entries: &[Entry],
    top: i32,
) -> std::result::Result<DrawingArea<DB, Shift>, String>
where
    DB::ErrorType: 'static,
{
    if entries.is_empty() {
        return Ok(root.clone());
    }
    let (width, height) = root.dim_in_pixel();
    let font = (FONT_FAMILY, LEGEND_FONT).into_font();
    let style = TextStyle::from(font.clone()).color(&BLACK);
    let mut widest = 0u32;
    for entry in entries {
        let (w, _) = root
            .estimate_text_size(&entry.label, &style)
            .map_err(|e| e.to_string())?;
        widest = widest.max(w);
    }
    let rows = (((height as i32 - top - 12) / LEGEND_ROW).max(1)) as usize;
    let columns = entries.len().div_ceil(rows);
    let column_width = LEGEND_SAMPLE as u32 + 10 + widest + 14;
    let legend_width = (column_width * columns as u32 + 8).min(width / 2);
    let (plot, legend) = root.split_horizontally(width - legend_width);
    for (i, entry) in entries.iter().enumerate() {
        let (column, row) = (i / rows, i % rows);
        let x = 6 + column as i32 * column_width as i32;
        let y = top + row as i32 * LEGEND_ROW + LEGEND_ROW / 2;
        let sample = (x + 2, x + LEGEND_SAMPLE);
        match entry.mark {
            Mark::Line {
                color,
                width,
                dashed,
                marker,
            } => {
                let stroke = color.stroke_width(width);
                if dashed {
                    let third = (sample.1 - sample.0) / 3;
                    for k in [0, 2] {
                        let a = sample.0 + k * third;
                        legend
                            .draw(&PathElement::new(vec![(a, y), (a + third, y)], stroke))
                            .map_err(|e| e.to_string())?;
                    }
                } else {
                    legend
                        .draw(&PathElement::new(vec![(sample.0, y), (sample.1, y)], stroke))
                        .map_err(|e| e.to_string())?;
                }
                if let Some(shape) = marker {
                    marker_at(&legend, ((sample.0 + sample.1) / 2, y), shape, color.filled())?;
                }
            }
            Mark::Marker { color, shape, filled } => {
                let style = if filled { color.filled() } else { color.stroke_width(2) };
                marker_at(&legend, ((sample.0 + sample.1) / 2, y), shape, style)?;
            }
            Mark::Band(color) => {
                legend
                    .draw(&Rectangle::new([(sample.0, y - 6), (sample.1, y + 6)], color.filled()))
                    .map_err(|e| e.to_string())?;
            }
            Mark::Text => {}
        }
        let text_x = if matches!(entry.mark, Mark::Text) {
            x
        } else {
            sample.1 + 8
        };
        legend
            .draw(&Text::new(
                entry.label.clone(),
                (text_x, y - (LEGEND_FONT as i32) / 2 - 1),
                style.clone(),
            ))
            .map_err(|e| e.to_string())?;
    }
    Ok(plot)
}

/// A plot that can draw itself on any plotters backend.
pub(crate) trait Chart {
    /// Pixel size of the image.
    fn size(&self) -> (u32, u32) {
        (1040, 600)
    }

    /// Draws onto `root`; errors are plotters' messages.
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> std::result::Result<(), String>
    where
        DB::ErrorType: 'static;
}

/// Draws `chart` as `stem.png` and `stem.svg` in `dir`; returns both paths.
pub(crate) fn render_both(dir: &Path, stem: &str, chart: &impl Chart) -> Result<Vec<PathBuf>> {
    let png = dir.join(format!("{stem}.png"));
    if !register_font() {
        return Err(ReportError::Plot {
            path: png,
            message: "the embedded font assets/DejaVuSans.ttf did not load".into(),
        });
    }
    // The folder is made by write_atomically, which never writes through a link out of --out.
    let svg = dir.join(format!("{stem}.svg"));
    let fail = |path: &Path, message: String| ReportError::Plot {
        path: path.to_path_buf(),
        message,
    };
    // plotters draws into an RGB buffer; the small `png` crate encodes it (plotters' own
    // encoder pulls in the whole `image` crate, a third of a fresh build's time).
    let (width, height) = chart.size();
    let mut pixels = vec![0u8; width as usize * height as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut pixels, (width, height)).into_drawing_area();
        chart.draw(&root).map_err(|m| fail(&png, m))?;
        root.present().map_err(|e| fail(&png, e.to_string()))?;
    }
    let mut encoded = Vec::new();
    {
        let mut encoder = ::png::Encoder::new(&mut encoded, width, height);
        encoder.set_color(::png::ColorType::Rgb);
        encoder.set_depth(::png::BitDepth::Eight);
        encoder.set_compression(::png::Compression::Best);
        let mut writer = encoder.write_header().map_err(|e| fail(&png, e.to_string()))?;
        writer
            .write_image_data(&pixels)
            .map_err(|e| fail(&png, e.to_string()))?;
    }
    experiments::write_atomically(&png, &encoded)?;
    let mut svg_text = String::new();
    {
        let root = SVGBackend::with_string(&mut svg_text, chart.size()).into_drawing_area();
        chart.draw(&root).map_err(|m| fail(&svg, m))?;
        root.present().map_err(|e| fail(&svg, e.to_string()))?;
    }
    experiments::write_atomically(&svg, svg_text.as_bytes())?;
    Ok(vec![png, svg])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_read_in_real_units() {
        assert_eq!(Scale::Bytes.label(10.0), "1 KiB");
        assert_eq!(Scale::Bytes.label(30.0), "1 GiB");
        assert_eq!(Scale::Log.label(1.0), "10");
        assert_eq!(Scale::Log.label(0.5), "3.16");
        assert_eq!(Scale::Linear.label(2.5), "2.5");
        assert_eq!(Scale::Linear.label(5000.0), "5,000");
        assert_eq!(Scale::Linear.label(-250.0), "-250");
        assert_eq!(Scale::Log.label(3.0), "1,000");
        assert_eq!(Scale::Log.label(-2.0), "0.01");
    }

    fn labels(scale: Scale, lo: f64, hi: f64, whole: bool) -> Vec<String> {
        let range = scale.to_axis(lo)..scale.to_axis(hi);
        scale
            .ticks(&range, whole)
            .0
            .into_iter()
            .map(|v| scale.label(v))
            .collect()
    }

    #[test]
    fn log_ticks_fall_on_1_2_5_or_powers_of_ten() {
        // Coalescing's bandwidths (the axis read 2512, 1585, 631 before).
        assert_eq!(
            labels(Scale::Log, 90.0, 3000.0, false),
            ["100", "200", "500", "1,000", "2,000"]
        );
        // Growth's times over five decades: powers of ten.
        assert_eq!(
            labels(Scale::Log, 0.9, 300_000.0, false),
            ["1", "10", "100", "1,000", "10,000", "100,000"]
        );
        // Less than a decade: every mantissa.
        assert_eq!(labels(Scale::Log, 25.0, 60.0, false), ["30", "40", "50", "60"]);
    }

    #[test]
    fn whole_number_axes_get_whole_ticks() {
        // Streams 1, 2, 4: no 1.5.
        assert_eq!(labels(Scale::Linear, 0.8, 4.2, true), ["1", "2", "3", "4"]);
        assert_eq!(labels(Scale::Linear, 0.0, 32416.0, true)[1], "5,000");
        assert_eq!(
            labels(Scale::Linear, 0.8, 4.2, false),
            ["1", "1.5", "2", "2.5", "3", "3.5", "4"]
        );
    }

    #[test]
    fn byte_ticks_are_powers_of_two() {
        assert_eq!(
            labels(Scale::Bytes, 1024.0, (1u64 << 30) as f64, false),
            [
                "1 KiB", "4 KiB", "16 KiB", "64 KiB", "256 KiB", "1 MiB", "4 MiB", "16 MiB", "64 MiB", "256 MiB",
                "1 GiB"
            ]
        );
    }

    #[test]
    fn the_eleventh_series_differs_from_the_second() {
        let (a, b) = (series_style(1), series_style(10));
        assert_eq!(a.color, b.color);
        assert!(a.dashed != b.dashed || a.shape != b.shape);
    }
}
