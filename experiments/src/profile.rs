//! Device profiles: the model's parameters, immutable, each saying where it came from.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// A device profile: what `sim` needs to predict one GPU, and where each number came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// Short name (`--profile NAME`).
    pub name: String,
    /// One sentence: which machine, which date.
    pub description: String,
    /// The host whose machine parts ([`machine_parts`]) were measured, as `vramlab calibrate`
    /// wrote it; absent in built-in profiles, which come from other machines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
    /// The GPU the parameters describe.
    pub device: ProfileDevice,
    /// Host <-> device copies and launch overhead.
    pub transfer: TransferParams,
    /// The SM's resource limits and allocation rules, for the occupancy calculator.
    pub sm: SmParams,
    /// Shared memory's banks and what a conflict costs, for the `banks` family; absent in
    /// profiles calibrated before vramlab measured it (`vramlab calibrate --part banks --into
    /// FILE` adds it). Profiles written before the rename call the section `[shared]`.
    #[serde(default, skip_serializing_if = "Option::is_none", alias = "shared")]
    pub banks: Option<BankParams>,
    /// Global memory: sectors, lines, L2 and DRAM, for the `coalescing` family; absent until
    /// calibrated (`--part coalescing`). Formerly `[global]`.
    #[serde(default, skip_serializing_if = "Option::is_none", alias = "global")]
    pub coalescing: Option<CoalescingParams>,
    /// Load-to-use latency of each level; absent until calibrated (`--part latency`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<LatencyParams>,
    /// Constant-memory serialization; absent until calibrated (`--part constant`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub constant: Option<ConstantParams>,
    /// Growing a device buffer; absent until calibrated (`--part growth`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub growth: Option<GrowthParams>,
    /// Register spills; absent until calibrated (`--part spills`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spills: Option<SpillParams>,
    /// Managed-memory migration to the device; absent until calibrated (`--part migration`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub migration: Option<MigrationParams>,
    /// One GPU reading another's memory; measured on a machine with two of this GPU (`--part peer`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<PeerParams>,
    /// How much measurements of the same point differ between runs and machines of this GPU, per
    /// family: the band within which a prediction is as good as a measurement can tell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uncertainty: Option<Uncertainty>,
}

/// The spread of repeated measurements, per family (a fraction: 0.03 is 3%).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Uncertainty {
    /// How it was found.
    pub source: String,
    /// Family name -> relative spread.
    pub spread: std::collections::BTreeMap<String, f64>,
}

impl Profile {
    /// The measured spread of `family`'s primary metric, if the profile has one.
    pub fn spread_of(&self, family: crate::Family) -> Option<f64> {
        self.uncertainty.as_ref()?.spread.get(family.name()).copied()
    }
}

/// A GPU reading a peer GPU's memory: `latency + bytes / bandwidth` per mapping.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeerParams {
    /// Where these numbers came from.
    pub source: String,
    /// A VMM allocation mapped for both devices.
    pub vmm: LinkParams,
    /// A cuMemAlloc buffer with peer access enabled.
    pub peer_access: LinkParams,
    /// The sizes calibration measured; reports exclude them.
    pub calibration_bytes: Vec<u64>,
}

/// A kernel reading host-written managed memory: `latency + bytes / bandwidth` with the pages
/// moved by the kernel's faults or prefetched first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MigrationParams {
    /// Where these numbers came from.
    pub source: String,
    /// Pages moved by faults.
    pub on_demand: LinkParams,
    /// Pages prefetched, then read.
    pub prefetch: LinkParams,
    /// The sizes calibration measured; reports exclude them.
    pub calibration_bytes: Vec<u64>,
}

/// Register spills, in two parts. The compiler: `spills.cu` uncapped uses `live +
/// overhead_registers` registers; with `g = live - cap` it loads
/// `max(0, min(loads_at_equal + loads_per_register_small x g, loads_beyond_deficit + g))` spilled
/// words per iteration (and stores one fewer), in a frame of
/// `min(frame_bytes_at_equal + 8 g, frame_bytes_large_base + 4 g)` bytes per thread. The GPU:
/// with every SM full (blocks of 128 threads, warps per SM from the occupancy calculator), an
/// iteration takes the issue time `W x (live + loads + stores + loop_instructions) x
/// instruction_ns` combined, `(a^p + b^p)^(1/p)`, with the time to move the spill traffic
/// (128 bytes per warp load or store) at the profile's L2 bandwidth, or at its DRAM bandwidth
/// for the share the L2 cannot hold: the local memory the driver sets aside (frame x threads
/// per SM x SMs) is served from the L2 with probability `min(1, (local_capacity_bytes /
/// reserved)^local_sharpness)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpillParams {
    /// Where these numbers came from.
    pub source: String,
    /// Where the compiler's rule (loads, frame, loop instructions) came from.
    pub compiler_source: String,
    /// Registers the kernel needs beyond its live values (calibration, uncapped cases).
    pub overhead_registers: u32,
    /// Spilled loads per iteration when the cap equals the live values.
    pub loads_at_equal: f64,
    /// Loads each register of deficit adds while the deficit is small.
    pub loads_per_register_small: f64,
    /// For large deficits, loads per iteration are the deficit plus this.
    pub loads_beyond_deficit: f64,
    /// Spill frame per thread when the cap equals the live values, bytes.
    pub frame_bytes_at_equal: f64,
    /// For large deficits the frame is this plus 4 bytes per register of deficit.
    pub frame_bytes_large_base: f64,
    /// Instructions of the loop besides the live values' FMAs and the spill loads and stores.
    pub loop_instructions: f64,
    /// Time one SM takes per warp instruction issued, ns (calibration, uncapped cases).
    pub instruction_ns: f64,
    /// How the issue time and the traffic time combine (calibration).
    pub overlap_exponent: f64,
    /// Reserved local memory the L2 holds for spills, bytes (calibration).
    pub local_capacity_bytes: f64,
    /// How sharply the L2 stops holding it (calibration).
    pub local_sharpness: f64,
    /// The (live, registers) cases calibration measured; reports exclude them.
    pub calibration_cases: Vec<(u32, u32)>,
}

/// What one grow costs with one strategy: `fixed_us + us_per_gib x (size grown to, GiB)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GrowthCost {
    /// The strategy.
    pub strategy: crate::family::GrowthStrategy,
    /// Whether room was reserved up front.
    pub reserve: bool,
    /// Calls and synchronization, microseconds.
    pub fixed_us: f64,
    /// What each GiB of the new size adds (allocating, mapping, copying the old half), microseconds.
    pub us_per_gib: f64,
}

/// Growing a device buffer by doubling: what each strategy's grow costs, and the memory the
/// device has free when a series starts (which decides where a strategy runs out).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GrowthParams {
    /// Where these numbers came from.
    pub source: String,
    /// Device memory free at the start of a series (cuMemGetInfo), bytes.
    pub free_bytes: u64,
    /// One cost per strategy and reserve choice.
    pub costs: Vec<GrowthCost>,
    /// The sizes calibration grew to; reports exclude them.
    pub calibration_bytes: Vec<u64>,
}

impl GrowthParams {
    /// The cost line of one strategy and reserve choice.
    pub fn cost(&self, strategy: crate::family::GrowthStrategy, reserve: bool) -> Option<&GrowthCost> {
        self.costs
            .iter()
            .find(|c| c.strategy == strategy && c.reserve == reserve)
    }
}

/// The share of free device memory `reserve = yes` sets aside before the first grow (vramlab's
/// choice: room for every size a series tries, short of the whole device).
pub const GROWTH_RESERVE_FRACTION: f64 = 0.85;

/// VMM and the driver hand out memory in 2 MiB granules (cuMemGetAllocationGranularity on
/// the H100 and H200, GPU.md).
pub const VMM_GRANULE: u64 = 2 << 20;

/// Bytes a growth point's `reserve = yes` sets aside, given the device's free memory.
pub fn reserved_bytes(free_bytes: u64) -> u64 {
    ((free_bytes as f64 * GROWTH_RESERVE_FRACTION) as u64) / VMM_GRANULE * VMM_GRANULE
}

/// The sizes a grow to `bytes` goes from and to: `bytes` rounded up to the granule, and half that.
pub fn grow_sizes(bytes: u64) -> (u64, u64) {
    let new = bytes.div_ceil(VMM_GRANULE) * VMM_GRANULE;
    (new / 2, new)
}

/// Managed memory is never asked for beyond this share of free device memory: oversubscribing
/// managed memory can hang a shared GPU (see GPU.md), so a managed grow that would stops there.
pub const MANAGED_LIMIT_FRACTION: f64 = 0.95;

/// Constant memory serves one address per pass: a warp access naming `n` words takes
/// `first + (n - 1) x per_extra` cycles in a dependent chain, warm or cold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConstantParams {
    /// Where these numbers came from.
    pub source: String,
    /// Cycles of a broadcast (one word) from a warm constant cache.
    pub warm_cycles: f64,
    /// Cycles each further distinct word adds, warm.
    pub warm_per_extra: f64,
    /// Cycles of a broadcast that misses the constant cache.
    pub cold_cycles: f64,
    /// Cycles each further distinct word adds, cold.
    pub cold_per_extra: f64,
    /// Distinct 128-byte lines the SM's constant cache keeps: a warm access naming more, in a
    /// repeating chain, misses on every line (as cold).
    pub capacity_lines: u32,
    /// The (distinct, cold) cases calibration measured; reports exclude them.
    pub calibration_cases: Vec<(u32, bool)>,
}

/// The latency ladder: cycles of one dependent load served by each level, and the capacities
/// that decide which level serves a random chase through a footprint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LatencyParams {
    /// Where these numbers came from.
    pub source: String,
    /// L1 data cache capacity a kernel without shared memory gets, bytes.
    pub l1_bytes: u64,
    /// L2 capacity, bytes.
    pub l2_bytes: u64,
    /// Cycles of a load that hits the L1.
    pub l1_cycles: f64,
    /// Cycles of a load that misses the L1 and hits the L2 (near and far halves averaged).
    pub l2_cycles: f64,
    /// Cycles of a load served by DRAM.
    pub dram_cycles: f64,
    /// How sharply the L1 stops serving a chase longer than it: it serves (l1_bytes / F)^k of
    /// a footprint F beyond it (1: every line equally likely kept; large: an LRU cliff).
    #[serde(default = "one")]
    pub l1_sharpness: f64,
    /// The L2 capacity a chase from one SM sees (the near half, mostly), bytes; 0: `l2_bytes`.
    #[serde(default)]
    pub l2_effective_bytes: u64,
    /// As `l1_sharpness`, for the L2 and `l2_effective_bytes`.
    #[serde(default = "one")]
    pub l2_sharpness: f64,
    /// Share of the lines a chase past `l2_effective_bytes` still finds in the L2 (those held
    /// in the far half), up to `l2_far_bytes`; 0: none.
    #[serde(default)]
    pub l2_far_share: f64,
    /// Footprint up to which the far half keeps serving its share, bytes.
    #[serde(default)]
    pub l2_far_bytes: u64,
    /// The footprints calibration measured; reports exclude them.
    pub calibration_bytes: Vec<u64>,
}

fn one() -> f64 {
    1.0
}

/// Global memory as the coalescing model sees it: reads are served in `sector_bytes` sectors
/// of `line_bytes` lines; the L2 holds `l2_bytes`; DRAM is read in `dram_fetch_bytes` pieces.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CoalescingParams {
    /// Where these numbers came from.
    pub source: String,
    /// Sector size, bytes (32 on every architecture since compute capability 5.0).
    pub sector_bytes: u32,
    /// Cache line size, bytes (128).
    pub line_bytes: u32,
    /// L2 capacity, bytes (CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE).
    pub l2_bytes: u64,
    /// Bytes DRAM delivers for each piece the L2 asks for (fitted: 32, 64 or 128).
    pub dram_fetch_bytes: u32,
    /// Sustained DRAM read bandwidth for the bytes fetched, 10^9 B/s.
    pub dram_gb_per_s: f64,
    /// DRAM page (row) size, bytes: a read opens every page it touches.
    pub dram_page_bytes: u32,
    /// Rate at which DRAM opens the pages a read touches, in page bytes per second (10^9):
    /// the cost sparse reads pay beyond the bytes they fetch.
    pub dram_page_gb_per_s: f64,
    /// Sustained L2 read bandwidth, 10^9 B/s.
    pub l2_gb_per_s: f64,
    /// 128-byte line requests the L2 answers per second, 10^9: what bounds reads that touch
    /// one sector in each of many lines.
    pub l2_lines_g_per_s: f64,
    /// Time one warp waits for a load served by DRAM, nanoseconds, when few are in flight.
    pub dram_latency_ns: f64,
    /// The same for a load served by the L2.
    pub l2_latency_ns: f64,
    /// What each further 128-byte line one warp's load touches adds to its latency, nanoseconds.
    pub line_latency_ns: f64,
    /// How the latency bound and the bandwidth bound combine: time = (lat^p + bw^p)^(1/p).
    pub overlap_exponent: f64,
    /// Registers per thread of the read kernel (cuFuncGetAttribute), for its occupancy.
    pub read_kernel_registers: u32,
    /// Fixed cost of the read kernel's launch, microseconds.
    pub launch_us: f64,
    /// The (width, stride, bytes) cases calibration measured; reports exclude them.
    pub calibration_cases: Vec<(u32, u32, u64)>,
}

/// Shared memory: `banks` banks of `bank_bytes` each; a warp access that needs `w` wavefronts
/// (passes over the banks) takes `base_cycles + (w - 1) x wavefront_cycles` in a dependent chain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BankParams {
    /// Where these numbers came from.
    pub source: String,
    /// Banks (32 on every architecture since compute capability 2.0).
    pub banks: u32,
    /// Bytes per bank word.
    pub bank_bytes: u32,
    /// Cycles of one dependent 4-byte shared load that needs one wavefront.
    pub base_cycles: f64,
    /// Cycles each further wavefront adds.
    pub wavefront_cycles: f64,
    /// The (width, stride) cases calibration measured; reports exclude them from validation.
    pub calibration_cases: Vec<(u32, u32)>,
}

/// What one SM has and how it hands it out: the occupancy calculator's inputs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SmParams {
    /// Where these numbers came from.
    pub source: String,
    /// Threads per warp.
    pub warp_size: u32,
    /// Resident threads per SM.
    pub max_threads_per_sm: u32,
    /// Threads per block.
    pub max_threads_per_block: u32,
    /// Resident blocks per SM.
    pub max_blocks_per_sm: u32,
    /// 32-bit registers per SM.
    pub registers_per_sm: u32,
    /// 32-bit registers one block may use.
    pub registers_per_block: u32,
    /// Registers one thread may use.
    pub max_registers_per_thread: u32,
    /// Registers are handed to a warp in multiples of this.
    pub register_allocation_unit: u32,
    /// Warp schedulers (each with its own register file slice).
    pub sub_partitions: u32,
    /// Shared memory per SM at the largest carveout, bytes.
    pub shared_bytes_per_sm: u32,
    /// Shared memory per block without opting in, bytes.
    pub shared_bytes_per_block: u32,
    /// Shared memory per block after opting in (cuFuncSetAttribute), bytes.
    pub shared_bytes_per_block_optin: u32,
    /// Shared memory the driver reserves for each resident block, bytes.
    pub reserved_shared_bytes_per_block: u32,
    /// Shared memory is handed to a block in multiples of this, bytes.
    pub shared_allocation_unit: u32,
}

/// The GPU a profile describes, as the driver reported it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileDevice {
    /// Marketing name, e.g. "NVIDIA H100 80GB HBM3".
    pub name: String,
    /// "major.minor".
    pub compute_capability: String,
    /// Streaming multiprocessors.
    pub multiprocessors: u32,
    /// Device memory in bytes.
    pub memory_bytes: u64,
    /// Copy engines that run concurrently with kernels (CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT).
    pub copy_engines: u32,
}

/// A copy that the copy engine does straight from or to pinned memory:
/// `time = latency_us + bytes / gb_per_s`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkParams {
    /// Fixed cost per copy, microseconds (issue, DMA setup, completion).
    pub latency_us: f64,
    /// Sustained bandwidth, 10^9 bytes per second.
    pub gb_per_s: f64,
}

/// A pageable copy, which the driver pipelines through pinned staging buffers:
/// the host copies one staging chunk while the copy engine moves the previous one.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StagedParams {
    /// Fixed cost per copy, microseconds.
    pub latency_us: f64,
    /// Bandwidth of the host-side copy between pageable and staging memory, 10^9 B/s.
    pub host_gb_per_s: f64,
    /// Size of one staging chunk, bytes.
    pub staging_bytes: u64,
}

/// Transfer parameters, fitted by `vramlab calibrate` on sizes the transfer suite never uses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TransferParams {
    /// Where these numbers came from (command, machine, date).
    pub source: String,
    /// The copy sizes calibration measured; reports exclude them from validation.
    pub calibration_bytes: Vec<u64>,
    /// Cost of launching one kernel behind another on a stream, microseconds.
    pub kernel_launch_us: f64,
    /// Pinned uploads.
    pub h2d_pinned: LinkParams,
    /// Pinned downloads.
    pub d2h_pinned: LinkParams,
    /// Pageable uploads (the DMA stage uses `h2d_pinned`'s bandwidth).
    pub h2d_pageable: StagedParams,
    /// Pageable downloads (the DMA stage uses `d2h_pinned`'s bandwidth).
    pub d2h_pageable: StagedParams,
}

struct BuiltinProfile {
    name: &'static str,
    text: &'static str,
}

const BUILTIN_PROFILES: &[BuiltinProfile] = &[
    BuiltinProfile {
        name: "h100",
        text: include_str!("../profiles/h100.toml"),
    },
    BuiltinProfile {
        name: "h200",
        text: include_str!("../profiles/h200.toml"),
    },
];

/// Keys whose value may be zero: fixed costs and latencies that a device may not have, and the
/// driver's shared-memory reservation. Every other number in a profile sizes, divides or
/// scales something, and must be positive.
const ZERO_ALLOWED: &[&str] = &[
    "latency_us",
    "kernel_launch_us",
    "launch_us",
    "fixed_us",
    "reserved_shared_bytes_per_block",
    "overhead_registers",
    "wavefront_cycles",
    "warm_per_extra",
    "cold_per_extra",
];

/// Upper bounds on counts that size what a model allocates or loops over.
const UPPER_BOUNDS: &[(&str, &str, f64)] = &[
    ("banks", "banks", 1024.0),
    ("banks", "bank_bytes", 1024.0),
    ("coalescing", "sector_bytes", 1_048_576.0),
    ("coalescing", "line_bytes", 1_048_576.0),
    ("coalescing", "dram_fetch_bytes", 1_048_576.0),
    ("coalescing", "dram_page_bytes", 1_048_576.0),
    ("sm", "warp_size", 1024.0),
    ("sm", "sub_partitions", 1024.0),
    ("device", "multiprocessors", 65_536.0),
    ("device", "copy_engines", 1024.0),
];

/// Every number in a profile, in every section: finite, not negative, positive unless its key
/// may be zero, and within the bounds above; the error names the file, section, key and value.
fn check_numbers(origin: &str, section: &str, value: &toml::Value) -> Result<()> {
    match value {
        toml::Value::Table(table) => {
            for (key, value) in table {
                let inner = if section.is_empty() {
                    key.clone()
                } else {
                    format!("{section}.{key}")
                };
                match value {
                    toml::Value::Table(_) | toml::Value::Array(_) => check_numbers(origin, &inner, value)?,
                    _ => check_number(origin, section, key, value)?,
                }
            }
        }
        toml::Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                match item {
                    // Arrays of tables (growth costs): each table's keys, named by index.
                    toml::Value::Table(_) | toml::Value::Array(_) => {
                        check_numbers(origin, &format!("{section}[{i}]"), item)?
                    }
                    // Calibration cases and sizes: finite and not negative; 0 is a case (stride 0).
                    toml::Value::Float(x) if !(x.is_finite() && *x >= 0.0) => {
                        return Err(Error::Invalid(format!(
                            "{origin}: {section}[{i}] = {x}: must be >= 0 (and finite)"
                        )))
                    }
                    toml::Value::Integer(x) if *x < 0 => {
                        return Err(Error::Invalid(format!("{origin}: {section}[{i}] = {x}: must be >= 0")))
                    }
                    _ => {}
                }
            }
        }
        _ => {}
    }
    Ok(())
}

fn check_number(origin: &str, section: &str, key: &str, value: &toml::Value) -> Result<()> {
    let x = match value {
        toml::Value::Integer(i) => *i as f64,
        toml::Value::Float(f) => *f,
        _ => return Ok(()),
    };
    let place = if section.is_empty() {
        key.to_string()
    } else {
        format!("[{section}] {key}")
    };
    // A spread of 0 is a measurement (every repeat agreed), not a missing value.
    let zero_ok = ZERO_ALLOWED.contains(&key) || section == "uncertainty.spread";
    if !x.is_finite() || x < 0.0 || (x == 0.0 && !zero_ok) {
        let want = if zero_ok {
            ">= 0 (and finite)"
        } else {
            "positive (and finite)"
        };
        return Err(Error::Invalid(format!("{origin}: {place} = {value}: must be {want}")));
    }
    let top = section.split(['.', '[']).next().unwrap_or_default();
    if let Some((_, _, max)) = UPPER_BOUNDS.iter().find(|(s, k, _)| *s == top && *k == key) {
        if x > *max {
            return Err(Error::Invalid(format!(
                "{origin}: {place} = {value}: must be at most {max}"
            )));
        }
    }
    Ok(())
}

/// Section (and calibration part) names from before each family had one name in every layer,
/// and the family's name that replaced them.
pub const FORMER_NAMES: [(&str, &str); 2] = [("shared", "banks"), ("global", "coalescing")];

/// `text` with the old section headers (`[shared]`, `[global]`) under the families' names, line
/// for line, so that old profiles read, and are checked, as new ones.
fn with_family_section_names(text: &str) -> String {
    let renamed = |line: &str| -> Option<String> {
        let header = line.trim_start().strip_prefix('[')?;
        FORMER_NAMES.iter().find_map(|(old, new)| {
            let rest = header.strip_prefix(old)?;
            (rest.starts_with(']') || rest.starts_with('.')).then(|| format!("[{new}{rest}"))
        })
    };
    let mut out: String = text
        .lines()
        .map(|line| renamed(line).unwrap_or_else(|| line.to_string()))
        .collect::<Vec<_>>()
        .join("\n");
    if text.ends_with('\n') {
        out.push('\n');
    }
    out
}

/// The profile `vramlab run` uses when none is named.
pub const DEFAULT_PROFILE: &str = "h100";

/// The parts of a profile that belong to the machine a GPU sits in rather than to the GPU model:
/// host memory and the PCIe link (copies; pageable ones go through host memory), and the driver
/// (growing buffers, managed-memory migration); the [`crate::CALIBRATION_PARTS`] marked
/// `machine`. The others (banks, coalescing, latency, constant, spills, the SM's limits) are the GPU
/// model's own and travel with it. Measured on freshly started machines (issue 13), built-in
/// profiles held to a few percent for the GPU's parts and missed by 6-26% median for these.
pub fn machine_parts() -> Vec<&'static str> {
    crate::CALIBRATION_PARTS
        .iter()
        .filter(|p| p.machine)
        .map(|p| p.name)
        .collect()
}

/// The host this process runs on (Linux's hostname; `None` where it cannot be read).
pub fn this_machine() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|name| name.trim().to_string())
        .filter(|name| !name.is_empty())
}

impl Profile {
    /// Why measurements on this machine may not match the profile's machine parts: the profile
    /// was measured elsewhere (or is built in). `None` when it was calibrated here.
    pub fn machine_mismatch(&self) -> Option<String> {
        let here = this_machine();
        if self.machine.is_some() && self.machine == here {
            return None;
        }
        let origin = match &self.machine {
            Some(machine) => format!("was calibrated on {machine}"),
            None => "is built in (calibrated on another machine)".to_string(),
        };
        Some(format!(
            "profile '{}' {origin}, not on {}: its machine parts ({}) describe that machine's host, PCIe link and driver; `vramlab calibrate --part machine --into PROFILE` re-measures them here",
            self.name,
            here.as_deref().unwrap_or("this machine"),
            machine_parts().join(", ")
        ))
    }

    /// Parses a profile's TOML; `origin` names it in errors.
    pub fn parse(origin: &str, text: &str) -> Result<Profile> {
        let text = &with_family_section_names(text);
        let profile: Profile = toml::from_str(text).map_err(|e| Error::from_toml(origin, text, &e))?;
        let table: toml::Table = toml::from_str(text).map_err(|e| Error::from_toml(origin, text, &e))?;
        check_numbers(origin, "", &toml::Value::Table(table))?;
        profile.validate(origin)?;
        Ok(profile)
    }

    /// A built-in profile by name, or a profile file by path (anything with a '/' or ending in .toml).
    pub fn find(name_or_path: &str) -> Result<Profile> {
        if name_or_path.contains('/') || name_or_path.ends_with(".toml") {
            let path = Path::new(name_or_path);
            let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
            return Profile::parse(name_or_path, &text);
        }
        let builtin = BUILTIN_PROFILES
            .iter()
            .find(|p| p.name == name_or_path)
            .ok_or_else(|| Error::Unknown {
                kind: "profile",
                name: name_or_path.to_string(),
                valid: Profile::builtin_names().into_iter().map(String::from).collect(),
            })?;
        Profile::parse(&format!("builtin:{}", builtin.name), builtin.text)
    }

    /// Names of the profiles compiled into vramlab.
    pub fn builtin_names() -> Vec<&'static str> {
        BUILTIN_PROFILES.iter().map(|p| p.name).collect()
    }

    /// The profile as TOML, as `vramlab calibrate` writes it.
    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).expect("a profile always serializes")
    }

    fn validate(&self, origin: &str) -> Result<()> {
        if let Some(u) = &self.uncertainty {
            for (family, &spread) in &u.spread {
                if crate::Family::from_name(family).is_none() {
                    return Err(Error::Invalid(format!(
                        "{origin}: [uncertainty.spread] {family}: no such family"
                    )));
                }
                if !(0.0..=10.0).contains(&spread) {
                    return Err(Error::Invalid(format!(
                        "{origin}: [uncertainty.spread] {family} = {spread}: expected a fraction from 0 to 10"
                    )));
                }
            }
        }
        let t = &self.transfer;
        let positive = [
            ("transfer.h2d_pinned.gb_per_s", t.h2d_pinned.gb_per_s),
            ("transfer.d2h_pinned.gb_per_s", t.d2h_pinned.gb_per_s),
            ("transfer.h2d_pageable.host_gb_per_s", t.h2d_pageable.host_gb_per_s),
            ("transfer.d2h_pageable.host_gb_per_s", t.d2h_pageable.host_gb_per_s),
            (
                "transfer.h2d_pageable.staging_bytes",
                t.h2d_pageable.staging_bytes as f64,
            ),
            (
                "transfer.d2h_pageable.staging_bytes",
                t.d2h_pageable.staging_bytes as f64,
            ),
        ];
        let non_negative = [
            ("transfer.kernel_launch_us", t.kernel_launch_us),
            ("transfer.h2d_pinned.latency_us", t.h2d_pinned.latency_us),
            ("transfer.d2h_pinned.latency_us", t.d2h_pinned.latency_us),
            ("transfer.h2d_pageable.latency_us", t.h2d_pageable.latency_us),
            ("transfer.d2h_pageable.latency_us", t.d2h_pageable.latency_us),
        ];
        for (name, value) in positive {
            if !(value.is_finite() && value > 0.0) {
                return Err(Error::Invalid(format!("{origin}: {name} = {value}: must be positive")));
            }
        }
        for (name, value) in non_negative {
            if !(value.is_finite() && value >= 0.0) {
                return Err(Error::Invalid(format!("{origin}: {name} = {value}: must be >= 0")));
            }
        }
        let sm = &self.sm;
        for (name, value) in [
            ("sm.warp_size", sm.warp_size),
            ("sm.max_threads_per_sm", sm.max_threads_per_sm),
            ("sm.max_threads_per_block", sm.max_threads_per_block),
            ("sm.max_blocks_per_sm", sm.max_blocks_per_sm),
            ("sm.registers_per_sm", sm.registers_per_sm),
            ("sm.registers_per_block", sm.registers_per_block),
            ("sm.max_registers_per_thread", sm.max_registers_per_thread),
            ("sm.register_allocation_unit", sm.register_allocation_unit),
            ("sm.sub_partitions", sm.sub_partitions),
            ("sm.shared_bytes_per_sm", sm.shared_bytes_per_sm),
            ("sm.shared_bytes_per_block", sm.shared_bytes_per_block),
            ("sm.shared_allocation_unit", sm.shared_allocation_unit),
        ] {
            if value == 0 {
                return Err(Error::Invalid(format!("{origin}: {name} = 0: must be positive")));
            }
        }
        if let Some(shared) = &self.banks {
            // Written so that NaN fails too.
            let physical = shared.base_cycles > 0.0 && shared.wavefront_cycles >= 0.0;
            if shared.banks == 0 || shared.bank_bytes == 0 || !physical {
                return Err(Error::Invalid(format!(
                    "{origin}: [banks] needs banks, bank_bytes and base_cycles > 0 and wavefront_cycles >= 0"
                )));
            }
        }
        if let Some(global) = &self.coalescing {
            for (name, value) in [
                ("coalescing.dram_gb_per_s", global.dram_gb_per_s),
                ("coalescing.dram_page_gb_per_s", global.dram_page_gb_per_s),
                ("coalescing.l2_gb_per_s", global.l2_gb_per_s),
                ("coalescing.l2_lines_g_per_s", global.l2_lines_g_per_s),
                ("coalescing.dram_latency_ns", global.dram_latency_ns),
                ("coalescing.l2_latency_ns", global.l2_latency_ns),
                ("coalescing.line_latency_ns", global.line_latency_ns),
            ] {
                if !(value.is_finite() && value > 0.0) {
                    return Err(Error::Invalid(format!("{origin}: {name} = {value}: must be positive")));
                }
            }
            if global.overlap_exponent.is_nan() || global.overlap_exponent < 1.0 {
                return Err(Error::Invalid(format!(
                    "{origin}: coalescing.overlap_exponent = {}: must be at least 1",
                    global.overlap_exponent
                )));
            }
        }
        if self.device.copy_engines == 0 {
            return Err(Error::Invalid(format!(
                "{origin}: device.copy_engines = 0: must be at least 1"
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_profile_written_before_the_rename_reads_as_the_same_profile() {
        let text = BUILTIN_PROFILES.iter().find(|p| p.name == "h100").unwrap().text;
        let old = text.replace("[banks]", "[shared]").replace("[coalescing]", "[global]");
        assert_ne!(old, text);
        let builtin = Profile::parse("new", text).unwrap();
        assert_eq!(Profile::parse("old", &old).unwrap().to_toml(), builtin.to_toml());
        assert!(builtin.to_toml().contains("[banks]") && !builtin.to_toml().contains("[shared]"));
        // Old names are checked as the new ones are, and named by their new names.
        let too_many = old.replacen("banks = 32", "banks = 4294967295", 1);
        let err = Profile::parse("old", &too_many).unwrap_err().to_string();
        assert!(
            err.contains("[banks] banks = 4294967295: must be at most 1024"),
            "{err}"
        );
        let parts = crate::calibration_parts("global").unwrap();
        assert_eq!(parts.iter().map(|p| p.name).collect::<Vec<_>>(), ["coalescing"]);
    }

    #[test]
    fn a_profile_from_another_machine_says_so() {
        let builtin = Profile::find("h100").unwrap();
        let why = builtin
            .machine_mismatch()
            .expect("a built-in profile comes from elsewhere");
        assert!(
            why.contains("built in") && why.contains("transfer, growth, migration"),
            "{why}"
        );
        let elsewhere = Profile {
            machine: Some("some-other-host".into()),
            ..builtin.clone()
        };
        assert!(elsewhere
            .machine_mismatch()
            .unwrap()
            .contains("calibrated on some-other-host"));
        if let Some(here) = this_machine() {
            let local = Profile {
                machine: Some(here),
                ..builtin
            };
            assert_eq!(local.machine_mismatch(), None);
        }
    }

    /// Every section, every kind of bad number: one line naming the file, section, key and value.
    #[test]
    fn bad_numbers_anywhere_are_refused_by_name() {
        let text = BUILTIN_PROFILES.iter().find(|p| p.name == "h100").unwrap().text;
        let replace_line = |prefix: &str, new: &str| -> String {
            let mut done = false;
            text.lines()
                .map(|line| {
                    if !done && line.starts_with(prefix) {
                        done = true;
                        new.to_string()
                    } else {
                        line.to_string()
                    }
                })
                .collect::<Vec<_>>()
                .join("\n")
        };
        for (prefix, bad, needle) in [
            (
                "sector_bytes =",
                "sector_bytes = 0",
                "[coalescing] sector_bytes = 0: must be positive (and finite)",
            ),
            ("sector_bytes =", "sector_bytes = -0", "[coalescing] sector_bytes = 0"),
            (
                "banks =",
                "banks = 4294967295",
                "[banks] banks = 4294967295: must be at most 1024",
            ),
            (
                "multiprocessors =",
                "multiprocessors = 0",
                "[device] multiprocessors = 0",
            ),
            ("warm_cycles =", "warm_cycles = nan", "[constant] warm_cycles = nan"),
            ("dram_cycles =", "dram_cycles = -8e21", "[latency] dram_cycles = -8"),
            (
                "instruction_ns =",
                "instruction_ns = inf",
                "[spills] instruction_ns = inf",
            ),
            (
                "us_per_gib =",
                "us_per_gib = -1.0",
                "[growth.costs[0]] us_per_gib = -1.0",
            ),
            (
                "gb_per_s = 6.5",
                "gb_per_s = 0.0",
                "[migration.on_demand] gb_per_s = 0.0",
            ),
        ] {
            let broken = replace_line(prefix, bad);
            assert_ne!(broken, text, "{prefix} found");
            let err = Profile::parse("p.toml", &broken).unwrap_err().to_string();
            assert!(
                err.starts_with("p.toml: ") && err.contains(needle) && !err.contains('\n'),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn builtin_profiles_parse_and_round_trip() {
        for name in Profile::builtin_names() {
            let profile = Profile::find(name).unwrap();
            assert_eq!(profile.name, name);
            let again = Profile::parse("again", &profile.to_toml()).unwrap();
            assert_eq!(again, profile);
        }
    }

    #[test]
    fn every_profile_file_is_built_in_and_fully_measured() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/profiles");
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
            let profile = Profile::find(&stem).unwrap_or_else(|e| panic!("{} is not built in: {e}", path.display()));
            assert!(
                profile.banks.is_some()
                    && profile.coalescing.is_some()
                    && profile.latency.is_some()
                    && profile.constant.is_some()
                    && profile.growth.is_some()
                    && profile.spills.is_some()
                    && profile.migration.is_some(),
                "{stem}: a part is missing"
            );
        }
    }

    #[test]
    fn unknown_profile_lists_valid_names() {
        let err = Profile::find("a100").unwrap_err().to_string();
        assert!(err.contains("a100") && err.contains("h100"), "{err}");
    }

    #[test]
    fn rejects_non_physical_parameters() {
        let text = Profile::find("h100").unwrap().to_toml();
        let bad = text.replacen("gb_per_s = ", "gb_per_s = -", 1);
        let err = Profile::parse("bad.toml", &bad).unwrap_err().to_string();
        assert!(err.contains("bad.toml") && err.contains("must be positive"), "{err}");
    }
}
