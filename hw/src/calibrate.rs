//! `vramlab calibrate`, measuring half: the samples a profile is fitted on.

use experiments::{
    bank_calibration_cases, calibration_sizes, coalescing_calibration_cases, constant_calibration_cases,
    latency_calibration_bytes, spill_calibration_cases, Calibration, Direction, HostMemory, Sample, TransferPoint,
};

use crate::banks::BankProbe;
use crate::coalescing::{l2_bytes, ReadProbe};
use crate::constant::ConstantProbe;
use crate::cuda::Gpu;
use crate::error::Result;
use crate::growth::GrowthProbe;
use crate::latency::ChaseProbe;
use crate::migration::MigrationProbe;
use crate::occupancy::sm_attributes;
use crate::overlap::Spin;
use crate::peer::PeerProbe;
use crate::spills::SpillProbe;
use crate::transfer::measure_copy;

/// Which parts of a profile to measure ([`experiments::CALIBRATION_PARTS`], by name). The SM's
/// limits are always read (they are attributes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parts {
    names: Vec<&'static str>,
}

impl Parts {
    /// The parts `--part SELECTION` names (`all`, `machine`, or a part's name).
    pub fn select(selection: &str) -> Option<Parts> {
        experiments::calibration_parts(selection).map(|parts| Parts {
            names: parts.iter().map(|p| p.name).collect(),
        })
    }

    /// Whether part `name` is to be measured.
    pub fn has(&self, name: &str) -> bool {
        debug_assert!(
            experiments::CALIBRATION_PARTS.iter().any(|p| p.name == name),
            "no calibration part '{name}'"
        );
        self.names.contains(&name)
    }
}

/// Measures the requested parts; parts not requested come back as empty sample lists.
/// `progress` is called once per measured case.
pub fn measure_calibration(parts: &Parts, seed: u64, progress: &dyn Fn()) -> Result<Calibration> {
    let gpu = Gpu::open()?;
    let device = gpu.info()?;
    let clock = PartClock::default();
    let arena = std::cell::RefCell::new(None);
    let measure = |direction, host| -> Result<Vec<Sample>> {
        if !parts.has("transfer") {
            return Ok(Vec::new());
        }
        clock.time("transfer", || {
            calibration_sizes()
                .into_iter()
                .map(|bytes| {
                    let point = TransferPoint { direction, host, bytes };
                    let time_us = measure_copy(&gpu, &mut arena.borrow_mut(), &point, seed)?.median;
                    progress();
                    Ok(Sample { bytes, time_us })
                })
                .collect()
        })
    };
    let h2d_pinned = measure(Direction::HostToDevice, HostMemory::Pinned)?;
    let d2h_pinned = measure(Direction::DeviceToHost, HostMemory::Pinned)?;
    let h2d_pageable = measure(Direction::HostToDevice, HostMemory::Pageable)?;
    let d2h_pageable = measure(Direction::DeviceToHost, HostMemory::Pageable)?;
    // Its gigabyte of device memory must not be taken when growth measures what is free.
    drop(arena);
    let kernel_launch_us = if parts.has("transfer") {
        clock.time("transfer", || Spin::load(&gpu)?.launch_overhead_us(&gpu, 200))?
    } else {
        0.0
    };
    let part = |name: &'static str, measure: &mut dyn FnMut() -> Result<usize>| -> Result<()> {
        if parts.has(name) {
            let cases = clock.time(name, measure)?;
            (0..cases).for_each(|_| progress());
        }
        Ok(())
    };
    let (mut shared, mut global, mut latency, mut constant) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut growth, mut free_bytes, mut spills, mut migration, mut peer) =
        (Vec::new(), 0, Vec::new(), Vec::new(), Vec::new());
    let mut read_kernel_registers = 0;
    part("banks", &mut || {
        shared = BankProbe::load(&gpu)?.calibrate(&gpu, &bank_calibration_cases())?;
        Ok(shared.len())
    })?;
    part("coalescing", &mut || {
        let mut probe = ReadProbe::load(&gpu)?;
        read_kernel_registers = probe.registers()?;
        global = probe.calibrate(&gpu, &coalescing_calibration_cases())?;
        Ok(global.len())
    })?;
    part("latency", &mut || {
        latency = ChaseProbe::load(&gpu)?.calibrate(&gpu, &latency_calibration_bytes(), seed)?;
        Ok(latency.len())
    })?;
    part("constant", &mut || {
        constant = ConstantProbe::load(&gpu)?.calibrate(&gpu, &constant_calibration_cases())?;
        Ok(constant.len())
    })?;
    part("growth", &mut || {
        // Growth ticks progress per grow itself: its grows are the slowest cases.
        (growth, free_bytes) = GrowthProbe::load(&gpu)?.calibrate(&gpu, progress)?;
        Ok(0)
    })?;
    part("spills", &mut || {
        spills = SpillProbe::new().calibrate(&gpu, &spill_calibration_cases())?;
        Ok(spills.len())
    })?;
    part("migration", &mut || {
        migration = MigrationProbe::load(&gpu)?.calibrate(&gpu)?;
        Ok(migration.len())
    })?;
    part("peer", &mut || {
        peer = PeerProbe::load(&gpu)?.calibrate(&gpu)?;
        Ok(peer.len())
    })?;
    Ok(Calibration {
        peer,
        migration,
        spills,
        growth,
        free_bytes,
        read_kernel_registers,
        constant,
        latency,
        coalescing: global,
        l2_bytes: l2_bytes(&gpu)?,
        sm: sm_attributes(&gpu)?,
        device,
        date: today(),
        h2d_pinned,
        d2h_pinned,
        h2d_pageable,
        d2h_pageable,
        kernel_launch_us,
        banks: shared,
        part_seconds: clock.seconds.into_inner(),
    })
}

/// Wall seconds spent per calibration part, summed over the part's pieces.
#[derive(Default)]
struct PartClock {
    seconds: std::cell::RefCell<std::collections::BTreeMap<String, f64>>,
}

impl PartClock {
    fn time<T>(&self, name: &str, measure: impl FnOnce() -> T) -> T {
        let start = std::time::Instant::now();
        let result = measure();
        *self.seconds.borrow_mut().entry(name.to_string()).or_default() += start.elapsed().as_secs_f64();
        result
    }
}

/// How many cases [`measure_calibration`] measures for these parts, for a progress bar.
pub fn calibration_steps(parts: &Parts) -> u64 {
    experiments::CALIBRATION_PARTS
        .iter()
        .filter(|p| parts.has(p.name))
        .map(|p| (p.cases)() as u64)
        .sum()
}

/// Today's date (UTC) as YYYY-MM-DD, from the system clock.
fn today() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    civil_date((secs / 86_400) as i64)
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn civil_date(days: i64) -> String {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

#[cfg(test)]
mod tests {
    use super::civil_date;

    #[test]
    fn civil_dates() {
        assert_eq!(civil_date(0), "1970-01-01");
        assert_eq!(civil_date(20_414), "2025-11-22");
        assert_eq!(civil_date(11_016), "2000-02-29");
    }
}
