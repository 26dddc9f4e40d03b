//! Reading host-written managed memory on the device: the pages migrate on demand (faults), or
//! are prefetched first; either way a link with a latency and a bandwidth, fitted per mode.

use experiments::{migration_calibration_bytes, MigrationParams, MigrationPoint, MigrationSample, Sample};

use crate::fit::FitError;
use crate::transfer::{fit_link_of, pinned_copy_us};

/// Microseconds to read `point.bytes` of managed memory last written by the host.
pub fn migration_us(params: &MigrationParams, point: &MigrationPoint) -> f64 {
    let link = if point.prefetch {
        &params.prefetch
    } else {
        &params.on_demand
    };
    pinned_copy_us(link, point.bytes)
}

/// Fits one link per mode (on demand, prefetched) on the calibration's samples.
pub fn fit_migration(samples: &[MigrationSample], source: String) -> Result<MigrationParams, FitError> {
    let time = |s: &MigrationSample, prefetch: bool| {
        (s.prefetch == prefetch).then_some(Sample {
            bytes: s.bytes,
            time_us: s.time_us,
        })
    };
    Ok(MigrationParams {
        source,
        on_demand: fit_link_of(samples, |s| time(s, false))?,
        prefetch: fit_link_of(samples, |s| time(s, true))?,
        calibration_bytes: migration_calibration_bytes(),
    })
}
