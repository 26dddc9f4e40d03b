//! vramlab's shared vocabulary: experiment files and their sweeps, the [`Backend`] trait,
//! result records, device profiles,
//! allocation traces and allocator policy names. Depends on no other vramlab crate.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod alloc_conf;
mod backend;
mod calibration;
mod catalog;
mod error;
mod family;
mod files;
mod params;
mod policy;
mod profile;
mod record;
mod replay_record;
mod stats;
mod suite;
mod trace;
mod units;

pub use alloc_conf::{AllocBackend, AllocConf, ALLOC_CONF_KEYS, ROUNDUP_INTERVALS};
pub use backend::Backend;
pub use calibration::{
    bank_calibration_cases, calibration_parts, calibration_sizes, coalescing_calibration_cases,
    constant_calibration_cases, growth_calibration_bytes, latency_calibration_bytes, migration_calibration_bytes,
    peer_calibration_bytes, spill_calibration_cases, BankSample, Calibration, CalibrationPart, CoalescingSample,
    ConstantSample, GrowthSample, LatencySample, MigrationSample, PeerSample, Sample, SmAttributes, SpillSample,
    CALIBRATION_PARTS,
};
pub use catalog::Catalog;
pub use error::{Error, Result};
pub use family::{
    coalescing_metrics, cycles_metrics, growth_metrics, occupancy_metrics, overlap_metrics, spill_metrics,
    transfer_metrics, BankPoint, CoalescingPoint, ConstantPoint, Direction, Family, GrowthPoint, GrowthStrategy,
    HostMemory, LatencyPoint, MigrationPoint, OccupancyPoint, OverlapPoint, PeerPoint, SpillPoint, TransferPoint,
    Workload, READ_KERNEL_BLOCKS_PER_SM, READ_KERNEL_THREADS, SPILL_KERNEL_THREADS,
};
pub use files::{unsafe_name, write_atomically};
pub use params::{Metrics, ParamValue, Params};
pub use policy::{PolicyInfo, PolicySpec, POLICIES};
pub use profile::{
    grow_sizes, machine_parts, reserved_bytes, this_machine, BankParams, CoalescingParams, ConstantParams, GrowthCost,
    GrowthParams, LatencyParams, LinkParams, MigrationParams, PeerParams, Profile, ProfileDevice, SmParams,
    SpillParams, StagedParams, TransferParams, Uncertainty, DEFAULT_PROFILE, FORMER_NAMES, GROWTH_RESERVE_FRACTION,
    MANAGED_LIMIT_FRACTION, VMM_GRANULE,
};
pub use record::{BackendKind, DeviceInfo, PointRecord, Record, CODE_COMMIT};
pub use replay_record::{
    BlockView, PolicyResult, PytorchStats, ReplayRecord, ReplayedEvent, ReplayedTrace, SegmentView, TimelinePoint,
};
pub use stats::median;
pub use suite::{point_from_args, Experiment, Point, Suite};
pub use trace::{
    refuse_private_pool, snapshot_bytes, write_snapshot, DeviceAction, RecordedOp, SnapshotBuilder, SyntheticInfo,
    Trace, TraceEvent, TraceSource, TraceWarnings, DEFAULT_MAX_TRACE_BYTES, SETTINGS_KEYS, SYNTHETIC_TRACES,
};
pub use units::{format_bytes, parse_bytes};
