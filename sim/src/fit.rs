//! `vramlab calibrate`'s maths half: a profile from a calibration's samples. Each family's fit
//! lives beside its model (`fit_banks` in banks.rs, `fit_coalescing` in coalescing.rs,
//! `fit_latency`, `fit_constant`, `fit_growth`, `fit_spills`, `fit_migration`, `fit_peer`, and the
//! copies' fits in transfer.rs);
//! the solvers they share, with tests on problems of known optimum, are in solve.rs. This file
//! assembles them, with the SM's rules from the compute capability.

use experiments::{Calibration, Profile, ProfileDevice, SmAttributes, SmParams};

use crate::transfer::fit_transfer;
use crate::{
    fit_banks, fit_coalescing, fit_constant, fit_growth, fit_latency, fit_migration, fit_peer, fit_spills,
    CoalescingMachine,
};

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

fn unified_l1_bytes(compute_capability: &str) -> Option<u64> {
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

/// A part's section: fitted when the calibration measured `samples`, else kept from the base
/// profile (`None` when there is none to keep).
fn fitted_or_kept<S, T: Clone>(
    samples: &[S],
    kept: Option<&T>,
    fit: impl FnOnce() -> Result<T, FitError>,
) -> Result<Option<T>, FitError> {
    if samples.is_empty() {
        Ok(kept.cloned())
    } else {
        fit().map(Some)
    }
}

/// Fits a profile to a calibration run. Parts the run did not measure (an empty sample list)
/// are taken from `base`, so one part of an existing profile can be re-measured alone.
pub fn fit_profile(name: &str, calibration: &Calibration, base: Option<&Profile>) -> Result<Profile, FitError> {
    let d = &calibration.device;
    let missing = |part: &'static str| FitError::BadSamples {
        what: part,
        reason: "not measured in this calibration, and no profile given to keep it from (--into)".into(),
    };
    let transfer = if calibration.h2d_pinned.is_empty() {
        base.map(|b| b.transfer.clone())
            .ok_or_else(|| missing("the transfer part"))?
    } else {
        fit_transfer(calibration)?
    };
    let banks = fitted_or_kept(&calibration.banks, base.and_then(|b| b.banks.as_ref()), || {
        fit_banks(
            &calibration.banks,
            format!(
                "vramlab calibrate on {} ({}): median clock64 cycles per dependent shared load over 4-byte strides 1, 2, 4, 8, fitted by least absolute relative error; 32 banks of 4 bytes as the CUDA C++ Programming Guide gives for compute capability 5.0 and later",
                d.name, calibration.date
            ),
        )
    })?;
    let coalescing = fitted_or_kept(
        &calibration.coalescing,
        base.and_then(|b| b.coalescing.as_ref()),
        || {
            let machine = CoalescingMachine {
                l2_bytes: calibration.l2_bytes,
                launch_us: transfer.kernel_launch_us,
                sm: sm_params(&d.compute_capability, &calibration.sm)?,
                multiprocessors: d.multiprocessors,
                read_kernel_registers: calibration.read_kernel_registers,
            };
            fit_coalescing(
            &calibration.coalescing,
            &machine,
            format!(
                "vramlab calibrate on {} ({}): median event-timed reads (through the L2 only, ld.global.cg) at calibration_cases, all parameters fitted jointly by least absolute relative error: dense 16-byte reads of 1 GiB and 16 MiB (DRAM and L2 bandwidth), 1-byte dense reads (latency bound: one load in flight per warp), 4-byte dense reads (both bounds: the exponent), 4- and 16-byte reads at stride 32 (fetch size, page-open rate), 4-byte reads at stride 32 of 16 MiB (L2 line-request rate), 16-byte reads at stride 32 of 16 MiB (latency per extra line); 1 KiB DRAM pages (JEDEC JESD238, HBM3); launch cost = the transfer part's kernel_launch_us; 32 B sectors and 128 B lines (CUDA C++ Best Practices Guide); L2 size from cuDeviceGetAttribute",
                d.name, calibration.date
            ),
        )
        },
    )?;
    let latency = fitted_or_kept(&calibration.latency, base.and_then(|b| b.latency.as_ref()), || {
        // The L1 a kernel without shared memory gets: the SM's unified L1/shared array less the
        // smallest shared-memory carveout that holds the driver's reserved bytes (8 KiB).
        let unified = unified_l1_bytes(&d.compute_capability).ok_or_else(|| FitError::BadSamples {
            what: "the latency ladder",
            reason: format!(
                "the L1 size of compute capability {} is not known to vramlab (it knows {})",
                d.compute_capability,
                UNIFIED_L1.map(|(cc, _)| cc).join(", ")
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
    let growth = fitted_or_kept(&calibration.growth, base.and_then(|b| b.growth.as_ref()), || {
        fit_growth(
            &calibration.growth,
            calibration.free_bytes,
            format!(
                "vramlab calibrate on {} ({}): host time of each grow (synchronized) while doubling to 3 MiB x 2^k, k = 1..14 (5 repeats up to 1 GiB, 3 above, median), for each strategy with and without a reserve, a line in the size fitted by least absolute relative error; free memory from cuMemGetInfo at the start",
                d.name, calibration.date
            ),
        )
    })?;
    let spills = fitted_or_kept(&calibration.spills, base.and_then(|b| b.spills.as_ref()), || {
        fit_spills(
            &calibration.spills,
            &sm_params(&d.compute_capability, &calibration.sm)?,
            d.multiprocessors,
            coalescing.as_ref().ok_or_else(|| missing("the coalescing part (spill traffic moves at its L2 and DRAM bandwidth)"))?,
            format!(
                "vramlab calibrate on {} ({}): kernels/spills.cu compiled by NVRTC and the driver at (live, cap) = calibration_cases, launched to fill every SM (blocks of 128 threads, as many as cuOccupancyMaxActiveBlocksPerMultiprocessor allows); registers and local bytes from cuFuncGetAttribute, median event time of 7 launches of 1000 iterations; issue time from the uncapped cases, frames from the local bytes, the overlap exponent and the L2's hold on reserved local memory by least absolute relative error over the spilling cases; L2 and DRAM bandwidth from [coalescing]",
                d.name, calibration.date
            ),
        )
    })?;
    let migration = fitted_or_kept(&calibration.migration, base.and_then(|b| b.migration.as_ref()), || {
        fit_migration(
            &calibration.migration,
            format!(
                "vramlab calibrate on {} ({}): event-timed prefetch (if any) plus a kernel reading host-written managed memory at calibration_bytes, median of 5, a line fitted by least absolute relative error",
                d.name, calibration.date
            ),
        )
    })?;
    let peer = fitted_or_kept(&calibration.peer, base.and_then(|b| b.peer.as_ref()), || {
        fit_peer(
            &calibration.peer,
            format!(
                "vramlab calibrate on two {} ({}): event-timed kernel on the second GPU reading the first's memory at calibration_bytes (ld.global.cg, 16-byte dense reads), median of 7, a line fitted by least absolute relative error",
                d.name, calibration.date
            ),
        )
    })?;
    let constant = fitted_or_kept(&calibration.constant, base.and_then(|b| b.constant.as_ref()), || {
        fit_constant(
            &calibration.constant,
            format!(
                "vramlab calibrate on {} ({}): median clock64 cycles per dependent constant load of one warp at calibration_cases (1 and 2 distinct words, warm and cold), a line through each pair; capacity_lines = one less than the fewest warm lines (14, 15, 17, 18, 19, 24 tried) that cost more like a cold chain",
                d.name, calibration.date
            ),
        )
    })?;
    Ok(Profile {
        name: name.to_string(),
        description: format!(
            "{} (driver {}, PCI {}), measured by vramlab calibrate on {}",
            d.name, d.driver_version, d.pci_bus_id, calibration.date
        ),
        machine: base.and_then(|b| b.machine.clone()),
        uncertainty: base.and_then(|b| b.uncertainty.clone()),
        device: ProfileDevice {
            name: d.name.clone(),
            compute_capability: d.compute_capability.clone(),
            multiprocessors: d.multiprocessors,
            memory_bytes: d.memory_bytes,
            copy_engines: d.copy_engines,
        },
        transfer,
        sm: sm_params(&d.compute_capability, &calibration.sm)?,
        banks,
        coalescing,
        latency,
        constant,
        growth,
        spills,
        migration,
        peer,
    })
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

    use crate::solve::*;
    use crate::transfer::pinned_copy_us;
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
