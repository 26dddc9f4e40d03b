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

/// Where a calibration's samples were measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SamplesFrom {
    /// On this machine, just now (`vramlab calibrate`).
    ThisMachine,
    /// Earlier, on a host the samples do not name (`vramlab calibrate --from-samples`).
    Earlier,
}

/// [`fit_profile`], with the profile's machine set by the rule for the parts that describe a
/// host (its PCIe link, driver and CPU): measured here, the profile is this machine's; fitted
/// from earlier samples, it names no machine where those parts were measured (older samples do
/// not say which parts they measured: they are taken to have measured them).
pub fn fit_profile_from(
    name: &str,
    calibration: &Calibration,
    base: Option<&Profile>,
    from: SamplesFrom,
) -> Result<Profile, FitError> {
    let mut profile = fit_profile(name, calibration, base)?;
    let measured = &calibration.part_seconds;
    let machine_measured = experiments::machine_parts()
        .iter()
        .any(|part| measured.contains_key(*part));
    match from {
        SamplesFrom::ThisMachine if machine_measured => profile.machine = experiments::this_machine(),
        SamplesFrom::Earlier if machine_measured || measured.is_empty() => profile.machine = None,
        _ => {}
    }
    Ok(profile)
}

/// Fits a profile to a calibration run. Parts the run did not measure (an empty sample list)
/// are taken from `base`, so one part of an existing profile can be re-measured alone. Each
/// family's fit is its model's (`sim/src/models.rs`), in the registry's order, so a family can
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
    let sm = match &calibration.sm {
        Some(attributes) => sm_params(&d.compute_capability, attributes)?,
        // Samples written before calibrations recorded the SM's attributes (2026-11-22).
        None => base.map(|b| b.sm.clone()).ok_or_else(|| FitError::BadSamples {
            what: "the SM's occupancy rules",
            reason: format!(
                "the samples of {} do not hold the SM's limits (calibrations recorded them only from the occupancy calculator on, 2026-11-22), and no profile was given to keep them from (--into)",
                calibration.date
            ),
        })?,
    };
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
    // What loading earlier samples could not take, so the profile says which parts it did not refit.
    if !calibration.set_aside.is_empty() {
        let notes = calibration.set_aside.join("; ");
        profile.description += &format!("; not refitted from these earlier samples: {notes}");
    }
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
