//! memlab's shared vocabulary: experiment files and their sweeps, the [`Backend`] trait,
//! result records, device profiles. Depends on no other memlab crate.
#![deny(missing_docs)]

mod backend;
mod calibration;
mod catalog;
mod error;
mod family;
mod files;
mod params;
mod profile;
mod record;
mod suite;
mod units;

pub use backend::Backend;
pub use calibration::{
    bank_calibration_cases, calibration_sizes, constant_calibration_cases, global_calibration_cases,
    latency_calibration_bytes, BankSample, Calibration, ConstantSample, GlobalSample, LatencySample, Sample,
    SmAttributes,
};
pub use catalog::Catalog;
pub use error::{Error, Result};
pub use family::{
    coalescing_metrics, cycles_metrics, occupancy_metrics, overlap_metrics, transfer_metrics, BankPoint,
    CoalescingPoint, ConstantPoint, Direction, Family, HostMemory, LatencyPoint, OccupancyPoint, OverlapPoint,
    TransferPoint, Workload,
};
pub use files::write_atomically;
pub use params::{Metrics, ParamValue, Params};
pub use profile::{
    ConstantParams, GlobalParams, LatencyParams, LinkParams, Profile, ProfileDevice, SharedParams, SmParams,
    StagedParams, TransferParams, DEFAULT_PROFILE,
};
pub use record::{BackendKind, DeviceInfo, PointRecord, Record};
pub use suite::{point_from_args, Experiment, Point, Suite};
pub use units::{format_bytes, parse_bytes};
