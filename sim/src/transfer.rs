//! Host <-> device copies over PCIe.
//!
//! Pinned copies are one DMA: a fixed latency plus bytes over the link's bandwidth.
//! Pageable copies cannot be DMA'd directly: the driver copies them through pinned
//! staging buffers, one chunk at a time, double-buffered, so the host-side copy of
//! one chunk overlaps the DMA of the previous one. That is a two-stage pipeline.

use experiments::{TeachControl, TeachFact, TeachPage, TeachPanel, TeachView, Workload};
use serde_json::json;
use crate::teach::{byte_ticks, fail, metric, strings, Teacher};
use experiments::{Calibration, Metrics, Params, Profile};

use crate::backend::SimError;
use crate::fit::FitError;
use crate::link::{bytes_per_us, check, fit_link, pinned_copy_us};
use crate::models::{bytes_points, Model};

use crate::solve::weighted_median;
use experiments::Sample;

use experiments::{Direction, HostMemory, LinkParams, StagedParams, TransferParams, TransferPoint};

/// Time of a double-buffered two-stage pipeline over `bytes` cut into `chunk` pieces,
/// where stage one runs at `first_gb_per_s` and stage two at `second_gb_per_s`.
///
/// With two buffers, chunk i's first stage waits for its own predecessor's first stage and
/// for chunk i-2's second stage (which frees the buffer); its second stage waits for its
/// first stage and for chunk i-1's second stage. For equal chunks that recurrence has a
/// closed form, evaluated here for the full chunks; the smaller last chunk follows it.
fn pipeline_us(bytes: u64, chunk: u64, first_gb_per_s: f64, second_gb_per_s: f64) -> f64 {
    let (first_rate, second_rate) = (bytes_per_us(first_gb_per_s), bytes_per_us(second_gb_per_s));
    let chunk = chunk.max(1);
    let full = bytes / chunk;
    let rest = bytes % chunk;
    let (a, b) = (chunk as f64 / first_rate, chunk as f64 / second_rate);
    // End times of full chunk i's two stages (i < full); chunk -1 and earlier end at 0.
    let first_end = |i: u64| match (a >= b, i) {
        (true, _) => (i + 1) as f64 * a,
        (false, 0) => a,
        (false, _) => 2.0 * a + (i - 1) as f64 * b,
    };
    let second_end = |i: u64| {
        if a >= b {
            (i + 1) as f64 * a + b
        } else {
            a + (i + 1) as f64 * b
        }
    };
    let before = |i: u64, back: u64, end: &dyn Fn(u64) -> f64| if i >= back { end(i - back) } else { 0.0 };
    if bytes == 0 {
        return 0.0;
    }
    if rest == 0 {
        return second_end(full - 1);
    }
    let (ra, rb) = (rest as f64 / first_rate, rest as f64 / second_rate);
    let rest_first = before(full, 1, &first_end).max(before(full, 2, &second_end)) + ra;
    rest_first.max(before(full, 1, &second_end)) + rb
}

/// Time of one pageable copy, microseconds.
pub(crate) fn pageable_copy_us(link: &LinkParams, staged: &StagedParams, direction: Direction, bytes: u64) -> f64 {
    let pipeline = match direction {
        // Host copies into staging, then the copy engine uploads it.
        Direction::HostToDevice => pipeline_us(bytes, staged.staging_bytes, staged.host_gb_per_s, link.gb_per_s),
        // The copy engine downloads into staging, then the host copies it out.
        Direction::DeviceToHost => pipeline_us(bytes, staged.staging_bytes, link.gb_per_s, staged.host_gb_per_s),
    };
    staged.latency_us + pipeline
}

/// Predicted time of one copy, microseconds.
pub(crate) fn copy_us(params: &TransferParams, point: &TransferPoint) -> f64 {
    let (link, staged) = match point.direction {
        Direction::HostToDevice => (&params.h2d_pinned, &params.h2d_pageable),
        Direction::DeviceToHost => (&params.d2h_pinned, &params.d2h_pageable),
    };
    match point.host {
        HostMemory::Pinned => pinned_copy_us(link, point.bytes),
        HostMemory::Pageable => pageable_copy_us(link, staged, point.direction, point.bytes),
    }
}

/// Candidate staging chunk sizes: 64 KiB to 16 MiB.
const STAGING_CANDIDATES: std::ops::RangeInclusive<u32> = 16..=24;

/// Fits the pageable pipeline given the pinned link: a grid over staging chunk size and
/// host copy bandwidth, with the latency solved exactly (a weighted median) at each grid point.
pub(crate) fn fit_staged(link: &LinkParams, direction: Direction, samples: &[Sample]) -> Result<StagedParams, FitError> {
    check("a pageable pipeline", samples, 3)?;
    let mut best: Option<(f64, StagedParams)> = None;
    for chunk_log in STAGING_CANDIDATES {
        for step in 0..=400 {
            // Host bandwidth from 0.5 to 200 GB/s, log-spaced.
            let host_gb_per_s = 0.5 * (400.0f64).powf(f64::from(step) / 400.0);
            let shape = StagedParams {
                latency_us: 0.0,
                host_gb_per_s,
                staging_bytes: 1 << chunk_log,
            };
            let pipeline: Vec<f64> = samples
                .iter()
                .map(|s| pageable_copy_us(link, &shape, direction, s.bytes))
                .collect();
            // sum |p + L - t| / t is minimised by the 1/t-weighted median of t - p; the
            // objective is convex in L, so clamping at zero keeps the constrained optimum.
            let residuals = samples
                .iter()
                .zip(&pipeline)
                .map(|(s, p)| (s.time_us - p, 1.0 / s.time_us))
                .collect();
            let latency_us = weighted_median(residuals).max(0.0);
            let error: f64 = samples
                .iter()
                .zip(&pipeline)
                .map(|(s, p)| ((p + latency_us - s.time_us) / s.time_us).abs())
                .sum();
            if best.as_ref().is_none_or(|(e, _)| error < *e) {
                best = Some((error, StagedParams { latency_us, ..shape }));
            }
        }
    }
    Ok(best.expect("the grid is not empty").1)
}

pub(crate) fn fit_transfer(calibration: &Calibration) -> Result<TransferParams, FitError> {
    let h2d_pinned = fit_link(&calibration.h2d_pinned)?;
    let d2h_pinned = fit_link(&calibration.d2h_pinned)?;
    let h2d_pageable = fit_staged(&h2d_pinned, Direction::HostToDevice, &calibration.h2d_pageable)?;
    let d2h_pageable = fit_staged(&d2h_pinned, Direction::DeviceToHost, &calibration.d2h_pageable)?;
    let mut calibration_bytes: Vec<u64> = [
        &calibration.h2d_pinned,
        &calibration.d2h_pinned,
        &calibration.h2d_pageable,
        &calibration.d2h_pageable,
    ]
    .iter()
    .flat_map(|samples| samples.iter().map(|s| s.bytes))
    .collect();
    calibration_bytes.sort_unstable();
    calibration_bytes.dedup();
    let d = &calibration.device;
    Ok(TransferParams {
        source: format!(
            "vramlab calibrate on {} ({}): medians of event-timed copies at calibration_bytes, fitted by least absolute relative error (pinned: iteratively reweighted least squares; pageable: grid over staging size and host bandwidth)",
            d.name, calibration.date
        ),
        calibration_bytes,
        kernel_launch_us: calibration.kernel_launch_us,
        h2d_pinned,
        d2h_pinned,
        h2d_pageable,
        d2h_pageable,
    })
}

/// The copies' model. The transfer section is the profile's base: kernel launch overhead and
/// the link, which other families' models read too.
pub(crate) struct FamilyModel;

impl Model for FamilyModel {
    type Point = TransferPoint;

    fn teach(t: &Teacher) -> Result<Vec<TeachPage>, experiments::Error> {
        Ok(vec![teach_page(t)?])
    }

    fn predict(profile: &Profile, point: &TransferPoint) -> Result<Metrics, SimError> {
        Ok(experiments::throughput_metrics(copy_us(&profile.transfer, point), point.bytes))
    }

    fn calibration_points(profile: &Profile) -> Vec<Params> {
        bytes_points(&profile.transfer.calibration_bytes)
    }

    fn summary(profile: &Profile) -> Option<String> {
        let t = &profile.transfer;
        Some(format!(
            "pinned h2d {:.2} GB/s + {:.2} us, d2h {:.2} GB/s + {:.2} us; pageable h2d host {:.2} GB/s, {} staging, + {:.2} us; d2h host {:.2} GB/s, {} staging, + {:.2} us; kernel launch {:.2} us",
            t.h2d_pinned.gb_per_s,
            t.h2d_pinned.latency_us,
            t.d2h_pinned.gb_per_s,
            t.d2h_pinned.latency_us,
            t.h2d_pageable.host_gb_per_s,
            experiments::format_bytes(t.h2d_pageable.staging_bytes),
            t.h2d_pageable.latency_us,
            t.d2h_pageable.host_gb_per_s,
            experiments::format_bytes(t.d2h_pageable.staging_bytes),
            t.d2h_pageable.latency_us,
            t.kernel_launch_us
        ))
    }
}

/// The family's page of the teaching site (`vramlab teach`).
pub(crate) fn teach_page(t: &Teacher) -> Result<TeachPage, experiments::Error> {
    let sizes: Vec<u64> = (10..=30).map(|k| 1u64 << k).collect();
    let point = |direction: &str, host: &str, bytes: u64| {
        t.point(
            experiments::Family::Transfer,
            &[
                format!("direction={direction}"),
                format!("host={host}"),
                format!("bytes={bytes}"),
            ],
        )
    };
    let controls = vec![
        TeachControl::new(
            "direction",
            "Direction",
            "select",
            strings(&["h2d", "d2h"]),
            strings(&["host to device", "device to host"]),
            "h2d",
        ),
        TeachControl::new(
            "bytes",
            "Bytes copied",
            "range",
            strings(&sizes),
            sizes.iter().map(|s| experiments::format_bytes(*s)).collect(),
            &(1u64 << 20).to_string(),
        ),
    ];
    let mut curves: std::collections::BTreeMap<(String, String), Vec<(f64, f64)>> = std::collections::BTreeMap::new();
    for direction in ["h2d", "d2h"] {
        for host in ["pinned", "pageable"] {
            for bytes in &sizes {
                let gb = metric(&t.predict(&point(direction, host, *bytes)?)?, "gb_per_s")?;
                curves
                    .entry((direction.to_string(), host.to_string()))
                    .or_default()
                    .push((*bytes as f64, gb));
            }
        }
    }
    let copies = TeachPanel::build("transfers", "One copy, pinned against pageable", controls, |values| {
        let (direction, bytes) = (&values[0], values[1].parse::<u64>().map_err(|e| fail(e.to_string()))?);
        let pinned = point(direction, "pinned", bytes)?;
        let pageable = point(direction, "pageable", bytes)?;
        let (pm, gm) = (t.predict(&pinned)?, t.predict(&pageable)?);
        let mut series = Vec::new();
        for host in ["pinned", "pageable"] {
            series.push(json!({"name": format!("model, {host}"), "class": host, "line": true, "points": curves[&(direction.clone(), host.to_string())]}));
        }
        for host in ["pinned", "pageable"] {
            let Workload::Transfer(kind) = point(direction, host, 1)? else {
                return Err(fail("not a transfer point"));
            };
            for (gpu, points) in t.measured_series(
                |w| match w {
                    Workload::Transfer(p) if p.direction == kind.direction && p.host == kind.host => {
                        Some(p.bytes as f64)
                    }
                    _ => None,
                },
                "gb_per_s",
            ) {
                let short = if gpu.contains("H200") {
                    "H200"
                } else if gpu.contains("H100") {
                    "H100"
                } else {
                    gpu.as_str()
                };
                series.push(json!({"name": format!("{short} {host}"), "class": match (host, short) { ("pinned", "H200") => "#64b5f6", ("pinned", _) => "#0d47a1", (_, "H200") => "#ffab91", _ => "#bf360c" }, "line": false, "points": points}));
            }
        }
        let mut measured = t.measured(&pinned, "pinned", "gb_per_s", |v| format!("{v:.2} GB/s"));
        measured.extend(t.measured(&pageable, "pageable", "gb_per_s", |v| format!("{v:.2} GB/s")));
        if measured.iter().all(|m| m.starts_with("No committed")) {
            measured.truncate(1);
        }
        Ok(TeachView {
            facts: vec![
                TeachFact::new(
                    "pinned_us",
                    "Pinned: predicted time",
                    format!("{:.1} us", metric(&pm, "time_us")?),
                ),
                TeachFact::new(
                    "pinned_gb_per_s",
                    "Pinned: predicted bandwidth",
                    format!("{:.2} GB/s", metric(&pm, "gb_per_s")?),
                )
                .strong(),
                TeachFact::new(
                    "pageable_us",
                    "Pageable: predicted time",
                    format!("{:.1} us", metric(&gm, "time_us")?),
                ),
                TeachFact::new(
                    "pageable_gb_per_s",
                    "Pageable: predicted bandwidth",
                    format!("{:.2} GB/s", metric(&gm, "gb_per_s")?),
                )
                .strong(),
                TeachFact::new(
                    "ratio",
                    "Pageable takes",
                    format!(
                        "{:.2} x the pinned time",
                        metric(&gm, "time_us")? / metric(&pm, "time_us")?
                    ),
                ),
            ],
            measured,
            command: format!("vramlab run {direction}_pinned {direction}_pageable{}", t.profile_flag),
            text: String::new(),
            picture: json!({"kind": "curve", "title": "bandwidth against size", "xlabel": "bytes copied", "ylabel": "GB/s",
                            "xlog": true, "ylog": false, "series": series, "xticks": byte_ticks(1 << 10, 1 << 30, 2),
                            "marks": [[bytes as f64, metric(&pm, "gb_per_s")?], [bytes as f64, metric(&gm, "gb_per_s")?]]}),
        })
    })?;
    Ok(TeachPage {
        slug: "transfers".into(),
        title: "Transfers: pinned, pageable, overlapped".into(),
        intro: vec![
            "A copy from page-locked (pinned) host memory goes straight to the copy engine; a pageable one is staged by the driver through pinned buffers, one chunk at a time. Slide the size to see where the fixed cost gives way to bandwidth, and how far pageable falls behind.".into(),
            "Below, an upload cut into chunks over several streams lets the copy of one chunk run beside the kernel of the previous one.".into(),
        ],
        terminal: format!("vramlab run transfers{}", t.profile_flag),
        panels: vec![copies],
        notes: vec![
            format!("Model: sim/src/transfer.rs with profile '{}'.", t.profile.name),
            "Pageable copies depend on the host's memory and CPU; the H100 and H200 measurements are of the lent machines named in reports/reference/.".into(),
            "`vramlab explain` has no transfer view; the terminal command runs the model over the transfer suite.".into(),
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const LINK: LinkParams = LinkParams {
        latency_us: 2.0,
        gb_per_s: 50.0,
    };

    fn staged(host: f64, chunk: u64) -> StagedParams {
        StagedParams {
            latency_us: 4.0,
            host_gb_per_s: host,
            staging_bytes: chunk,
        }
    }

    #[test]
    fn pinned_is_latency_plus_bytes_over_bandwidth() {
        assert!((pinned_copy_us(&LINK, 50_000_000) - 1002.0).abs() < 1e-9);
    }

    #[test]
    fn pageable_pipeline_closed_forms() {
        // One chunk: both stages in sequence.
        let one = pageable_copy_us(&LINK, &staged(25.0, 1 << 20), Direction::HostToDevice, 1 << 20);
        let expect = 4.0 + (1u64 << 20) as f64 / 25e3 + (1u64 << 20) as f64 / 50e3;
        assert!((one - expect).abs() < 1e-9, "{one} vs {expect}");
        // Many chunks: the slower stage paces the pipeline.
        let many = pageable_copy_us(&LINK, &staged(25.0, 1 << 20), Direction::HostToDevice, 64 << 20);
        let paced = 4.0 + (64u64 << 20) as f64 / 25e3 + (1u64 << 20) as f64 / 50e3;
        assert!((many - paced).abs() < 1e-6, "{many} vs {paced}");
    }

    /// The recurrence itself, chunk by chunk: the reference the closed form must match.
    fn pipeline_by_steps(bytes: u64, chunk: u64, first: f64, second: f64) -> f64 {
        let mut sizes = vec![chunk; (bytes / chunk) as usize];
        if !bytes.is_multiple_of(chunk) {
            sizes.push(bytes % chunk);
        }
        let (mut first_ends, mut second_ends) = (Vec::<f64>::new(), Vec::<f64>::new());
        for (i, size) in sizes.iter().enumerate() {
            let free_buffer = if i >= 2 { second_ends[i - 2] } else { 0.0 };
            let prev_first = if i >= 1 { first_ends[i - 1] } else { 0.0 };
            let f = prev_first.max(free_buffer) + *size as f64 / (first * 1e3);
            let prev_second = if i >= 1 { second_ends[i - 1] } else { 0.0 };
            second_ends.push(f.max(prev_second) + *size as f64 / (second * 1e3));
            first_ends.push(f);
        }
        second_ends.last().copied().unwrap_or(0.0)
    }

    proptest! {
        #[test]
        fn closed_form_matches_the_recurrence(bytes in 1u64..(1 << 22), chunk_log in 10u32..20,
                                             first in 1.0f64..100.0, second in 1.0f64..100.0) {
            let chunk = 1u64 << chunk_log;
            let closed = pipeline_us(bytes, chunk, first, second);
            let steps = pipeline_by_steps(bytes, chunk, first, second);
            prop_assert!((closed - steps).abs() <= 1e-9 * steps.max(1.0), "{closed} vs {steps}");
        }

        #[test]
        fn copies_take_longer_when_larger(bytes in 1u64..(1 << 31), extra in 1u64..(1 << 24),
                                         host in 1.0f64..100.0, chunk_log in 12u32..25) {
            let s = staged(host, 1 << chunk_log);
            for direction in [Direction::HostToDevice, Direction::DeviceToHost] {
                let small = pageable_copy_us(&LINK, &s, direction, bytes);
                let large = pageable_copy_us(&LINK, &s, direction, bytes + extra);
                prop_assert!(large >= small, "{large} < {small}");
            }
            prop_assert!(pinned_copy_us(&LINK, bytes + extra) > pinned_copy_us(&LINK, bytes));
        }

        #[test]
        fn pageable_is_never_faster_than_either_stage_alone(bytes in 1u64..(1 << 31),
                                                          host in 1.0f64..100.0, chunk_log in 12u32..25) {
            let s = staged(host, 1 << chunk_log);
            let t = pageable_copy_us(&LINK, &s, Direction::HostToDevice, bytes) - s.latency_us;
            let slowest = bytes as f64 / (host.min(LINK.gb_per_s) * 1e3);
            let serial = bytes as f64 / (host * 1e3) + bytes as f64 / (LINK.gb_per_s * 1e3);
            prop_assert!(t >= slowest * (1.0 - 1e-9), "{t} < {slowest}");
            prop_assert!(t <= serial * (1.0 + 1e-9), "{t} > {serial}");
        }
    }
}

#[cfg(test)]
mod fit_tests {
    
    
    use super::*;
    use experiments::Sample;

    #[test]
    fn recovers_a_known_pipeline() {
        let link = LinkParams {
            latency_us: 2.0,
            gb_per_s: 52.0,
        };
        let truth = StagedParams {
            latency_us: 8.0,
            host_gb_per_s: 20.0,
            staging_bytes: 1 << 20,
        };
        let samples: Vec<Sample> = (10..30)
            .step_by(3)
            .map(|k| Sample {
                bytes: 3 << k,
                time_us: pageable_copy_us(&link, &truth, Direction::HostToDevice, 3 << k),
            })
            .collect();
        let fitted = fit_staged(&link, Direction::HostToDevice, &samples).unwrap();
        for s in &samples {
            let p = pageable_copy_us(&link, &fitted, Direction::HostToDevice, s.bytes);
            assert!(
                ((p - s.time_us) / s.time_us).abs() < 0.02,
                "{fitted:?} at {} B",
                s.bytes
            );
        }
    }
}
