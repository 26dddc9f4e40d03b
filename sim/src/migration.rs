//! Reading host-written managed memory on the device: the pages migrate on demand (faults), or
//! are prefetched first; either way a link with a latency and a bandwidth, fitted per mode.

use experiments::{MigrationParams, MigrationPoint};

use crate::transfer::pinned_copy_us;

/// Microseconds to read `point.bytes` of managed memory last written by the host.
pub fn migration_us(params: &MigrationParams, point: &MigrationPoint) -> f64 {
    let link = if point.prefetch {
        &params.prefetch
    } else {
        &params.on_demand
    };
    pinned_copy_us(link, point.bytes)
}
