//! Fitting the transfer model to measurements: the maths half of `memlab calibrate`.
//!
//! Fits minimise squared *relative* error, so a 1 KiB copy counts as much as a 1 GiB one,
//! the same yardstick reports use.

use experiments::{Calibration, Direction, LinkParams, Profile, ProfileDevice, Sample, StagedParams, TransferParams};

use crate::pcie::pageable_copy_us;

/// Why a fit could not be made.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FitError {
    /// Fewer samples than parameters, or a sample that is not a positive time.
    #[error("cannot fit {what}: {reason}")]
    BadSamples {
        /// What was being fitted.
        what: &'static str,
        /// Why the samples do not do.
        reason: String,
    },
}

fn check(what: &'static str, samples: &[Sample], needed: usize) -> Result<(), FitError> {
    if samples.len() < needed {
        return Err(FitError::BadSamples { what, reason: format!("{} samples, need {needed}", samples.len()) });
    }
    if let Some(bad) = samples.iter().find(|s| !(s.time_us.is_finite() && s.time_us > 0.0) || s.bytes == 0) {
        return Err(FitError::BadSamples { what, reason: format!("sample {bad:?} is not a positive size and time") });
    }
    Ok(())
}

/// Fits `time = latency + bytes / bandwidth` by weighted least squares (weights 1/time^2).
/// A negative latency, which noise can produce, is clamped to zero and the slope refitted.
pub fn fit_link(samples: &[Sample]) -> Result<LinkParams, FitError> {
    check("a pinned link", samples, 2)?;
    let (mut sw, mut sx, mut sy, mut sxx, mut sxy) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for s in samples {
        let w = 1.0 / (s.time_us * s.time_us);
        let x = s.bytes as f64;
        sw += w;
        sx += w * x;
        sy += w * s.time_us;
        sxx += w * x * x;
        sxy += w * x * s.time_us;
    }
    let det = sw * sxx - sx * sx;
    let mut slope = (sw * sxy - sx * sy) / det;
    let mut latency = (sy - slope * sx) / sw;
    if latency < 0.0 {
        latency = 0.0;
        slope = sxy / sxx;
    }
    if !(slope.is_finite() && slope > 0.0) {
        return Err(FitError::BadSamples { what: "a pinned link", reason: "time does not grow with size".into() });
    }
    Ok(LinkParams { latency_us: latency, gb_per_s: 1.0 / slope / 1e3 })
}

/// Candidate staging chunk sizes: 64 KiB to 16 MiB.
const STAGING_CANDIDATES: std::ops::RangeInclusive<u32> = 16..=24;

/// Fits the pageable pipeline given the pinned link: a grid over staging chunk size and
/// host copy bandwidth, with the latency solved in closed form at each grid point.
pub fn fit_staged(link: &LinkParams, direction: Direction, samples: &[Sample]) -> Result<StagedParams, FitError> {
    check("a pageable pipeline", samples, 3)?;
    let mut best: Option<(f64, StagedParams)> = None;
    for chunk_log in STAGING_CANDIDATES {
        for step in 0..=400 {
            // Host bandwidth from 0.5 to 200 GB/s, log-spaced.
            let host_gb_per_s = 0.5 * (400.0f64).powf(f64::from(step) / 400.0);
            let shape = StagedParams { latency_us: 0.0, host_gb_per_s, staging_bytes: 1 << chunk_log };
            let pipeline: Vec<f64> = samples.iter().map(|s| pageable_copy_us(link, &shape, direction, s.bytes)).collect();
            // Weighted least squares for the additive latency: the weighted mean residual.
            let (num, den) = samples.iter().zip(&pipeline).fold((0.0, 0.0), |(n, d), (s, p)| {
                let w = 1.0 / (s.time_us * s.time_us);
                (n + w * (s.time_us - p), d + w)
            });
            let latency_us = (num / den).max(0.0);
            let error: f64 = samples
                .iter()
                .zip(&pipeline)
                .map(|(s, p)| ((p + latency_us - s.time_us) / s.time_us).powi(2))
                .sum();
            if best.as_ref().is_none_or(|(e, _)| error < *e) {
                best = Some((error, StagedParams { latency_us, ..shape }));
            }
        }
    }
    Ok(best.expect("the grid is not empty").1)
}

/// Fits a whole profile to a calibration run.
pub fn fit_profile(name: &str, calibration: &Calibration) -> Result<Profile, FitError> {
    let h2d_pinned = fit_link(&calibration.h2d_pinned)?;
    let d2h_pinned = fit_link(&calibration.d2h_pinned)?;
    let h2d_pageable = fit_staged(&h2d_pinned, Direction::HostToDevice, &calibration.h2d_pageable)?;
    let d2h_pageable = fit_staged(&d2h_pinned, Direction::DeviceToHost, &calibration.d2h_pageable)?;
    let mut calibration_bytes: Vec<u64> = [&calibration.h2d_pinned, &calibration.d2h_pinned, &calibration.h2d_pageable, &calibration.d2h_pageable]
        .iter()
        .flat_map(|samples| samples.iter().map(|s| s.bytes))
        .collect();
    calibration_bytes.sort_unstable();
    calibration_bytes.dedup();
    let d = &calibration.device;
    Ok(Profile {
        name: name.to_string(),
        description: format!("{} (driver {}, PCI {}), measured by memlab calibrate on {}", d.name, d.driver_version, d.pci_bus_id, calibration.date),
        device: ProfileDevice {
            name: d.name.clone(),
            compute_capability: d.compute_capability.clone(),
            multiprocessors: d.multiprocessors,
            memory_bytes: d.memory_bytes,
            copy_engines: d.copy_engines,
        },
        transfer: TransferParams {
            source: format!(
                "memlab calibrate on {} ({}): medians of event-timed copies at calibration_bytes, fitted by weighted least squares (pinned) and a grid search (pageable staging)",
                d.name, calibration.date
            ),
            calibration_bytes,
            kernel_launch_us: calibration.kernel_launch_us,
            h2d_pinned,
            d2h_pinned,
            h2d_pageable,
            d2h_pageable,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pcie::pinned_copy_us;
    use experiments::Sample;

    #[test]
    fn recovers_a_known_link() {
        let truth = LinkParams { latency_us: 3.0, gb_per_s: 52.0 };
        let samples: Vec<Sample> = (10..30)
            .step_by(3)
            .map(|k| Sample { bytes: 3 << k, time_us: pinned_copy_us(&truth, 3 << k) })
            .collect();
        let fitted = fit_link(&samples).unwrap();
        assert!((fitted.latency_us - 3.0).abs() < 1e-6 && (fitted.gb_per_s - 52.0).abs() < 1e-6, "{fitted:?}");
    }

    #[test]
    fn recovers_a_known_pipeline() {
        let link = LinkParams { latency_us: 2.0, gb_per_s: 52.0 };
        let truth = StagedParams { latency_us: 8.0, host_gb_per_s: 20.0, staging_bytes: 1 << 20 };
        let samples: Vec<Sample> = (10..30)
            .step_by(3)
            .map(|k| Sample { bytes: 3 << k, time_us: pageable_copy_us(&link, &truth, Direction::HostToDevice, 3 << k) })
            .collect();
        let fitted = fit_staged(&link, Direction::HostToDevice, &samples).unwrap();
        for s in &samples {
            let p = pageable_copy_us(&link, &fitted, Direction::HostToDevice, s.bytes);
            assert!(((p - s.time_us) / s.time_us).abs() < 0.02, "{fitted:?} at {} B", s.bytes);
        }
    }

    #[test]
    fn refuses_too_few_or_bad_samples() {
        assert!(fit_link(&[Sample { bytes: 1, time_us: 1.0 }]).is_err());
        let bad = [Sample { bytes: 1, time_us: 1.0 }, Sample { bytes: 2, time_us: f64::NAN }];
        assert!(fit_link(&bad).unwrap_err().to_string().contains("not a positive"));
    }
}
