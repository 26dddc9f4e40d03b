//! Growing a device buffer by doubling, three ways: what each grow costs, how much device
//! memory the strategy holds at its peak, and so where each runs out.
//!
//! copy: a new allocation, a device-to-device copy of the old half, a free; it holds both at
//! once (1.5x the new size). managed: the same with managed memory, prefetched. vmm: a chunk
//! mapped after the existing ones; it holds only the new size. With `reserve = yes` room for
//! every size is set aside first: copy allocates it outright (a grow then moves nothing), managed
//! allocates it unbacked and a grow prefetches the new half, vmm reserves addresses only.

use experiments::{Calibration, Family, Metrics, Params, Profile};

use crate::backend::SimError;
use crate::fit::FitError;
use crate::models::{bytes_points, fitted_or_kept, required, Model};

use crate::solve::{fit_line, weighted_median};
use experiments::{growth_calibration_bytes, GrowthCost, GrowthSample};

use experiments::{grow_sizes, reserved_bytes, GrowthParams, GrowthPoint, GrowthStrategy, MANAGED_LIMIT_FRACTION};

/// What the model says about one grow.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct GrowthPrediction {
    /// The grow's time, microseconds; `None` when the strategy runs out of memory.
    pub grow_us: Option<f64>,
    /// Device memory the strategy holds at its peak during the grow, bytes.
    pub peak_bytes: u64,
}

/// Predicts one grow from `point.bytes / 2` to `point.bytes`.
pub(crate) fn predict_growth(params: &GrowthParams, point: &GrowthPoint) -> Option<GrowthPrediction> {
    let (old, new) = grow_sizes(point.bytes);
    let free = params.free_bytes;
    let reserve = reserved_bytes(free);
    let (peak, fits) = match (point.strategy, point.reserve) {
        (GrowthStrategy::Copy, false) => (old + new, old + new <= free),
        (GrowthStrategy::Copy, true) => (reserve, new <= reserve),
        (GrowthStrategy::Managed, false) => (old + new, (old + new) as f64 <= free as f64 * MANAGED_LIMIT_FRACTION),
        (GrowthStrategy::Managed, true) => (new, new <= reserve),
        (GrowthStrategy::Vmm, _) => (new, new <= free),
    };
    let cost = params.cost(point.strategy, point.reserve)?;
    let gib = new as f64 / (1u64 << 30) as f64;
    Some(GrowthPrediction {
        grow_us: fits.then_some(cost.fixed_us + cost.us_per_gib * gib),
        peak_bytes: peak,
    })
}

/// Fits each growth strategy's cost line, `fixed + per GiB x size`, on its calibration grows
/// by least absolute relative error.
pub(crate) fn fit_growth(samples: &[GrowthSample], free_bytes: u64, source: String) -> Result<GrowthParams, FitError> {
    let what = "buffer growth";
    let mut costs = Vec::new();
    for strategy in GrowthStrategy::ALL {
        for reserve in [false, true] {
            let points: Vec<(f64, f64)> = samples
                .iter()
                .filter(|s| s.strategy == strategy && s.reserve == reserve)
                .map(|s| (s.bytes as f64 / (1u64 << 30) as f64, s.grow_us))
                .collect();
            if points.len() < 2 || points.iter().any(|p| !(p.1.is_finite() && p.1 > 0.0)) {
                return Err(FitError::BadSamples {
                    what,
                    reason: format!(
                        "{} (reserve {reserve}): need two or more positive grow times, got {points:?}",
                        strategy.name()
                    ),
                });
            }
            // Neither part of a grow can cost less than nothing: a line with a negative part
            // (a grow that costs the same at every size) is refitted with that part at zero.
            let (mut fixed_us, mut us_per_gib) = fit_line(&points);
            if us_per_gib < 0.0 {
                us_per_gib = 0.0;
                fixed_us = weighted_median(points.iter().map(|&(_, t)| (t, 1.0 / t)).collect());
            } else if fixed_us < 0.0 {
                fixed_us = 0.0;
                us_per_gib = weighted_median(points.iter().map(|&(x, t)| (t / x, x / t)).collect());
            }
            costs.push(GrowthCost {
                strategy,
                reserve,
                fixed_us,
                us_per_gib,
            });
        }
    }
    if free_bytes == 0 {
        return Err(FitError::BadSamples {
            what,
            reason: "the device's free memory was not recorded".into(),
        });
    }
    Ok(GrowthParams {
        source,
        free_bytes,
        costs,
        calibration_bytes: growth_calibration_bytes(),
    })
}

/// The growth model.
pub(crate) struct FamilyModel;

impl Model for FamilyModel {
    type Point = GrowthPoint;

    fn predict(profile: &Profile, point: &GrowthPoint) -> Result<Metrics, SimError> {
        let params = required(profile, &profile.growth, Family::Growth)?;
        let prediction = predict_growth(params, point).ok_or_else(|| {
            SimError::new(format!(
                "profile '{}' has no growth cost for strategy {} (reserve {})",
                profile.name,
                point.strategy.name(),
                point.reserve
            ))
        })?;
        Ok(experiments::growth_metrics(prediction.grow_us, prediction.peak_bytes))
    }

    fn calibration_points(profile: &Profile) -> Vec<Params> {
        profile.growth.iter().flat_map(|g| bytes_points(&g.calibration_bytes)).collect()
    }

    fn fit(calibration: &Calibration, base: Option<&Profile>, profile: &mut Profile) -> Result<(), FitError> {
        let d = &calibration.device;
        profile.growth = fitted_or_kept(&calibration.growth, base.and_then(|b| b.growth.as_ref()), || {
            fit_growth(
                &calibration.growth,
                calibration.free_bytes,
                format!(
                    "vramlab calibrate on {} ({}): host time of each grow (synchronized) while doubling to 3 MiB x 2^k, k = 1..14 (5 repeats up to 1 GiB, 3 above, median), for each strategy with and without a reserve, a line in the size fitted by least absolute relative error; free memory from cuMemGetInfo at the start",
                    d.name, calibration.date
                ),
            )
        })?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use experiments::GrowthCost;

    fn params() -> GrowthParams {
        let costs = GrowthStrategy::ALL
            .iter()
            .flat_map(|&strategy| {
                [false, true].map(|reserve| GrowthCost {
                    strategy,
                    reserve,
                    fixed_us: 10.0,
                    us_per_gib: 100.0,
                })
            })
            .collect();
        GrowthParams {
            source: "t".into(),
            free_bytes: 80 << 30,
            costs,
            calibration_bytes: vec![],
        }
    }

    #[test]
    fn copy_runs_out_near_half_of_memory_and_vmm_does_not() {
        let p = params();
        let grow = |strategy, bytes| {
            predict_growth(
                &p,
                &GrowthPoint {
                    strategy,
                    reserve: false,
                    bytes,
                },
            )
            .unwrap()
        };
        // 32 -> 64 GiB needs 96 GiB at once by copying; mapping needs the 64 only.
        assert!(grow(GrowthStrategy::Copy, 32 << 30).grow_us.is_some());
        assert!(grow(GrowthStrategy::Copy, 64 << 30).grow_us.is_none());
        assert!(grow(GrowthStrategy::Vmm, 64 << 30).grow_us.is_some());
        assert_eq!(grow(GrowthStrategy::Vmm, 64 << 30).peak_bytes, 64 << 30);
        assert_eq!(grow(GrowthStrategy::Copy, 32 << 30).peak_bytes, 48 << 30);
        assert!(grow(GrowthStrategy::Vmm, 128 << 30).grow_us.is_none());
    }
}
