//! What `vramlab calibrate` measured, before any fitting: the file between the two stages.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::record::DeviceInfo;

/// One measured copy: its size and its median time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Bytes copied.
    pub bytes: u64,
    /// Median time, microseconds.
    pub time_us: f64,
}

/// The raw measurements a transfer profile is fitted on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// The GPU measured.
    pub device: DeviceInfo,
    /// When, as an ISO date (UTC).
    pub date: String,
    /// Pinned uploads (every transfer list is empty when transfers were not measured).
    pub h2d_pinned: Vec<Sample>,
    /// Pinned downloads.
    pub d2h_pinned: Vec<Sample>,
    /// Pageable uploads.
    pub h2d_pageable: Vec<Sample>,
    /// Pageable downloads.
    pub d2h_pageable: Vec<Sample>,
    /// Median time per kernel of a run of back-to-back zero-length kernels, microseconds.
    pub kernel_launch_us: f64,
    /// The SM limits the driver reports (cuDeviceGetAttribute).
    pub sm: SmAttributes,
    /// Dependent shared-memory loads at the calibration cases; empty when not measured.
    #[serde(default, alias = "shared")]
    pub banks: Vec<BankSample>,
    /// Registers per thread of the global read kernel (its occupancy); 0 when not measured.
    #[serde(default)]
    pub read_kernel_registers: u32,
    /// Global-memory reads at the calibration cases; empty when not measured.
    #[serde(default, alias = "global")]
    pub coalescing: Vec<CoalescingSample>,
    /// L2 capacity, bytes (CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE).
    #[serde(default)]
    pub l2_bytes: u64,
    /// Pointer chases at the latency calibration footprints; empty when not measured.
    #[serde(default)]
    pub latency: Vec<LatencySample>,
    /// Constant-memory reads at the constant calibration cases; empty when not measured.
    #[serde(default)]
    pub constant: Vec<ConstantSample>,
    /// Buffer grows at the growth calibration sizes; empty when not measured.
    #[serde(default)]
    pub growth: Vec<GrowthSample>,
    /// Device memory free when the growth calibration began, bytes; 0 when not measured.
    #[serde(default)]
    pub free_bytes: u64,
    /// The spill kernel at the spill calibration cases; empty when not measured.
    #[serde(default)]
    pub spills: Vec<SpillSample>,
    /// Managed-memory reads at the migration calibration sizes; empty when not measured.
    #[serde(default)]
    pub migration: Vec<MigrationSample>,
    /// Peer reads at the peer calibration sizes; empty when not measured.
    #[serde(default)]
    pub peer: Vec<PeerSample>,
    /// Wall seconds each measured part took, by part name (how long `--part machine` is, and
    /// which part to shorten).
    #[serde(default)]
    pub part_seconds: BTreeMap<String, f64>,
}

/// One measured peer read.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PeerSample {
    /// Bytes read.
    pub bytes: u64,
    /// VMM mapping (else peer access).
    pub vmm: bool,
    /// Median kernel time, microseconds.
    pub time_us: f64,
}

/// The peer calibration sizes: 3 x 4^k MiB, 3 MiB to 3 GiB (the suite reads powers of two).
pub fn peer_calibration_bytes() -> Vec<u64> {
    (0..6).map(|k| (3u64 << 20) << (2 * k)).collect()
}

/// One measured read of host-written managed memory.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MigrationSample {
    /// Bytes read.
    pub bytes: u64,
    /// Whether they were prefetched first.
    pub prefetch: bool,
    /// Median time of prefetch (if any) plus the kernel, microseconds.
    pub time_us: f64,
}

/// The migration calibration sizes: 3 x 4^k MiB, 3 MiB to 3 GiB (the suite reads powers of two).
pub fn migration_calibration_bytes() -> Vec<u64> {
    (0..6).map(|k| (3u64 << 20) << (2 * k)).collect()
}

/// One measured spill case.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SpillSample {
    /// Live values.
    pub live: u32,
    /// Register cap.
    pub registers: u32,
    /// Registers the compiler used (CU_FUNC_ATTRIBUTE_NUM_REGS).
    pub registers_used: u32,
    /// Local bytes per thread (CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES).
    pub local_bytes: u32,
    /// Warps resident per SM with the GPU full.
    pub warps_per_sm: u32,
    /// Median kernel time per loop iteration with the GPU full, ns.
    pub ns_per_iteration: f64,
}

/// The spill calibration cases, as (live, registers). 40 and 120 live values uncapped give the
/// issue rate; 104 and 120 at their own count give how issue and spill traffic overlap; 104 and
/// 120 under caps of 32 to 64 reserve 90 to 140 MB of local memory, around where the L2 stops
/// holding it. The suite keeps other live counts, so none of these is a validation point.
pub fn spill_calibration_cases() -> Vec<(u32, u32)> {
    vec![
        (40, 255),
        (120, 255),
        (104, 104),
        (120, 120),
        (104, 32),
        (104, 40),
        (104, 48),
        (120, 40),
        (120, 48),
        (120, 56),
        (120, 64),
    ]
}

/// One measured grow.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GrowthSample {
    /// The strategy.
    pub strategy: crate::family::GrowthStrategy,
    /// Whether room was reserved up front.
    pub reserve: bool,
    /// The size grown to (from half of it).
    pub bytes: u64,
    /// Host time of the grow, synchronized, microseconds.
    pub grow_us: f64,
}

/// The sizes the growth calibration doubles to: 3 MiB x 2^k, 6 MiB to 48 GiB (the suites
/// double through powers of two, so none of these is a validation point, yet they span the
/// same range).
pub fn growth_calibration_bytes() -> Vec<u64> {
    (1..=14).map(|k| (3u64 << 20) << k).collect()
}

/// One measured constant-memory pattern.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ConstantSample {
    /// Distinct words per warp access.
    pub distinct: u32,
    /// Whether every access missed the constant cache.
    pub cold: bool,
    /// Median cycles per dependent access.
    pub cycles: f64,
}

/// The constant cases calibration measures: 1 and 2 distinct words, warm and cold (the two
/// lines), and warm chains of 14, 15, 17, 18, 19 and 24 distinct lines (where the cache runs
/// out). The suites' counts (powers of two, 3, 5, 7, 12, 20, 31) are left for validation.
pub fn constant_calibration_cases() -> Vec<(u32, bool)> {
    vec![
        (1, false),
        (2, false),
        (1, true),
        (2, true),
        (14, false),
        (15, false),
        (17, false),
        (18, false),
        (19, false),
        (24, false),
    ]
}

/// One measured pointer-chase footprint.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LatencySample {
    /// Footprint, bytes.
    pub bytes: u64,
    /// Median cycles per dependent load.
    pub cycles: f64,
}

/// The footprints calibration chases: 12 KiB (well inside the L1), 6 MiB (inside the L2, far
/// beyond the L1) and 768 MiB (far beyond the L2) for the three latencies; 384 KiB (just past
/// the L1) for how sharply the L1 stops serving; 28, 40, 56 and 80 MiB for the two steps in
/// which the L2 runs out. None is a point of the latency suites.
pub fn latency_calibration_bytes() -> Vec<u64> {
    vec![
        12 << 10,
        384 << 10,
        6 << 20,
        28 << 20,
        40 << 20,
        56 << 20,
        80 << 20,
        768 << 20,
    ]
}

/// One measured global read pattern (all lanes active, no offset).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CoalescingSample {
    /// Bytes per lane.
    pub width: u32,
    /// Elements between lanes.
    pub stride: u32,
    /// Array size, bytes.
    pub bytes: u64,
    /// Median kernel time, microseconds.
    pub time_us: f64,
}

/// The global-memory cases calibration measures, as (width, stride, bytes): dense 16-byte
/// reads of 1 GiB and of 16 MiB (DRAM and L2 bandwidth), dense 1-byte reads of both (one small
/// load in flight per warp: latency bound), dense 4-byte reads of 1 GiB (where the two bounds
/// meet), 4- and 16-byte reads at stride 32 (one element per line and per four lines: DRAM's
/// fetch size and the cost of opening pages), 4-byte reads at stride 32 of 16 MiB (one sector
/// in each of 32 lines per request: the L2's line-request rate), and 16-byte reads at stride
/// 32 of 16 MiB (too few warps to fill the GPU: the latency of a 32-line load). Every other
/// point is left for validation.
pub fn coalescing_calibration_cases() -> Vec<(u32, u32, u64)> {
    vec![
        (16, 1, 1 << 30),
        (16, 1, 16 << 20),
        (1, 1, 1 << 30),
        (1, 1, 16 << 20),
        (4, 1, 1 << 30),
        (4, 32, 1 << 30),
        (16, 32, 1 << 30),
        (4, 32, 16 << 20),
        (16, 32, 16 << 20),
    ]
}

/// One measured shared-memory access pattern.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BankSample {
    /// Bytes each lane loads (4, 8 or 16).
    pub width: u32,
    /// Distance between neighbouring lanes, in elements of `width` (0: all lanes the same).
    pub stride: u32,
    /// Median cycles per dependent load.
    pub cycles: f64,
}

/// The shared-memory cases calibration measures: 4-byte loads at strides 1, 2, 4 and 8
/// (1 to 8 wavefronts). Every other width, stride and broadcast is left for validation.
pub fn bank_calibration_cases() -> Vec<(u32, u32)> {
    vec![(4, 1), (4, 2), (4, 4), (4, 8)]
}

/// SM limits as device attributes; the occupancy rules that are not attributes come from the
/// compute capability (see `sim::fit_profile`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SmAttributes {
    /// CU_DEVICE_ATTRIBUTE_WARP_SIZE
    pub warp_size: u32,
    /// CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR
    pub max_threads_per_sm: u32,
    /// CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK
    pub max_threads_per_block: u32,
    /// CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR
    pub max_blocks_per_sm: u32,
    /// CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR
    pub registers_per_sm: u32,
    /// CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK
    pub registers_per_block: u32,
    /// CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR
    pub shared_bytes_per_sm: u32,
    /// CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK
    pub shared_bytes_per_block: u32,
    /// CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
    pub shared_bytes_per_block_optin: u32,
    /// CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK
    pub reserved_shared_bytes_per_block: u32,
}

/// The copy sizes calibration measures: 3 x 2^k for k = 10, 12, ..., 28 (3 KiB to 768 MiB).
/// None is a power of two, so none coincides with a point of the transfer suite.
pub fn calibration_sizes() -> Vec<u64> {
    (10..=28).step_by(2).map(|k| 3u64 << k).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn part_selections_name_their_parts() {
        let names = |selection: &str| -> Vec<&str> {
            calibration_parts(selection)
                .unwrap_or_default()
                .iter()
                .map(|p| p.name)
                .collect()
        };
        assert_eq!(names("machine"), ["transfer", "growth", "migration"]);
        let all = names("all");
        assert!(all.contains(&"latency") && !all.contains(&"peer"), "{all:?}");
        assert_eq!(names("peer"), ["peer"]);
        assert!(calibration_parts("bogus").is_none());
        // Progress counts every case of every part, not only the copies and banks.
        let cases: usize = calibration_parts("all").unwrap().iter().map(|p| (p.cases)()).sum();
        assert!(cases > 4 * calibration_sizes().len() + bank_calibration_cases().len());
    }

    #[test]
    fn calibration_sizes_are_never_powers_of_two() {
        let sizes = calibration_sizes();
        assert_eq!(sizes.len(), 10);
        assert!(sizes.iter().all(|s| !s.is_power_of_two()));
    }
}

/// One part of a profile that `vramlab calibrate --part NAME` measures: the one list the CLI's
/// choices, the progress count and the machine/GPU split are made from.
#[derive(Debug, Clone, Copy)]
pub struct CalibrationPart {
    /// Its name (`--part NAME`) and the profile section it writes.
    pub name: &'static str,
    /// What it measures, for `--help`.
    pub measures: &'static str,
    /// Whether it describes the machine the GPU sits in (host memory, PCIe link, driver) rather
    /// than the GPU model: `--part machine` re-measures these.
    pub machine: bool,
    /// Whether `--part all` measures it (peer needs two GPUs and is asked for by name).
    pub in_all: bool,
    /// How many cases it measures (for progress).
    pub cases: fn() -> usize,
}

/// Every part, in the order `vramlab calibrate` measures them.
pub const CALIBRATION_PARTS: [CalibrationPart; 9] = [
    CalibrationPart {
        name: "transfer",
        measures: "pinned and pageable copies both ways, and the kernel launch overhead",
        machine: true,
        in_all: true,
        cases: || 4 * calibration_sizes().len(),
    },
    CalibrationPart {
        name: "banks",
        measures: "dependent shared-memory loads (banks)",
        machine: false,
        in_all: true,
        cases: || bank_calibration_cases().len(),
    },
    CalibrationPart {
        name: "coalescing",
        measures: "global-memory reads (coalescing, L2 and DRAM)",
        machine: false,
        in_all: true,
        cases: || coalescing_calibration_cases().len(),
    },
    CalibrationPart {
        name: "latency",
        measures: "pointer chases (the latency ladder)",
        machine: false,
        in_all: true,
        cases: || latency_calibration_bytes().len(),
    },
    CalibrationPart {
        name: "constant",
        measures: "constant-memory reads",
        machine: false,
        in_all: true,
        cases: || constant_calibration_cases().len(),
    },
    CalibrationPart {
        name: "growth",
        measures: "buffer grows, three strategies with and without a reserve",
        machine: true,
        in_all: true,
        cases: || 6 * growth_calibration_bytes().len(),
    },
    CalibrationPart {
        name: "spills",
        measures: "the spill kernel under register caps",
        machine: false,
        in_all: true,
        cases: || spill_calibration_cases().len(),
    },
    CalibrationPart {
        name: "migration",
        measures: "managed-memory reads, with and without prefetch",
        machine: true,
        in_all: true,
        cases: || 2 * migration_calibration_bytes().len(),
    },
    CalibrationPart {
        name: "peer",
        measures: "one GPU reading another's memory (two GPUs)",
        machine: false,
        in_all: false,
        cases: || 2 * peer_calibration_bytes().len(),
    },
];

/// The parts `--part SELECTION` names: `all`, `machine`, or one part's name.
pub fn calibration_parts(selection: &str) -> Option<Vec<&'static CalibrationPart>> {
    let parts: Vec<&CalibrationPart> = match selection {
        "all" => CALIBRATION_PARTS.iter().filter(|p| p.in_all).collect(),
        "machine" => CALIBRATION_PARTS.iter().filter(|p| p.machine).collect(),
        name => {
            // The parts' names before each family had one name in every layer.
            let name = crate::profile::FORMER_NAMES
                .iter()
                .find(|(old, _)| *old == name)
                .map_or(name, |(_, new)| new);
            CALIBRATION_PARTS.iter().filter(|p| p.name == name).collect()
        }
    };
    (!parts.is_empty()).then_some(parts)
}
