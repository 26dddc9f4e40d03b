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

#[cfg(test)]
mod fit_tests {
    use crate::link::pinned_copy_us;
    use crate::*;
    use experiments::Sample;
    use experiments::*;

    #[test]
    fn recovers_a_known_link() {
        let truth = LinkParams {
            latency_us: 3.0,
            gb_per_s: 52.0,
        };
        let samples: Vec<Sample> = (10..30)
            .step_by(3)
            .map(|k| Sample {
                bytes: 3 << k,
                time_us: pinned_copy_us(&truth, 3 << k),
            })
            .collect();
        let fitted = fit_link(&samples).unwrap();
        assert!(
            (fitted.latency_us - 3.0).abs() < 1e-6 && (fitted.gb_per_s - 52.0).abs() < 1e-6,
            "{fitted:?}"
        );
    }

    #[test]
    fn one_disturbed_sample_does_not_move_the_link() {
        let truth = LinkParams {
            latency_us: 2.0,
            gb_per_s: 55.0,
        };
        let mut samples: Vec<Sample> = (10..=28)
            .step_by(2)
            .map(|k| Sample {
                bytes: 3 << k,
                time_us: pinned_copy_us(&truth, 3 << k),
            })
            .collect();
        samples[3].time_us *= 3.0;
        samples[7].time_us *= 1.25;
        let fitted = fit_link(&samples).unwrap();
        assert!(
            (fitted.gb_per_s - 55.0).abs() < 0.05 && (fitted.latency_us - 2.0).abs() < 0.01,
            "{fitted:?}"
        );
    }

    #[test]
    fn refuses_too_few_or_bad_samples() {
        assert!(fit_link(&[Sample { bytes: 1, time_us: 1.0 }]).is_err());
        let bad = [
            Sample { bytes: 1, time_us: 1.0 },
            Sample {
                bytes: 2,
                time_us: f64::NAN,
            },
        ];
        assert!(fit_link(&bad).unwrap_err().to_string().contains("not a positive"));
    }
}
