//! What every plot shares: the embedded font, axes in transformed space, PNG + SVG output.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

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

    pub(crate) fn label(self, axis_value: f64) -> String {
        match self {
            Scale::Linear => trim(axis_value),
            Scale::Bytes => format_bytes(2f64.powf(axis_value).round() as u64),
            Scale::Log => trim(10f64.powf(axis_value)),
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
}

/// Three significant digits, no trailing zeros.
fn trim(value: f64) -> String {
    let digits = if value.abs() >= 100.0 {
        0
    } else if value.abs() >= 10.0 {
        1
    } else {
        2
    };
    let text = format!("{value:.digits$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
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

/// The coordinate system every vramlab chart draws in (axes already transformed by [`Scale`]).
pub(crate) type Plane = plotters::coord::cartesian::Cartesian2d<
    plotters::coord::types::RangedCoordf64,
    plotters::coord::types::RangedCoordf64,
>;

/// Draws the series legend in vramlab's style at `position`.
pub(crate) fn draw_legend<'a, DB: DrawingBackend + 'a>(
    chart: &mut ChartContext<'a, DB, Plane>,
    position: SeriesLabelPosition,
) -> std::result::Result<(), String>
where
    DB::ErrorType: 'static,
{
    chart
        .configure_series_labels()
        .position(position)
        .label_font((FONT_FAMILY, 13))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|err| err.to_string())
}

/// A plot that can draw itself on any plotters backend.
pub(crate) trait Chart {
    /// Pixel size of the image.
    fn size(&self) -> (u32, u32) {
        (960, 600)
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
    }
}
