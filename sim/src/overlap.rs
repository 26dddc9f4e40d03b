//! Copy/compute overlap as a schedule: the upload link and the SMs are each one in-order
//! queue, and each stream runs its own operations in order.
//!
//! A chunk's upload occupies the host-to-device link (one direction of PCIe; extra copy
//! engines cannot make it faster), and its kernel, which fills every SM, occupies the
//! compute queue. Chunks are issued breadth-first (upload 0, kernel 0, upload 1, ...),
//! round-robin over the streams, so each queue serves work in issue order.

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

    fn predict(profile: &Profile, point: &OverlapPoint) -> Result<Metrics, SimError> {
        let params = &profile.transfer;
        Ok(experiments::overlap_metrics(overlapped_us(params, point), serial_us(params, point)))
    }
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
