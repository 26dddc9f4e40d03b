//! Replaying a trace through a policy, and the figures that come out.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap as HashMap;

use experiments::pytorch::TraceAction;
use experiments::{
    BackendKind, BlockState, DeviceAction, FirstDifference, OperationView, PolicyResult, PolicySpec, RecordedCheck,
    RecordedOp, ReplayedEvent, ReplayedTrace, SegmentView, TimelinePoint, Trace, TraceEvent, Verdict,
};

use super::capacity::{Copier, UnlimitedRun};
use super::device::Metered;
use super::replayer::{Held, Live, LiveBlocks, Observer, Replayer};
use super::{build_policy, AllocError, BackendError, Block, DeviceMemory, Error, Policy};

/// How a replay runs.
#[derive(Debug, Clone, Copy)]
pub struct ReplayOptions {
    /// Refuse device memory beyond this many bytes.
    pub capacity: Option<u64>,
    /// Thin the allocated/reserved timeline to at most this many points (0: none).
    pub timeline_points: usize,
    /// Time allocate and free calls on the host clock (one request in 16, with its frees).
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
    fn allocated(&mut self, id: u64, block: Block) -> Result<(), BackendError>;
    /// Called right before a block is freed.
    fn freeing(&mut self, id: u64, block: Block) -> Result<(), BackendError>;
    /// Called at the end: what the backend's own checks found.
    fn finish(&mut self) -> Result<Option<String>, BackendError>;
}

/// No hooks: pure simulation.
impl ReplayHooks for () {
    fn allocated(&mut self, _id: u64, _block: Block) -> Result<(), BackendError> {
        Ok(())
    }
    fn freeing(&mut self, _id: u64, _block: Block) -> Result<(), BackendError> {
        Ok(())
    }
    fn finish(&mut self) -> Result<Option<String>, BackendError> {
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

/// The 1-based rank of quantile `q` among `n` samples (the smallest value at or above it).
fn rank(q: f64, n: usize) -> usize {
    ((q * n as f64).ceil() as usize).clamp(1, n)
}

/// The median and 99th percentile, as a full sort would give them, found by selection in linear
/// time (millions of samples: a sort was a tenth of a second of every replay).
fn p50_p99(mut samples: Vec<f64>) -> (f64, f64) {
    let n = samples.len();
    if n == 0 {
        return (0.0, 0.0);
    }
    let (p50, p99) = (rank(0.5, n) - 1, rank(0.99, n) - 1);
    let (_, &mut median, above) = samples.select_nth_unstable_by(p50, f64::total_cmp);
    let high = if p99 == p50 {
        median
    } else {
        *above.select_nth_unstable_by(p99 - p50 - 1, f64::total_cmp).1
    };
    (median, high)
}

#[cfg(test)]
mod quantile_tests {
    use super::*;

    /// Selection gives what sorting gives, whatever the order and the ties.
    #[test]
    fn selection_agrees_with_a_sort() {
        let mut seed = 7u64;
        for n in [1usize, 2, 3, 99, 100, 101, 1000, 4097] {
            let samples: Vec<f64> = (0..n)
                .map(|_| {
                    seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    ((seed >> 33) % 50) as f64
                })
                .collect();
            let mut sorted = samples.clone();
            sorted.sort_by(f64::total_cmp);
            let by_sort = (sorted[rank(0.5, n) - 1], sorted[rank(0.99, n) - 1]);
            assert_eq!(p50_p99(samples), by_sort, "n = {n}");
        }
        assert_eq!(p50_p99(Vec::new()), (0.0, 0.0));
    }
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
) -> Result<PolicyResult, Error> {
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

/// Writes down what a replay does, in PyTorch's terms, when the exports ask for it.
struct Recorder {
    events: Vec<ReplayedEvent>,
    ops_seen: usize,
    /// The stream of each segment or mapped range by its first address: a segment given back
    /// is recorded on its own stream, whichever request made room by giving it back.
    streams: BTreeMap<u64, u64>,
}

impl Recorder {
    fn push(&mut self, at: usize, action: TraceAction, addr: u64, size: u64, stream: u64) {
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
            self.push(op.at, op.action.into(), op.addr, op.size, stream);
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

/// What a whole replay keeps besides the policy's work: the timings, the timeline, the
/// operations for the exports, where each allocation was placed, and the backend's hooks.
struct Observe<'h> {
    label: &'h str,
    hooks: &'h mut dyn ReplayHooks,
    time_ops: bool,
    trace: &'h Trace,
    alloc_ns: Vec<f64>,
    free_ns: Vec<f64>,
    pair_ns: Vec<f64>,
    timeline: Timeline,
    recorder: Option<Recorder>,
    retries_before: Option<u64>,
    placement: Placement,
    allocs_seen: usize,
    /// Where the recording placed the request being answered.
    recorded_addr: Option<u64>,
    failed: u64,
    first_failure: Option<String>,
    fragmentation: f64,
    waste: u64,
}

impl Observe<'_> {
    fn backend(&self, event: usize, source: BackendError) -> Error {
        Error::Backend {
            policy: self.label.to_string(),
            event,
            source,
        }
    }
}

impl Observer for Observe<'_> {
    fn timed(&self) -> bool {
        self.time_ops
    }

    fn requesting(&mut self, policy: &dyn Policy) {
        if self.recorder.is_some() {
            self.retries_before = policy.pytorch_stats().map(|s| s.num_alloc_retries);
        }
    }

    fn answered(&mut self, index: usize, size: u64, stream: u64, policy: &dyn Policy) {
        if let (Some(r), Some(before)) = (self.recorder.as_mut(), self.retries_before) {
            if policy.pytorch_stats().is_some_and(|s| s.num_alloc_retries > before) {
                r.push(index, TraceAction::Retry, 0, size, stream);
            }
        }
        if self.placement.checked {
            self.recorded_addr = self.trace.alloc_addrs.get(self.allocs_seen).copied();
            self.allocs_seen += 1;
        }
    }

    fn adopted(&mut self, live: &Live) -> Result<(), Error> {
        self.hooks
            .allocated(live.id, live.block)
            .map_err(|e| self.backend(0, e))
    }

    fn allocated(&mut self, index: usize, live: &Live, meter: &Metered<'_>) -> Result<(), Error> {
        if let Some(recorded) = self.recorded_addr.take().filter(|&a| a != u64::MAX) {
            if recorded != live.block.addr {
                self.placement.misplaced += 1;
                self.placement.first.get_or_insert((index, recorded, live.block.addr));
            }
        }
        if let Some(r) = self.recorder.as_mut() {
            r.device_ops(meter.ops(), live.stream);
            r.push(index, TraceAction::Alloc, live.block.addr, live.size, live.stream);
        }
        self.hooks
            .allocated(live.id, live.block)
            .map_err(|e| self.backend(index, e))?;
        if self.time_ops && live.ns >= 0.0 {
            self.alloc_ns.push(live.ns);
        }
        Ok(())
    }

    fn refused(&mut self, index: usize, size: u64, stream: u64, error: &AllocError, meter: &mut Metered<'_>) {
        self.recorded_addr = None;
        self.failed += 1;
        meter.log_refusal(size, stream);
        if let Some(r) = self.recorder.as_mut() {
            r.device_ops(meter.ops(), stream);
        }
        if self.first_failure.is_none() {
            // The program's line that asked, where the snapshot's frames name it.
            let source = match self.trace.events.get(index) {
                Some(TraceEvent::Alloc { id, .. }) => self.trace.sources.of(*id),
                _ => None,
            };
            self.first_failure = Some(match source {
                Some(line) => format!("event {index} ({line}): {error}"),
                None => format!("event {index}: {error}"),
            });
        }
    }

    fn new_peak(&mut self, policy: &dyn Policy, held: &Held) {
        self.fragmentation = policy.free_space().fragmentation();
        self.waste = held.allocated - held.requested;
    }

    fn let_go(&mut self, index: usize, live: &Live) {
        if let Some(r) = self.recorder.as_mut() {
            r.push(
                index,
                TraceAction::FreeRequested,
                live.block.addr,
                live.size,
                live.stream,
            );
        }
    }

    fn freeing(&mut self, index: usize, live: &Live) -> Result<(), Error> {
        if !live.let_go {
            self.let_go(index, live);
        }
        if let Some(r) = self.recorder.as_mut() {
            r.push(
                index,
                TraceAction::FreeCompleted,
                live.block.addr,
                live.size,
                live.stream,
            );
        }
        self.hooks
            .freeing(live.id, live.block)
            .map_err(|e| self.backend(index, e))
    }

    fn freed(&mut self, live: &Live, ns: f64) {
        if self.time_ops && live.ns >= 0.0 {
            self.free_ns.push(ns);
            self.pair_ns.push(live.ns + ns);
        }
    }

    fn released(&mut self, meter: &Metered<'_>) {
        if let Some(r) = self.recorder.as_mut() {
            r.device_ops(meter.ops(), 0);
        }
    }

    fn stepped(&mut self, index: usize, held: &Held, meter: &Metered<'_>) {
        self.timeline.record(index, held.allocated, meter.reserved());
    }
}

/// Replays `trace` through any policy (one of vramlab's or your own), reported as `label`.
pub fn replay_policy(
    trace: &Trace,
    label: &str,
    policy: Box<dyn Policy>,
    device: &mut dyn DeviceMemory,
    options: ReplayOptions,
    hooks: &mut dyn ReplayHooks,
    backend: BackendKind,
) -> Result<PolicyResult, Error> {
    let (result, _) = replay_leaving_copies(trace, label, policy, device, options, hooks, backend, None, None)?;
    Ok(result)
}

/// [`replay_policy`], with `copier` leaving behind the copies of the capacity search's unlimited
/// run, and that run where the replay made it (see [`Copier`]); `live`, an empty table of live
/// blocks made for the trace, where one was (made here without).
#[allow(clippy::too_many_arguments)]
pub(crate) fn replay_leaving_copies(
    trace: &Trace,
    label: &str,
    policy: Box<dyn Policy>,
    device: &mut dyn DeviceMemory,
    options: ReplayOptions,
    hooks: &mut dyn ReplayHooks,
    backend: BackendKind,
    mut copier: Option<Copier>,
    live: Option<&LiveBlocks>,
) -> Result<(PolicyResult, Option<UnlimitedRun>), Error> {
    let mut replayer = Replayer::with_live(
        policy,
        trace,
        options.capacity.is_some() || options.stop_at_first_failure,
        live.cloned().unwrap_or_else(|| LiveBlocks::for_trace(trace)),
    );
    let limited_by_policy = options
        .capacity
        .is_some_and(|capacity| replayer.policy.limit_memory(capacity));
    let mut meter = Metered::new(device, if limited_by_policy { None } else { options.capacity });
    let mut observe = Observe {
        label,
        hooks,
        time_ops: options.time_ops,
        trace,
        alloc_ns: Vec::new(),
        free_ns: Vec::new(),
        pair_ns: Vec::new(),
        timeline: Timeline::new(trace.events.len(), options.timeline_points),
        recorder: options.record_events.then(|| Recorder {
            events: Vec::new(),
            ops_seen: 0,
            streams: BTreeMap::new(),
        }),
        retries_before: None,
        // Over the driver's addresses, a replay under the recording's settings puts every
        // block where the recording did (expandable segments' address ranges are the
        // simulator's own); checked only where the recording's segment addresses are known
        // (its device operations, or the segments its window began with).
        placement: Placement {
            checked: options.check_recorded
                && !trace.alloc_addrs.is_empty()
                && (trace.records_device_operations() || trace.start.is_some())
                && !trace.uses_expandable_segments(),
            ..Placement::default()
        },
        allocs_seen: 0,
        recorded_addr: None,
        failed: 0,
        first_failure: None,
        fragmentation: 0.0,
        waste: 0,
    };
    // A policy that cannot hold what the window began with replays nothing: said as the first
    // failure, as is a cap below it.
    let mut refused_start = false;
    if trace.start.is_some() {
        if let Some(why) = replayer.adopt_start(trace, &mut meter, &mut observe)? {
            refused_start = true;
            observe.failed += 1;
            observe.first_failure = Some(format!("the window's starting state: {why}"));
        } else if let Some(cap) = options.capacity.filter(|&cap| meter.reserved() > cap) {
            observe.failed += 1;
            observe.first_failure = Some(format!(
                "the window began with {} reserved, more than the cap of {}",
                experiments::format_bytes(meter.reserved()),
                experiments::format_bytes(cap)
            ));
        }
        if let Some(r) = observe.recorder.as_mut() {
            r.streams
                .extend(replayer.policy.segments().iter().map(|s| (s.address, s.stream)));
        }
        observe.fragmentation = replayer.policy.free_space().fragmentation();
        observe.waste = replayer.held.allocated - replayer.held.requested;
    }
    let events = if refused_start || observe.failed > 0 && options.stop_at_first_failure {
        0
    } else {
        trace.events.len()
    };
    for index in 0..events {
        if index % 4096 == 0 {
            experiments::cancel::check()?;
        }
        if let Some(copier) = copier.as_mut().filter(|_| observe.failed == 0) {
            copier.before(index, &replayer, &meter);
        }
        let fits = replayer.step(trace, index, &mut meter, &mut observe)?;
        if !fits && options.stop_at_first_failure {
            break;
        }
    }
    // The policy's own statistics describe the trace: taken before anything below is returned.
    let policy = &replayer.policy;
    let pytorch_stats = policy.pytorch_stats();
    let final_segments = (options.check_recorded && !trace.final_segments.is_empty() || observe.recorder.is_some())
        .then(|| policy.segments());
    let recorded_check = check_recorded(
        trace,
        options.check_recorded,
        meter.ops(),
        final_segments.clone().filter(|_| !trace.final_segments.is_empty()),
        &observe.placement,
    );
    let replayed = observe.recorder.take().map(|r| ReplayedTrace {
        events: r.events,
        segments: final_segments.unwrap_or_default(),
        pools: trace.pools.clone(),
        annotations: trace.annotations.clone(),
    });
    // Taken before anything below is returned, as the unlimited run ends.
    let unlimited = copier.and_then(|copier| {
        copier.finish(
            &replayer,
            &meter,
            refused_start || observe.failed > 0 || events < trace.events.len(),
            options.capacity,
        )
    });
    // Blocks the trace never frees are returned (untimed, and after every figure above), then
    // the cache: whatever the policy still holds afterwards is memory it cannot give back.
    let held = replayer.held;
    // Device frees while the trace ran, as the job's `num_device_free` counts them: the release
    // below of what the trace leaves held is the replay's, not the job's.
    let frees_in_trace = meter.counts().frees;
    replayer.finish(trace, &mut meter, &mut observe)?;
    let held_after_release = meter.reserved();
    let device_check = observe
        .hooks
        .finish()
        .map_err(|e| observe.backend(trace.events.len(), e))?;
    let (alloc_ns_p50, alloc_ns_p99) = p50_p99(std::mem::take(&mut observe.alloc_ns));
    let (free_ns_p50, free_ns_p99) = p50_p99(std::mem::take(&mut observe.free_ns));
    let (alloc_free_ns_p50, alloc_free_ns_p99) = p50_p99(std::mem::take(&mut observe.pair_ns));
    let mut counters: BTreeMap<String, u64> = replayer
        .policy
        .counters()
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    counters.insert("held_after_release".into(), held_after_release);
    let counts = meter.counts();
    let sizes = meter.into_sizes();
    let segments_matched = (!trace.segment_sizes.is_empty()).then(|| multiset_overlap(&trace.segment_sizes, &sizes));
    let result = PolicyResult {
        policy: label.to_string(),
        backend,
        peak_reserved_bytes: counts.peak_reserved,
        peak_allocated_bytes: held.peak_allocated,
        peak_requested_bytes: held.peak_requested,
        fragmentation_at_peak: observe.fragmentation,
        rounding_waste_bytes: observe.waste,
        device_allocations: counts.allocations,
        device_frees: frees_in_trace,
        failed_allocs: observe.failed,
        first_failure: observe.first_failure,
        min_capacity_bytes: None,
        always_fits_bytes: None,
        always_fits_exact: None,
        alloc_ns_p50,
        alloc_ns_p99,
        free_ns_p50,
        free_ns_p99,
        alloc_free_ns_p50,
        alloc_free_ns_p99,
        timed_one_in: options.time_ops.then_some(crate::replayer::TIMED_ONE_IN),
        counters,
        segment_sizes: sizes,
        segments_matched,
        device_check,
        pytorch_stats,
        recorded_check,
        timeline: observe.timeline.finish(),
        replayed,
    };
    Ok((result, unlimited))
}
