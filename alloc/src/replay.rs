//! Replaying a trace through a policy, and the figures that come out.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap as HashMap;
use std::time::Instant;

use experiments::{
    BackendKind, BlockState, DeviceAction, FirstDifference, OperationView, PolicyResult, PolicySpec, RecordedCheck,
    RecordedOp, ReplayedEvent, ReplayedTrace, SegmentView, TimelinePoint, Trace, TraceEvent, Verdict,
};

use super::{build_policy, Block, DeviceMemory, Metered, Policy};

/// How a replay runs.
#[derive(Debug, Clone, Copy)]
pub struct ReplayOptions {
    /// Refuse device memory beyond this many bytes.
    pub capacity: Option<u64>,
    /// Thin the allocated/reserved timeline to at most this many points (0: none).
    pub timeline_points: usize,
    /// Time every allocate and free call on the host clock.
    pub time_ops: bool,
    /// Compare the policy's device operations with those the trace recorded (a replay of a
    /// trace under the settings it was recorded with).
    pub check_recorded: bool,
    /// Stop at the first request the policy cannot satisfy (a probe that only asks "does it fit?").
    pub stop_at_first_failure: bool,
    /// Keep every operation and the final segments, in PyTorch's terms, for the exports.
    pub record_events: bool,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        ReplayOptions {
            capacity: None,
            timeline_points: 2000,
            time_ops: true,
            check_recorded: false,
            stop_at_first_failure: false,
            record_events: false,
        }
    }
}

impl ReplayOptions {
    /// A replay that only asks whether the trace fits under `capacity`: no timeline, no clock,
    /// stopping at the first refusal.
    pub fn probe(capacity: Option<u64>) -> ReplayOptions {
        ReplayOptions {
            capacity,
            timeline_points: 0,
            time_ops: false,
            check_recorded: false,
            stop_at_first_failure: true,
            record_events: false,
        }
    }
}

/// What a backend does around each operation; none of it is timed. `hw` writes every block
/// handed out with a kernel and checks it when it comes back.
pub trait ReplayHooks {
    /// Called right after a block is handed out.
    fn allocated(&mut self, id: u64, block: Block) -> Result<(), String>;
    /// Called right before a block is freed.
    fn freeing(&mut self, id: u64, block: Block) -> Result<(), String>;
    /// Called at the end: what the backend's own checks found.
    fn finish(&mut self) -> Result<Option<String>, String>;
}

/// No hooks: pure simulation.
impl ReplayHooks for () {
    fn allocated(&mut self, _id: u64, _block: Block) -> Result<(), String> {
        Ok(())
    }
    fn freeing(&mut self, _id: u64, _block: Block) -> Result<(), String> {
        Ok(())
    }
    fn finish(&mut self) -> Result<Option<String>, String> {
        Ok(None)
    }
}

/// Thins a per-event series to about `points` points, keeping each stretch's highest values.
struct Timeline {
    stride: usize,
    current: Option<TimelinePoint>,
    points: Vec<TimelinePoint>,
}

impl Timeline {
    fn new(events: usize, points: usize) -> Timeline {
        Timeline {
            stride: if points == 0 {
                usize::MAX
            } else {
                events.div_ceil(points).max(1)
            },
            current: None,
            points: Vec::new(),
        }
    }

    fn record(&mut self, event: usize, allocated: u64, reserved: u64) {
        if self.stride == usize::MAX {
            return;
        }
        match &mut self.current {
            Some(p) if p.event / self.stride == event / self.stride => {
                p.allocated = p.allocated.max(allocated);
                p.reserved = p.reserved.max(reserved);
            }
            _ => {
                self.points.extend(self.current.take());
                self.current = Some(TimelinePoint {
                    event,
                    allocated,
                    reserved,
                });
            }
        }
    }

    fn finish(mut self) -> Vec<TimelinePoint> {
        self.points.extend(self.current.take());
        self.points
    }
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn p50_p99(mut samples: Vec<f64>) -> (f64, f64) {
    samples.sort_by(f64::total_cmp);
    (percentile(&samples, 0.5), percentile(&samples, 0.99))
}

/// How many of `recorded` (as a multiset) also appear in `made`.
fn multiset_overlap(recorded: &[u64], made: &[u64]) -> usize {
    let mut counts: HashMap<u64, usize> = HashMap::default();
    for &size in made {
        *counts.entry(size).or_default() += 1;
    }
    recorded
        .iter()
        .filter(|size| match counts.get_mut(size) {
            Some(n) if *n > 0 => {
                *n -= 1;
                true
            }
            _ => false,
        })
        .count()
}

/// Replays `trace` through the policy `spec` names, over `device`.
pub fn replay(
    trace: &Trace,
    spec: &PolicySpec,
    device: &mut dyn DeviceMemory,
    options: ReplayOptions,
    hooks: &mut dyn ReplayHooks,
    backend: BackendKind,
) -> Result<PolicyResult, experiments::Error> {
    replay_policy(
        trace,
        &spec.label(),
        build_policy(spec)?,
        device,
        options,
        hooks,
        backend,
    )
}

/// Takes out of the live table the blocks a flush finished before the trace's own free came
/// (rare: a scan will do).
fn settle_finished(
    policy: &mut dyn Policy,
    live: &mut LiveTable,
    mut recorder: Option<&mut Recorder>,
    hooks: &mut dyn ReplayHooks,
    index: usize,
) -> Result<(), String> {
    for block in policy.drain_finished() {
        if let Some(done) = live.let_go_at(block.addr) {
            let entry = live.remove(done).expect("found just now");
            if let Some(r) = recorder.as_deref_mut() {
                r.push(index, "free_completed", block.addr, entry.size, entry.stream);
            }
            hooks.freeing(done, block)?;
        }
    }
    Ok(())
}

/// A block the replay has handed to the trace's program.
struct Live {
    block: Block,
    size: u64,
    stream: u64,
    ns: f64,
    /// The program let go of it (`FreeRequested`); it waits for its `Free`.
    let_go: bool,
}

/// Live blocks by trace id: a vector where the ids are dense (every importer numbers them from
/// 0), a hash map otherwise.
enum LiveTable {
    Dense(Vec<Option<Live>>),
    Sparse(HashMap<u64, Live>),
}

/// How many slots a table indexed by the trace's ids needs, when the ids are dense enough for
/// one (every importer numbers them from 0); `None` when a hash map should hold them.
pub(crate) fn dense_id_slots(trace: &Trace) -> Option<usize> {
    let started = trace.start.iter().flat_map(|s| s.blocks()).filter_map(|b| b.id);
    let max_id = trace
        .events
        .iter()
        .map(|e| match *e {
            TraceEvent::Alloc { id, .. } | TraceEvent::FreeRequested { id } | TraceEvent::Free { id } => id,
            TraceEvent::EmptyCache { .. } | TraceEvent::ReleasePool { .. } => 0,
        })
        .chain(started)
        .max()
        .unwrap_or(0);
    (max_id <= 2 * trace.events.len() as u64 + 1024).then(|| max_id as usize + 1)
}

impl LiveTable {
    fn for_trace(trace: &Trace) -> LiveTable {
        match dense_id_slots(trace) {
            Some(slots) => LiveTable::Dense((0..slots).map(|_| None).collect()),
            None => LiveTable::Sparse(HashMap::default()),
        }
    }

    fn insert(&mut self, id: u64, live: Live) {
        match self {
            LiveTable::Dense(slots) => slots[id as usize] = Some(live),
            LiveTable::Sparse(map) => {
                map.insert(id, live);
            }
        }
    }

    fn get_mut(&mut self, id: u64) -> Option<&mut Live> {
        match self {
            LiveTable::Dense(slots) => slots.get_mut(id as usize).and_then(Option::as_mut),
            LiveTable::Sparse(map) => map.get_mut(&id),
        }
    }

    fn remove(&mut self, id: u64) -> Option<Live> {
        match self {
            LiveTable::Dense(slots) => slots.get_mut(id as usize).and_then(Option::take),
            LiveTable::Sparse(map) => map.remove(&id),
        }
    }

    /// The id of the live block at `addr` that the program has let go of.
    fn let_go_at(&self, addr: u64) -> Option<u64> {
        let matches = |live: &Live| live.let_go && live.block.addr == addr;
        match self {
            LiveTable::Dense(slots) => slots
                .iter()
                .position(|slot| slot.as_ref().is_some_and(matches))
                .map(|i| i as u64),
            LiveTable::Sparse(map) => map.iter().find(|(_, live)| matches(live)).map(|(&id, _)| id),
        }
    }

    fn drain(self) -> Vec<(u64, Block)> {
        let mut out: Vec<(u64, Block)> = match self {
            LiveTable::Dense(slots) => slots
                .into_iter()
                .enumerate()
                .filter_map(|(id, slot)| slot.map(|live| (id as u64, live.block)))
                .collect(),
            LiveTable::Sparse(map) => map.into_iter().map(|(id, live)| (id, live.block)).collect(),
        };
        out.sort_by_key(|(id, _)| *id);
        out
    }
}

/// Writes down what a replay does, in PyTorch's terms, when the exports ask for it.
struct Recorder {
    events: Vec<ReplayedEvent>,
    ops_seen: usize,
    /// The stream of each segment or mapped range by its first address: a segment given back
    /// is recorded on its own stream, whichever request made room by giving it back.
    streams: BTreeMap<u64, u64>,
}

impl Recorder {
    fn push(&mut self, at: usize, action: &'static str, addr: u64, size: u64, stream: u64) {
        self.events.push(ReplayedEvent {
            at,
            action,
            addr,
            size,
            stream,
        });
    }

    /// The device operations logged since the last call: those that take memory for the
    /// request on `stream`, those that give it back on the stream of what they give back.
    fn device_ops(&mut self, ops: &[RecordedOp], stream: u64) {
        for op in &ops[self.ops_seen..] {
            let stream = match op.action {
                DeviceAction::SegmentAlloc | DeviceAction::SegmentMap => {
                    self.streams.insert(op.addr, stream);
                    stream
                }
                DeviceAction::SegmentFree | DeviceAction::SegmentUnmap => {
                    self.streams.range(..=op.addr).next_back().map_or(stream, |(_, &s)| s)
                }
                DeviceAction::Oom => stream,
            };
            self.push(op.at, op.action.name(), op.addr, op.size, stream);
        }
        self.ops_seen = ops.len();
    }
}

/// The replay checked against the recording: its device operations, in order and in place,
/// and the segments it ends with (`own`: replayed under the recording's settings).
/// Allocations the replay placed elsewhere than the recording did: how many, and the first
/// (its event, the recorded address, the replay's).
#[derive(Default)]
struct Placement {
    checked: bool,
    misplaced: usize,
    first: Option<(usize, u64, u64)>,
}

fn check_recorded(
    trace: &Trace,
    own: bool,
    made: &[RecordedOp],
    segments: Option<Vec<SegmentView>>,
    placement: &Placement,
) -> RecordedCheck {
    if !own {
        return RecordedCheck::what_if();
    }
    if let Some((at, recorded, replayed)) = placement.first {
        return RecordedCheck {
            verdict: Verdict::Differs,
            operations: trace.recorded_ops.len(),
            first_difference: None,
            why: format!(
                "the allocation at event {at} was placed at {replayed:#x}, the recording placed it at {recorded:#x} ({} allocations placed elsewhere)",
                placement.misplaced
            ),
            summary: format!(
                "{} allocations placed elsewhere than the recording placed them, the first at event {at}",
                placement.misplaced
            ),
        };
    }
    let placed = if placement.checked {
        ", every allocation where the recording placed it"
    } else {
        ""
    };
    let layout = segments.map(|segments| same_layout(&trace.final_segments, &segments));
    if !trace.records_device_operations() {
        let why = "the trace records no device operations (no segment events), so the replay's cannot be checked";
        return match layout {
            Some(Err(difference)) => RecordedCheck {
                verdict: Verdict::Differs,
                operations: 0,
                first_difference: None,
                why: format!("{why}; and the segments it ends with differ from the snapshot's: {difference}"),
                summary: format!("differs: the segments the replay ends with are not the snapshot's ({difference})"),
            },
            Some(Ok(())) => RecordedCheck::unchecked(format!(
                "{why}; the segments it ends with are the snapshot's, block for block{placed}"
            )),
            None => RecordedCheck::unchecked(why),
        };
    }
    let recorded = &trace.recorded_ops;
    let view = |op: &RecordedOp| OperationView {
        action: op.action.name().to_string(),
        size: op.size,
        at: op.at,
    };
    let describe = |op: &RecordedOp| format!("{} of {} B at event {}", op.action.name(), op.size, op.at);
    let parted = match recorded.iter().zip(made).position(|(r, m)| !r.same_as(m)) {
        Some(i) => Some((i, Some(&recorded[i]), Some(&made[i]))),
        None if recorded.len() == made.len() => None,
        None => {
            let i = recorded.len().min(made.len());
            Some((i, recorded.get(i), made.get(i)))
        }
    };
    if let Some((i, r, m)) = parted {
        let said = |op: Option<&RecordedOp>| op.map_or("nothing more".to_string(), describe);
        return RecordedCheck {
            verdict: Verdict::Differs,
            operations: recorded.len(),
            first_difference: Some(FirstDifference {
                operation: Some(i),
                recorded: r.map(view),
                replayed: m.map(view),
            }),
            why: format!(
                "device operation {i} of {}: the recording made {}, the replay {}",
                recorded.len(),
                said(r),
                said(m)
            ),
            summary: format!(
                "parts from the recording at device operation {i}: recorded {}, replayed {}",
                said(r),
                said(m)
            ),
        };
    }
    match layout {
        Some(Err(difference)) => RecordedCheck {
            verdict: Verdict::Differs,
            operations: recorded.len(),
            first_difference: Some(FirstDifference {
                operation: None,
                recorded: None,
                replayed: None,
            }),
            why: format!(
                "all {} recorded device operations reproduced, but the segments the replay ends with are not the snapshot's: {difference}",
                recorded.len()
            ),
            summary: format!("differs in the final segments: {difference}"),
        },
        Some(Ok(())) => RecordedCheck {
            verdict: Verdict::Match,
            operations: recorded.len(),
            first_difference: None,
            why: format!(
                "all {} recorded device operations reproduced, in order and in place{placed}, and the final segments are the snapshot's",
                recorded.len()
            ),
            summary: format!(
                "all {} recorded device operations reproduced, in order and in place; final segments equal",
                recorded.len()
            ),
        },
        None => RecordedCheck {
            verdict: Verdict::Match,
            operations: recorded.len(),
            first_difference: None,
            why: format!(
                "all {} recorded device operations reproduced, in order and in place{placed} (the trace has no final segments to compare)",
                recorded.len()
            ),
            summary: format!(
                "all {} recorded device operations reproduced, in order and in place",
                recorded.len()
            ),
        },
    }
}

/// Whether the replay ends with the segments the snapshot recorded: each segment's pool, size
/// class and blocks (size, state, request), whatever their addresses.
fn same_layout(recorded: &[experiments::StartSegment], made: &[SegmentView]) -> Result<(), String> {
    type Shape = (u32, bool, bool, Vec<(u64, &'static str, u64)>);
    let state_name = |state: BlockState| match state {
        BlockState::Free => "inactive",
        BlockState::Allocated => "active_allocated",
        BlockState::Pending => "active_pending_free",
    };
    let mut want: Vec<Shape> = recorded
        .iter()
        .map(|s| {
            let blocks = s
                .blocks
                .iter()
                .map(|b| (b.size, state_name(b.state), b.requested))
                .collect();
            (s.pool, s.is_large, s.expandable, blocks)
        })
        .collect();
    let mut got: Vec<Shape> = made
        .iter()
        .map(|s| {
            let blocks = s
                .blocks
                .iter()
                .map(|b| {
                    let state = BlockState::from_snapshot(&b.state).map_or("?", state_name);
                    (b.size, state, b.requested_size)
                })
                .collect();
            (s.pool, s.is_large, s.is_expandable, blocks)
        })
        .collect();
    want.sort();
    got.sort();
    if want == got {
        return Ok(());
    }
    let bytes = |shapes: &[Shape]| -> u64 { shapes.iter().flat_map(|s| &s.3).map(|b| b.0).sum() };
    Err(format!(
        "the snapshot ends with {} segments ({} B), the replay with {} ({} B)",
        want.len(),
        bytes(&want),
        got.len(),
        bytes(&got)
    ))
}

/// Replays `trace` through any policy (one of vramlab's or your own), reported as `label`.
pub fn replay_policy(
    trace: &Trace,
    label: &str,
    mut policy: Box<dyn Policy>,
    device: &mut dyn DeviceMemory,
    options: ReplayOptions,
    hooks: &mut dyn ReplayHooks,
    backend: BackendKind,
) -> Result<PolicyResult, experiments::Error> {
    let limited_by_policy = options.capacity.is_some_and(|capacity| policy.limit_memory(capacity));
    let mut meter = Metered::new(device, if limited_by_policy { None } else { options.capacity });
    let mut live = LiveTable::for_trace(trace);
    let (mut allocated, mut requested) = (0u64, 0u64);
    let (mut peak_allocated, mut peak_requested) = (0u64, 0u64);
    let (mut fragmentation, mut waste) = (0.0, 0u64);
    let (mut failed, mut first_failure) = (0u64, None);
    let (mut alloc_ns, mut free_ns, mut pair_ns) = (Vec::new(), Vec::new(), Vec::new());
    let mut timeline = Timeline::new(trace.events.len(), options.timeline_points);
    let mut recorder = options.record_events.then(|| Recorder {
        events: Vec::new(),
        ops_seen: 0,
        streams: BTreeMap::new(),
    });
    let hook_error = |index: usize, e: String| experiments::Error::Invalid(format!("{label}: event {index}: {e}"));
    let timed = |start: Option<Instant>| start.map_or(0.0, |s| s.elapsed().as_nanos() as f64);
    if let Some(start) = &trace.start {
        meter.priming = true;
        let adopted = policy
            .adopt(&mut meter, start)
            .map_err(|e| experiments::Error::Invalid(format!("{label}: the trace's starting state: {e}")))?;
        meter.priming = false;
        for a in adopted {
            hooks.allocated(a.id, a.block).map_err(|e| hook_error(0, e))?;
            live.insert(
                a.id,
                Live {
                    block: a.block,
                    size: a.requested,
                    stream: a.stream,
                    ns: 0.0,
                    let_go: a.pending,
                },
            );
            if !a.pending {
                allocated += a.block.size;
                requested += a.requested;
            }
        }
        (peak_allocated, peak_requested) = (allocated, requested);
        // A cap below what the window began with cannot hold it: said as the first failure.
        if let Some(cap) = options.capacity.filter(|&cap| meter.reserved > cap) {
            failed += 1;
            first_failure = Some(format!(
                "the window began with {} reserved, more than the cap of {}",
                experiments::format_bytes(meter.reserved),
                experiments::format_bytes(cap)
            ));
        }
        if let Some(r) = recorder.as_mut() {
            r.streams
                .extend(policy.segments().iter().map(|s| (s.address, s.stream)));
        }
        fragmentation = policy.free_space().fragmentation();
        waste = allocated - requested;
    }
    let pooled = !trace.pool_of_id.is_empty();
    // Over the driver's addresses, a replay under the recording's settings puts every block
    // where the recording did (expandable segments' address ranges are the simulator's own).
    let mut placement = Placement {
        // Only where the recording's segment addresses are known (its device operations, or
        // the segments its window began with).
        checked: options.check_recorded
            && !trace.alloc_addrs.is_empty()
            && (trace.records_device_operations() || trace.start.is_some())
            && !trace.uses_expandable_segments(),
        ..Placement::default()
    };
    let mut allocs_seen = 0usize;

    let events = if failed > 0 && options.stop_at_first_failure {
        &trace.events[..0]
    } else {
        &trace.events[..]
    };
    for (index, event) in events.iter().enumerate() {
        if index % 4096 == 0 {
            experiments::cancel::check()?;
        }
        meter.at = index;
        match *event {
            TraceEvent::Alloc { id, size, stream } => {
                let retries_before = recorder
                    .as_ref()
                    .and_then(|_| policy.pytorch_stats())
                    .map(|s| s.num_alloc_retries);
                if pooled {
                    policy.select_pool(trace.pool_of(id));
                }
                let recorded_addr = if placement.checked {
                    allocs_seen += 1;
                    trace.alloc_addrs.get(allocs_seen - 1).copied()
                } else {
                    None
                };
                let start = options.time_ops.then(Instant::now);
                let result = policy.allocate(&mut meter, size, stream);
                let ns = timed(start);
                if let (Some(r), Some(before)) = (recorder.as_mut(), retries_before) {
                    if policy.pytorch_stats().is_some_and(|s| s.num_alloc_retries > before) {
                        r.push(index, "retry", 0, size, stream);
                    }
                }
                settle_finished(policy.as_mut(), &mut live, recorder.as_mut(), hooks, index)
                    .map_err(|e| hook_error(index, e))?;
                match result {
                    Ok(block) => {
                        if let Some(recorded) = recorded_addr.filter(|&a| a != u64::MAX) {
                            if recorded != block.addr {
                                placement.misplaced += 1;
                                placement.first.get_or_insert((index, recorded, block.addr));
                            }
                        }
                        if let Some(r) = recorder.as_mut() {
                            r.device_ops(&meter.ops, stream);
                            r.push(index, "alloc", block.addr, size, stream);
                        }
                        hooks.allocated(id, block).map_err(|e| hook_error(index, e))?;
                        if options.time_ops {
                            alloc_ns.push(ns);
                        }
                        live.insert(
                            id,
                            Live {
                                block,
                                size,
                                stream,
                                ns,
                                let_go: false,
                            },
                        );
                        allocated += block.size;
                        requested += size;
                        peak_requested = peak_requested.max(requested);
                        if allocated > peak_allocated {
                            peak_allocated = allocated;
                            fragmentation = policy.free_space().fragmentation();
                            waste = allocated - requested;
                        }
                    }
                    Err(e) => {
                        failed += 1;
                        meter.ops.push(RecordedOp {
                            at: index,
                            action: DeviceAction::Oom,
                            size,
                            addr: 0,
                            stream,
                        });
                        if let Some(r) = recorder.as_mut() {
                            r.device_ops(&meter.ops, stream);
                        }
                        first_failure.get_or_insert_with(|| format!("event {index}: {e}"));
                        if options.stop_at_first_failure {
                            break;
                        }
                    }
                }
            }
            TraceEvent::FreeRequested { id } => {
                if let Some(entry) = live.get_mut(id).filter(|entry| !entry.let_go) {
                    entry.let_go = true;
                    if let Some(r) = recorder.as_mut() {
                        r.push(index, "free_requested", entry.block.addr, entry.size, entry.stream);
                    }
                    allocated -= entry.block.size;
                    requested -= entry.size;
                    let start = options.time_ops.then(Instant::now);
                    policy.free_requested(&mut meter, entry.block);
                    entry.ns += timed(start);
                }
            }
            // Under a cap (and in a probe, which always has one), a release right before a
            // device allocation may be the allocator's own retry: the policy makes it itself,
            // when the cap calls for it.
            TraceEvent::EmptyCache { within_request: true }
                if options.capacity.is_some() || options.stop_at_first_failure => {}
            TraceEvent::EmptyCache { within_request } => {
                // Its operations belong to the request that follows, as the recording has them.
                meter.at = index + usize::from(within_request);
                policy.empty_cache(&mut meter);
                settle_finished(policy.as_mut(), &mut live, recorder.as_mut(), hooks, index)
                    .map_err(|e| hook_error(index, e))?;
                if let Some(r) = recorder.as_mut() {
                    r.device_ops(&meter.ops, 0);
                }
            }
            TraceEvent::ReleasePool { pool } => policy.release_pool(pool),
            TraceEvent::Free { id } => {
                // A free whose allocation failed, or that a flush already finished, has nothing to return.
                if let Some(entry) = live.remove(id) {
                    if !entry.let_go {
                        allocated -= entry.block.size;
                        requested -= entry.size;
                    }
                    if let Some(r) = recorder.as_mut() {
                        if !entry.let_go {
                            r.push(index, "free_requested", entry.block.addr, entry.size, entry.stream);
                        }
                        r.push(index, "free_completed", entry.block.addr, entry.size, entry.stream);
                    }
                    hooks.freeing(id, entry.block).map_err(|e| hook_error(index, e))?;
                    let start = options.time_ops.then(Instant::now);
                    policy.free(&mut meter, entry.block);
                    if options.time_ops {
                        let ns = timed(start);
                        free_ns.push(ns);
                        pair_ns.push(entry.ns + ns);
                    }
                }
            }
        }
        timeline.record(index, allocated, meter.reserved);
    }
    // The policy's own statistics describe the trace: taken before anything below is returned.
    let pytorch_stats = policy.pytorch_stats();
    let final_segments =
        (options.check_recorded && !trace.final_segments.is_empty() || recorder.is_some()).then(|| policy.segments());
    let recorded_check = check_recorded(
        trace,
        options.check_recorded,
        &meter.ops,
        final_segments.clone().filter(|_| !trace.final_segments.is_empty()),
        &placement,
    );
    let replayed = recorder.map(|r| ReplayedTrace {
        events: r.events,
        segments: final_segments.unwrap_or_default(),
        pools: trace.pools.clone(),
    });
    // Blocks the trace never frees are returned (untimed, and after every figure above), then
    // the cache: whatever the policy still holds afterwards is memory it cannot give back.
    let end = trace.events.len();
    meter.at = end;
    for (id, block) in live.drain() {
        hooks.freeing(id, block).map_err(|e| hook_error(end, e))?;
        policy.free(&mut meter, block);
    }
    policy.release_cached(&mut meter);
    let held_after_release = meter.reserved;
    let device_check = hooks.finish().map_err(|e| hook_error(end, e))?;
    let (alloc_ns_p50, alloc_ns_p99) = p50_p99(alloc_ns);
    let (free_ns_p50, free_ns_p99) = p50_p99(free_ns);
    let (alloc_free_ns_p50, alloc_free_ns_p99) = p50_p99(pair_ns);
    let mut counters: BTreeMap<String, u64> = policy.counters().into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    counters.insert("held_after_release".into(), held_after_release);
    let segments_matched =
        (!trace.segment_sizes.is_empty()).then(|| multiset_overlap(&trace.segment_sizes, &meter.sizes));
    Ok(PolicyResult {
        policy: label.to_string(),
        backend,
        peak_reserved_bytes: meter.peak_reserved,
        peak_allocated_bytes: peak_allocated,
        peak_requested_bytes: peak_requested,
        fragmentation_at_peak: fragmentation,
        rounding_waste_bytes: waste,
        device_allocations: meter.allocations,
        device_frees: meter.frees,
        failed_allocs: failed,
        first_failure,
        min_capacity_bytes: None,
        always_fits_bytes: None,
        always_fits_exact: None,
        alloc_ns_p50,
        alloc_ns_p99,
        free_ns_p50,
        free_ns_p99,
        alloc_free_ns_p50,
        alloc_free_ns_p99,
        counters,
        segment_sizes: meter.sizes,
        segments_matched,
        device_check,
        pytorch_stats,
        recorded_check,
        timeline: timeline.finish(),
        replayed,
    })
}
