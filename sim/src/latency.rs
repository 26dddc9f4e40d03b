//! The latency ladder: one thread chasing a random cycle of pointers through a footprint.
//!
//! A cache of capacity `C` serves a chase through `F <= C` bytes entirely. Beyond it, it serves
//! `(C / F)^k` of the loads: `k = 1` if every line were equally likely to be kept, while a
//! replacement close to LRU keeps almost nothing of a cyclic chase longer than itself (large
//! `k`). Both `k` and the L2 capacity one SM sees are fitted on footprints where the levels
//! run out. The L2 runs out in two steps: past what its near half holds for a chase, the far
//! half still serves a share of the lines, until it runs out as well. A chase through `F` takes, per load, each level's latency weighted by its share.

use experiments::{TeachControl, TeachFact, TeachPage, TeachPanel, TeachView, Workload};
use serde_json::json;
use crate::teach::{byte_ticks, fail, gpu_class, ladder, metric, strings, Teacher};
use experiments::{Calibration, Family, Metrics, Params, Profile};

use crate::backend::SimError;
use crate::fit::{known_l1_devices, unified_l1_bytes, FitError};
use crate::models::{bytes_points, fitted_or_kept, required, Model};

use crate::solve::minimise_positive;
use experiments::LatencySample;

use experiments::{LatencyParams, LatencyPoint};

/// The share of a chase through `footprint` bytes a cache of `capacity` bytes serves.
fn served(capacity: f64, footprint: f64, sharpness: f64) -> f64 {
    (capacity / footprint).min(1.0).powf(sharpness)
}

/// Shares of loads served by the L1, the L2 and DRAM for a random chase through `bytes`.
pub(crate) fn level_shares(params: &LatencyParams, bytes: u64) -> [f64; 3] {
    let footprint = bytes.max(1) as f64;
    let l2_capacity = if params.l2_effective_bytes > 0 {
        params.l2_effective_bytes
    } else {
        params.l2_bytes
    };
    let l1 = served(params.l1_bytes as f64, footprint, params.l1_sharpness);
    let near = served(l2_capacity as f64, footprint, params.l2_sharpness);
    // Past the near half, the far half still serves its share of the lines until it runs out too.
    let far = params.l2_far_share.clamp(0.0, 1.0) * served(params.l2_far_bytes as f64, footprint, params.l2_sharpness);
    let l1_or_l2 = (near + (1.0 - near) * far).max(l1);
    [l1, l1_or_l2 - l1, 1.0 - l1_or_l2]
}

/// Predicted cycles per dependent load.
pub(crate) fn chase_cycles(params: &LatencyParams, point: &LatencyPoint) -> f64 {
    let [l1, l2, dram] = level_shares(params, point.bytes);
    l1 * params.l1_cycles + l2 * params.l2_cycles + dram * params.dram_cycles
}

/// The free parameters of where the L2 runs out, named; the solver sees them in this order.
#[derive(Debug, Clone, Copy)]
struct L2Edge {
    /// The near part's capacity, MiB.
    near_mib: f64,
    sharpness: f64,
    /// The far part's share of what the near part misses.
    far_share: f64,
    /// How far past the near part the far part reaches, MiB.
    far_extra_mib: f64,
}

impl L2Edge {
    fn values(&self) -> [f64; 4] {
        [self.near_mib, self.sharpness, self.far_share, self.far_extra_mib]
    }

    fn from_values(x: &[f64]) -> L2Edge {
        L2Edge {
            near_mib: x[0],
            sharpness: x[1],
            far_share: x[2],
            far_extra_mib: x[3],
        }
    }
}

/// Fits the latency ladder. The L1, L2 and DRAM footprints (the smallest, 6 MiB and the
/// largest sample) fix each level's latency given the others' shares; the footprint just past
/// the L1 fixes how sharply the L1 stops serving; the four where the L2 runs out fix its near
/// capacity, the far half's share and capacity, and the sharpness (jointly, least absolute
/// relative error). Shape and latencies are fitted in turn until they settle.
pub(crate) fn fit_latency(
    samples: &[LatencySample],
    l1_bytes: u64,
    l2_bytes: u64,
    source: String,
) -> Result<LatencyParams, FitError> {
    let what = "the latency ladder";
    let mut sorted = samples.to_vec();
    sorted.sort_by_key(|s| s.bytes);
    if sorted.len() != 8 || sorted.iter().any(|s| !(s.cycles.is_finite() && s.cycles > 0.0)) {
        return Err(FitError::BadSamples {
            what,
            reason: format!(
                "need eight positive samples (L1, past-L1, L2, four L2-edge and DRAM footprints), got {}: {}",
                sorted.len(),
                sorted
                    .iter()
                    .map(|s| format!("{} {} cycles", experiments::format_bytes(s.bytes), s.cycles))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        });
    }
    let (l1_sample, past_l1, l2_sample, dram_sample) = (sorted[0], sorted[1], sorted[2], sorted[7]);
    let edges = &sorted[3..7];
    let mut params = LatencyParams {
        source,
        l1_bytes,
        l2_bytes,
        l1_cycles: 0.0,
        l2_cycles: 0.0,
        dram_cycles: 0.0,
        l1_sharpness: 8.0,
        l2_effective_bytes: l2_bytes / 2,
        l2_sharpness: 8.0,
        l2_far_share: 0.5,
        l2_far_bytes: l2_bytes,
        calibration_bytes: sorted.iter().map(|s| s.bytes).collect(),
    };
    for _ in 0..4 {
        for (level, sample) in [l1_sample, l2_sample, dram_sample].iter().enumerate() {
            let shares = level_shares(&params, sample.bytes);
            if shares[level] < 0.5 {
                return Err(FitError::BadSamples {
                    what,
                    reason: format!(
                        "the {} B footprint is not served mostly by level {level} (share {:.2})",
                        sample.bytes, shares[level]
                    ),
                });
            }
            let known = [params.l1_cycles, params.l2_cycles, params.dram_cycles];
            let others: f64 = (0..3).filter(|&l| l != level).map(|l| shares[l] * known[l]).sum();
            let cycles = (sample.cycles - others) / shares[level];
            match level {
                0 => params.l1_cycles = cycles,
                1 => params.l2_cycles = cycles,
                _ => params.dram_cycles = cycles,
            }
        }
        let l1_hit = ((params.l2_cycles - past_l1.cycles) / (params.l2_cycles - params.l1_cycles)).clamp(1e-6, 1.0);
        let ratio = l1_bytes as f64 / past_l1.bytes as f64;
        if l1_hit < 1.0 && ratio < 1.0 {
            params.l1_sharpness = (l1_hit.ln() / ratio.ln()).clamp(0.1, 200.0);
        }
        let mib = (1u64 << 20) as f64;
        let with = |x: &[f64]| {
            let edge = L2Edge::from_values(x);
            LatencyParams {
                l2_effective_bytes: (edge.near_mib * mib) as u64,
                l2_sharpness: edge.sharpness,
                l2_far_share: edge.far_share.min(1.0),
                l2_far_bytes: ((edge.near_mib + edge.far_extra_mib) * mib) as u64,
                ..params.clone()
            }
        };
        let error = |x: &[f64]| -> f64 {
            let p = with(x);
            edges
                .iter()
                .map(|s| (chase_cycles(&p, &experiments::LatencyPoint { bytes: s.bytes }) / s.cycles - 1.0).abs())
                .sum()
        };
        // A few starts (sharp or gentle, small or large far share); the best fit wins.
        let current = L2Edge {
            near_mib: params.l2_effective_bytes as f64 / mib,
            sharpness: params.l2_sharpness,
            far_share: params.l2_far_share.max(1e-3),
            far_extra_mib: (params.l2_far_bytes.saturating_sub(params.l2_effective_bytes) as f64 / mib).max(1.0),
        };
        let half = l2_bytes as f64 / mib / 2.0;
        let mut best = minimise_positive(&current.values(), error);
        for sharpness in [2.0, 6.0, 20.0] {
            for far_share in [0.2, 0.5] {
                let start = L2Edge {
                    near_mib: half,
                    sharpness,
                    far_share,
                    far_extra_mib: half,
                };
                let x = minimise_positive(&start.values(), error);
                if error(&x) < error(&best) {
                    best = x;
                }
            }
        }
        params = with(&best);
    }
    Ok(params)
}

/// The latency-ladder model.
pub(crate) struct FamilyModel;

impl Model for FamilyModel {
    type Point = LatencyPoint;

    fn teach(t: &Teacher) -> Result<Vec<TeachPage>, experiments::Error> {
        Ok(vec![teach_page(t)?])
    }

    fn predict(profile: &Profile, point: &LatencyPoint) -> Result<Metrics, SimError> {
        let params = required(profile, &profile.latency, Family::Latency)?;
        Ok(experiments::cycles_metrics(chase_cycles(params, point)))
    }

    fn calibration_points(profile: &Profile) -> Vec<Params> {
        profile.latency.iter().flat_map(|l| bytes_points(&l.calibration_bytes)).collect()
    }

    fn fit(calibration: &Calibration, base: Option<&Profile>, profile: &mut Profile) -> Result<(), FitError> {
        let d = &calibration.device;
        profile.latency = fitted_or_kept(&calibration.latency, base.and_then(|b| b.latency.as_ref()), || {
            // The L1 a kernel without shared memory gets: the SM's unified L1/shared array less the
            // smallest shared-memory carveout that holds the driver's reserved bytes (8 KiB).
            let unified = unified_l1_bytes(&d.compute_capability).ok_or_else(|| FitError::BadSamples {
                what: "the latency ladder",
                reason: format!(
                    "the L1 size of compute capability {} is not known to vramlab (it knows {})",
                    d.compute_capability,
                    known_l1_devices()
                ),
            })?;
            let l1_bytes = unified - (8 << 10);
            fit_latency(
                &calibration.latency,
                l1_bytes,
                calibration.l2_bytes,
                format!(
                    "vramlab calibrate on {} ({}): median clock64 cycles per load of a one-thread random pointer chase at calibration_bytes (12 KiB, 6 MiB, 768 MiB: the latencies; 384 KiB: how sharply the L1 stops serving; 28, 40, 56, 80 MiB: the two steps in which the L2 runs out); L1 {} KiB ({} KiB unified L1/shared per SM of compute capability {}, NVIDIA's whitepaper, less an 8 KiB carveout); L2 size from cuDeviceGetAttribute",
                    d.name,
                    calibration.date,
                    l1_bytes >> 10,
                    unified >> 10,
                    d.compute_capability
                ),
            )
        })?;
        Ok(())
    }

    fn summary(profile: &Profile) -> Option<String> {
        let l = profile.latency.as_ref()?;
        Some(format!(
            "L1 {:.0}, L2 {:.0}, DRAM {:.0} cycles per dependent load",
            l.l1_cycles, l.l2_cycles, l.dram_cycles
        ))
    }
}

/// The family's page of the teaching site (`vramlab teach`).
pub(crate) fn teach_page(t: &Teacher) -> Result<TeachPage, experiments::Error> {
    let params = t
        .profile
        .latency
        .as_ref()
        .ok_or_else(|| fail(format!("profile '{}' has no [latency] section", t.profile.name)))?;
    let sizes = ladder(4 << 10, 1 << 30);
    let mut model = Vec::new();
    for bytes in &sizes {
        let w = t.point(experiments::Family::Latency, &[format!("bytes={bytes}")])?;
        model.push((*bytes as f64, metric(&t.predict(&w)?, "cycles")?));
    }
    let measured = t.measured_series(
        |w| match w {
            Workload::Latency(p) => Some(p.bytes as f64),
            _ => None,
        },
        "cycles",
    );
    let controls = vec![TeachControl::new(
        "bytes",
        "Footprint of the chase",
        "range",
        strings(&sizes),
        sizes.iter().map(|s| experiments::format_bytes(*s)).collect(),
        &(1u64 << 20).to_string(),
    )];
    let panel = TeachPanel::build(
        "latency",
        "One thread chasing pointers through a footprint",
        controls,
        |values| {
            let workload = t.point(experiments::Family::Latency, &[format!("bytes={}", values[0])])?;
            let Workload::Latency(point) = workload else {
                return Err(fail("not a latency point"));
            };
            let cycles = metric(&t.predict(&workload)?, "cycles")?;
            let [l1, l2, dram] = level_shares(params, point.bytes);
            let mut series = vec![json!({"name": "model", "class": "pinned", "line": true, "points": model})];
            for (gpu, points) in &measured {
                series.push(json!({"name": format!("measured, {gpu}"), "class": gpu_class(gpu), "line": false, "points": points}));
            }
            Ok(TeachView {
                facts: vec![
                    TeachFact::new("cycles", "Predicted cycles per dependent load", format!("{cycles:.0}")).strong(),
                    TeachFact::new("l1", "Loads served by the L1", format!("{:.0}%", 100.0 * l1)),
                    TeachFact::new("l2", "Loads served by the L2", format!("{:.0}%", 100.0 * l2)),
                    TeachFact::new("dram", "Loads served by DRAM", format!("{:.0}%", 100.0 * dram)),
                ],
                measured: t.measured(&workload, "cycles", "cycles", |v| format!("{v:.0}")),
                command: format!("vramlab run latency{}", t.profile_flag),
                text: String::new(),
                picture: json!({"kind": "curve", "title": "the latency ladder", "xlabel": "footprint", "ylabel": "cycles per load",
                            "xlog": true, "ylog": false, "series": series, "xticks": byte_ticks(4 << 10, 1 << 30, 3),
                            "bands": [[0.0, params.l1_bytes as f64, "l1", format!("L1 {}", experiments::format_bytes(params.l1_bytes))],
                                      [params.l1_bytes as f64, params.l2_bytes as f64, "l2", format!("L2 {}", experiments::format_bytes(params.l2_bytes))]],
                            "marks": [[point.bytes as f64, cycles]]}),
            })
        },
    )?;
    Ok(TeachPage {
        slug: "latency".into(),
        title: "The latency ladder: L1, L2, DRAM".into(),
        intro: vec![
            "One thread follows a random cycle of pointers through a footprint. While the footprint fits in the L1, each load is an L1 hit; past it the L2 serves them, past the L2 DRAM does. Slide the footprint and read the cost per load off the model's curve, beside the committed measurements.".into(),
        ],
        terminal: format!("vramlab run latency{}", t.profile_flag),
        panels: vec![panel],
        notes: vec![
            format!("Model: sim/src/latency.rs with profile '{}' ({}).", t.profile.name, params.source),
            "`vramlab explain` has no latency view; the terminal command runs the model over the latency experiment's footprints and writes its report.".into(),
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn params() -> LatencyParams {
        LatencyParams {
            source: "test".into(),
            l1_bytes: 256 << 10,
            l2_bytes: 50 << 20,
            l1_cycles: 35.0,
            l2_cycles: 260.0,
            dram_cycles: 600.0,
            l1_sharpness: 1.0,
            l2_effective_bytes: 0,
            l2_sharpness: 1.0,
            l2_far_share: 0.0,
            l2_far_bytes: 0,
            calibration_bytes: vec![],
        }
    }

    #[test]
    fn plateaus() {
        let p = params();
        assert_eq!(chase_cycles(&p, &LatencyPoint { bytes: 16 << 10 }), 35.0);
        let in_l2 = chase_cycles(&p, &LatencyPoint { bytes: 16 << 20 });
        assert!((in_l2 - (35.0 / 64.0 + 260.0 * 63.0 / 64.0)).abs() < 1e-9);
        let huge = chase_cycles(&p, &LatencyPoint { bytes: 1 << 40 });
        assert!((huge - 600.0).abs() < 1.0);
    }

    proptest! {
        #[test]
        fn latency_never_falls_as_the_footprint_grows(bytes in 1u64..(1 << 34), extra in 1u64..(1 << 30)) {
            let p = params();
            let smaller = chase_cycles(&p, &LatencyPoint { bytes });
            let larger = chase_cycles(&p, &LatencyPoint { bytes: bytes + extra });
            prop_assert!(larger >= smaller - 1e-9, "{} B: {}, {} B: {}", bytes, smaller, bytes + extra, larger);
        }

        #[test]
        fn shares_sum_to_one(bytes in 1u64..(1 << 40)) {
            let s = level_shares(&params(), bytes);
            prop_assert!((s.iter().sum::<f64>() - 1.0).abs() < 1e-12 && s.iter().all(|x| *x >= 0.0));
        }
    }
}

#[cfg(test)]
mod fit_tests {
    
    
    use super::*;
    

    #[test]
    fn recovers_a_known_latency_ladder() {
        let truth = LatencyParams {
            source: "t".into(),
            l1_bytes: 248 << 10,
            l2_bytes: 50 << 20,
            l1_cycles: 38.0,
            l2_cycles: 270.0,
            dram_cycles: 650.0,
            l1_sharpness: 20.0,
            l2_effective_bytes: 22 << 20,
            l2_sharpness: 4.0,
            l2_far_share: 0.4,
            l2_far_bytes: 50 << 20,
            calibration_bytes: vec![],
        };
        let samples: Vec<LatencySample> = experiments::latency_calibration_bytes()
            .into_iter()
            .map(|bytes| LatencySample {
                bytes,
                cycles: crate::latency::chase_cycles(&truth, &experiments::LatencyPoint { bytes }),
            })
            .collect();
        let fitted = fit_latency(&samples, truth.l1_bytes, truth.l2_bytes, "t".into()).unwrap();
        for (got, want) in [
            (fitted.l1_cycles, 38.0),
            (fitted.l2_cycles, 270.0),
            (fitted.dram_cycles, 650.0),
            (fitted.l1_sharpness, 20.0),
        ] {
            assert!((got / want - 1.0).abs() < 1e-3, "{fitted:?}");
        }
        // The L2's two steps may fit with other parameters; what must hold is the prediction.
        for k in 12..32 {
            let point = experiments::LatencyPoint { bytes: 1 << k };
            let (got, want) = (
                crate::latency::chase_cycles(&fitted, &point),
                crate::latency::chase_cycles(&truth, &point),
            );
            assert!(
                (got / want - 1.0).abs() < 0.03,
                "{} B: {got} vs {want}; {fitted:?}",
                1u64 << k
            );
        }
    }
}
