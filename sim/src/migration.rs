//! Reading host-written managed memory on the device: the pages migrate on demand (faults), or
//! are prefetched first; either way a link with a latency and a bandwidth, fitted per mode.

use experiments::{Calibration, Family, Metrics, Params, Profile};

use crate::backend::SimError;
use crate::fit::FitError;
use crate::models::{bytes_points, fitted_or_kept, required, Model};

use experiments::{migration_calibration_bytes, MigrationParams, MigrationPoint, MigrationSample, Sample};

use crate::link::{fit_link_of, pinned_copy_us};

/// Microseconds to read `point.bytes` of managed memory last written by the host.
pub(crate) fn migration_us(params: &MigrationParams, point: &MigrationPoint) -> f64 {
    let link = if point.prefetch {
        &params.prefetch
    } else {
        &params.on_demand
    };
    pinned_copy_us(link, point.bytes)
}

/// Fits one link per mode (on demand, prefetched) on the calibration's samples.
pub(crate) fn fit_migration(samples: &[MigrationSample], source: String) -> Result<MigrationParams, FitError> {
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

/// The migration model.
pub(crate) struct FamilyModel;

impl Model for FamilyModel {
    type Point = MigrationPoint;

    fn predict(profile: &Profile, point: &MigrationPoint) -> Result<Metrics, SimError> {
        let params = required(profile, &profile.migration, Family::Migration)?;
        Ok(experiments::throughput_metrics(migration_us(params, point), point.bytes))
    }

    fn calibration_points(profile: &Profile) -> Vec<Params> {
        profile.migration.iter().flat_map(|m| bytes_points(&m.calibration_bytes)).collect()
    }

    fn fit(calibration: &Calibration, base: Option<&Profile>, profile: &mut Profile) -> Result<(), FitError> {
        let d = &calibration.device;
        profile.migration = fitted_or_kept(&calibration.migration, base.and_then(|b| b.migration.as_ref()), || {
            fit_migration(
                &calibration.migration,
                format!(
                    "vramlab calibrate on {} ({}): event-timed prefetch (if any) plus a kernel reading host-written managed memory at calibration_bytes, median of 5, a line fitted by least absolute relative error",
                    d.name, calibration.date
                ),
            )
        })?;
        Ok(())
    }
}
