//! Experiment families: which parameters each takes, and the typed point a backend runs.

use serde::{Deserialize, Serialize};

use crate::params::{Metrics, ParamValue, Params};

/// The kinds of experiment vramlab knows how to predict and measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    /// One host <-> device copy of a given size.
    Transfer,
    /// A pinned upload split into chunks over several streams, each chunk followed by a kernel.
    Overlap,
    /// How many blocks of a kernel fit on one SM, given its registers, threads and shared memory.
    Occupancy,
    /// One warp's shared-memory load: bank conflicts, broadcast, and what they cost.
    Banks,
    /// Global-memory reads with a stride, offset and lane mask: sectors, lines and bandwidth.
    Coalescing,
    /// One thread chasing pointers through a footprint: the L1, L2 and DRAM latency ladder.
    Latency,
    /// A warp reading 1..32 distinct constant-memory addresses, from a warm or cold cache.
    Constant,
    /// A device buffer doubled to a size by one of three strategies, with or without reserving
    /// up front: time per grow and peak device memory.
    Growth,
    /// A loop keeping `live` values in registers, compiled with a register cap: what spills to
    /// local memory and what the local traffic costs per iteration.
    Spills,
    /// A kernel reading managed memory last written by the host: pages migrated on demand
    /// (faults) or prefetched first.
    Migration,
    /// One GPU reading another's memory: a VMM allocation mapped for both, or a cuMemAlloc
    /// buffer with peer access enabled.
    Peer,
}

/// How a parameter's values are written and checked.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ParamKind {
    /// A positive byte count; accepts "256 MiB" and `log2` ranges.
    Size,
    /// A byte count that may be zero, at most `max`.
    Bytes { max: u64 },
    /// One of a few whole numbers.
    OneOf(&'static [i64]),
    /// A whole number in `min..=max`.
    Count { min: i64, max: i64 },
    /// A non-negative real number.
    NonNegative,
    /// One word of a fixed set.
    Choice(&'static [&'static str]),
}

/// One parameter a family takes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ParamSpec {
    pub(crate) name: &'static str,
    pub(crate) kind: ParamKind,
    pub(crate) default: Option<&'static str>,
}

const DIRECTIONS: &[&str] = &["h2d", "d2h"];
const HOST_MEMORY: &[&str] = &["pinned", "pageable"];

const fn spec(name: &'static str, kind: ParamKind, default: Option<&'static str>) -> ParamSpec {
    ParamSpec { name, kind, default }
}

const TRANSFER_PARAMS: &[ParamSpec] = &[
    spec("direction", ParamKind::Choice(DIRECTIONS), None),
    spec("host", ParamKind::Choice(HOST_MEMORY), Some("pinned")),
    spec("bytes", ParamKind::Size, None),
];

const OVERLAP_PARAMS: &[ParamSpec] = &[
    spec("bytes", ParamKind::Size, None),
    spec("chunks", ParamKind::Count { min: 1, max: 4096 }, None),
    spec("streams", ParamKind::Count { min: 1, max: 64 }, None),
    spec("kernel_us", ParamKind::NonNegative, None),
];

const OCCUPANCY_PARAMS: &[ParamSpec] = &[
    // CUDA's per-block thread limit on every architecture since compute capability 2.0.
    spec("threads", ParamKind::Count { min: 1, max: 1024 }, None),
    // ptxas accepts --maxrregcount up to 255.
    spec("registers", ParamKind::Count { min: 1, max: 255 }, None),
    // Static __shared__ arrays are limited to 48 KiB.
    spec("static_shared", ParamKind::Bytes { max: 48 << 10 }, Some("0")),
    spec("dynamic_shared", ParamKind::Bytes { max: 1 << 20 }, Some("0")),
];

const BANK_PARAMS: &[ParamSpec] = &[
    // Shared loads come in 32-, 64- and 128-bit widths.
    spec("width", ParamKind::OneOf(&[4, 8, 16]), Some("4")),
    // Lane i loads element i x stride; 0 makes every lane load the same element.
    spec("stride", ParamKind::Count { min: 0, max: 64 }, None),
];

const CACHE_STATES: &[&str] = &["warm", "cold"];

const CONSTANT_PARAMS: &[ParamSpec] = &[
    // How many different words one warp access names (1 = every lane the same: a broadcast).
    spec("distinct", ParamKind::Count { min: 1, max: 32 }, None),
    // warm: the same words every access; cold: every access misses the SM's constant cache.
    spec("cache", ParamKind::Choice(CACHE_STATES), Some("warm")),
];

const GROWTH_STRATEGIES: &[&str] = &["copy", "managed", "vmm"];
const YES_NO: &[&str] = &["no", "yes"];

const GROWTH_PARAMS: &[ParamSpec] = &[
    // copy: cuMemAlloc the new size, copy, free the old; managed: managed memory prefetched to
    // the device; vmm: physical chunks mapped into a reserved virtual range.
    spec("strategy", ParamKind::Choice(GROWTH_STRATEGIES), None),
    // yes: room for the largest size is set aside before the first grow.
    spec("reserve", ParamKind::Choice(YES_NO), Some("no")),
    // The size the buffer is doubled to (from half of it).
    spec("bytes", ParamKind::Size, None),
];

const MIGRATION_MODES: &[&str] = &["on-demand", "prefetch"];

const MIGRATION_PARAMS: &[ParamSpec] = &[
    // Managed bytes the host writes and a kernel then reads.
    spec("bytes", ParamKind::Size, None),
    // on-demand: the kernel's page faults move the pages; prefetch: cuMemPrefetchAsync first.
    spec("mode", ParamKind::Choice(MIGRATION_MODES), None),
];

const PEER_MAPPINGS: &[&str] = &["vmm", "peer-access"];

const PEER_PARAMS: &[ParamSpec] = &[
    // Bytes of the first GPU's memory the second reads.
    spec("bytes", ParamKind::Size, None),
    // vmm: cuMemCreate on the first GPU, cuMemSetAccess for both; peer-access: cuMemAlloc and
    // cuCtxEnablePeerAccess.
    spec("mapping", ParamKind::Choice(PEER_MAPPINGS), None),
];

const SPILL_PARAMS: &[ParamSpec] = &[
    // Floats each thread keeps live across the loop.
    spec("live", ParamKind::Count { min: 8, max: 160 }, None),
    // The register cap the kernel is compiled with (__maxnreg__); ptxas needs at least 16.
    spec("registers", ParamKind::Count { min: 16, max: 255 }, None),
];

const LATENCY_PARAMS: &[ParamSpec] = &[
    // The chase visits one node per 128-byte line of this many bytes, in a random cycle.
    spec("bytes", ParamKind::Size, None),
];

const COALESCING_PARAMS: &[ParamSpec] = &[
    // Global loads come in 8-, 16-, 32-, 64- and 128-bit widths.
    spec("width", ParamKind::OneOf(&[1, 2, 4, 8, 16]), Some("4")),
    // Lane i reads element offset + i x stride; a stride of 0 would be a broadcast, not a sweep.
    spec("stride", ParamKind::Count { min: 1, max: 64 }, None),
    spec("offset", ParamKind::Count { min: 0, max: 31 }, Some("0")),
    // Lanes 0 .. active_lanes - 1 read; the rest of the warp is masked off.
    spec("active_lanes", ParamKind::Count { min: 1, max: 32 }, Some("32")),
    // The array every warp of the grid reads through, once.
    spec("bytes", ParamKind::Size, Some("1 GiB")),
    // Shared memory each block of the read kernel asks for, only to limit how many blocks an
    // SM holds (occupancy); the kernel does not use it.
    spec("dynamic_shared", ParamKind::Bytes { max: 227 << 10 }, Some("0")),
];

/// The read kernel's launch: this many blocks per SM of [`READ_KERNEL_THREADS`] threads, in a
/// grid-stride loop, so with nothing else limiting occupancy every SM holds 64 warps.
pub const READ_KERNEL_BLOCKS_PER_SM: u32 = 8;
/// Threads per block of the read kernel.
pub const READ_KERNEL_THREADS: u32 = 256;

/// What the rest of vramlab needs to know of a family, one row each: its name, parameters,
/// axis, compared metric and whether its model reads the machine's parts of a profile.
struct FamilyInfo {
    family: Family,
    name: &'static str,
    params: &'static [ParamSpec],
    x_param: &'static str,
    primary_metric: &'static str,
    uses_machine_parts: bool,
}

/// Every family's row, in the enum's order (a test holds it so).
const FAMILIES: [FamilyInfo; 11] = [
    FamilyInfo {
        family: Family::Transfer,
        name: "transfer",
        params: TRANSFER_PARAMS,
        x_param: "bytes",
        primary_metric: "gb_per_s",
        uses_machine_parts: true,
    },
    FamilyInfo {
        family: Family::Overlap,
        name: "overlap",
        params: OVERLAP_PARAMS,
        x_param: "streams",
        primary_metric: "speedup",
        uses_machine_parts: true,
    },
    FamilyInfo {
        family: Family::Occupancy,
        name: "occupancy",
        params: OCCUPANCY_PARAMS,
        x_param: "threads",
        primary_metric: "blocks_per_sm",
        uses_machine_parts: false,
    },
    FamilyInfo {
        family: Family::Banks,
        name: "banks",
        params: BANK_PARAMS,
        x_param: "stride",
        primary_metric: "cycles",
        uses_machine_parts: false,
    },
    FamilyInfo {
        family: Family::Coalescing,
        name: "coalescing",
        params: COALESCING_PARAMS,
        x_param: "stride",
        primary_metric: "gb_per_s",
        uses_machine_parts: false,
    },
    FamilyInfo {
        family: Family::Latency,
        name: "latency",
        params: LATENCY_PARAMS,
        x_param: "bytes",
        primary_metric: "cycles",
        uses_machine_parts: false,
    },
    FamilyInfo {
        family: Family::Constant,
        name: "constant",
        params: CONSTANT_PARAMS,
        x_param: "distinct",
        primary_metric: "cycles",
        uses_machine_parts: false,
    },
    FamilyInfo {
        family: Family::Growth,
        name: "growth",
        params: GROWTH_PARAMS,
        x_param: "bytes",
        primary_metric: "grow_us",
        uses_machine_parts: true,
    },
    FamilyInfo {
        family: Family::Spills,
        name: "spills",
        params: SPILL_PARAMS,
        x_param: "registers",
        primary_metric: "ns_per_iteration",
        uses_machine_parts: false,
    },
    FamilyInfo {
        family: Family::Migration,
        name: "migration",
        params: MIGRATION_PARAMS,
        x_param: "bytes",
        primary_metric: "gb_per_s",
        uses_machine_parts: true,
    },
    FamilyInfo {
        family: Family::Peer,
        name: "peer",
        params: PEER_PARAMS,
        x_param: "bytes",
        primary_metric: "gb_per_s",
        uses_machine_parts: false,
    },
];

impl Family {
    /// Every family, in the order `vramlab list` shows them.
    pub const ALL: [Family; 11] = {
        let mut all = [Family::Transfer; 11];
        let mut i = 0;
        while i < FAMILIES.len() {
            all[i] = FAMILIES[i].family;
            i += 1;
        }
        all
    };

    fn info(self) -> &'static FamilyInfo {
        &FAMILIES[self as usize]
    }

    /// Whether its model reads a profile's machine parts ([`crate::machine_parts`]): copies,
    /// copy/compute overlap, buffer growth, managed migration.
    pub fn uses_machine_parts(self) -> bool {
        self.info().uses_machine_parts
    }

    /// The name used in experiment files.
    pub fn name(self) -> &'static str {
        self.info().name
    }

    /// Looks a family up by the name used in experiment files.
    pub fn from_name(name: &str) -> Option<Family> {
        Family::ALL.into_iter().find(|f| f.name() == name)
    }

    pub(crate) fn params(self) -> &'static [ParamSpec] {
        self.info().params
    }

    /// The parameter plotted along the x axis.
    pub fn x_param(self) -> &'static str {
        self.info().x_param
    }

    /// The metric that reports compare between prediction and measurement.
    pub fn primary_metric(self) -> &'static str {
        self.info().primary_metric
    }

    /// Builds the typed point from checked parameters.
    pub(crate) fn workload(self, params: &Params) -> Workload {
        let text = |name: &str| match &params[name] {
            ParamValue::Text(t) => t.clone(),
            other => other.to_string(),
        };
        let int = |name: &str| match params[name] {
            ParamValue::Int(v) => v,
            ParamValue::Float(v) => v as i64,
            ParamValue::Text(_) => unreachable!("checked as a number"),
        };
        let float = |name: &str| params[name].as_f64().expect("checked as a number");
        match self {
            Family::Transfer => Workload::Transfer(TransferPoint {
                direction: if text("direction") == "h2d" {
                    Direction::HostToDevice
                } else {
                    Direction::DeviceToHost
                },
                host: if text("host") == "pinned" {
                    HostMemory::Pinned
                } else {
                    HostMemory::Pageable
                },
                bytes: int("bytes") as u64,
            }),
            Family::Overlap => Workload::Overlap(OverlapPoint {
                bytes: int("bytes") as u64,
                chunks: int("chunks") as u32,
                streams: int("streams") as u32,
                kernel_us: float("kernel_us"),
            }),
            Family::Occupancy => Workload::Occupancy(OccupancyPoint {
                threads: int("threads") as u32,
                registers: int("registers") as u32,
                static_shared: int("static_shared") as u32,
                dynamic_shared: int("dynamic_shared") as u32,
            }),
            Family::Banks => Workload::Banks(BankPoint {
                width: int("width") as u32,
                stride: int("stride") as u32,
            }),
            Family::Coalescing => Workload::Coalescing(CoalescingPoint {
                width: int("width") as u32,
                stride: int("stride") as u32,
                offset: int("offset") as u32,
                active_lanes: int("active_lanes") as u32,
                bytes: int("bytes") as u64,
                dynamic_shared: int("dynamic_shared") as u32,
            }),
            Family::Latency => Workload::Latency(LatencyPoint {
                bytes: int("bytes") as u64,
            }),
            Family::Peer => Workload::Peer(PeerPoint {
                bytes: int("bytes") as u64,
                vmm: text("mapping") == "vmm",
            }),
            Family::Migration => Workload::Migration(MigrationPoint {
                bytes: int("bytes") as u64,
                prefetch: text("mode") == "prefetch",
            }),
            Family::Spills => Workload::Spills(SpillPoint {
                live: int("live") as u32,
                registers: int("registers") as u32,
            }),
            Family::Growth => Workload::Growth(GrowthPoint {
                strategy: match text("strategy").as_str() {
                    "copy" => GrowthStrategy::Copy,
                    "managed" => GrowthStrategy::Managed,
                    _ => GrowthStrategy::Vmm,
                },
                reserve: text("reserve") == "yes",
                bytes: int("bytes") as u64,
            }),
            Family::Constant => Workload::Constant(ConstantPoint {
                distinct: int("distinct") as u32,
                cold: text("cache") == "cold",
            }),
        }
    }
}

/// Which way a copy goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Direction {
    /// Host to device (upload).
    HostToDevice,
    /// Device to host (download).
    DeviceToHost,
}

/// How the host side of a copy was allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum HostMemory {
    /// Page-locked memory (cuMemAllocHost with flags 0): the copy engine reads it directly.
    Pinned,
    /// Ordinary malloc'd memory: the driver stages it through pinned buffers.
    Pageable,
}

/// One host <-> device copy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TransferPoint {
    /// Which way the bytes go.
    pub direction: Direction,
    /// How the host buffer was allocated.
    pub host: HostMemory,
    /// Bytes copied.
    pub bytes: u64,
}

/// A pinned upload of `bytes` split into `chunks`, issued round-robin on `streams`,
/// each chunk followed on its stream by a kernel of `kernel_us / chunks` microseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OverlapPoint {
    /// Total bytes uploaded.
    pub bytes: u64,
    /// How many pieces the upload is cut into.
    pub chunks: u32,
    /// How many streams the pieces are spread over.
    pub streams: u32,
    /// Total kernel time over all chunks, in microseconds.
    pub kernel_us: f64,
}

impl OverlapPoint {
    /// The byte size of chunk `index`; the last chunk takes the remainder.
    pub fn chunk_bytes(&self, index: u32) -> u64 {
        let base = self.bytes / u64::from(self.chunks);
        if index + 1 == self.chunks {
            self.bytes - base * u64::from(self.chunks - 1)
        } else {
            base
        }
    }
}

/// One kernel shape for the occupancy calculator. Kernels are assumed to have opted in to the
/// device's largest dynamic shared memory per block (cuFuncSetAttribute), as vramlab's do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OccupancyPoint {
    /// Threads per block.
    pub threads: u32,
    /// Registers per thread.
    pub registers: u32,
    /// Static `__shared__` bytes per block.
    pub static_shared: u32,
    /// Dynamic shared bytes per block, given at launch.
    pub dynamic_shared: u32,
}

/// One warp's shared-memory load: lane `i` loads `width` bytes at element `i x stride`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BankPoint {
    /// Bytes per lane: 4, 8 or 16.
    pub width: u32,
    /// Elements between neighbouring lanes; 0 means every lane loads the same element.
    pub stride: u32,
}

/// Global reads: lane `i < active_lanes` of every warp reads `width` bytes at element
/// `warp x 32 x stride + offset + i x stride` of an array of `bytes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CoalescingPoint {
    /// Bytes per lane: 1, 2, 4, 8 or 16.
    pub width: u32,
    /// Elements between neighbouring lanes (>= 1).
    pub stride: u32,
    /// Elements every warp's accesses are shifted by (misalignment).
    pub offset: u32,
    /// Lanes that read.
    pub active_lanes: u32,
    /// The array read, bytes.
    pub bytes: u64,
    /// Dynamic shared memory per block (limits resident blocks; unused by the kernel).
    pub dynamic_shared: u32,
}

impl CoalescingPoint {
    /// The shape calibration reads: every lane active, no misalignment, no shared memory.
    pub fn calibration(width: u32, stride: u32, bytes: u64) -> CoalescingPoint {
        CoalescingPoint {
            width,
            stride,
            offset: 0,
            active_lanes: 32,
            bytes,
            dynamic_shared: 0,
        }
    }

    /// How many times the kernel reads through the array: enough for 1 GiB of requests, so
    /// that an array small enough to stay in the L2 still takes long enough to time.
    pub fn passes(&self) -> u32 {
        ((1u64 << 30) / self.bytes.max(1)).clamp(1, 4096) as u32
    }

    /// Bytes one warp's active lanes ask for.
    pub fn useful_bytes_per_warp(&self) -> u32 {
        self.active_lanes * self.width
    }

    /// Warps needed to read through the whole array once.
    pub fn warps(&self) -> u64 {
        let elements = self.bytes / u64::from(self.width);
        elements.saturating_sub(u64::from(self.offset)) / (32 * u64::from(self.stride))
    }
}

/// A pointer chase through `bytes`: one node per 128-byte line, visited in a random cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LatencyPoint {
    /// Footprint, bytes.
    pub bytes: u64,
}

impl LatencyPoint {
    /// Bytes between nodes: one cache line, so no two nodes share a line.
    pub const NODE_BYTES: u64 = 128;

    /// Nodes in the cycle (at least 2).
    pub fn nodes(&self) -> u64 {
        (self.bytes / Self::NODE_BYTES).max(2)
    }
}

/// One warp's constant-memory read: `distinct` different words, from a warm or cold cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConstantPoint {
    /// Different words the warp's lanes name.
    pub distinct: u32,
    /// Whether every access misses the SM's constant cache.
    pub cold: bool,
}

/// The typed work at one point: what a backend actually runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Workload {
    /// A single copy.
    Transfer(TransferPoint),
    /// Chunked copy/compute overlap.
    Overlap(OverlapPoint),
    /// Blocks per SM for one kernel shape.
    Occupancy(OccupancyPoint),
    /// One shared-memory access pattern.
    Banks(BankPoint),
    /// One global-memory read pattern.
    Coalescing(CoalescingPoint),
    /// One pointer-chase footprint.
    Latency(LatencyPoint),
    /// One constant-memory read pattern.
    Constant(ConstantPoint),
    /// One grow of a device buffer.
    Growth(GrowthPoint),
    /// One loop compiled under a register cap.
    Spills(SpillPoint),
    /// One read of host-written managed memory.
    Migration(MigrationPoint),
    /// One read of another GPU's memory.
    Peer(PeerPoint),
}

/// The second GPU reads `bytes` of the first's memory, mapped for it by VMM or peer access.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerPoint {
    /// Bytes read.
    pub bytes: u64,
    /// VMM mapping (else cuMemAlloc + cuCtxEnablePeerAccess).
    pub vmm: bool,
}

/// A kernel reads `bytes` of managed memory the host wrote last; with `prefetch` the pages are
/// moved to the device first (cuMemPrefetchAsync), else the kernel's page faults move them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MigrationPoint {
    /// Managed bytes read.
    pub bytes: u64,
    /// Whether they are prefetched before the kernel runs.
    pub prefetch: bool,
}

/// Threads per block of the spill kernel when it fills the GPU.
pub const SPILL_KERNEL_THREADS: u32 = 128;

/// A loop keeping `live` floats per thread live, compiled with at most `registers` registers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpillPoint {
    /// Values kept live across the loop.
    pub live: u32,
    /// The register cap.
    pub registers: u32,
}

/// The metrics of a spill point, with every SM holding as many blocks as fit:
/// `ns_per_iteration` of the loop, `warps_per_sm`, `registers_used`, and `local_bytes` of spill
/// frame per thread.
pub fn spill_metrics(ns_per_iteration: f64, warps_per_sm: u32, registers_used: u32, local_bytes: u32) -> Metrics {
    Metrics::from([
        ("ns_per_iteration".to_string(), ns_per_iteration),
        ("warps_per_sm".to_string(), f64::from(warps_per_sm)),
        ("registers_used".to_string(), f64::from(registers_used)),
        ("local_bytes".to_string(), f64::from(local_bytes)),
    ])
}

/// How a device buffer grows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GrowthStrategy {
    /// cuMemAlloc the new size, copy the contents, cuMemFree the old.
    Copy,
    /// Managed memory (cuMemAllocManaged), prefetched to the device (cuMemPrefetchAsync).
    Managed,
    /// Physical chunks mapped into a reserved virtual range (cuMemCreate, cuMemMap).
    Vmm,
}

impl GrowthStrategy {
    /// Every strategy, in the order reports show them.
    pub const ALL: [GrowthStrategy; 3] = [GrowthStrategy::Copy, GrowthStrategy::Managed, GrowthStrategy::Vmm];

    /// The name experiment files use.
    pub fn name(self) -> &'static str {
        match self {
            GrowthStrategy::Copy => "copy",
            GrowthStrategy::Managed => "managed",
            GrowthStrategy::Vmm => "vmm",
        }
    }
}

/// One grow: the buffer, made by `strategy`, is doubled from `bytes / 2` to `bytes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GrowthPoint {
    /// How it grows.
    pub strategy: GrowthStrategy,
    /// Whether room for the largest size was set aside before the first grow.
    pub reserve: bool,
    /// The size it grows to.
    pub bytes: u64,
}

/// The metrics of a grow: `ok` (1 if it succeeded), `grow_us` (only when it did), and
/// `peak_bytes`, the device memory the strategy held at its highest during the grow.
pub fn growth_metrics(grow_us: Option<f64>, peak_bytes: u64) -> Metrics {
    let mut metrics = Metrics::from([
        ("ok".to_string(), f64::from(u8::from(grow_us.is_some()))),
        ("peak_bytes".to_string(), peak_bytes as f64),
    ]);
    if let Some(us) = grow_us {
        metrics.insert("grow_us".to_string(), us);
    }
    metrics
}

/// The metrics of a transfer point, from its time: `time_us` and `gb_per_s` (10^9 bytes/s).
pub fn transfer_metrics(time_us: f64, bytes: u64) -> Metrics {
    Metrics::from([
        ("time_us".to_string(), time_us),
        ("gb_per_s".to_string(), bytes as f64 / time_us / 1e3),
    ])
}

/// The metrics of an overlap point: `time_us`, `serial_time_us` and `speedup` (serial / overlapped).
pub fn overlap_metrics(time_us: f64, serial_time_us: f64) -> Metrics {
    Metrics::from([
        ("time_us".to_string(), time_us),
        ("serial_time_us".to_string(), serial_time_us),
        ("speedup".to_string(), serial_time_us / time_us),
    ])
}

/// The metrics of an occupancy point: resident `blocks_per_sm`, `warps_per_sm`, and
/// `occupancy` (resident warps over the SM's maximum).
pub fn occupancy_metrics(blocks_per_sm: u32, threads: u32, warp_size: u32, max_warps_per_sm: u32) -> Metrics {
    let warps = blocks_per_sm * threads.div_ceil(warp_size);
    Metrics::from([
        ("blocks_per_sm".to_string(), f64::from(blocks_per_sm)),
        ("warps_per_sm".to_string(), f64::from(warps)),
        ("occupancy".to_string(), f64::from(warps) / f64::from(max_warps_per_sm)),
    ])
}

/// The metrics of a coalescing point from its time: `time_us` and `gb_per_s`, the useful
/// bytes (what active lanes asked for) per second, 10^9 B/s.
pub fn coalescing_metrics(time_us: f64, point: &CoalescingPoint) -> Metrics {
    let useful =
        point.warps() as f64 * f64::from(point.active_lanes) * f64::from(point.width) * f64::from(point.passes());
    Metrics::from([
        ("time_us".to_string(), time_us),
        ("gb_per_s".to_string(), useful / time_us / 1e3),
    ])
}

/// The metrics of a point measured in clock cycles per access: `cycles`.
pub fn cycles_metrics(cycles: f64) -> Metrics {
    Metrics::from([("cycles".to_string(), cycles)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_family_finds_its_own_row() {
        for (i, row) in FAMILIES.iter().enumerate() {
            assert_eq!(row.family as usize, i, "{} is out of the enum's order", row.name);
            assert_eq!(Family::from_name(row.name), Some(row.family));
            assert!(
                row.params.iter().any(|p| p.name == row.x_param),
                "{}: its axis {} is not one of its parameters",
                row.name,
                row.x_param
            );
        }
        let mut names: Vec<_> = FAMILIES.iter().map(|row| row.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), FAMILIES.len());
    }
}
