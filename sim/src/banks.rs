//! Shared-memory banks: which bank each lane's bytes fall in, and how many passes
//! (wavefronts) the banks need to serve one warp-wide load.
//!
//! Shared memory is `banks` banks of `bank_bytes`-byte words; word `w` lives in bank
//! `w mod banks`, and each bank delivers one word per pass. Lanes that touch the same word
//! share it (broadcast); different words in one bank take one pass each. So a load needs as
//! many passes as the busiest bank has distinct words, counted over the whole warp.
//!
//! The first version split 8- and 16-byte loads into half- and quarter-warp phases. The H100
//! showed that wrong for broadcasts (one pass, not 2 or 4, for every lane loading the same
//! 8 or 16 bytes: reports/reference/h100/hierarchy) and the whole-warp count matched all 57
//! measured cases. The rule has no fitted term; the strides added afterwards and the
//! H200 run validate it on cases it was not derived from.

use experiments::{TeachControl, TeachFact, TeachPage, TeachPanel, TeachView, Workload};
use serde_json::json;
use crate::teach::{args, fail, metric, strings, Teacher};
use experiments::{Calibration, Family, Metrics, Params, Profile};

use crate::backend::SimError;
use crate::fit::FitError;
use crate::models::{explained, fitted_or_kept, int, params, required, Model};

use crate::solve::fit_line;
use std::fmt::Write as _;

use experiments::BankSample;

use experiments::{BankParams, BankPoint};

/// What one warp-wide shared load costs, lane by lane (the picture `vramlab teach` draws).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BankAccess {
    /// Passes over the banks.
    pub wavefronts: u32,
    /// Passes the load would need without conflicts: its distinct words over the bank count.
    pub min_wavefronts: u32,
    /// Conflict degree: wavefronts over the conflict-free minimum, rounded up (1 = none).
    pub conflict_degree: u32,
    /// For each lane, the bank of its first word.
    pub lane_banks: Vec<u32>,
    /// For each lane, the pass (0-based) in which its first word's bank delivers it: lanes
    /// sharing a word share a pass.
    pub lane_passes: Vec<u32>,
}

impl BankAccess {
    /// Passes beyond the conflict-free minimum: what conflicts cost.
    pub fn replays(&self) -> u32 {
        self.wavefronts - self.min_wavefronts
    }
}

/// Threads in a warp.
const WARP: u32 = 32;

/// The banks one warp-wide load touches and the wavefronts it needs.
pub fn bank_access(shared: &BankParams, point: &BankPoint) -> BankAccess {
    let words_per_lane = u64::from((point.width / shared.bank_bytes).max(1));
    let banks = u64::from(shared.banks);
    let first_word = |lane: u32| u64::from(lane) * u64::from(point.stride) * words_per_lane;
    // Distinct words per bank; lanes sharing a word count once (broadcast).
    let mut words_in_bank: Vec<Vec<u64>> = vec![Vec::new(); shared.banks as usize];
    for lane in 0..WARP {
        for word in first_word(lane)..first_word(lane) + words_per_lane {
            let bank = &mut words_in_bank[(word % banks) as usize];
            if !bank.contains(&word) {
                bank.push(word);
            }
        }
    }
    let wavefronts = words_in_bank.iter().map(Vec::len).max().unwrap_or(1).max(1) as u32;
    let distinct: usize = words_in_bank.iter().map(Vec::len).sum();
    let min_wavefronts = (distinct as u32).div_ceil(shared.banks).max(1);
    let lane_banks = (0..WARP).map(|lane| (first_word(lane) % banks) as u32).collect();
    let lane_passes = (0..WARP)
        .map(|lane| {
            let word = first_word(lane);
            let bank = &words_in_bank[(word % banks) as usize];
            bank.iter().position(|&w| w == word).unwrap_or(0) as u32
        })
        .collect();
    BankAccess {
        lane_passes,
        wavefronts,
        min_wavefronts,
        conflict_degree: wavefronts.div_ceil(min_wavefronts),
        lane_banks,
    }
}

/// Wavefronts of one warp-wide load, without building the lane map: the model's fast path.
///
/// With 32 banks and 32 lanes, lane `l` starts at word `l x stride x k` (`k` words per lane).
/// For stride >= 1 the lanes' words never overlap, and the starts fall on the multiples of
/// `g = gcd(stride x k, 32)`, each `g` times; since `k` divides `stride x k`, `k <= g`, so each
/// bank that is hit holds exactly `g` distinct words. A broadcast (stride 0) is one pass.
/// Other bank or warp counts fall back to counting.
pub(crate) fn bank_wavefronts(shared: &BankParams, point: &BankPoint) -> u32 {
    if shared.banks != WARP || shared.bank_bytes != 4 {
        return bank_access(shared, point).wavefronts;
    }
    if point.stride == 0 {
        return 1;
    }
    let words_per_lane = (point.width / 4).max(1);
    let span = point.stride * words_per_lane;
    // gcd with a power of two: the lowest set bit, capped at 32.
    1 << span.trailing_zeros().min(5)
}

/// Predicted cycles of one dependent load with this pattern.
pub fn bank_cycles(shared: &BankParams, point: &BankPoint) -> f64 {
    shared.base_cycles + f64::from(bank_wavefronts(shared, point) - 1) * shared.wavefront_cycles
}

/// Fits shared memory's base and per-wavefront cycles on measured bank patterns.
pub(crate) fn fit_banks(samples: &[BankSample], source: String) -> Result<BankParams, FitError> {
    let what = "shared-memory bank costs";
    let shape = BankParams {
        source,
        banks: 32,
        bank_bytes: 4,
        base_cycles: 1.0,
        wavefront_cycles: 0.0,
        calibration_cases: Vec::new(),
    };
    let points: Vec<(f64, f64)> = samples
        .iter()
        .map(|s| {
            (
                f64::from(
                    bank_access(
                        &shape,
                        &BankPoint {
                            width: s.width,
                            stride: s.stride,
                        },
                    )
                    .wavefronts
                        - 1,
                ),
                s.cycles,
            )
        })
        .collect();
    if points
        .iter()
        .map(|p| p.0 as u64)
        .collect::<std::collections::BTreeSet<u64>>()
        .len()
        < 2
    {
        return Err(FitError::BadSamples {
            what,
            reason: "need patterns with at least two wavefront counts".into(),
        });
    }
    if let Some(bad) = samples.iter().find(|s| !(s.cycles.is_finite() && s.cycles > 0.0)) {
        return Err(FitError::BadSamples {
            what,
            reason: format!("{bad:?} is not a positive cycle count"),
        });
    }
    let (base_cycles, wavefront_cycles) = fit_line(&points);
    Ok(BankParams {
        base_cycles,
        wavefront_cycles: wavefront_cycles.max(0.0),
        calibration_cases: samples.iter().map(|s| (s.width, s.stride)).collect(),
        ..shape
    })
}

/// Which bank each lane hits for one shared load, and how many passes the banks need.
pub(crate) fn explain_banks(shared: &BankParams, device: &str, point: &BankPoint) -> String {
    let access = bank_access(shared, point);
    let mut out = String::new();
    let pattern = if point.stride == 0 {
        "every lane loads the same element".to_string()
    } else {
        format!("lane i loads element i x {}", point.stride)
    };
    let _ = writeln!(
        out,
        "{}-byte shared loads, {pattern}, on {device} ({} banks of {} bytes)
",
        point.width, shared.banks, shared.bank_bytes
    );
    let _ = writeln!(out, "  lane -> first bank");
    for row in access.lane_banks.chunks(8).enumerate() {
        let cells: Vec<String> = row
            .1
            .iter()
            .enumerate()
            .map(|(i, b)| format!("{:>2}->{:<2}", row.0 * 8 + i, b))
            .collect();
        let _ = writeln!(out, "  {}", cells.join("  "));
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{} wavefront(s) where {} would do: {}, {} replay(s); about {:.0} cycles per dependent load.",
        access.wavefronts,
        access.min_wavefronts,
        if access.conflict_degree == 1 {
            "no conflict".to_string()
        } else {
            format!("{}-way conflict", access.conflict_degree)
        },
        access.replays(),
        bank_cycles(shared, point)
    );
    let why = if point.stride == 0 {
        "Why: lanes that read the same word share it (broadcast); one pass serves them all.".to_string()
    } else if access.conflict_degree == 1 {
        "Why: the busiest bank holds no more distinct words than the load's size requires.".to_string()
    } else {
        format!(
            "Why: the busiest bank must deliver {} different words, one per pass. A stride whose words are odd-spaced (e.g. one word of padding) spreads lanes over all banks.",
            access.wavefronts
        )
    };
    let _ = writeln!(out, "{why}");
    out
}

/// The banks model.
pub(crate) struct FamilyModel;

impl Model for FamilyModel {
    type Point = BankPoint;

    fn teach(t: &Teacher) -> Result<Vec<TeachPage>, experiments::Error> {
        Ok(vec![teach_page(t)?])
    }

    fn predict(profile: &Profile, point: &BankPoint) -> Result<Metrics, SimError> {
        let params = required(profile, &profile.banks, Family::Banks)?;
        let access = bank_access(params, point);
        let mut metrics = experiments::cycles_metrics(bank_cycles(params, point));
        metrics.insert("wavefronts".to_string(), f64::from(access.wavefronts));
        metrics.insert("conflict_degree".to_string(), f64::from(access.conflict_degree));
        Ok(metrics)
    }

    fn calibration_points(profile: &Profile) -> Vec<Params> {
        let cases = profile.banks.iter().flat_map(|s| s.calibration_cases.iter());
        cases
            .map(|&(width, stride)| params([("width", int(width)), ("stride", int(stride))]))
            .collect()
    }

    fn fit(calibration: &Calibration, base: Option<&Profile>, profile: &mut Profile) -> Result<(), FitError> {
        let d = &calibration.device;
        profile.banks = fitted_or_kept(&calibration.banks, base.and_then(|b| b.banks.as_ref()), || {
            fit_banks(
                &calibration.banks,
                format!(
                    "vramlab calibrate on {} ({}): median clock64 cycles per dependent shared load over 4-byte strides 1, 2, 4, 8, fitted by least absolute relative error; 32 banks of 4 bytes as the CUDA C++ Programming Guide gives for compute capability 5.0 and later",
                    d.name, calibration.date
                ),
            )
        })?;
        Ok(())
    }

    const EXPLAINS: bool = true;

    fn explain(profile: &Profile, point: &BankPoint) -> Result<String, experiments::Error> {
        Ok(explain_banks(explained(profile, &profile.banks, Family::Banks)?, &profile.device.name, point))
    }

    fn summary(profile: &Profile) -> Option<String> {
        let s = profile.banks.as_ref()?;
        Some(format!("{:.2} cycles + {:.2} per extra wavefront", s.base_cycles, s.wavefront_cycles))
    }
}

/// The family's page of the teaching site (`vramlab teach`).
pub(crate) fn teach_page(t: &Teacher) -> Result<TeachPage, experiments::Error> {
    let shared = t
        .profile
        .banks
        .as_ref()
        .ok_or_else(|| fail(format!("profile '{}' has no [banks] section", t.profile.name)))?;
    let strides: Vec<u32> = vec![0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 15, 16, 17, 24, 31, 32, 33, 48, 64];
    let stride_labels: Vec<String> = strides
        .iter()
        .map(|s| {
            if *s == 0 {
                "0 (broadcast)".to_string()
            } else {
                s.to_string()
            }
        })
        .collect();
    let controls = vec![
        TeachControl::new(
            "width",
            "Bytes per lane",
            "select",
            strings(&[4, 8, 16]),
            strings(&["4 (float)", "8 (double, float2)", "16 (float4)"]),
            "4",
        ),
        TeachControl::new(
            "stride",
            "Stride (elements between lanes)",
            "range",
            strings(&strides),
            stride_labels,
            "2",
        ),
    ];
    let panel = TeachPanel::build("banks", "One warp's shared-memory load", controls, |values| {
        let a = args(&["width", "stride"], values);
        let workload = t.point(experiments::Family::Banks, &a)?;
        let Workload::Banks(point) = workload else {
            return Err(fail("not a bank point"));
        };
        let access = bank_access(shared, &point);
        let metrics = t.predict(&workload)?;
        let cycles = metric(&metrics, "cycles")?;
        let padded = experiments::BankPoint {
            stride: point.stride + 1,
            ..point
        };
        let padded_access = bank_access(shared, &padded);
        let padded_cycles = metric(&t.predict(&Workload::Banks(padded))?, "cycles")?;
        let (text, command) = t.explain("banks", &a)?;
        let passes_of_bank = |bank: u32| {
            access
                .lane_banks
                .iter()
                .zip(&access.lane_passes)
                .filter(|(b, _)| **b == bank)
                .map(|(_, p)| p + 1)
                .max()
                .unwrap_or(0)
        };
        let cells: Vec<serde_json::Value> = (0..32usize)
            .map(|lane| {
                let (bank, pass) = (access.lane_banks[lane], access.lane_passes[lane]);
                let sharing = (0..32)
                    .filter(|&o| access.lane_banks[o] == bank && access.lane_passes[o] == pass)
                    .count();
                let class = if passes_of_bank(bank) > 1 {
                    "conflict"
                } else if sharing > 1 {
                    "broadcast"
                } else {
                    "lane"
                };
                json!({"col": bank, "row": pass, "text": lane.to_string(), "class": class,
                       "title": format!("lane {lane}: bank {bank}, pass {}", pass + 1)})
            })
            .collect();
        let column_classes: Vec<&str> = (0..32)
            .map(|b| if passes_of_bank(b) > 1 { "#ffebee" } else { "#fafafa" })
            .collect();
        let degree = if access.conflict_degree == 1 {
            "none".to_string()
        } else {
            format!("{}-way", access.conflict_degree)
        };
        let fix = format!(
            "stride {}: {} wavefront(s), about {:.0} cycles",
            padded.stride, padded_access.wavefronts, padded_cycles
        );
        Ok(TeachView {
            facts: vec![
                TeachFact::new(
                    "wavefronts",
                    "Passes over the banks (wavefronts)",
                    access.wavefronts.to_string(),
                )
                .strong()
                .bad_if(access.wavefronts > access.min_wavefronts),
                TeachFact::new(
                    "min_wavefronts",
                    "Passes without conflicts",
                    access.min_wavefronts.to_string(),
                ),
                TeachFact::new("conflict", "Bank conflict", degree),
                TeachFact::new("replays", "Replays", access.replays().to_string()),
                TeachFact::new("cycles", "Predicted cycles per dependent load", format!("{cycles:.0}")),
                TeachFact::new("padded", "With one more element of padding", fix),
            ],
            measured: t.measured(&workload, "cycles", "cycles", |v| format!("{v:.1}")),
            command,
            text,
            picture: json!({
                "kind": "cells", "title": "lanes on banks",
                "column_title": "bank", "row_title": "pass",
                "column_labels": strings(&(0..32).collect::<Vec<u32>>()),
                "column_classes": column_classes,
                "row_labels": (1..=access.wavefronts).map(|p| p.to_string()).collect::<Vec<_>>(),
                "rows": access.wavefronts, "cells": cells, "cell_width": 36,
                "legend": [["lane", "lane, no conflict"], ["conflict", "lane in a conflicting bank"], ["broadcast", "lanes sharing one word"]],
            }),
        })
    })?;
    Ok(TeachPage {
        slug: "banks".into(),
        title: "Shared-memory banks".into(),
        intro: vec![
            "Shared memory is 32 banks of 4-byte words; each bank delivers one word per pass. Move the stride and watch which bank each of the warp's 32 lanes lands in: lanes that pile into one bank with different words take one pass each (a conflict); lanes reading the same word share it (a broadcast).".into(),
            "Each lane is drawn at the bank of its first word (8- and 16-byte loads also touch the next one or three banks); rows are the passes the model counts.".into(),
        ],
        terminal: panel.initial_command(),
        panels: vec![panel],
        notes: vec![
            format!("Model: sim/src/banks.rs with profile '{}' ({}).", t.profile.name, shared.source),
            "Offset: vramlab's bank model takes a width and a stride, not an offset, so this page has no offset control; a broadcast is stride 0.".into(),
            "The padding line is the same model at the stride plus one element: the usual fix for a column read of a 32 x 32 float tile (stride 32 -> 33).".into(),
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn bank_view_shows_the_transpose_conflict_and_its_fix() {
        let shared = experiments::Profile::find("h100").unwrap().banks.unwrap();
        let column = explain_banks(&shared, "H100", &BankPoint { width: 4, stride: 32 });
        assert!(
            column.contains("32-way conflict") && column.contains(" 1->0 "),
            "{column}"
        );
        let padded = explain_banks(&shared, "H100", &BankPoint { width: 4, stride: 33 });
        assert!(padded.contains("no conflict") && padded.contains(" 1->1 "), "{padded}");
    }

    fn shared() -> BankParams {
        BankParams {
            source: "test".into(),
            banks: 32,
            bank_bytes: 4,
            base_cycles: 30.0,
            wavefront_cycles: 2.0,
            calibration_cases: vec![],
        }
    }

    fn access(width: u32, stride: u32) -> BankAccess {
        bank_access(&shared(), &BankPoint { width, stride })
    }

    #[test]
    fn classic_cases() {
        assert_eq!(access(4, 1).conflict_degree, 1, "consecutive words");
        assert_eq!(access(4, 2).conflict_degree, 2, "stride 2: two-way");
        assert_eq!(access(4, 32).conflict_degree, 32, "transpose column, no padding");
        assert_eq!(access(4, 33).conflict_degree, 1, "one word of padding removes it");
        assert_eq!(access(4, 0).wavefronts, 1, "broadcast");
        assert_eq!(
            (access(8, 1).wavefronts, access(8, 1).replays()),
            (2, 0),
            "64-bit: 256 bytes need two passes"
        );
        assert_eq!(
            (access(16, 1).wavefronts, access(16, 1).replays()),
            (4, 0),
            "128-bit: four passes"
        );
        assert_eq!(
            (access(16, 0).wavefronts, access(8, 0).wavefronts),
            (1, 1),
            "a wide broadcast is one pass"
        );
        assert_eq!(
            access(16, 32).conflict_degree,
            8,
            "128 words in 4 banks: 32 passes where 4 would do"
        );
    }

    proptest! {
        #[test]
        fn conflict_degree_is_between_1_and_32(width in prop::sample::select(vec![4u32, 8, 16]), stride in 0u32..=64) {
            let a = access(width, stride);
            prop_assert!((1..=32).contains(&a.conflict_degree));
            prop_assert!(a.wavefronts >= a.min_wavefronts && a.wavefronts <= 32);
        }

        #[test]
        fn fast_path_agrees_with_counting(width in prop::sample::select(vec![4u32, 8, 16]), stride in 0u32..=4096) {
            let point = BankPoint { width, stride };
            prop_assert_eq!(bank_wavefronts(&shared(), &point), bank_access(&shared(), &point).wavefronts);
        }

        #[test]
        fn broadcast_never_conflicts(width in prop::sample::select(vec![4u32, 8, 16])) {
            prop_assert_eq!(access(width, 0).replays(), 0);
        }

        #[test]
        fn odd_strides_of_words_never_conflict(stride in (0u32..32).prop_map(|s| 2 * s + 1)) {
            // An odd stride is coprime with 32 banks: 32 lanes land in 32 different banks.
            prop_assert_eq!(access(4, stride).conflict_degree, 1);
        }

        #[test]
        fn degree_is_the_power_of_two_in_the_stride(shift in 0u32..=5, odd in (0u32..4).prop_map(|s| 2 * s + 1)) {
            let stride = odd << shift;
            prop_assert_eq!(access(4, stride).conflict_degree, 1 << shift);
        }

        #[test]
        fn cycles_grow_with_wavefronts(width in prop::sample::select(vec![4u32, 8, 16]), a in 0u32..=64, b in 0u32..=64) {
            let s = shared();
            let (pa, pb) = (BankPoint { width, stride: a }, BankPoint { width, stride: b });
            let (wa, wb) = (bank_access(&s, &pa).wavefronts, bank_access(&s, &pb).wavefronts);
            if wa < wb {
                prop_assert!(bank_cycles(&s, &pa) < bank_cycles(&s, &pb));
            }
        }
    }
}

#[cfg(test)]
mod fit_tests {
    
    
    use super::*;
    

    #[test]
    fn recovers_known_bank_costs_and_names_its_cases() {
        let truth = |wavefronts: f64| 29.0 + 2.0 * (wavefronts - 1.0);
        let samples: Vec<BankSample> = [(4, 1, 1.0), (4, 2, 2.0), (4, 4, 4.0), (4, 8, 8.0)]
            .iter()
            .map(|&(width, stride, w)| BankSample {
                width,
                stride,
                cycles: truth(w),
            })
            .collect();
        let fitted = fit_banks(&samples, "test".into()).unwrap();
        assert!(
            (fitted.base_cycles - 29.0).abs() < 1e-6 && (fitted.wavefront_cycles - 2.0).abs() < 1e-6,
            "{fitted:?}"
        );
        assert_eq!(fitted.calibration_cases, vec![(4, 1), (4, 2), (4, 4), (4, 8)]);
        let flat = [
            BankSample {
                width: 4,
                stride: 1,
                cycles: 30.0,
            },
            BankSample {
                width: 4,
                stride: 3,
                cycles: 30.0,
            },
        ];
        assert!(
            fit_banks(&flat, "test".into()).is_err(),
            "one wavefront count cannot fit a slope"
        );
    }
}
