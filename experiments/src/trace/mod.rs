//! Allocation traces: what a program asked its allocator for, in order, and their importers.
//!
//! A trace is a list of `alloc` and `free` events naming allocations by id. Importers pair
//! frees with allocations by address; anything that does not pair (a free of an address that
//! is not live, an allocation over a live address) is skipped and counted as a warning that
//! names the event's index, because real recordings begin mid-run and may miss events.

mod pickle;
mod rmm;
mod snapshot;
mod snapshot_writer;
mod start;
mod synthetic;

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::files::write_atomically;
use crate::pytorch::TraceAction;

pub use snapshot::SnapshotEvents;
pub use snapshot_writer::{snapshot_bytes, write_snapshot};
pub use start::{BlockState, Reservation, StartBlock, StartSegment, StartState};

pub use synthetic::{SyntheticInfo, SYNTHETIC_TRACES};

/// One allocator request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum TraceEvent {
    /// A request for `size` bytes on `stream`; later frees name it by `id`.
    Alloc {
        /// Unique among the trace's live allocations.
        id: u64,
        /// Bytes asked for.
        size: u64,
        /// The stream it is used on (PyTorch pools blocks per stream).
        #[serde(default)]
        stream: u64,
    },
    /// The program lets go of allocation `id` (PyTorch's `free_requested`): it no longer counts as
    /// allocated, but the memory is not reusable until the `Free` that follows (work on another
    /// stream may still read it).
    FreeRequested {
        /// The id its `Alloc` had.
        id: u64,
    },
    /// The allocation `id` is returned and reusable (PyTorch's `free_completed`); a `Free` with
    /// no `FreeRequested` before it is both.
    Free {
        /// The id its `Alloc` had.
        id: u64,
    },
    /// The program's `torch.cuda.empty_cache()`: every cached block that can be given back is.
    EmptyCache {
        /// Right before a device allocation, where the allocator's own release of its cache
        /// when a cap refuses a request (a counted retry) would have left the same record: a
        /// replay under a cap leaves the release to the policy.
        #[serde(default)]
        within_request: bool,
    },
    /// The owner of private pool `pool` (a CUDA graph, a `torch.cuda.MemPool`) let go of it:
    /// its cached memory may be given back from now on.
    ReleasePool {
        /// The pool's index in [`Trace::pools`].
        pool: u32,
    },
}

/// A device-memory operation the recording allocator itself made, kept to check a model of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeviceAction {
    /// cudaMalloc of a segment.
    SegmentAlloc,
    /// cudaFree of a segment.
    SegmentFree,
    /// Pages mapped into an expandable segment.
    SegmentMap,
    /// Pages unmapped from an expandable segment.
    SegmentUnmap,
    /// A request the allocator could not satisfy (out of memory).
    Oom,
}

impl DeviceAction {
    /// PyTorch's name for it in a snapshot's `device_traces`.
    pub fn name(self) -> &'static str {
        TraceAction::from(self).name()
    }
}

impl From<DeviceAction> for TraceAction {
    fn from(action: DeviceAction) -> TraceAction {
        match action {
            DeviceAction::SegmentAlloc => TraceAction::SegmentAlloc,
            DeviceAction::SegmentFree => TraceAction::SegmentFree,
            DeviceAction::SegmentMap => TraceAction::SegmentMap,
            DeviceAction::SegmentUnmap => TraceAction::SegmentUnmap,
            DeviceAction::Oom => TraceAction::Oom,
        }
    }
}

/// One recorded device-memory operation and where it happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedOp {
    /// How many replay events came before it.
    pub at: usize,
    /// What was done.
    pub action: DeviceAction,
    /// Bytes (for `Oom`, the rounded request).
    pub size: u64,
    /// The device address it concerned (the driver's choice; 0 where not known; for `Oom`,
    /// the bytes the device had free).
    #[serde(default)]
    pub addr: u64,
    /// The stream it was made for.
    #[serde(default)]
    pub stream: u64,
}

impl RecordedOp {
    /// The same operation in the same place, whatever the addresses.
    pub fn same_as(&self, other: &RecordedOp) -> bool {
        (self.at, self.action, self.size) == (other.at, other.action, other.size)
    }
}

/// A cap read off a snapshot's recorded out-of-memory errors and every device allocation
/// around them: any cap in `[lower, upper)` makes the recorded allocator's decisions on every
/// recorded request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InferredCap {
    /// The cap taken: `lower`, the smallest cap under which every device allocation the
    /// recording shows succeeded succeeds (also where the bounds cross).
    pub bytes: u64,
    /// The most the allocator held, or had to fit under the cap, at a device allocation that
    /// succeeded, anywhere in the trace (or the bytes in use at once, where that was more).
    pub lower: u64,
    /// The trace event of the success that sets `lower` (`None`: the starting state sets it).
    pub lower_at: Option<usize>,
    /// The least, over the recorded errors, of the bytes held at the error plus what the failed
    /// request needed (or plus the device's free memory then and one, where that was less): the
    /// cap is below it.
    pub upper: u64,
    /// The trace event of the error that sets `upper`.
    pub at: usize,
    /// Whether `upper` comes from the device's free memory (`device_free`) rather than the
    /// request: the device itself, not a set cap, was then the limit.
    pub upper_from_device_free: bool,
    /// How many out-of-memory errors the trace records.
    pub ooms: usize,
}

impl InferredCap {
    /// Whether the bounds cross (`lower >= upper`): no one cap makes every recorded decision,
    /// so the cap changed while the job ran.
    pub fn crossed(&self) -> bool {
        self.lower >= self.upper
    }

    /// In plain words: which bounds the cap satisfies, and where they cross, why and what that
    /// costs the replay.
    pub fn explain(&self) -> String {
        let lower_from = match self.lower_at {
            Some(at) => format!("the device allocation at event {at}"),
            None => "the memory held at the start".to_string(),
        };
        let upper_from = if self.upper_from_device_free {
            "the device's free memory it recorded"
        } else {
            "the request that failed"
        };
        let errors = match self.ooms {
            1 => "the recorded out-of-memory error".to_string(),
            n => format!("the {n} recorded out-of-memory errors"),
        };
        if self.crossed() {
            format!(
                "the cap is inferred from every device allocation and {errors}, but the bounds cross: {lower_from} held {} B, so the cap was at least that, while the error at event {} shows it below {} B ({upper_from}); no one cap makes every recorded decision, so the cap changed while the job ran (set_per_process_memory_fraction called again, or another process taking or giving back device memory{}); {} B is taken, under which every device allocation the recording shows succeeded succeeds, and the errors it contradicts may not be replayed",
                self.lower,
                self.at,
                self.upper,
                if self.upper_from_device_free { ", or a device_free that PyTorch did not measure" } else { "" },
                self.bytes
            )
        } else {
            format!(
                "the cap is inferred from every device allocation and {errors}: {lower_from} shows it at least {} B, and the error at event {} ({upper_from}) below {} B, so any cap in between makes the recorded decisions; the lower is taken (the job's true cap, or its device's free memory, is not recorded)",
                self.lower, self.at, self.upper
            )
        }
    }
}

/// What kind of file a trace came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TraceSource {
    /// `torch.cuda.memory._snapshot()`, pickled.
    PytorchSnapshot,
    /// RMM's `logging_resource_adaptor` CSV.
    RmmLog,
    /// vramlab's own JSON.
    #[serde(alias = "memlab")]
    Vramlab,
    /// One of vramlab's seeded generators.
    Synthetic,
}

/// Events that could not be paired, skipped and counted.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TraceWarnings {
    /// How many events were skipped or adjusted.
    pub count: usize,
    /// The first few, each naming its event index.
    pub examples: Vec<String>,
    /// Frees and free requests of blocks the trace never allocated, skipped because the format
    /// does not say their size (a snapshot's are kept: they rebuild its starting state).
    #[serde(default)]
    pub allocated_before_start: usize,
}

impl TraceWarnings {
    /// What starting the replay with no memory in use changes, when the recording began mid-run.
    pub fn lost_start(&self) -> Option<String> {
        (self.allocated_before_start > 0).then(|| {
            format!(
                "the recording began mid-run: {} frees name blocks allocated before it; the replay starts with none of them in use, so its peaks leave out what those blocks held until they were freed",
                self.allocated_before_start
            )
        })
    }
}

impl TraceWarnings {
    const EXAMPLES: usize = 5;

    fn push(&mut self, message: String) {
        self.count += 1;
        if self.examples.len() < Self::EXAMPLES {
            self.examples.push(message);
        }
    }
}

/// A mark the program made in its snapshot (PyTorch's `external_annotations`: the start or end
/// of a `record_function` range, such as `Optimizer.step#AdamW.step`, recorded by
/// `_record_memory_history`), placed among the trace's events by its time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Annotation {
    /// The trace event it comes before (how many events came before it): a `START` comes
    /// before the events recorded at its time, an `END` after them.
    pub at: usize,
    /// `START` or `END`, as PyTorch writes it (any other text is kept as written).
    pub stage: String,
    /// The range's name.
    pub name: String,
    /// PyTorch's time of it, in microseconds (`time_us`).
    pub time_us: u64,
}

/// An allocation trace, ready to replay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trace {
    /// Where it came from: a file name or a generator with its parameters.
    pub name: String,
    /// The kind of input.
    pub source: TraceSource,
    /// The requests, in order.
    pub events: Vec<TraceEvent>,
    /// Device allocations the recording allocator itself made (PyTorch's `segment_alloc`), in
    /// order, so a model of that allocator can be checked against them. Empty when unknown.
    #[serde(default)]
    pub segment_sizes: Vec<u64>,
    /// Events skipped while importing.
    #[serde(default)]
    pub warnings: TraceWarnings,
    /// Every device-memory operation the recording allocator made, in order (PyTorch snapshots).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recorded_ops: Vec<RecordedOp>,
    /// The `PYTORCH_ALLOC_CONF` the trace was recorded under, when the snapshot says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocator_settings: Option<String>,
    /// What the allocator held when the trace began (a snapshot whose start was lost), rebuilt
    /// from its final segments; `None` when it began empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<StartState>,
    /// PyTorch's ids of the private pools the trace uses (CUDA graphs, `torch.cuda.MemPool`);
    /// pool `k` of an allocation is `pools[k - 1]`, pool 0 the default pools.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pools: Vec<(i64, i64)>,
    /// The pool of each allocation id (empty when every allocation is in the default pools).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pool_of_id: Vec<u32>,
    /// The segments at the end, as the snapshot recorded them (to check a replay against).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub final_segments: Vec<StartSegment>,
    /// What the input does not determine, in plain words (a replay says these beside its figures).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unknowns: Vec<String>,
    /// The events (by index, ascending) before which the program reset PyTorch's peak
    /// statistics (`torch.cuda.reset_peak_memory_stats()`; vramlab's tracer writes the action
    /// `reset_peak`): PyTorch's `memory_stats()` peaks count from the last of them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub peak_resets: Vec<usize>,
    /// The phases the program marked (a snapshot's `external_annotations`), in order, each
    /// placed among the events; carried into the exports.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub annotations: Vec<Annotation>,
    /// The device the trace is of (a snapshot's index).
    #[serde(default)]
    pub device: usize,
    /// The address the recording allocator gave each allocation, in the order of the `Alloc`
    /// events (`u64::MAX` for a request that failed); empty where the format has none. A replay
    /// under the recording's settings over the driver's addresses must place each one there.
    #[serde(skip)]
    pub alloc_addrs: Vec<u64>,
    /// The oldest PyTorch release that could have written the input, with the field that
    /// shows it (`None`: nothing in it tells).
    #[serde(skip)]
    pub torch_shown: Option<(crate::TorchRelease, String)>,
    /// The release whose allocator rules a replay of it follows, and why.
    #[serde(skip)]
    pub torch: crate::ReleaseChoice,
    /// The snapshot's final segments summed per pool and stream (a report of the state at the
    /// end, for a snapshot with no trace to replay).
    #[serde(skip)]
    pub state_at_end: Vec<crate::PoolState>,
    /// Pinned host memory (`host_segments`, PyTorch 2.14 on with
    /// `record_pinned_host_memory=True`) as its own pool, never in the device's figures.
    #[serde(skip)]
    pub host_state: Vec<crate::PoolState>,
    /// The program's source line of each allocation whose recorded stack names one (a
    /// snapshot's `frames`), by the allocation's id: what a failure names.
    #[serde(skip)]
    pub sources: AllocSources,
}

/// The program's source lines of a trace's allocations, by allocation id (a snapshot's frames
/// give them; most traces have none).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AllocSources {
    /// (allocation id, index into `lines`), by id.
    by_id: Vec<(u64, u32)>,
    lines: Vec<String>,
    index: HashMap<String, u32>,
}

impl AllocSources {
    /// Records that allocation `id` (ids given in increasing order) was made at `line`.
    pub fn push(&mut self, id: u64, line: String) {
        let at = match self.index.get(&line) {
            Some(&at) => at,
            None => {
                let at = self.lines.len() as u32;
                self.index.insert(line.clone(), at);
                self.lines.push(line);
                at
            }
        };
        debug_assert!(self.by_id.last().is_none_or(|(last, _)| *last < id));
        self.by_id.push((id, at));
    }

    /// Where allocation `id` was made, as `file:line in function`.
    pub fn of(&self, id: u64) -> Option<&str> {
        let at = self.by_id.binary_search_by_key(&id, |(i, _)| *i).ok()?;
        self.lines.get(self.by_id[at].1 as usize).map(String::as_str)
    }

    /// Whether no allocation's line is known.
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }
}

/// The program's own line among a recorded stack (`frames`, innermost first, each a file, line
/// and function), as `file:line in function`: the innermost frame that is neither a library's
/// (PyTorch's, an installed package's, the standard library's) nor native code (C++ frames of
/// `context="all"` stacks). `None` where every frame is a library's.
pub fn program_line<'a>(frames: impl IntoIterator<Item = (&'a str, i128, &'a str)>) -> Option<String> {
    frames.into_iter().find_map(|(file, line, name)| {
        // Native frames (C++ of `context="all"` stacks, `??`) and frozen bootstrap code are not
        // Python files; a notebook's cells are the program's.
        let python = file.ends_with(".py") || file.starts_with("<ipython-input");
        let library = ["/site-packages/", "/dist-packages/", "/torch/", "/lib/python3"]
            .iter()
            .any(|part| file.contains(part));
        let library = !python || library;
        (!library).then(|| format!("{file}:{line} in {name}"))
    })
}

impl Trace {
    /// A trace of `events` with nothing else known about it (no recorded operations, no
    /// starting state, no settings).
    pub fn new(name: &str, source: TraceSource, events: Vec<TraceEvent>) -> Trace {
        let mut trace = Pairing::default().finish(name.to_string(), source, Vec::new());
        trace.events = events;
        trace
    }

    /// Names the release that wrote the input (`--torch`, `torch=`; `None`: what the input
    /// shows, or the default), refused where the input shows a later one.
    pub fn name_release(&mut self, named: Option<&str>) -> Result<()> {
        self.torch = crate::ReleaseChoice::resolve(self.torch_shown.clone(), named)
            .map_err(|e| Error::Settings(format!("{}: {e}", self.name)))?;
        Ok(())
    }

    /// The settings the recording ran under, read by the rules of its release; `None` where
    /// the input does not name them.
    pub fn recorded_settings(&self) -> Result<Option<crate::AllocConf>> {
        self.allocator_settings
            .as_deref()
            .map(|s| {
                crate::AllocConf::parse_for(s, self.torch.release)
                    .map_err(|e| Error::Trace(format!("{}: allocator_settings: {e}", self.name)))
            })
            .transpose()
    }

    /// Where what the snapshot shows contradicts the settings it says it ran under, in plain
    /// words: `expandable_segments:True` with segments of which none is expandable and no range
    /// mapped (the setting did not take effect, as in pytorch#183387), or expandable segments
    /// under settings without it (settings changed while the program ran). Empty where they
    /// agree or where the snapshot shows no segments.
    pub fn settings_contradictions(&self) -> Vec<String> {
        let Ok(Some(conf)) = self.recorded_settings() else {
            return Vec::new();
        };
        let mapped = self
            .recorded_ops
            .iter()
            .filter(|op| matches!(op.action, DeviceAction::SegmentMap | DeviceAction::SegmentUnmap))
            .count();
        let allocated = self
            .recorded_ops
            .iter()
            .filter(|op| op.action == DeviceAction::SegmentAlloc)
            .count();
        let expandable = self.final_segments.iter().filter(|s| s.expandable).count();
        let plain = self.final_segments.len() - expandable;
        let settings = self.allocator_settings.as_deref().unwrap_or("");
        let mut said = Vec::new();
        if conf.expandable_segments
            && conf.backend == crate::AllocBackend::Native
            && mapped == 0
            && expandable == 0
            && (plain > 0 || allocated > 0)
        {
            said.push(format!(
                "the setting did not take effect: the snapshot says it ran under '{settings}', but none of its {plain} segments at the end is expandable and its trace maps no range ({allocated} plain segment allocations): PyTorch fell back to plain segments (e.g. where the driver lacks the virtual memory API, pytorch#183387); a replay under its own settings follows the settings, not what the recording did"
            ));
        }
        if !conf.expandable_segments && (mapped > 0 || expandable > 0) {
            said.push(format!(
                "the snapshot's settings '{settings}' do not enable expandable segments, yet {expandable} of its segments at the end are expandable and its trace maps {mapped} ranges: the settings changed while the program ran (torch.cuda.memory._set_allocator_settings), so no one setting describes the whole recording"
            ));
        }
        said
    }

    /// The pool allocation `id` belongs to (0: the default pools).
    pub fn pool_of(&self, id: u64) -> u32 {
        self.pool_of_id.get(id as usize).copied().unwrap_or(0)
    }

    /// The cap the recording ran under, as all its events bound it. Every device allocation
    /// that succeeded bounds it from below (what the allocator held after a segment, not after an
    /// expandable segment's pages, which may pass the cap, and what it had
    /// to fit under the cap when it asked: PyTorch checks the cap once per device allocation,
    /// against what it holds plus the request's allocation size), as do the bytes of live
    /// allocations at any moment; every recorded out-of-memory error bounds it from above (the
    /// bytes held then plus what the failed request needed, or plus the device's free memory
    /// where that was less). The lowest cap satisfying every lower bound is taken; where it
    /// breaks an upper bound, [`InferredCap::crossed`] says so. `None` without a recorded `oom`.
    pub fn capacity_from_oom(&self) -> Option<InferredCap> {
        let ooms = self
            .recorded_ops
            .iter()
            .filter(|op| op.action == DeviceAction::Oom)
            .count();
        if ooms == 0 {
            return None;
        }
        let conf = self.recorded_settings().ok().flatten().unwrap_or_default();
        let request_at = |at: usize| match self.events.get(at) {
            Some(TraceEvent::Alloc { size, .. }) => conf.allocation_size(conf.round_size(*size)),
            _ => 0,
        };
        let mut held = self.start.as_ref().map_or(0, StartState::reserved);
        let (mut lower, mut lower_at) = (held, None);
        fn raise(bytes: u64, at: usize, lower: &mut u64, lower_at: &mut Option<usize>) {
            if bytes > *lower {
                *lower = bytes;
                *lower_at = Some(at);
            }
        }
        // (upper, at, from the device's free memory)
        let mut upper: Option<(u64, usize, bool)> = None;
        let mut checked_at = None;
        for op in &self.recorded_ops {
            match op.action {
                DeviceAction::SegmentAlloc => {
                    if checked_at != Some(op.at) {
                        let asked = held.saturating_add(op.size.max(request_at(op.at)));
                        raise(asked, op.at, &mut lower, &mut lower_at);
                        checked_at = Some(op.at);
                    }
                    held = held.saturating_add(op.size);
                    raise(held, op.at, &mut lower, &mut lower_at);
                }
                // An expandable segment's pages: PyTorch checks the cap once, against what it
                // holds plus the request's allocation size (`alloc_block`), then maps whole
                // pages (20 MiB in the large pool), which may take it past the cap. What it holds
                // after the map bounds nothing (a 12.25 MiB request mapping 40 MiB under a cap
                // took the inferred cap 8 MiB above the one the replay ran under).
                DeviceAction::SegmentMap => {
                    if checked_at != Some(op.at) {
                        raise(held.saturating_add(request_at(op.at)), op.at, &mut lower, &mut lower_at);
                        checked_at = Some(op.at);
                    }
                    held = held.saturating_add(op.size);
                }
                DeviceAction::SegmentFree | DeviceAction::SegmentUnmap => held = held.saturating_sub(op.size),
                DeviceAction::Oom => {
                    let by_request = held.saturating_add(conf.allocation_size(op.size));
                    let by_free = held.saturating_add(op.addr).saturating_add(1);
                    let bound = (by_request.min(by_free), op.at, by_free < by_request);
                    if upper.is_none_or(|(least, _, _)| bound.0 < least) {
                        upper = Some(bound);
                    }
                }
            }
        }
        // The bytes of live allocations that succeeded: reserved memory is never less (this
        // bounds a trace whose device allocations were not recorded).
        let failed: HashSet<u64> = self.failed_alloc_ids();
        let mut live: HashMap<u64, u64> = HashMap::default();
        let mut in_use = 0u64;
        // Without recorded device allocations, what the allocator reserved for a request is not
        // shown: it held at least the segment the request needs (a 512 B request a 2 MiB one),
        // so a cap below that would fail a request the recording shows succeeded (an error
        // whose device_free is 0 once implied a cap of a few hundred bytes).
        let segments_unrecorded = !self.records_device_operations();
        for (at, event) in self.events.iter().enumerate() {
            match *event {
                TraceEvent::Alloc { id, size, .. } if !failed.contains(&id) => {
                    let bytes = conf.round_size(size);
                    if let Some(old) = live.insert(id, bytes) {
                        in_use = in_use.saturating_sub(old);
                    }
                    in_use = in_use.saturating_add(bytes);
                    raise(in_use, at, &mut lower, &mut lower_at);
                    if segments_unrecorded {
                        raise(conf.allocation_size(bytes), at, &mut lower, &mut lower_at);
                    }
                }
                TraceEvent::FreeRequested { id } | TraceEvent::Free { id } => {
                    if let Some(bytes) = live.remove(&id) {
                        in_use = in_use.saturating_sub(bytes);
                    }
                }
                _ => {}
            }
        }
        let (upper, at, upper_from_device_free) = upper?;
        Some(InferredCap {
            bytes: lower,
            lower,
            lower_at,
            upper,
            at,
            upper_from_device_free,
            ooms,
        })
    }

    /// The ids of the requests that may have failed in the recording: those whose recorded
    /// address is none, and any `Alloc` given back by the very next event (how a failed request
    /// is replayed; leaving out one that succeeded only loosens the bound it would give).
    fn failed_alloc_ids(&self) -> HashSet<u64> {
        let mut failed = HashSet::default();
        let mut k = 0;
        for (at, event) in self.events.iter().enumerate() {
            if let TraceEvent::Alloc { id, .. } = *event {
                let given_back = matches!(self.events.get(at + 1), Some(TraceEvent::Free { id: next }) if *next == id);
                if given_back || self.alloc_addrs.get(k) == Some(&u64::MAX) {
                    failed.insert(id);
                }
                k += 1;
            }
        }
        failed
    }

    /// Whether the recording used expandable segments (its settings, a mapped range, a
    /// starting segment).
    pub fn uses_expandable_segments(&self) -> bool {
        let settings = self
            .recorded_settings()
            .ok()
            .flatten()
            .is_some_and(|c| c.expandable_segments);
        settings
            || self
                .recorded_ops
                .iter()
                .any(|op| matches!(op.action, DeviceAction::SegmentMap | DeviceAction::SegmentUnmap))
            || self.final_segments.iter().any(|s| s.expandable)
    }

    /// Whether the trace records its allocator's device operations (segments allocated,
    /// freed, mapped), so a replay under its own settings can be checked against them.
    pub fn records_device_operations(&self) -> bool {
        self.recorded_ops.iter().any(|op| op.action != DeviceAction::Oom)
    }
}

/// The on-disk shape of vramlab's own trace JSON.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TraceFile {
    /// The format's version (`memlab_trace` in files written before the rename).
    #[serde(alias = "memlab_trace")]
    vramlab_trace: u32,
    name: String,
    events: Vec<TraceEvent>,
    #[serde(default)]
    segment_sizes: Vec<u64>,
}

const TRACE_FILE_VERSION: u32 = 1;

const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// The first bytes of every SQLite 3 database file (sqlite.org/fileformat.html, 1.3).
const SQLITE_MAGIC: &[u8] = b"SQLite format 3\0";

/// What a trace file holds, told by its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Gzip,
    Pickle,
    Json,
    Rmm,
}

impl Format {
    fn of(name: &str, head: &[u8]) -> Result<Format> {
        let text = head.strip_prefix(UTF8_BOM).unwrap_or(head);
        let first = text.iter().find(|b| !b.is_ascii_whitespace()).copied();
        match first {
            _ if head.starts_with(&[0x1f, 0x8b]) => Ok(Format::Gzip),
            Some(0x80) => Ok(Format::Pickle),
            Some(b'{') => Ok(Format::Json),
            Some(_) if text.starts_with(b"Thread") => Ok(Format::Rmm),
            Some(_) if rmm::looks_like_log(text) => Ok(Format::Rmm),
            // The SQLite dump of issue 37 (`_dump_snapshot_sqlite`) is in no PyTorch release
            // through 2.15 (its torch/cuda/memory.py has none), so its tables are unknown.
            _ if head.starts_with(SQLITE_MAGIC) => Err(Error::Trace(format!(
                "{name}: an SQLite database; no PyTorch release through 2.15 writes memory snapshots as SQLite, so its tables are not read: save the snapshot with torch.cuda.memory._dump_snapshot(\"snap.pickle\")"
            ))),
            _ => Err(Error::Trace(format!(
                "{name}: not a PyTorch snapshot pickle (gzipped or not), an RMM log CSV (header 'Thread,Time,Action,Pointer,Size,Stream') or a vramlab trace JSON"
            ))),
        }
    }
}

/// The most bytes a trace file (after gzip) may hold, unless `VRAMLAB_MAX_TRACE_BYTES` says otherwise.
pub const DEFAULT_MAX_TRACE_BYTES: u64 = 4 << 30;

fn max_trace_bytes() -> Result<u64> {
    match std::env::var("VRAMLAB_MAX_TRACE_BYTES") {
        Ok(text) => crate::units::parse_bytes(&text)
            .map_err(|reason| Error::Invalid(format!("VRAMLAB_MAX_TRACE_BYTES = {text}: {reason}"))),
        Err(_) => Ok(DEFAULT_MAX_TRACE_BYTES),
    }
}

/// Reads at most `limit` bytes of `reader`, refusing a longer input with one line naming the limit.
fn read_bounded(name: &str, reader: impl std::io::Read, limit: u64) -> Result<Vec<u8>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    reader
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| Error::Trace(format!("{name}: {e}")))?;
    if bytes.len() as u64 > limit {
        return Err(Error::Trace(format!(
            "{name}: larger than {} (set VRAMLAB_MAX_TRACE_BYTES to read more)",
            crate::units::format_bytes(limit)
        )));
    }
    Ok(bytes)
}

/// The first bytes of a stream (enough to tell its format).
fn read_head(name: &str, reader: Box<dyn std::io::Read + '_>) -> Result<Vec<u8>> {
    use std::io::Read;
    let mut head = Vec::new();
    reader
        .take(64)
        .read_to_end(&mut head)
        .map_err(|e| Error::Trace(format!("{name}: {e}")))?;
    Ok(head)
}

/// How many times its compressed size a gzipped trace may expand to, unless
/// `VRAMLAB_MAX_TRACE_EXPANSION` says otherwise: real snapshots expand 12-20 times; a small
/// file that expands thousands of times (a gzip bomb of pickled references) is refused before it
/// fills memory.
pub(crate) const DEFAULT_MAX_TRACE_EXPANSION: u64 = 256;

/// As [`DEFAULT_MAX_TRACE_EXPANSION`], for a gzipped RMM log or trace JSON, which are read
/// whole and whose every line becomes an event: real logs expand 8-20 times; a 3.5 MiB log
/// that expanded 256 times took over 3 GiB to replay.
pub(crate) const DEFAULT_MAX_TEXT_EXPANSION: u64 = 64;

/// The most bytes a gzip stream of `compressed` bytes may expand to: the expansion limit
/// (`ratio` unless `VRAMLAB_MAX_TRACE_EXPANSION` says otherwise) times its size (at least
/// 16 MiB), and never past the trace limit.
fn expansion_limit(compressed: u64, ratio: u64) -> Result<(u64, u64)> {
    let ratio = crate::files::env_limit("VRAMLAB_MAX_TRACE_EXPANSION", ratio)?;
    let limit = compressed.saturating_mul(ratio).max(16 << 20).min(max_trace_bytes()?);
    Ok((limit, ratio))
}

/// A reader that refuses to give more than `left` bytes, with `message` as the error.
struct Bounded<R> {
    inner: R,
    left: u64,
    message: String,
}

impl<R: std::io::Read> std::io::Read for Bounded<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let read = self.inner.read(buf)?;
        if read as u64 > self.left {
            return Err(std::io::Error::other(self.message.clone()));
        }
        self.left -= read as u64;
        Ok(read)
    }
}

/// A gzip stream's contents (several members read as one, as gzip does), refused past
/// [`expansion_limit`] of its `compressed` size at `ratio`.
fn gunzip<'a>(reader: Box<dyn std::io::Read + 'a>, compressed: u64, ratio: u64) -> Result<Box<dyn std::io::Read + 'a>> {
    let (limit, ratio) = expansion_limit(compressed, ratio)?;
    Ok(Box::new(Bounded {
        inner: flate2::read::MultiGzDecoder::new(reader),
        left: limit,
        message: format!(
            "decompresses to more than {}, {ratio} times its {} compressed (VRAMLAB_MAX_TRACE_EXPANSION raises the ratio)",
            crate::units::format_bytes(limit),
            crate::units::format_bytes(compressed)
        ),
    }))
}

impl Trace {
    /// Reads a PyTorch snapshot pickle, an RMM log CSV or a vramlab trace JSON, telling them
    /// apart by content (any of them may be gzipped). A snapshot's first device with events is taken.
    pub fn load(path: &Path) -> Result<Trace> {
        Trace::load_device(path, None)
    }

    /// As [`Trace::load`], taking a snapshot's device `device` (`None`: the first with
    /// events). A device without events is refused: it has nothing to replay.
    pub fn load_device(path: &Path, device: Option<usize>) -> Result<Trace> {
        Trace::pick_device(&path.display().to_string(), Trace::load_all(path, device)?, device)
    }

    /// Every device a trace file holds: one trace per device of a snapshot (only `device`'s
    /// when given; those without events too), the one trace of any other format. A snapshot
    /// is read streaming (its events are not held as pickled values); other formats are read
    /// whole, up to the size limit.
    pub fn load_all(path: &Path, device: Option<usize>) -> Result<Vec<Trace>> {
        let name = path.display().to_string();
        crate::files::check_regular(path)?;
        let open = || -> Result<Box<dyn std::io::Read>> {
            Ok(Box::new(std::io::BufReader::new(
                std::fs::File::open(path).map_err(|e| Error::io(path, e))?,
            )))
        };
        // Its first bytes say what a file is: one that is no trace at all (say /dev/zero) is
        // refused before the rest is read.
        let head = read_head(&name, open()?)?;
        match Format::of(&name, &head)? {
            Format::Pickle => snapshot::import(&name, &open, device, max_trace_bytes()?),
            Format::Gzip
                if Format::of(
                    &name,
                    &read_head(&name, gunzip(open()?, u64::MAX, DEFAULT_MAX_TRACE_EXPANSION)?)?,
                )? == Format::Pickle =>
            {
                let compressed = std::fs::metadata(path).map_err(|e| Error::io(path, e))?.len();
                snapshot::import(
                    &name,
                    &|| gunzip(open()?, compressed, DEFAULT_MAX_TRACE_EXPANSION),
                    device,
                    max_trace_bytes()?,
                )
            }
            _ => {
                let bytes = read_bounded(&name, open()?, max_trace_bytes()?)?;
                Trace::all_from_bytes(&name, &bytes, device)
            }
        }
    }

    /// Reads a trace held in memory (a snapshot pickle, RMM CSV or vramlab JSON, any of them
    /// gzipped), named `name` in messages: as [`Trace::load_device`].
    pub fn from_bytes(name: &str, bytes: &[u8], device: Option<usize>) -> Result<Trace> {
        Trace::pick_device(name, Trace::all_from_bytes(name, bytes, device)?, device)
    }

    /// Every device of a trace held in memory: as [`Trace::load_all`].
    pub fn all_from_bytes(name: &str, bytes: &[u8], device: Option<usize>) -> Result<Vec<Trace>> {
        let format = Format::of(name, bytes)?;
        if device.is_some() && !matches!(format, Format::Gzip | Format::Pickle) {
            return Err(Error::Trace(format!(
                "{name}: a device applies only to PyTorch snapshots"
            )));
        }
        let text = bytes.strip_prefix(UTF8_BOM).unwrap_or(bytes);
        match format {
            Format::Gzip
                if Format::of(
                    name,
                    &read_head(name, gunzip(Box::new(bytes), u64::MAX, DEFAULT_MAX_TRACE_EXPANSION)?)?,
                )? == Format::Pickle =>
            {
                let compressed = bytes.len() as u64;
                snapshot::import(
                    name,
                    &|| gunzip(Box::new(bytes), compressed, DEFAULT_MAX_TRACE_EXPANSION),
                    device,
                    max_trace_bytes()?,
                )
            }
            Format::Gzip => {
                let text = gunzip(Box::new(bytes), bytes.len() as u64, DEFAULT_MAX_TEXT_EXPANSION)?;
                let plain = read_bounded(name, text, max_trace_bytes()?)?;
                Trace::all_from_bytes(name, &plain, device)
            }
            Format::Pickle => snapshot::import(name, &|| Ok(Box::new(bytes)), device, max_trace_bytes()?),
            Format::Json => Ok(vec![Self::from_json(name, text)?]),
            Format::Rmm => Ok(vec![rmm::import(name, text)?]),
        }
    }

    /// The device asked for, or the first with events; one without events is refused.
    fn pick_device(name: &str, traces: Vec<Trace>, device: Option<usize>) -> Result<Trace> {
        let count = traces.len();
        let found = traces.into_iter().find(|t| !t.events.is_empty());
        match (found, device) {
            (Some(trace), _) => Ok(trace),
            (None, Some(d)) => Err(Error::Trace(format!(
                "{name}: device {d} has no events in the snapshot (nothing to replay)"
            ))),
            (None, None) if count > 0 => Err(Error::Trace(format!(
                "{name}: not a PyTorch memory snapshot: every device trace is empty (was _record_memory_history on?)"
            ))),
            (None, None) => Err(Error::Trace(format!("{name}: the trace has no events"))),
        }
    }

    /// Whether the trace has anything to replay.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty() && self.start.is_none()
    }

    /// A seeded synthetic trace, named `synthetic:GENERATOR[:key=value...]`.
    pub fn synthetic(spec: &str, seed: u64) -> Result<Trace> {
        synthetic::generate(spec, seed)
    }

    /// Every device a TRACE argument holds: a generator's trace (`synthetic:NAME[:key=value...]`,
    /// seeded by `seed`), or every device of a file (with `device`, only that device's events
    /// are read).
    pub fn load_input(text: &str, device: Option<usize>, seed: u64) -> Result<Vec<Trace>> {
        if Trace::is_synthetic(text) {
            if device.is_some() {
                return Err(Error::Trace(format!(
                    "{text}: a device applies only to PyTorch snapshots"
                )));
            }
            return Ok(vec![Trace::synthetic(text, seed)?]);
        }
        Trace::load_all(Path::new(text), device)
    }

    /// Whether a TRACE argument names a generator rather than a file.
    pub fn is_synthetic(spec: &str) -> bool {
        spec.starts_with("synthetic:")
    }

    fn from_json(name: &str, bytes: &[u8]) -> Result<Trace> {
        let file: TraceFile = serde_json::from_slice(bytes).map_err(|e| {
            // A JSON object that is no trace at all (say the figures file a snapshot is committed
            // with) is told so, rather than by serde's first complaint about its keys.
            let keys = serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(bytes);
            match keys {
                Ok(keys) if !keys.contains_key("vramlab_trace") && !keys.contains_key("memlab_trace") => {
                    let first: Vec<&str> = keys.keys().take(4).map(String::as_str).collect();
                    Error::Trace(format!(
                        "{name}: a JSON object with keys {}{}, not a vramlab trace (which has 'vramlab_trace' and 'events'); vramlab replays PyTorch snapshots (.pickle), RMM logs (.csv) and vramlab traces (.json)",
                        first.join(", "),
                        if keys.len() > first.len() { ", ..." } else { "" }
                    ))
                }
                _ => Error::Json {
                    path: name.into(),
                    reason: e,
                },
            }
        })?;
        if file.vramlab_trace != TRACE_FILE_VERSION {
            return Err(Error::Trace(format!(
                "{name}: vramlab_trace = {}: this vramlab reads version {TRACE_FILE_VERSION}",
                file.vramlab_trace
            )));
        }
        let mut pairing = Pairing::default();
        for (index, event) in file.events.iter().enumerate() {
            match *event {
                TraceEvent::Alloc { id, size, stream } => pairing.alloc(index, id, size, stream),
                TraceEvent::FreeRequested { id } => pairing.free_requested(index, id, None),
                TraceEvent::Free { id } => pairing.free(index, id, None),
                TraceEvent::EmptyCache { .. } | TraceEvent::ReleasePool { .. } => pairing.events.push(*event),
            }
        }
        Ok(pairing.finish(file.name, TraceSource::Vramlab, file.segment_sizes))
    }

    /// Writes the trace as vramlab trace JSON (through a temporary file).
    pub fn save(&self, path: &Path) -> Result<()> {
        let file = TraceFile {
            vramlab_trace: TRACE_FILE_VERSION,
            name: self.name.clone(),
            events: self.events.clone(),
            segment_sizes: self.segment_sizes.clone(),
        };
        let text = serde_json::to_vec(&file).map_err(|e| Error::Trace(format!("{}: {e}", path.display())))?;
        write_atomically(path, &text)
    }

    /// How many allocation requests the trace makes.
    pub fn allocations(&self) -> usize {
        self.events
            .iter()
            .filter(|e| matches!(e, TraceEvent::Alloc { .. }))
            .count()
    }
}

/// Turns address-keyed alloc/free records into id-keyed events, counting what does not pair.
#[derive(Default)]
struct Pairing {
    /// Live allocations by key: (id, size, whether its free was requested).
    live: HashMap<u64, (u64, u64, bool)>,
    /// Keys whose free was requested before any allocation of them was seen (formats whose
    /// frees carry no size).
    requested_unknown: HashSet<u64>,
    /// Keys the trace has allocated at least once (a later free of one that is not live is a
    /// double free, not a block from before the trace).
    allocated: HashSet<u64>,
    /// Blocks the trace frees without having allocated them: live when it began.
    preexisting: Vec<start::Preexisting>,
    /// A block the trace allocated was freed with no request before (an older format).
    completed_unrequested: bool,
    next_id: u64,
    events: Vec<TraceEvent>,
    warnings: TraceWarnings,
}

impl Pairing {
    /// An allocation of `size` bytes at `key` (an address, or a trace's own id).
    fn alloc(&mut self, index: usize, key: u64, size: u64, stream: u64) {
        let id = self.next_id;
        self.next_id += 1;
        // One look-up of the live blocks, not two.
        if let Some((earlier, _, _)) = self.live.insert(key, (id, size, false)) {
            self.warnings.push(format!(
                "event {index}: allocation at {key:#x}, which is still live; the earlier block is taken as freed"
            ));
            self.events.push(TraceEvent::Free { id: earlier });
        }
        self.allocated.insert(key);
        self.events.push(TraceEvent::Alloc { id, size, stream });
    }

    /// A free of `key`, which the trace never allocated, of a block of `size` bytes: the block
    /// was live when the trace began. Its id, now live; `None` for a key the trace allocated
    /// before (a double free).
    fn preexisting(&mut self, key: u64, size: u64, stream: u64, completed_first: bool) -> Option<u64> {
        if self.allocated.contains(&key) {
            return None;
        }
        self.allocated.insert(key);
        let id = self.next_id;
        self.next_id += 1;
        self.preexisting.push(start::Preexisting {
            id,
            addr: key,
            requested: size,
            stream,
            completed_first,
            freed_at: self.events.len(),
        });
        Some(id)
    }

    /// A request that failed in the recording (PyTorch's `oom`): replayed as a request that is
    /// given back at once if the policy can satisfy it, since the recorded program never held it.
    fn failed_alloc(&mut self, size: u64, stream: u64) {
        let id = self.next_id;
        self.next_id += 1;
        self.events.push(TraceEvent::Alloc { id, size, stream });
        self.events.push(TraceEvent::Free { id });
    }

    /// The program let go of `key`; the memory is reusable only at the `free` that follows.
    /// `known` (size, stream) where the format records them: a block the trace never
    /// allocated is then one from before it began.
    fn free_requested(&mut self, index: usize, key: u64, known: Option<(u64, u64)>) {
        match self.live.get_mut(&key) {
            Some((id, _, requested)) if !*requested => {
                *requested = true;
                self.events.push(TraceEvent::FreeRequested { id: *id });
            }
            Some(_) => self.warnings.push(format!(
                "event {index}: second free request of {key:#x} before it completed; skipped"
            )),
            // Not live: with its size and stream, a block from before the trace (or a double free).
            None => match known {
                Some((size, stream)) => match self.preexisting(key, size, stream, false) {
                    Some(id) => {
                        self.live.insert(key, (id, size, true));
                        self.events.push(TraceEvent::FreeRequested { id });
                    }
                    None => self.warnings.push(format!(
                        "event {index}: free request of {key:#x}, which the trace allocated and freed before (a double free); skipped"
                    )),
                },
                None => {
                    self.warnings.allocated_before_start += 1;
                    self.requested_unknown.insert(key);
                    self.warnings.push(format!(
                        "event {index}: free request of {key:#x}, which is not live (a double free, or allocated before the trace began); skipped"
                    ))
                }
            },
        }
    }

    /// A free of `key`; `size` is checked when the format records it.
    fn free(&mut self, index: usize, key: u64, size: Option<u64>) {
        self.free_on(index, key, size, None)
    }

    /// [`Pairing::free`]; with `stream` too, a block the trace never allocated is one from
    /// before it began.
    fn free_on(&mut self, index: usize, key: u64, size: Option<u64>, stream: Option<u64>) {
        match self.live.remove(&key) {
            Some((id, live_size, requested)) => {
                self.completed_unrequested |= !requested;
                if let Some(size) = size.filter(|&s| s != live_size) {
                    self.warnings.push(format!(
                        "event {index}: free of {key:#x} says {size} bytes, its allocation asked for {live_size}"
                    ));
                }
                self.events.push(TraceEvent::Free { id });
            }
            // Not live: with its size and stream, a block from before the trace (or a double free).
            None if size.is_some() && stream.is_some() => {
                let (Some(size), Some(stream)) = (size, stream) else {
                    return;
                };
                match self.preexisting(key, size, stream, true) {
                    Some(id) => self.events.push(TraceEvent::Free { id }),
                    None => self.warnings.push(format!(
                        "event {index}: free of {key:#x}, which the trace allocated and freed before (a double free); skipped"
                    )),
                }
            }
            None => {
                // A completion whose (also unknown) request was counted already is the same block.
                if !self.requested_unknown.remove(&key) {
                    self.warnings.allocated_before_start += 1;
                }
                self.warnings.push(format!(
                    "event {index}: free of {key:#x}, which is not live (a double free, or allocated before the trace began); skipped"
                ))
            }
        }
    }

    fn finish(self, name: String, source: TraceSource, segment_sizes: Vec<u64>) -> Trace {
        Trace {
            name,
            source,
            events: self.events,
            segment_sizes,
            warnings: self.warnings,
            recorded_ops: Vec::new(),
            allocator_settings: None,
            start: None,
            pools: Vec::new(),
            pool_of_id: Vec::new(),
            final_segments: Vec::new(),
            unknowns: Vec::new(),
            peak_resets: Vec::new(),
            annotations: Vec::new(),
            device: 0,
            alloc_addrs: Vec::new(),
            torch_shown: None,
            torch: crate::ReleaseChoice::resolve(None, None).unwrap_or_default(),
            state_at_end: Vec::new(),
            host_state: Vec::new(),
            sources: AllocSources::default(),
        }
    }
}

#[cfg(test)]
mod source_tests {
    use super::*;

    #[test]
    fn the_programs_line_is_the_innermost_frame_outside_the_libraries() {
        let frames = [
            ("??", 0, "c10::cuda::CUDACachingAllocator::malloc"),
            (
                "/opt/conda/lib/python3.11/site-packages/torch/nn/modules/conv.py",
                456,
                "_conv_forward",
            ),
            ("<frozen runpy>", 88, "_run_code"),
            ("/home/me/train.py", 12, "step"),
            ("/home/me/train.py", 40, "<module>"),
        ];
        assert_eq!(program_line(frames).as_deref(), Some("/home/me/train.py:12 in step"));
        assert_eq!(program_line([("/usr/lib/python3.11/threading.py", 1, "run")]), None);
        let mut sources = AllocSources::default();
        sources.push(3, "a.py:1 in f".into());
        sources.push(7, "a.py:1 in f".into());
        assert_eq!(sources.of(7), Some("a.py:1 in f"));
        assert_eq!(sources.of(5), None);
    }
}

#[cfg(test)]
mod settings_effect_tests {
    use super::*;

    fn op(action: DeviceAction) -> RecordedOp {
        RecordedOp {
            at: 0,
            action,
            size: 2 << 20,
            addr: 0,
            stream: 0,
        }
    }

    /// pytorch#183387: expandable_segments:True recorded, plain segments made.
    #[test]
    fn a_setting_the_recording_contradicts_is_said() {
        let mut trace = Trace::new("t", TraceSource::PytorchSnapshot, Vec::new());
        trace.allocator_settings = Some("expandable_segments:True".into());
        trace.recorded_ops = vec![op(DeviceAction::SegmentAlloc)];
        let said = trace.settings_contradictions();
        assert!(said.len() == 1 && said[0].contains("did not take effect"), "{said:?}");
        // Mapped ranges: the setting took effect.
        trace.recorded_ops.push(op(DeviceAction::SegmentMap));
        assert!(trace.settings_contradictions().is_empty());
        // Mapped ranges without the setting: changed at run time.
        trace.allocator_settings = Some("max_split_size_mb:64".into());
        let said = trace.settings_contradictions();
        assert!(
            said.len() == 1 && said[0].contains("changed while the program ran"),
            "{said:?}"
        );
        // Nothing recorded: nothing to contradict.
        trace.allocator_settings = Some("expandable_segments:True".into());
        trace.recorded_ops.clear();
        assert!(trace.settings_contradictions().is_empty());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_sqlite_database_is_named_as_one_and_refused() {
        let mut head = SQLITE_MAGIC.to_vec();
        head.extend_from_slice(&[0x10, 0, 1, 1]);
        let err = Format::of("snap.db", &head).unwrap_err().to_string();
        assert!(
            err.starts_with("snap.db: an SQLite database;") && err.contains("_dump_snapshot"),
            "{err}"
        );
        // A pickle is still a pickle.
        assert_eq!(Format::of("snap.pickle", &[0x80, 4]).unwrap(), Format::Pickle);
    }

    /// A trace of 1 MiB-multiple requests with the device operations `ops` recorded
    /// (`(event, action, bytes, device_free)`).
    fn with_ops(allocs: &[u64], ops: &[(usize, DeviceAction, u64, u64)]) -> Trace {
        let events = allocs
            .iter()
            .enumerate()
            .map(|(id, &size)| TraceEvent::Alloc {
                id: id as u64,
                size,
                stream: 0,
            })
            .collect();
        let mut trace = Trace::new("t", TraceSource::PytorchSnapshot, events);
        trace.recorded_ops = ops
            .iter()
            .map(|&(at, action, size, addr)| RecordedOp {
                at,
                action,
                size,
                addr,
                stream: 0,
            })
            .collect();
        trace
    }

    const MIB: u64 = 1 << 20;

    /// Issue 40: an error whose device_free is 0, in a trace without its device allocations,
    /// implied a cap of the bytes in use (512 B), under which the 512 B request the recording
    /// shows succeeded fails (it needs a 2 MiB segment); the cap is at least the segment each
    /// request that succeeded needs.
    #[test]
    fn a_cap_from_an_error_fits_every_request_that_succeeded() {
        use DeviceAction::*;
        let mut trace = with_ops(&[MIB, 512, 30 * MIB], &[(0, Oom, MIB, 0)]);
        trace.alloc_addrs = vec![u64::MAX, 0x1000, 0x2000];
        let cap = trace.capacity_from_oom().unwrap();
        assert_eq!(
            (cap.lower, cap.lower_at),
            (30 * MIB + 512, Some(2)),
            "{}",
            cap.explain()
        );
        let mut trace = with_ops(&[MIB, 512], &[(0, Oom, MIB, 0)]);
        trace.alloc_addrs = vec![u64::MAX, 0x1000];
        assert_eq!(trace.capacity_from_oom().unwrap().bytes, 2 * MIB);
    }

    /// Every device allocation bounds the cap from below and every error from above, not the
    /// first error alone: a success after the first error raises the lower bound, and a later
    /// error lowers the upper one.
    #[test]
    fn every_event_bounds_the_cap() {
        use DeviceAction::*;
        let mut trace = with_ops(
            &[20 * MIB, 2048 * MIB, 20 * MIB, 512 * MIB],
            &[
                (0, SegmentAlloc, 20 * MIB, 0),
                (1, Oom, 2048 * MIB, 80 << 30),
                (2, SegmentAlloc, 20 * MIB, 0),
                (3, Oom, 512 * MIB, 80 << 30),
            ],
        );
        trace.alloc_addrs = vec![0x1000, u64::MAX, 0x2000, u64::MAX];
        let cap = trace.capacity_from_oom().unwrap();
        assert_eq!((cap.lower, cap.lower_at), (40 * MIB, Some(2)));
        assert_eq!((cap.upper, cap.at), (552 * MIB, 3));
        assert_eq!((cap.bytes, cap.ooms, cap.crossed()), (40 * MIB, 2, false));
        assert!(!cap.upper_from_device_free);
        let said = cap.explain();
        assert!(
            said.contains("the 2 recorded out-of-memory errors") && said.contains("the lower is taken"),
            "{said}"
        );
        assert!(with_ops(&[MIB], &[(0, SegmentAlloc, 2 * MIB, 0)])
            .capacity_from_oom()
            .is_none());
    }

    /// An error whose `device_free` is 0 with nothing held implies a cap of 0 B; the device
    /// allocations the recording shows succeeding after it contradict that. The bounds cross,
    /// the cap taken lets every recorded success succeed, and the explanation says so and why.
    #[test]
    fn crossed_bounds_keep_every_recorded_success_and_say_why() {
        use DeviceAction::*;
        let mut trace = with_ops(
            &[64 * MIB, 2 * MIB, 8 * MIB],
            &[
                (0, Oom, 64 * MIB, 0),
                (1, SegmentAlloc, 2 * MIB, 0),
                (2, SegmentAlloc, 20 * MIB, 0),
            ],
        );
        trace.alloc_addrs = vec![u64::MAX, 0x1000, 0x2000];
        let cap = trace.capacity_from_oom().unwrap();
        assert_eq!((cap.upper, cap.at), (1, 0));
        assert!(cap.upper_from_device_free);
        assert!(cap.crossed());
        assert_eq!((cap.bytes, cap.lower_at), (22 * MIB, Some(2)));
        let said = cap.explain();
        assert!(
            said.contains("the bounds cross") && said.contains("device_free"),
            "{said}"
        );
        assert!(said.contains(&format!("{} B is taken", 22 * MIB)), "{said}");
    }

    /// Without recorded device allocations, the bytes of live allocations still bound the cap
    /// from below (reserved memory is never less), as does the segment each request needs (the
    /// 3 MiB request a 20 MiB one, which the 5 MiB request then fits in), and a request that
    /// failed does not count.
    #[test]
    fn live_allocations_bound_the_cap_where_no_device_allocation_is_recorded() {
        let mut trace = with_ops(&[3 * MIB, 5 * MIB, 100 * MIB], &[(2, DeviceAction::Oom, 100 * MIB, 0)]);
        trace.alloc_addrs = vec![0x1000, 0x2000, u64::MAX];
        let cap = trace.capacity_from_oom().unwrap();
        assert_eq!((cap.lower, cap.lower_at), (20 * MIB, Some(0)));
        let mut trace = with_ops(
            &[12 * MIB, 14 * MIB, 100 * MIB],
            &[(2, DeviceAction::Oom, 100 * MIB, 0)],
        );
        trace.alloc_addrs = vec![0x1000, 0x2000, u64::MAX];
        let cap = trace.capacity_from_oom().unwrap();
        assert_eq!((cap.lower, cap.lower_at), (26 * MIB, Some(1)));
        assert!(cap.crossed(), "nothing held at the error, device_free 0: {cap:?}");
    }

    #[test]
    fn json_round_trips_and_counts_bad_frees() {
        let text = br#"{"vramlab_trace": 1, "name": "t", "events": [
            {"op": "alloc", "id": 7, "size": 100},
            {"op": "free", "id": 7},
            {"op": "free", "id": 7},
            {"op": "free", "id": 9}]}"#;
        let trace = Trace::from_json("t.json", text).unwrap();
        assert_eq!(trace.events.len(), 2);
        assert_eq!(trace.warnings.count, 2);
        assert_eq!(trace.warnings.allocated_before_start, 2);
        assert!(trace
            .warnings
            .lost_start()
            .unwrap()
            .contains("2 frees name blocks allocated before it"));
        assert!(
            trace.warnings.examples[0].starts_with("event 2:"),
            "{:?}",
            trace.warnings
        );
        let dir = std::env::temp_dir().join(format!("vramlab-trace-{}", std::process::id()));
        let path = dir.join("t.json");
        trace.save(&path).unwrap();
        let again = Trace::load(&path).unwrap();
        assert_eq!(again.events, trace.events);
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// A gzip bomb: 120 MB of references to one memoized list in about 120 KB, which took
    /// 3.8 GB to read; refused once it passes 256 times its compressed size.
    #[test]
    fn a_small_gzipped_pickle_cannot_expand_without_bound() {
        use std::io::Write;
        let mut body = b"\x80\x02}X\r\x00\x00\x00device_traces](]q\x00(".to_vec();
        body.extend(std::iter::repeat_n(*b"h\x00", 60_000_000).flatten());
        body.extend_from_slice(b"ees.");
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(&body).unwrap();
        let bytes = gz.finish().unwrap();
        assert!(bytes.len() < 200_000, "{}", bytes.len());
        let err = Trace::from_bytes("bomb.pickle.gz", &bytes, None)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("decompresses to more than") && err.contains("256 times its"),
            "{err}"
        );
        assert!(!err.contains('\n'));
    }

    /// Issue 40: a gzipped RMM log is read whole and each of its lines becomes an event, so it
    /// may expand 64 times its size, not 256 (a 3.5 MiB log grew past 3 GiB replayed); one that
    /// expands less is read.
    #[test]
    fn a_small_gzipped_rmm_log_cannot_expand_without_bound() {
        use std::io::Write;
        let gzip = |rows: usize| {
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
            gz.write_all(b"Thread,Time,Action,Pointer,Size,Stream\n").unwrap();
            for _ in 0..rows {
                gz.write_all(b"1,08:00:00.000000,allocate,0x7f0000000000,256,0x0\n1,08:00:00.000001,free,0x7f0000000000,256,0x0\n")
                    .unwrap();
            }
            gz.finish().unwrap()
        };
        let bytes = gzip(400_000);
        let err = Trace::from_bytes("bomb.csv.gz", &bytes, None).unwrap_err().to_string();
        assert!(
            err.contains("decompresses to more than") && err.contains("64 times its"),
            "{err}"
        );
        assert!(!err.contains('\n'));
        assert_eq!(
            Trace::from_bytes("log.csv.gz", &gzip(1000), None).unwrap().events.len(),
            2000
        );
    }

    #[test]
    fn traces_written_before_the_rename_still_load() {
        let text = br#"{"memlab_trace": 1, "name": "old", "events": [{"op": "alloc", "id": 1, "size": 512}]}"#;
        assert_eq!(Trace::from_json("old.json", text).unwrap().events.len(), 1);
        let source: TraceSource = serde_json::from_str("\"memlab\"").unwrap();
        assert_eq!(source, TraceSource::Vramlab);
    }

    #[test]
    fn wrong_schema_is_one_line() {
        let err = Trace::from_json(
            "t.json",
            br#"{"vramlab_trace": 1, "name": "t", "events": [{"op": "grow"}]}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(err.starts_with("t.json:") && !err.contains('\n'), "{err}");
    }
}
