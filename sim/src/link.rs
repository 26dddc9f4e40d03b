//! A link: a fixed latency plus bytes over a bandwidth. Pinned copies are one such link; managed
//! migration and peer reads are fitted and predicted as links too.

use experiments::{LinkParams, Sample};

use crate::fit::FitError;
use crate::solve::fit_line;

/// Bytes per microsecond for a bandwidth in 10^9 bytes per second.
pub(crate) fn bytes_per_us(gb_per_s: f64) -> f64 {
    gb_per_s * 1e3
}

/// Time of one pinned copy, microseconds.
pub fn pinned_copy_us(link: &LinkParams, bytes: u64) -> f64 {
    link.latency_us + bytes as f64 / bytes_per_us(link.gb_per_s)
}

pub(crate) fn check(what: &'static str, samples: &[Sample], needed: usize) -> Result<(), FitError> {
    if samples.len() < needed {
        return Err(FitError::BadSamples {
            what,
            reason: format!("{} samples, need {needed}", samples.len()),
        });
    }
    if let Some(bad) = samples
        .iter()
        .find(|s| !(s.time_us.is_finite() && s.time_us > 0.0) || s.bytes == 0)
    {
        return Err(FitError::BadSamples {
            what,
            reason: format!("sample {bad:?} is not a positive size and time"),
        });
    }
    Ok(())
}

/// Fits `time = latency + bytes / bandwidth` minimising the sum of absolute relative errors.
pub fn fit_link(samples: &[Sample]) -> Result<LinkParams, FitError> {
    check("a pinned link", samples, 2)?;
    let points: Vec<(f64, f64)> = samples.iter().map(|s| (s.bytes as f64, s.time_us)).collect();
    let (intercept, slope) = fit_line(&points);
    if !(slope.is_finite() && slope > 0.0) {
        return Err(FitError::BadSamples {
            what: "a pinned link",
            reason: "time does not grow with size".into(),
        });
    }
    Ok(LinkParams {
        latency_us: intercept,
        gb_per_s: 1.0 / slope / 1e3,
    })
}

/// Fits a link line on the samples `pick` keeps, as size and time.
pub(crate) fn fit_link_of<T>(samples: &[T], pick: impl Fn(&T) -> Option<Sample>) -> Result<LinkParams, FitError> {
    fit_link(&samples.iter().filter_map(pick).collect::<Vec<_>>())
}
