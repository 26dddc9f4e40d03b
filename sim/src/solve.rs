//! The solvers the fits share. Fits minimise the sum of absolute *relative* errors: relative,
//! so a 1 KiB copy counts as much as a 1 GiB one (the yardstick reports use); absolute rather
//! than squared, so one sample disturbed by something else on the machine cannot drag the whole
//! fit (seen on the first calibration of a freshly started H100, where three of seven sizes ran
//! 2-3x slow).

/// Weighted least squares for `y = intercept + slope * x`, errors relative to y.
pub(crate) fn weighted_line(points: &[(f64, f64)], weights: &[f64]) -> (f64, f64) {
    let (mut sw, mut sx, mut sy, mut sxx, mut sxy) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for ((x, y), weight) in points.iter().zip(weights) {
        let w = weight / (y * y);
        sw += w;
        sx += w * x;
        sy += w * y;
        sxx += w * x * x;
        sxy += w * x * y;
    }
    let slope = (sw * sxy - sx * sy) / (sw * sxx - sx * sx);
    let intercept = (sy - slope * sx) / sw;
    if intercept < 0.0 {
        // Noise can make the best line cross below zero; a fixed cost is physical, so pin it.
        (0.0, sxy / sxx)
    } else {
        (intercept, slope)
    }
}

/// Fits `y = intercept + slope * x` minimising the sum of absolute relative errors, by
/// iteratively reweighted least squares. Returns (intercept, slope).
pub(crate) fn fit_line(points: &[(f64, f64)]) -> (f64, f64) {
    let mut weights = vec![1.0; points.len()];
    let (mut intercept, mut slope) = weighted_line(points, &weights);
    for _ in 0..100 {
        for (w, (x, y)) in weights.iter_mut().zip(points) {
            *w = 1.0 / ((intercept + slope * x - y) / y).abs().max(1e-6);
        }
        (intercept, slope) = weighted_line(points, &weights);
    }
    (intercept, slope)
}

/// Minimises `error` over positive parameters by coordinate descent in log space: each
/// parameter in turn is scaled up and down by a step that halves when nothing improves.
pub(crate) fn minimise_positive(start: &[f64], error: impl Fn(&[f64]) -> f64) -> Vec<f64> {
    let mut x = start.to_vec();
    let mut best = error(&x);
    let mut step = 0.5f64;
    while step > 1e-5 {
        let mut improved = false;
        for i in 0..x.len() {
            for factor in [1.0 + step, 1.0 / (1.0 + step)] {
                let mut trial = x.clone();
                trial[i] *= factor;
                let e = error(&trial);
                if e < best {
                    (best, x, improved) = (e, trial, true);
                }
            }
        }
        if !improved {
            step /= 2.0;
        }
    }
    x
}

/// The `value` that minimises the sum of `weight * |value - x|`: a weighted median.
pub(crate) fn weighted_median(mut pairs: Vec<(f64, f64)>) -> f64 {
    pairs.sort_by(|a, b| a.0.total_cmp(&b.0));
    let half = pairs.iter().map(|p| p.1).sum::<f64>() / 2.0;
    let mut running = 0.0;
    for (x, w) in &pairs {
        running += w;
        if running >= half {
            return *x;
        }
    }
    pairs.last().map_or(0.0, |p| p.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Points on an exact line come back as that line, from both line fits.
    #[test]
    fn a_line_through_exact_points_is_found() {
        let points: Vec<(f64, f64)> = (1..=8).map(|i| (f64::from(i), 3.0 + 0.5 * f64::from(i))).collect();
        let (intercept, slope) = fit_line(&points);
        assert!(
            (intercept - 3.0).abs() < 1e-9 && (slope - 0.5).abs() < 1e-9,
            "{intercept} {slope}"
        );
        let (intercept, slope) = weighted_line(&points, &[1.0; 8]);
        assert!(
            (intercept - 3.0).abs() < 1e-9 && (slope - 0.5).abs() < 1e-9,
            "{intercept} {slope}"
        );
    }

    /// Least absolute relative error ignores one wild point that least squares would follow.
    #[test]
    fn one_outlier_does_not_drag_the_line() {
        let mut points: Vec<(f64, f64)> = (1..=9).map(|i| (f64::from(i), 2.0 * f64::from(i))).collect();
        points[4].1 *= 3.0;
        let (intercept, slope) = fit_line(&points);
        assert!(
            intercept.abs() < 1e-3 && (slope - 2.0).abs() < 1e-3,
            "{intercept} {slope}"
        );
    }

    /// A smooth bowl with its floor at a known positive point.
    #[test]
    fn coordinate_descent_finds_a_known_minimum() {
        let target = [3.0, 0.25, 40.0];
        let x = minimise_positive(&[1.0, 1.0, 1.0], |x| {
            x.iter().zip(target).map(|(v, t)| (v / t - 1.0).abs()).sum()
        });
        for (v, t) in x.iter().zip(target) {
            assert!((v / t - 1.0).abs() < 1e-4, "{x:?}");
        }
    }

    /// Weights move the median: with most weight on one value, that value minimises the sum.
    #[test]
    fn the_weighted_median_minimises_weighted_distance() {
        assert_eq!(weighted_median(vec![(1.0, 1.0), (2.0, 1.0), (10.0, 5.0)]), 10.0);
        let m = weighted_median(vec![(1.0, 1.0), (2.0, 1.0), (3.0, 1.0)]);
        assert_eq!(m, 2.0);
    }
}

#[cfg(test)]
mod fit_tests {
    use crate::solve::*;

    #[test]
    fn weighted_median_minimises_weighted_distance() {
        assert_eq!(weighted_median(vec![(1.0, 1.0), (2.0, 1.0), (10.0, 1.0)]), 2.0);
        assert_eq!(weighted_median(vec![(1.0, 5.0), (2.0, 1.0), (10.0, 1.0)]), 1.0);
    }
}
