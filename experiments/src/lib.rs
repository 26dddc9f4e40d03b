//! vramlab's shared vocabulary: experiment files and their sweeps, the [`Backend`] trait,
//! result records, device profiles,
//! allocation traces and allocator policy names. Depends on no other vramlab crate.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

#[macro_use]
mod registry;
mod alloc_conf;
mod backend;
mod calibration;
pub mod cancel;
mod catalog;
mod error;
mod family;
mod files;
mod gpus;
mod params;
mod policy;
mod profile;
pub mod pytorch;
mod record;
mod replay_record;
mod stats;
mod suite;
mod teach;
mod torch_release;
mod trace;
mod units;

/// Each family's module: its parameters, typed point, metrics, profile section and calibration
/// samples, named as [`for_each_family!`] lists them.
macro_rules! family_modules {
    ($( $(#[$doc:meta])* $module:ident : $Variant:ident($Point:ty) $([$Section:ty])? $({$Sample:ty})? ),* $(,)?) => {
        $( mod $module; pub use $module::*; )*
    };
}
for_each_family!(family_modules);

pub use alloc_conf::{AllocBackend, AllocConf, ReserveSpec, ROUNDUP_INTERVALS};
pub use backend::Backend;
pub use calibration::{calibration_parts, Calibration, CalibrationPart, SmAttributes, CALIBRATION_PARTS};
pub use catalog::Catalog;
pub use error::{Error, Result};
pub use family::{cycles_metrics, throughput_metrics, AxisScale, Family, Workload};
pub use files::{
    error_line, hold_output_root, read_input, read_input_text, refuse_shared_outputs, set_output_root, terminal_text,
    unsafe_name, write_atomically, OutputLock, DEFAULT_MAX_INPUT_BYTES, ERROR_LINE_CHARS, OUTPUT_LOCK,
};
pub use gpus::{Capacity, Gpu, CONTEXT_BYTES_MEASURED_H100};
pub use params::{Metrics, ParamValue, Params};
pub use policy::{PolicyInfo, PolicySpec, POLICIES};
pub use profile::{
    machine_parts, this_machine, LinkParams, Profile, ProfileDevice, SmParams, Uncertainty, DEFAULT_PROFILE,
};
pub use record::{
    code_commit, max_record_values, set_code_commit, BackendKind, DeviceInfo, PointRecord, Record,
    DEFAULT_MAX_RECORD_VALUES,
};
pub use registry::former_names;
pub use replay_record::{
    BlockView, FirstDifference, OperationView, PolicyResult, PoolState, PytorchStats, RecordedCheck, ReplayRecord,
    ReplayedEvent, ReplayedTrace, SegmentView, StartSummary, TimelinePoint, Verdict,
};
pub use stats::median;
pub use suite::{point_from_args, Experiment, Point, Suite};
pub use teach::{TeachControl, TeachFact, TeachPage, TeachPanel, TeachView};
pub use torch_release::{key_source, KeyEffect, KeyInfo, ReleaseChoice, TorchRelease, ALLOC_CONF_KEYS};
pub use trace::{
    program_line, snapshot_bytes, write_snapshot, AllocSources, Annotation, BlockState, DeviceAction, InferredCap,
    RecordedOp, Reservation, SnapshotEvents, StartBlock, StartSegment, StartState, SyntheticInfo, Trace, TraceEvent,
    TraceSource, TraceWarnings, DEFAULT_MAX_TRACE_BYTES, SYNTHETIC_TRACES,
};
pub use units::{format_bytes, parse_bytes};
