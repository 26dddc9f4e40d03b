//! What replaying a trace through allocator policies produced: one JSON file per replay.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::files::write_atomically;
use crate::pytorch::TraceAction;
use crate::record::{BackendKind, DeviceInfo};
use crate::trace::{Annotation, Trace, TraceSource, TraceWarnings};
use crate::units::format_bytes;

/// Allocated and reserved bytes after one trace event.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TimelinePoint {
    /// Index of the event in the trace.
    pub event: usize,
    /// Bytes handed out (block sizes, after the policy's rounding).
    pub allocated: u64,
    /// Bytes the policy holds from the device.
    pub reserved: u64,
}

/// A replay's figures under the keys and meaning of `torch.cuda.memory_stats()`, counted by
/// the PyTorch allocator model itself as PyTorch counts them, the same in sim and hw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PytorchStats {
    /// Bytes of live blocks (rounded sizes), highest.
    #[serde(rename = "allocated_bytes.all.peak")]
    pub allocated_peak: u64,
    /// Bytes of live blocks at the end of the trace.
    #[serde(rename = "allocated_bytes.all.current")]
    pub allocated_current: u64,
    /// Bytes held from the device (segments and mapped pages), highest.
    #[serde(rename = "reserved_bytes.all.peak")]
    pub reserved_peak: u64,
    /// Bytes held from the device at the end of the trace.
    #[serde(rename = "reserved_bytes.all.current")]
    pub reserved_current: u64,
    /// Bytes of blocks allocated or still in use by a stream, highest.
    #[serde(rename = "active_bytes.all.peak")]
    pub active_peak: u64,
    /// Bytes the program asked for (unrounded) of active blocks, highest.
    #[serde(rename = "requested_bytes.all.peak")]
    pub requested_peak: u64,
    /// Bytes of free blocks in split segments (cannot be released), highest.
    #[serde(rename = "inactive_split_bytes.all.peak")]
    pub inactive_split_peak: u64,
    /// Segments held from the device (cudaMalloc'd), highest.
    #[serde(rename = "segment.all.peak")]
    pub segment_peak: u64,
    /// Device allocations that failed and were retried after the whole cache was released.
    pub num_alloc_retries: u64,
    /// Requests that failed even then (out of memory).
    pub num_ooms: u64,
    /// Times every stream was synchronised to release the cache.
    pub num_sync_all_streams: u64,
    /// Device allocations and page mappings.
    pub num_device_alloc: u64,
    /// Device frees and page unmappings.
    pub num_device_free: u64,
}

/// A block of a segment at the end of a replay, as PyTorch's snapshot describes one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockView {
    /// Its first byte.
    pub address: u64,
    /// Its size.
    pub size: u64,
    /// What the program asked for (0 when free).
    pub requested_size: u64,
    /// `active_allocated`, `active_pending_free` or `inactive`.
    pub state: String,
}

/// A segment at the end of a replay (for an expandable segment, one mapped range).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentView {
    /// Its first byte.
    pub address: u64,
    /// Its pool family: 0 the default pools, k > 0 the trace's private pool k.
    #[serde(default)]
    pub pool: u32,
    /// The stream its blocks serve.
    pub stream: u64,
    /// Large pool (true) or small.
    pub is_large: bool,
    /// An expandable segment's mapped range.
    pub is_expandable: bool,
    /// Its blocks, in address order.
    pub blocks: Vec<BlockView>,
}

/// One operation of a replay, as PyTorch's snapshot records one (`device_traces` entries).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplayedEvent {
    /// The trace event it happened at.
    pub at: usize,
    /// `alloc`, `free_requested`, `free_completed`, `segment_alloc`, `segment_free`,
    /// `segment_map`, `segment_unmap`, `oom`, or `retry` (a synchronising retry: vramlab's mark,
    /// not written into snapshots).
    pub action: TraceAction,
    /// The address concerned (for `oom`, the bytes the device had free).
    pub addr: u64,
    /// Bytes: requested for allocations and frees, the segment's for segment operations.
    pub size: u64,
    /// The stream.
    pub stream: u64,
}

/// What a replay did, in PyTorch's terms, for the exports (Perfetto, memory_viz snapshots).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReplayedTrace {
    /// Every operation, in order.
    pub events: Vec<ReplayedEvent>,
    /// The segments when the trace ended (before anything was released).
    pub segments: Vec<SegmentView>,
    /// PyTorch's ids of the private pools segments name by index (pool k is `pools[k - 1]`).
    pub pools: Vec<(i64, i64)>,
    /// The phases the program marked in the trace (its snapshot's `external_annotations`).
    pub annotations: Vec<Annotation>,
}

/// How a replay compares with what the recording allocator did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Every recorded device operation reproduced, in order and in place, and the final
    /// segments are the snapshot's.
    Match,
    /// The replay parts from the recording (`first_difference` says where).
    Differs,
    /// Nothing to check against: another setting than the recording's, or a trace that records
    /// no device operations.
    #[default]
    Unchecked,
}

/// One device operation, as the check names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperationView {
    /// `segment_alloc`, `segment_free`, `segment_map`, `segment_unmap` or `oom`.
    pub action: String,
    /// Its bytes.
    pub size: u64,
    /// The trace event it happened at.
    pub at: usize,
}

/// Where a replay first parts from its recording.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FirstDifference {
    /// The index of the device operation (among the recorded ones) where they part; `None`
    /// where the operations agree and the final segments do not.
    pub operation: Option<usize>,
    /// What the recording did there.
    pub recorded: Option<OperationView>,
    /// What the replay did there.
    pub replayed: Option<OperationView>,
}

/// The replay checked against the recording.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedCheck {
    /// `match`, `differs` or `unchecked`.
    pub verdict: Verdict,
    /// Recorded device operations compared.
    pub operations: usize,
    /// Where the replay first parts from the recording.
    pub first_difference: Option<FirstDifference>,
    /// Why the verdict is what it is.
    pub why: String,
    /// One sentence for people.
    pub summary: String,
}

impl RecordedCheck {
    /// Why a what-if replay is not checked.
    pub const WHAT_IF: &'static str = "replayed under other settings than the recording's";

    /// The check of a replay under other settings than the recording's: nothing to compare.
    pub fn what_if() -> RecordedCheck {
        RecordedCheck::unchecked(Self::WHAT_IF)
    }

    /// Whether this is a what-if replay's (nothing was compared, by design).
    pub fn is_what_if(&self) -> bool {
        self.verdict == Verdict::Unchecked && self.why == Self::WHAT_IF
    }

    /// Unchecked, for `why`.
    pub fn unchecked(why: impl Into<String>) -> RecordedCheck {
        let why = why.into();
        RecordedCheck {
            verdict: Verdict::Unchecked,
            operations: 0,
            first_difference: None,
            summary: format!("not checked: {why}"),
            why,
        }
    }

    /// Reads the check as records carry it, and records written before it had a structure
    /// (a sentence, or nothing).
    fn read<'de, D: serde::Deserializer<'de>>(deserializer: D) -> std::result::Result<RecordedCheck, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Written {
            Structured(RecordedCheck),
            Sentence(String),
        }
        Ok(match Option::<Written>::deserialize(deserializer)? {
            Some(Written::Structured(check)) => check,
            Some(Written::Sentence(sentence)) => RecordedCheck {
                summary: sentence,
                ..RecordedCheck::unchecked("written before checks had a verdict")
            },
            None => RecordedCheck::unchecked("written before every result carried a check"),
        })
    }
}

/// One policy's figures for one trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyResult {
    /// The policy, with any parameters given.
    pub policy: String,
    /// Simulated bookkeeping or real device memory.
    pub backend: BackendKind,
    /// Highest device memory held.
    pub peak_reserved_bytes: u64,
    /// Highest sum of live block sizes (after the policy's rounding).
    pub peak_allocated_bytes: u64,
    /// Highest sum of live request sizes.
    pub peak_requested_bytes: u64,
    /// At the peak of allocated bytes: 1 - largest free block / total free bytes held (0 when nothing is free).
    pub fragmentation_at_peak: f64,
    /// At the peak of allocated bytes: block sizes minus request sizes.
    pub rounding_waste_bytes: u64,
    /// Device allocations (cuMemAlloc calls or mapped chunks) made.
    pub device_allocations: u64,
    /// Device memory returned while the trace ran (cudaFree calls, or pages unmapped), as
    /// PyTorch's `num_device_free` counts them: the replay's own release, at the end, of what the
    /// trace leaves held is not counted.
    pub device_frees: u64,
    /// Requests the policy could not satisfy (their frees are skipped).
    pub failed_allocs: u64,
    /// The first failure's message, with its event index.
    pub first_failure: Option<String>,
    /// The smallest device capacity (2 MiB steps) at which the trace replays with no failure; sim only.
    pub min_capacity_bytes: Option<u64>,
    /// The smallest capacity (2 MiB steps) from which the trace fits at every larger one up to the
    /// unlimited replay's peak reserved, each of them replayed (`vramlab tune`; sim only): above
    /// `min_capacity_bytes` where fitting is not monotone in the cap. Where
    /// `always_fits_exact` is false, a cap proven so but not the smallest. `None` where even
    /// unlimited memory fails, or where it was not searched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub always_fits_bytes: Option<u64>,
    /// Whether `always_fits_bytes` is the smallest such cap (the cap 2 MiB below it fails), or
    /// a bound: the search stopped after its limit of probes, every cap from the bound up
    /// replayed, those between `min_capacity_bytes` and it not all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub always_fits_exact: Option<bool>,
    /// Host time of one allocate call, nanoseconds: median and 99th percentile.
    pub alloc_ns_p50: f64,
    /// See `alloc_ns_p50`.
    pub alloc_ns_p99: f64,
    /// Host time of one free call, nanoseconds.
    pub free_ns_p50: f64,
    /// See `free_ns_p50`.
    pub free_ns_p99: f64,
    /// Host time of an allocation plus its free, nanoseconds.
    pub alloc_free_ns_p50: f64,
    /// See `alloc_free_ns_p50`.
    pub alloc_free_ns_p99: f64,
    /// The host times above are of one request in this many, with the frees of its block
    /// (a clock read around every operation cost more than the operations); none where the
    /// replay timed nothing, or every operation (records made before sampling).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timed_one_in: Option<u64>,
    /// Policy-specific counts (hits, misses, returns, splits ...).
    pub counters: BTreeMap<String, u64>,
    /// Device allocation sizes, in order (for comparing with the recording allocator's).
    pub segment_sizes: Vec<u64>,
    /// How many of the trace's recorded segment sizes this replay also allocated (as a multiset).
    pub segments_matched: Option<usize>,
    /// On a GPU: what the device-side check of every block found.
    pub device_check: Option<String>,
    /// For PyTorch's allocator: its own statistics, keyed as in `torch.cuda.memory_stats()`
    /// (taken at the end of the trace, before anything is released).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pytorch_stats: Option<PytorchStats>,
    /// The replay against the recording: for a snapshot replayed under its own settings, every
    /// device operation it recorded and the segments it ended with; otherwise why not.
    #[serde(default, deserialize_with = "RecordedCheck::read")]
    pub recorded_check: RecordedCheck,
    /// Allocated and reserved bytes over the trace (thinned to at most a few thousand points).
    pub timeline: Vec<TimelinePoint>,
    /// What the replay did, operation by operation, when the exports asked for it.
    #[serde(skip)]
    pub replayed: Option<ReplayedTrace>,
}

impl PolicyResult {
    /// The `PYTORCH_ALLOC_CONF` a result of PyTorch's allocator was replayed under, ready to
    /// paste (another policy's name as it is).
    pub fn setting(&self) -> &str {
        crate::pytorch::alloc_conf_of(&self.policy).unwrap_or(&self.policy)
    }

    /// How reports name the setting: as written, `(defaults)` for the empty one.
    pub fn setting_label(&self) -> &str {
        match self.setting() {
            "" => "(defaults)",
            setting => setting,
        }
    }

    /// The setting as tune offers it: quoted for a shell (`'roundup_power2_divisions:[...]'`),
    /// `(defaults)` for the empty one; another policy's name as it is.
    pub fn quoted_label(&self) -> String {
        match crate::pytorch::alloc_conf_of(&self.policy) {
            Some("") => "(defaults)".into(),
            Some(setting) => crate::pytorch::shell_quote(setting),
            None => self.policy.clone(),
        }
    }

    /// How the replay's terminal names a result: `(defaults)` for PyTorch's defaults, as tune
    /// does; the line to paste for another setting of PyTorch's; another policy by its name.
    pub fn display_name(&self) -> String {
        match crate::pytorch::alloc_conf_of(&self.policy) {
            Some("") => "(defaults)".into(),
            Some(setting) => crate::pytorch::alloc_conf_line(setting),
            None => self.policy.clone(),
        }
    }

    /// For a result of PyTorch's allocator, the line to paste in a shell:
    /// `PYTORCH_ALLOC_CONF='...'`, quoted (see [`crate::pytorch::alloc_conf_line`]).
    pub fn paste_line(&self) -> Option<String> {
        crate::pytorch::alloc_conf_of(&self.policy).map(crate::pytorch::alloc_conf_line)
    }
}

/// What `vramlab tune` says of one setting: whether it fits under the cap, from where it
/// always fits, and whether fitting is monotone in the cap for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TuneVerdict {
    /// Its rank (1 first).
    pub rank: usize,
    /// The `PYTORCH_ALLOC_CONF` string ("" for PyTorch's defaults).
    pub setting: String,
    /// How reports name it (`(defaults)` for the empty string).
    pub label: String,
    /// Whether it fits under the cap given (`None` without one).
    pub fits_at_cap: Option<bool>,
    /// The smallest cap that fits (`min_capacity_bytes`).
    pub min_capacity_bytes: Option<u64>,
    /// The cap from which it fits at every larger one (`always_fits_bytes`).
    pub always_fits_bytes: Option<u64>,
    /// False where a cap fits below one that fails (between `min_capacity_bytes` and
    /// `always_fits_bytes`); `None` where that is not known.
    pub monotone: Option<bool>,
    /// The verdict in one line, as the terminal, tune.md and tune.html print it.
    pub text: String,
    /// Where the answer under the cap and the caps found read as a contradiction (it fits
    /// below the smallest cap found, fails above the cap from which it always fits, or fitting
    /// is not monotone around the cap), the one sentence, also in `text`, that says why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// Why the baseline setting did not fit, and what would have.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TunePostmortem {
    /// The baseline: the trace's own settings, or the grid's first.
    pub baseline: String,
    /// Its label (`(defaults)` for the empty string).
    pub baseline_label: String,
    /// Its first failure: the request, and the allocator's state then.
    pub first_failure: String,
    /// How many of the settings fit.
    pub fitting: usize,
    /// How many were tried.
    pub settings: usize,
    /// The setting that fits and reserves least, if any does.
    pub fits_reserving_least: Option<String>,
    /// The line to set it with (`PYTORCH_ALLOC_CONF='...'`, quoted for a shell).
    pub alloc_conf_line: Option<String>,
    /// The post-mortem in lines, as the terminal, tune.md and tune.html print it.
    pub text: Vec<String>,
}

/// A trace replayed through one or more policies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplayRecord {
    /// The trace's name.
    pub trace: String,
    /// Events replayed.
    pub events: usize,
    /// Allocation requests among them.
    pub allocations: usize,
    /// Segment sizes the recording allocator made, when the trace has them.
    pub recorded_segments: usize,
    /// Import warnings.
    pub warnings: TraceWarnings,
    /// Device capacity the replay was limited to, if any.
    pub capacity_bytes: Option<u64>,
    /// The device (a GPU for hw, empty for sim).
    pub device: DeviceInfo,
    /// The commit of the code that made it (empty in records written before records carried it).
    #[serde(default)]
    pub commit: String,
    /// One entry per policy.
    pub results: Vec<PolicyResult>,
    /// The device of the snapshot this is (its index in `device_traces`).
    #[serde(default)]
    pub device_index: usize,
    /// What the allocator held when the trace began, where its start was lost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<StartSummary>,
    /// Where the cap came from (a recorded out-of-memory error), or, for a cap given, how it
    /// reads back: both units, what it is a share of, and what lies outside it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_source: Option<String>,
    /// The memory of the device the replay ran on (the GPU `--gpu` names, or the built-in
    /// profile's): no replay holds more, so "with no cap" means "with all of it". `None` in
    /// records written before records carried it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_bytes: Option<u64>,
    /// The state the snapshot ends with, per pool and stream, where it has no trace to replay
    /// (a bare list of segments, or a snapshot taken without recording history); and pinned
    /// host memory (`host_segments`) as a pool of its own wherever the snapshot has it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub final_state: Vec<PoolState>,
    /// What the input does not determine and what the figures therefore mean, in plain words.
    #[serde(default)]
    pub notes: Vec<String>,
    /// The PyTorch release whose allocator rules the replay followed, and why (where it
    /// replayed PyTorch's allocator).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub torch: Option<crate::ReleaseChoice>,
    /// Every device of the snapshot, each replayed on its own (this record's figures are the
    /// first's); empty for a single trace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<ReplayRecord>,
    /// `vramlab tune`: what it says of each setting, in rank order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub verdicts: Vec<TuneVerdict>,
    /// `vramlab tune`: why the baseline did not fit and what would have (where it did not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub postmortem: Option<TunePostmortem>,
    /// `vramlab tune`: the answer in one line, the last the terminal prints: the setting to
    /// use (quoted), or that the current settings already fit and with how much to spare, or
    /// that nothing fits and the smallest cap that would.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
}

/// One pool and stream of the state a snapshot ends with (its `segments`, or `host_segments`
/// for pinned host memory): what a snapshot answers without a trace, such as the bare list of
/// segments `torch.cuda.memory_snapshot()` returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PoolState {
    /// `large` or `small` (the default pools), `private (A, B) large|small` (a CUDA graph's or
    /// `torch.cuda.MemPool`'s, by `segment_pool_id`), or `pinned host` (never in device figures).
    pub pool: String,
    /// The stream its segments were allocated for.
    pub stream: u64,
    /// Segments.
    pub segments: usize,
    /// Bytes of its segments.
    pub reserved_bytes: u64,
    /// Bytes of live blocks (handed out, or let go of and awaiting their streams).
    pub allocated_bytes: u64,
    /// Bytes the program asked for in those blocks.
    pub requested_bytes: u64,
    /// Bytes of cached free blocks.
    pub free_bytes: u64,
    /// The largest free block.
    pub largest_free_bytes: u64,
    /// 1 - largest free block / free bytes (0 when nothing is free), as `fragmentation_at_peak`.
    pub fragmentation: f64,
}

/// The allocator's state when a trace's window began.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartSummary {
    /// Bytes held from the device.
    pub reserved_bytes: u64,
    /// Bytes of live blocks (block sizes).
    pub allocated_bytes: u64,
    /// Segments (mapped ranges of expandable segments each count).
    pub segments: usize,
    /// Live blocks.
    pub live_blocks: usize,
}

impl ReplayRecord {
    /// The record of `trace` replayed by `results`, on `device` (empty for sim).
    pub fn new(
        trace: &Trace,
        capacity_bytes: Option<u64>,
        device: DeviceInfo,
        results: Vec<PolicyResult>,
    ) -> ReplayRecord {
        ReplayRecord {
            trace: trace.name.clone(),
            events: trace.events.len(),
            allocations: trace.allocations(),
            recorded_segments: trace.segment_sizes.len(),
            warnings: trace.warnings.clone(),
            capacity_bytes,
            device,
            commit: crate::record::code_commit().to_string(),
            results,
            device_index: trace.device,
            start: trace.start.as_ref().map(|start| StartSummary {
                reserved_bytes: start.reserved(),
                allocated_bytes: start.allocated(),
                segments: start.segments.len(),
                live_blocks: start.blocks().filter(|b| b.id.is_some()).count(),
            }),
            capacity_source: None,
            device_bytes: None,
            final_state: if trace.events.is_empty() {
                &trace.state_at_end[..]
            } else {
                &[]
            }
            .iter()
            .chain(&trace.host_state)
            .cloned()
            .collect(),
            notes: notes_of(trace),
            torch: None,
            devices: Vec::new(),
            verdicts: Vec::new(),
            postmortem: None,
            answer: None,
        }
    }

    /// One record for several devices' records: the first's figures, and all of them in
    /// `devices` (a single record stands alone).
    pub fn of_devices(mut records: Vec<ReplayRecord>) -> Result<ReplayRecord> {
        if records.len() <= 1 {
            return records
                .pop()
                .ok_or_else(|| Error::Invalid("the trace has no device to replay".into()));
        }
        let first = records
            .iter()
            .position(|r| !r.results.is_empty())
            .ok_or_else(|| Error::Invalid("no device of the snapshot has events to replay".into()))?;
        let mut top = records[first].clone();
        top.devices = records;
        Ok(top)
    }

    /// The record as one JSON value without the bulky per-event series (timelines, segment
    /// sizes): what `--json` prints and the Python API returns.
    pub fn summary_json(&self) -> serde_json::Value {
        fn slim(value: &mut serde_json::Value) {
            if let Some(results) = value.get_mut("results").and_then(|r| r.as_array_mut()) {
                for result in results.iter_mut().filter_map(|r| r.as_object_mut()) {
                    result.remove("timeline");
                    result.remove("segment_sizes");
                    // The line to paste, quoted for a shell, beside the policy's name.
                    let paste = result
                        .get("policy")
                        .and_then(|p| p.as_str())
                        .and_then(crate::pytorch::alloc_conf_of)
                        .map(crate::pytorch::alloc_conf_line);
                    if let Some(paste) = paste {
                        result.insert("paste".into(), paste.into());
                    }
                }
            }
            if let Some(devices) = value.get_mut("devices").and_then(|d| d.as_array_mut()) {
                devices.iter_mut().for_each(slim);
            }
        }
        let mut value = serde_json::to_value(self).expect("a replay record serialises");
        slim(&mut value);
        value
    }

    /// Writes the record as JSON (through a temporary file).
    pub fn save(&self, path: &Path) -> Result<()> {
        let text = serde_json::to_vec(self).map_err(|e| Error::Invalid(format!("{}: {e}", path.display())))?;
        write_atomically(path, &text)
    }

    /// The lines `vramlab tune` concludes with: each setting's verdict, then the post-mortem
    /// (what the terminal prints and tune.md and tune.html hold), an empty line between.
    pub fn tune_lines(&self) -> Vec<String> {
        let mut lines: Vec<String> = self.verdicts.iter().map(|v| v.text.clone()).collect();
        if let Some(postmortem) = &self.postmortem {
            lines.push(String::new());
            lines.extend(postmortem.text.iter().cloned());
        }
        if let Some(answer) = &self.answer {
            lines.push(String::new());
            lines.push(answer.clone());
        }
        lines
    }

    /// What a replay with no cap reaches: all of the device's memory, where the record knows
    /// it (a setting that fails there needs more than the device has, not "unlimited memory").
    pub fn whole_device(&self) -> String {
        match self.device_bytes {
            Some(bytes) => format!("all of the device's {}", Self::format_cap(bytes)),
            None => "no cap".into(),
        }
    }

    /// A cap as tune writes it: MiB, whole on the 2 MiB grid the searches step on, so that caps
    /// 2 MiB apart never read the same.
    pub fn format_cap(bytes: u64) -> String {
        const MIB: u64 = 1 << 20;
        let text = if bytes.is_multiple_of(MIB) {
            (bytes / MIB).to_string()
        } else {
            format!("{:.2}", bytes as f64 / MIB as f64)
        };
        let (whole, fraction) = text.split_at(text.find('.').unwrap_or(text.len()));
        let mut grouped = String::new();
        for (i, digit) in whole.chars().enumerate() {
            if i > 0 && (whole.len() - i).is_multiple_of(3) {
                grouped.push(',');
            }
            grouped.push(digit);
        }
        format!("{grouped}{fraction} MiB")
    }

    /// Writes what `vramlab tune` concludes into the record, from its ranked results: each
    /// setting's verdict (`verdicts`) and, where `baseline` (the setting the trace ran under, or
    /// the grid's first) did not fit, the post-mortem (`postmortem`). The lines are the text
    /// the terminal, tune.md and tune.html print (see [`ReplayRecord::tune_lines`]).
    pub fn conclude_tune(&mut self, baseline: &str) {
        let cap = Self::format_cap;
        self.verdicts = self
            .results
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let label = r.quoted_label();
                let fits = r.failed_allocs == 0;
                let exact = r.always_fits_exact == Some(true);
                let monotone = match (r.min_capacity_bytes, r.always_fits_bytes) {
                    (Some(min), Some(always)) if min < always && exact => Some(false),
                    (Some(_), Some(_)) if exact => Some(true),
                    _ => None,
                };
                let mut text = match (self.capacity_bytes, fits) {
                    (Some(limit), true) => format!("{label}: fits under the cap of {}", cap(limit)),
                    (Some(limit), false) => format!("{label}: does not fit under the cap of {}", cap(limit)),
                    (None, true) => format!("{label}: fits"),
                    (None, false) => format!("{label}: does not fit even with {}", self.whole_device()),
                };
                match (r.min_capacity_bytes, r.always_fits_bytes) {
                    (Some(min), Some(always)) => {
                        if min == always {
                            text.push_str(&format!("; it fits at every cap from {} up", cap(always)));
                        } else {
                            text.push_str(&format!(
                                "; the smallest cap that fits is {}, and it fits at every cap from {} up",
                                cap(min),
                                cap(always)
                            ));
                        }
                        if monotone == Some(false) {
                            text.push_str(&format!(
                                ". Fitting is not monotone for this setting: it fits at {} but fails at some caps between {} and {} ({} among them)",
                                cap(min),
                                cap(min),
                                cap(always),
                                cap(always - (2 << 20))
                            ));
                        } else if !exact && min < always {
                            text.push_str(&format!(
                                " (a bound: the search stopped after its limit of replays, and the caps between {} and {} were not all replayed)",
                                cap(min),
                                cap(always)
                            ));
                        }
                    }
                    (Some(min), None) => text.push_str(&format!("; the smallest cap that fits is {}", cap(min))),
                    // No cap fits: the search's largest, the device's whole memory, fails too.
                    (None, _) if self.capacity_bytes.is_some() => text.push_str(&match self.device_bytes {
                        Some(_) => format!(", nor under any other cap: even {} is too little for it", self.whole_device()),
                        None => ", nor under any other cap: it fails even with no cap".into(),
                    }),
                    (None, _) => {}
                }
                text.push('.');
                let why = self.capacity_bytes.and_then(|limit| Self::why_not_monotone(r, limit, fits));
                if let Some(why) = &why {
                    text.push(' ');
                    text.push_str(why);
                }
                TuneVerdict {
                    rank: i + 1,
                    setting: r.setting().to_string(),
                    label: r.setting_label().to_string(),
                    fits_at_cap: self.capacity_bytes.map(|_| fits),
                    min_capacity_bytes: r.min_capacity_bytes,
                    always_fits_bytes: r.always_fits_bytes,
                    monotone,
                    text,
                    why,
                }
            })
            .collect();
        self.postmortem = self
            .results
            .iter()
            .find(|r| r.setting() == baseline && r.failed_allocs > 0)
            .map(|base| {
                let fitting: Vec<&PolicyResult> = self.results.iter().filter(|r| r.failed_allocs == 0).collect();
                // The one reserving least (ties: the better ranked).
                let least = fitting.iter().min_by_key(|r| r.peak_reserved_bytes);
                let first_failure = base.first_failure.clone().unwrap_or_default();
                let mut text = vec![format!("{} does not fit: {first_failure}", base.quoted_label())];
                let line = least.map(|r| crate::pytorch::alloc_conf_line(r.setting()));
                text.push(match (&line, least) {
                    (Some(line), Some(least)) => {
                        let mut fit = format!(
                            "{} of {} settings fit; the one reserving least ({}): {line}",
                            fitting.len(),
                            self.results.len(),
                            format_bytes(least.peak_reserved_bytes)
                        );
                        // Ranked first: the one that fits from the smallest cap, where another.
                        if let Some((first, always)) = fitting
                            .first()
                            .filter(|first| first.setting() != least.setting())
                            .and_then(|first| first.always_fits_bytes.map(|always| (first, always)))
                        {
                            fit.push_str(&format!(
                                "; the one that fits at every cap from the smallest up ({}): {}",
                                cap(always),
                                crate::pytorch::alloc_conf_line(first.setting())
                            ));
                        }
                        fit
                    }
                    _ => {
                        let mut none = format!("none of the {} settings fits", self.results.len());
                        if self.capacity_bytes.is_some() {
                            none.push_str(" under this cap");
                        }
                        // Ranked by the cap each needs: the first needs least.
                        if let Some((r, always)) = self
                            .results
                            .iter()
                            .find_map(|r| r.always_fits_bytes.map(|always| (r, always)))
                        {
                            none.push_str(&format!(
                                "; the one needing least: {} fits at every cap from {} up",
                                crate::pytorch::alloc_conf_line(r.setting()),
                                cap(always)
                            ));
                        }
                        none
                    }
                });
                TunePostmortem {
                    baseline: base.setting().to_string(),
                    baseline_label: base.setting_label().to_string(),
                    first_failure,
                    fitting: fitting.len(),
                    settings: self.results.len(),
                    fits_reserving_least: least.map(|r| r.setting().to_string()),
                    alloc_conf_line: line,
                    text,
                }
            });
        self.answer = Some(self.tune_answer(baseline));
    }

    /// The sentence that explains a setting's verdict under the cap `limit` where it reads as
    /// a contradiction of the caps the search found: it fits under the cap but below the
    /// smallest cap found, or not at every cap above the cap; or it fails under the cap though
    /// a smaller cap fits, or though the cap is above the one from which it always fits. `None`
    /// where the figures agree with the answer.
    fn why_not_monotone(r: &PolicyResult, limit: u64, fits: bool) -> Option<String> {
        let cap = Self::format_cap;
        let (min, always) = (r.min_capacity_bytes?, r.always_fits_bytes?);
        let exact = r.always_fits_exact == Some(true);
        let setting = r.setting();
        // The mechanism: the cap enters the allocator's decisions beyond "does this segment fit".
        let gc = setting
            .split(',')
            .find_map(|kv| kv.trim().strip_prefix("garbage_collection_threshold:"))
            .map(str::trim);
        let reason = match gc {
            Some(threshold) => format!(
                "garbage_collection_threshold:{threshold} releases cached blocks once reserved memory passes {threshold} of the cap, so what it holds moves with the cap and a larger cap can fail where a smaller one fits{}",
                if exact {
                    String::new()
                } else {
                    format!(" (without a cap it never collects, and from {} up every cap replays as no cap does)", cap(always))
                }
            ),
            None => "a request refused under a smaller cap releases the cache and retries, which can leave memory less fragmented than a larger cap that refused nothing then".to_string(),
        };
        // The replay under the cap and the search's probes place segments differently where the
        // replay followed a recording's addresses (its own settings) and the search a fresh
        // process's driver; where segments lie decides which cached block best fit reuses.
        let placement = !r.recorded_check.is_what_if()
            && r.recorded_check.verdict != Verdict::Unchecked
            && ((fits && limit < min) || (!fits && limit >= always));
        let said = if placement {
            format!(
                "The replay under the cap of {} put segments at the recording's addresses, the search for the caps as a fresh process's driver would, and where segments lie decides which cached block is reused: near {} the two can answer differently",
                cap(limit),
                cap(min.min(always))
            )
        } else if fits && limit < min {
            format!(
                "It fits at {} all the same, below the smallest cap the search found: {reason}",
                cap(limit)
            )
        } else if !fits && limit >= always {
            format!(
                "It fails at {} all the same, above the cap from which it fit in the search: {reason}",
                cap(limit)
            )
        } else if exact && min < always && limit < always && (fits || min <= limit) {
            // The verdict already says where it fits and fails: the sentence says why.
            format!("Why: {reason}")
        } else if fits && limit < always {
            if exact {
                format!(
                    "It fits at {} but fails at some caps above it, below {}: {reason}",
                    cap(limit),
                    cap(always)
                )
            } else {
                format!(
                    "It fits at {}; not every cap between it and {} was replayed: {reason}",
                    cap(limit),
                    cap(always)
                )
            }
        } else if !fits && min <= limit && limit < always {
            format!("It fits at {} but not at {}, above it: {reason}", cap(min), cap(limit))
        } else {
            return None;
        };
        Some(format!("{said}."))
    }

    /// The one line that answers a tune (see [`ReplayRecord::answer`]), from the ranked results;
    /// `baseline` is the setting the job runs under now.
    fn tune_answer(&self, baseline: &str) -> String {
        let cap = Self::format_cap;
        // What a setting needs: the cap from which it fits at every larger one, else the
        // smallest that fits, else its peak; "at least" where the search stopped at a bound.
        let needs = |r: &PolicyResult| {
            r.always_fits_bytes
                .or(r.min_capacity_bytes)
                .unwrap_or(r.peak_reserved_bytes)
        };
        let base = self.results.iter().find(|r| r.setting() == baseline);
        let best = self.results.first();
        let current = |r: &PolicyResult| match r.setting() {
            "" => "your current settings (PyTorch's defaults)".to_string(),
            _ => format!("your current settings ({})", r.quoted_label()),
        };
        let use_line = |r: &PolicyResult| r.paste_line().unwrap_or_else(|| r.policy.clone());
        let Some(best) = best else {
            return "answer: no setting was replayed".into();
        };
        match self.capacity_bytes {
            Some(limit) => match base {
                Some(base) if base.failed_allocs == 0 => {
                    let spare = limit.saturating_sub(needs(base));
                    format!(
                        "answer: {} already fit under the cap of {}, with {} to spare; nothing to change",
                        current(base),
                        cap(limit),
                        cap(spare)
                    )
                }
                _ if best.failed_allocs == 0 => format!(
                    "answer: {} fits under the cap of {} (at every cap from {} up): put it before the job's command{}",
                    use_line(best),
                    cap(limit),
                    cap(needs(best)),
                    base.map_or(String::new(), |b| format!("; {} do not fit", current(b)))
                ),
                _ => match self.results.iter().find(|r| r.always_fits_bytes.is_some() || r.min_capacity_bytes.is_some()) {
                    Some(least) => format!(
                        "answer: nothing fits under the cap of {}: the smallest cap is {}, with {}; or reduce what the job holds at its peak (batch size, sequence length, model, optimizer state) by about {}",
                        cap(limit),
                        cap(needs(least)),
                        use_line(least),
                        cap(needs(least).saturating_sub(limit))
                    ),
                    None => format!(
                        "answer: nothing fits under the cap of {}, nor under any other cap: every setting fails even with {} (see the first failures); reduce what the job holds at its peak (batch size, sequence length, model, optimizer state) or use a GPU with more memory",
                        cap(limit),
                        self.whole_device()
                    ),
                },
            },
            None => match base.filter(|b| b.failed_allocs == 0) {
                Some(base) => format!(
                    "answer: no cap given: {} need {}; the setting needing least, {}, needs {}; give --capacity for a verdict",
                    current(base),
                    cap(needs(base)),
                    use_line(best),
                    cap(needs(best))
                ),
                None if best.failed_allocs == 0 => format!(
                    "answer: {} fits with no cap, needing {}: put it before the job's command{}",
                    use_line(best),
                    cap(needs(best)),
                    base.map_or(String::new(), |b| format!(
                        "; {} fail even with {}",
                        current(b),
                        self.whole_device()
                    ))
                ),
                None => format!(
                    "answer: nothing fits, even with {}: every setting fails (see the first failures); reduce what the job holds at its peak (batch size, sequence length, model, optimizer state) or use a GPU with more memory",
                    self.whole_device()
                ),
            },
        }
    }

    /// Reads a record written by [`ReplayRecord::save`].
    pub fn load(path: &Path) -> Result<ReplayRecord> {
        let text = crate::files::read_input(path)?;
        serde_json::from_slice(&text).map_err(|e| Error::Json {
            path: path.into(),
            reason: e,
        })
    }
}

/// What a replay of `trace` must say beside its figures: what the input does not determine,
/// and for a window whose start was lost, what its peaks and a what-if mean.
pub(crate) fn notes_of(trace: &Trace) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(start) = &trace.start {
        notes.push(format!(
            "the trace began mid-run: the allocator then held {} B in {} segments, {} B of it in {} live blocks, rebuilt from the snapshot's final segments; the peaks are the window's, and PyTorch's lifetime peaks (memory_stats) may lie before it",
            start.reserved(),
            start.segments.len(),
            start.allocated(),
            start.blocks().filter(|b| b.id.is_some()).count()
        ));
        notes.push(
            "a what-if setting or cap applies from the window's start: the starting layout is the recorded allocator's"
                .to_string(),
        );
        let pending: Vec<_> = start
            .blocks()
            .filter(|b| b.id.is_some() && b.state == crate::BlockState::Pending)
            .collect();
        if !pending.is_empty() {
            notes.push(format!(
                "{} of the blocks live at the start ({} B, requesting {} B) had their free requested before the window, which only completes it: PyTorch then counts them in active_bytes and requested_bytes but no longer in allocated_bytes, so the window's requested bytes may exceed its allocated bytes",
                pending.len(),
                pending.iter().map(|b| b.size).sum::<u64>(),
                pending.iter().map(|b| b.requested).sum::<u64>(),
            ));
        }
    }
    if trace.source == TraceSource::PytorchSnapshot && trace.allocator_settings.is_none() && !trace.events.is_empty() {
        notes.push(
            "the snapshot does not name its allocator settings: PyTorch's defaults are taken as the recording's, which its check puts to the test".to_string(),
        );
    }
    notes.extend(trace.unknowns.iter().cloned());
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_read_in_mib_whole_on_the_grid() {
        assert_eq!(ReplayRecord::format_cap(276 << 20), "276 MiB");
        assert_eq!(ReplayRecord::format_cap(3_395_289_088), "3,238 MiB");
        assert_eq!(ReplayRecord::format_cap(3_391_687_756), "3,234.57 MiB");
        assert_eq!(ReplayRecord::format_cap((1 << 30) - 1), "1,024.00 MiB");
        assert_eq!(ReplayRecord::format_cap(0), "0 MiB");
    }
}
