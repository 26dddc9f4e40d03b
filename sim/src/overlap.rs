//! Copy/compute overlap as a schedule: the upload link and the SMs are each one in-order
//! queue, and each stream runs its own operations in order.
//!
//! A chunk's upload occupies the host-to-device link (one direction of PCIe; extra copy
//! engines cannot make it faster), and its kernel, which fills every SM, occupies the
//! compute queue. Chunks are issued breadth-first (upload 0, kernel 0, upload 1, ...),
//! round-robin over the streams, so each queue serves work in issue order.

use experiments::{TeachControl, TeachFact, TeachPage, TeachPanel, TeachView};
use serde_json::json;
use crate::teach::{args, metric, strings, Teacher};
use experiments::{Metrics, Profile};

use crate::backend::SimError;
use crate::models::Model;

use experiments::{OverlapPoint, TransferParams};

use crate::link::pinned_copy_us;

/// Predicted time of the chunked, multi-stream schedule, microseconds.
pub fn overlapped_us(params: &TransferParams, point: &OverlapPoint) -> f64 {
    let kernel_us = params.kernel_launch_us + point.kernel_us / f64::from(point.chunks);
    let mut link_free = 0.0f64;
    let mut compute_free = 0.0f64;
    let mut stream_ready = vec![0.0f64; point.streams as usize];
    for chunk in 0..point.chunks {
        let stream = &mut stream_ready[(chunk % point.streams) as usize];
        let upload_end = link_free.max(*stream) + pinned_copy_us(&params.h2d_pinned, point.chunk_bytes(chunk));
        link_free = upload_end;
        let kernel_end = compute_free.max(upload_end) + kernel_us;
        compute_free = kernel_end;
        *stream = kernel_end;
    }
    stream_ready.into_iter().fold(0.0, f64::max)
}

/// Predicted time of the serial schedule: one upload of everything, then one kernel.
pub fn serial_us(params: &TransferParams, point: &OverlapPoint) -> f64 {
    pinned_copy_us(&params.h2d_pinned, point.bytes) + params.kernel_launch_us + point.kernel_us
}

/// The overlap model: the copies' model plus the kernels, on the copy engines and SMs.
pub(crate) struct FamilyModel;

impl Model for FamilyModel {
    type Point = OverlapPoint;

    fn teach(t: &Teacher) -> Result<Vec<TeachPage>, experiments::Error> {
        Ok(vec![teach_page(t)?])
    }

    fn predict(profile: &Profile, point: &OverlapPoint) -> Result<Metrics, SimError> {
        let params = &profile.transfer;
        Ok(experiments::overlap_metrics(overlapped_us(params, point), serial_us(params, point)))
    }
}

/// The family's page of the teaching site (`vramlab teach`).
pub(crate) fn teach_page(t: &Teacher) -> Result<TeachPage, experiments::Error> {
    let overlap_controls = vec![
        TeachControl::new(
            "streams",
            "Streams",
            "select",
            strings(&[1, 2, 4]),
            strings(&[1, 2, 4]),
            "2",
        ),
        TeachControl::new("chunks", "Chunks", "select", strings(&[8, 32]), strings(&[8, 32]), "8"),
        TeachControl::new(
            "kernel_us",
            "Kernel time in all (us)",
            "select",
            strings(&[2000, 5000, 10000]),
            strings(&[2000, 5000, 10000]),
            "5000",
        ),
    ];
    let overlap = TeachPanel::build(
        "overlap",
        "A 256 MiB upload in chunks, each followed by a kernel, over streams",
        overlap_controls,
        |values| {
            let mut a = args(&["streams", "chunks", "kernel_us"], values);
            a.push(format!("bytes={}", 256u64 << 20));
            let workload = t.point(experiments::Family::Overlap, &a)?;
            let m = t.predict(&workload)?;
            let (time, serial, speedup) = (
                metric(&m, "time_us")?,
                metric(&m, "serial_time_us")?,
                metric(&m, "speedup")?,
            );
            Ok(TeachView {
                facts: vec![
                    TeachFact::new("time_us", "Predicted time, overlapped", format!("{time:.0} us"))
                        .strong()
                        .bad_if(speedup < 1.05),
                    TeachFact::new(
                        "serial_time_us",
                        "Predicted time, copy then compute",
                        format!("{serial:.0} us"),
                    ),
                    TeachFact::new("speedup", "Speed-up", format!("{speedup:.2} x")),
                ],
                measured: t.measured(&workload, "overlapped time", "time_us", |v| format!("{v:.0} us")),
                command: format!("vramlab run overlap{}", t.profile_flag),
                text: String::new(),
                picture: json!({"kind": "bars", "title": "time", "bars": [
                    {"label": "copy, then compute", "value": serial, "text": format!("{serial:.0} us"), "class": "other"},
                    {"label": format!("overlapped, {} stream(s)", values[0]), "value": time, "text": format!("{time:.0} us"), "class": "pinned"},
                ]}),
            })
        },
    )?;
    Ok(TeachPage {
        slug: "transfers".into(),
        title: "Transfers: pinned, pageable, overlapped".into(),
        intro: vec!["Below, an upload cut into chunks over several streams lets the copy of one chunk run beside the kernel of the previous one.".into()],
        terminal: format!("vramlab run transfers{}", t.profile_flag),
        panels: vec![overlap],
        notes: vec![format!("Model: sim/src/overlap.rs with profile '{}', over the copies' model.", t.profile.name)],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use experiments::{LinkParams, StagedParams};
    use proptest::prelude::*;

    fn params() -> TransferParams {
        let staged = StagedParams {
            latency_us: 5.0,
            host_gb_per_s: 20.0,
            staging_bytes: 1 << 20,
        };
        TransferParams {
            source: "test".into(),
            calibration_bytes: vec![],
            kernel_launch_us: 2.0,
            h2d_pinned: LinkParams {
                latency_us: 2.0,
                gb_per_s: 50.0,
            },
            d2h_pinned: LinkParams {
                latency_us: 2.0,
                gb_per_s: 50.0,
            },
            h2d_pageable: staged,
            d2h_pageable: staged,
        }
    }

    #[test]
    fn balanced_pipeline_approaches_two_fold() {
        let p = params();
        let copy_us = (256u64 << 20) as f64 / 50e3;
        let point = OverlapPoint {
            bytes: 256 << 20,
            chunks: 64,
            streams: 4,
            kernel_us: copy_us,
        };
        let speedup = serial_us(&p, &point) / overlapped_us(&p, &point);
        assert!(speedup > 1.8 && speedup < 2.0, "{speedup}");
    }

    proptest! {
        #[test]
        fn overlap_is_bounded(chunks in 1u32..64, streams in 1u32..8, kernel_us in 0.0f64..20000.0,
                              bytes in (1u64 << 20)..(1u64 << 30)) {
            let p = params();
            let point = OverlapPoint { bytes, chunks, streams, kernel_us };
            let t = overlapped_us(&p, &point);
            let copy_total: f64 = (0..chunks).map(|c| pinned_copy_us(&p.h2d_pinned, point.chunk_bytes(c))).sum();
            let kernel_total = f64::from(chunks) * p.kernel_launch_us + kernel_us;
            // Never faster than the busier queue, never slower than doing everything in turn.
            prop_assert!(t >= copy_total.max(kernel_total) - 1e-6);
            prop_assert!(t <= copy_total + kernel_total + 1e-6);
            if streams == 1 {
                prop_assert!((t - (copy_total + kernel_total)).abs() < 1e-6, "one stream serialises");
            }
        }

        #[test]
        fn more_streams_never_hurt(chunks in 1u32..64, streams in 1u32..8, kernel_us in 0.0f64..20000.0) {
            let p = params();
            let few = OverlapPoint { bytes: 256 << 20, chunks, streams, kernel_us };
            let more = OverlapPoint { streams: streams + 1, ..few };
            prop_assert!(overlapped_us(&p, &more) <= overlapped_us(&p, &few) + 1e-6);
        }
    }
}
