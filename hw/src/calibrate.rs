//! `vramlab calibrate`, measuring half: the samples a profile is fitted on.

use cudarc::driver::sys::CUdevice_attribute;

use experiments::{Calibration, SmAttributes};

use crate::cuda::Gpu;
use crate::error::Result;
use crate::probes::calibrate_parts;

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
    let mut calibration = Calibration::new(gpu.info()?, today(), sm_attributes(&gpu)?, l2_bytes(&gpu)?);
    let clock = PartClock::default();
    calibrate_parts(&gpu, parts, seed, &mut calibration, &clock, progress)?;
    calibration.part_seconds = clock.seconds.into_inner();
    Ok(calibration)
}

/// The device's SM limits, as the driver reports them.
pub(crate) fn sm_attributes(gpu: &Gpu) -> Result<SmAttributes> {
    use CUdevice_attribute::*;
    let get = |a| gpu.attribute(a).map(|v| v as u32);
    Ok(SmAttributes {
        warp_size: get(CU_DEVICE_ATTRIBUTE_WARP_SIZE)?,
        max_threads_per_sm: get(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)?,
        max_threads_per_block: get(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
        max_blocks_per_sm: get(CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR)?,
        registers_per_sm: get(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR)?,
        registers_per_block: get(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK)?,
        shared_bytes_per_sm: get(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)?,
        shared_bytes_per_block: get(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)?,
        shared_bytes_per_block_optin: get(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?,
        reserved_shared_bytes_per_block: get(CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK)?,
    })
}

/// The L2's capacity, bytes.
fn l2_bytes(gpu: &Gpu) -> Result<u64> {
    Ok(gpu.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)? as u64)
}

/// Wall seconds spent per calibration part, summed over the part's pieces.
#[derive(Default)]
pub(crate) struct PartClock {
    seconds: std::cell::RefCell<std::collections::BTreeMap<String, f64>>,
}

impl PartClock {
    pub(crate) fn time<T>(&self, name: &str, measure: impl FnOnce() -> T) -> T {
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
