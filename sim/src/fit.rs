//! `vramlab calibrate`'s maths half: a profile from a calibration's samples. Each family's fit
//! lives beside its model, in `sim/src/<family>.rs` (its `FamilyModel::fit`); the solvers they
//! share, with tests on problems of known optimum, are in solve.rs. This file fits the profile's
//! base (the link and the SM's rules from the compute capability) and calls the families' fits.

use experiments::{Calibration, Profile, ProfileDevice, SmAttributes, SmParams};

use crate::transfer::fit_transfer;

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

/// The SM's unified L1 data cache / shared memory array per compute capability, from NVIDIA's
/// architecture whitepapers: A100 (8.0) 192 KB, GA10x (8.6) 128 KB, Ada (8.9) 128 KB, H100 and
/// H200 (9.0) 256 KB. A device not listed is said to be unknown rather than guessed.
const UNIFIED_L1: [(&str, u64); 4] = [
    ("8.0", 192 << 10),
    ("8.6", 128 << 10),
    ("8.9", 128 << 10),
    ("9.0", 256 << 10),
];

/// The compute capabilities whose L1 is known, for errors.
pub(crate) fn known_l1_devices() -> String {
    UNIFIED_L1.map(|(cc, _)| cc).join(", ")
}

pub(crate) fn unified_l1_bytes(compute_capability: &str) -> Option<u64> {
    UNIFIED_L1
        .iter()
        .find(|(cc, _)| *cc == compute_capability)
        .map(|(_, bytes)| *bytes)
}

/// The SM's occupancy rules: the driver's attributes plus what CUDA's occupancy calculator
/// (cuda_occupancy.h) defines per compute capability. Only 8.x and 9.x are known here.
pub fn sm_params(compute_capability: &str, attributes: &SmAttributes) -> Result<SmParams, FitError> {
    let major: u32 = compute_capability
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    if !(8..=9).contains(&major) {
        return Err(FitError::BadSamples {
            what: "the SM's occupancy rules",
            reason: format!("compute capability {compute_capability} is not one vramlab knows (8.x, 9.x)"),
        });
    }
    let a = attributes;
    Ok(SmParams {
        source: format!(
            "compute capability {compute_capability}: limits from cuDeviceGetAttribute at calibration; register allocation unit (256 per warp), 4 sub-partitions, 128 B shared allocation unit and the 255-register ceiling as cuda_occupancy.h defines them for {major}.x"
        ),
        warp_size: a.warp_size,
        max_threads_per_sm: a.max_threads_per_sm,
        max_threads_per_block: a.max_threads_per_block,
        max_blocks_per_sm: a.max_blocks_per_sm,
        registers_per_sm: a.registers_per_sm,
        registers_per_block: a.registers_per_block,
        max_registers_per_thread: 255,
        register_allocation_unit: 256,
        sub_partitions: 4,
        shared_bytes_per_sm: a.shared_bytes_per_sm,
        shared_bytes_per_block: a.shared_bytes_per_block,
        shared_bytes_per_block_optin: a.shared_bytes_per_block_optin,
        reserved_shared_bytes_per_block: a.reserved_shared_bytes_per_block,
        shared_allocation_unit: 128,
    })
}

/// Fits a profile to a calibration run. Parts the run did not measure (an empty sample list)
/// are taken from `base`, so one part of an existing profile can be re-measured alone. Each
/// family's fit is its model's ([`crate::models`]), in the registry's order, so a family can
/// build on one fitted before it (the spills' traffic on the coalescing part's bandwidths).
pub fn fit_profile(name: &str, calibration: &Calibration, base: Option<&Profile>) -> Result<Profile, FitError> {
    let d = &calibration.device;
    // The profile's base, which every family's model may read: the link and launch overhead,
    // and the SM's limits.
    let transfer = if !calibration.h2d_pinned.is_empty() {
        fit_transfer(calibration)?
    } else {
        base.map(|b| b.transfer.clone()).ok_or_else(|| FitError::BadSamples {
            what: "the transfer part",
            reason: "not measured in this calibration, and no profile given to keep it from (--into)".into(),
        })?
    };
    let sm = sm_params(&d.compute_capability, &calibration.sm)?;
    let device = ProfileDevice {
        name: d.name.clone(),
        compute_capability: d.compute_capability.clone(),
        multiprocessors: d.multiprocessors,
        memory_bytes: d.memory_bytes,
        copy_engines: d.copy_engines,
    };
    let mut profile = match base {
        Some(base) => Profile {
            device,
            transfer,
            sm,
            ..base.clone()
        },
        None => Profile::new(name, device, transfer, sm),
    };
    profile.name = name.to_string();
    profile.description = format!(
        "{} (driver {}, PCI {}), measured by vramlab calibrate on {}",
        d.name, d.driver_version, d.pci_bus_id, calibration.date
    );
    crate::models::fit_families(calibration, base, &mut profile)?;
    Ok(profile)
}

#[cfg(test)]
mod l1_tests {
    use super::unified_l1_bytes;

    #[test]
    fn the_l1_comes_from_the_devices_whitepaper_or_is_unknown() {
        assert_eq!(unified_l1_bytes("9.0"), Some(256 << 10));
        assert_eq!(unified_l1_bytes("8.0"), Some(192 << 10));
        assert_eq!(unified_l1_bytes("8.6"), Some(128 << 10));
        assert_eq!(unified_l1_bytes("10.0"), None);
    }
}

#[cfg(test)]
mod tests {

    use crate::link::pinned_copy_us;
    use crate::solve::*;
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

    #[test]
    fn weighted_median_minimises_weighted_distance() {
        assert_eq!(weighted_median(vec![(1.0, 1.0), (2.0, 1.0), (10.0, 1.0)]), 2.0);
        assert_eq!(weighted_median(vec![(1.0, 5.0), (2.0, 1.0), (10.0, 1.0)]), 1.0);
    }

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

#[cfg(test)]
mod global_tests {
    use super::*;

    use crate::coalescing::read_time;
    use crate::*;
    use experiments::coalescing_calibration_cases;
    use experiments::*;

    fn h100_sm() -> SmParams {
        sm_params(
            "9.0",
            &SmAttributes {
                warp_size: 32,
                max_threads_per_sm: 2048,
                max_threads_per_block: 1024,
                max_blocks_per_sm: 32,
                registers_per_sm: 65536,
                registers_per_block: 65536,
                shared_bytes_per_sm: 233472,
                shared_bytes_per_block: 49152,
                shared_bytes_per_block_optin: 232448,
                reserved_shared_bytes_per_block: 1024,
            },
        )
        .unwrap()
    }

    #[test]
    fn recovers_a_known_read_model_from_the_calibration_cases() {
        let machine = CoalescingMachine {
            l2_bytes: 50 << 20,
            launch_us: 4.0,
            sm: h100_sm(),
            multiprocessors: 132,
            read_kernel_registers: 16,
        };
        let truth = CoalescingParams {
            source: "truth".into(),
            sector_bytes: 32,
            line_bytes: 128,
            l2_bytes: machine.l2_bytes,
            dram_fetch_bytes: 64,
            dram_gb_per_s: 3200.0,
            dram_page_bytes: 1024,
            dram_page_gb_per_s: 30000.0,
            l2_gb_per_s: 9000.0,
            l2_lines_g_per_s: 90.0,
            dram_latency_ns: 380.0,
            l2_latency_ns: 160.0,
            line_latency_ns: 4.0,
            overlap_exponent: 2.5,
            read_kernel_registers: 16,
            launch_us: 4.0,
            calibration_cases: vec![],
        };
        let samples: Vec<CoalescingSample> = coalescing_calibration_cases()
            .into_iter()
            .map(|(width, stride, bytes)| {
                let point = CoalescingPoint::calibration(width, stride, bytes);
                CoalescingSample {
                    width,
                    stride,
                    bytes,
                    time_us: read_time(&truth, &machine.sm, 132, &point).unwrap().total_us,
                }
            })
            .collect();
        let fitted = fit_coalescing(&samples, &machine, "fit".into()).unwrap();
        assert_eq!(fitted.dram_fetch_bytes, 64, "{fitted:?}");
        for (name, got, want) in [
            ("dram", fitted.dram_gb_per_s, 3200.0),
            ("l2", fitted.l2_gb_per_s, 9000.0),
            ("dram latency", fitted.dram_latency_ns, 380.0),
            ("l2 latency", fitted.l2_latency_ns, 160.0),
            ("exponent", fitted.overlap_exponent, 2.5),
            ("pages", fitted.dram_page_gb_per_s, 30000.0),
            ("lines", fitted.l2_lines_g_per_s, 90.0),
            ("line latency", fitted.line_latency_ns, 4.0),
        ] {
            assert!((got / want - 1.0).abs() < 0.03, "{name}: {got} vs {want}; {fitted:?}");
        }
    }
}
