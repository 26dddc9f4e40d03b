//! The smallest capacity a trace fits in: bisection over probes, each a replay reduced to "does
//! every request succeed", started where its capacity first matters; and the smallest capacity
//! from which it fits at every larger one, by a scan down from the unlimited run's peak.
//!
//! A probe under capacity C makes the same decisions as the unlimited run for as long as every
//! check of the cap in the unlimited run would have passed C: PyTorch's allocator checks it at
//! each device request and, with a garbage-collection threshold, at each cache miss. So the
//! unlimited run leaves copies of its state behind, each with the smallest capacity that agrees
//! with it up to there, and a probe starts from the latest copy its capacity agrees with
//! instead of from the first event.
//!
//! Fitting need not be monotone in the capacity: a cap can fit where the cap 2 MiB above it
//! fails (a different cap changes when the cache is released, and so which cached block a
//! request splits later, or what garbage collection frees). The bisection finds a cap that fits
//! with the one below it failing; the scan finds where fitting stops failing for good.
//!
//! Where the policy's only decision that depends on the cap is whether a device request fits
//! under it (PyTorch's allocator without a garbage-collection threshold or expandable segments:
//! its caller says so), one probe answers for a range of caps: a probe under C whose granted
//! device requests never held more than G makes the same decisions under every cap from G to C
//! (each request granted under C is granted under them, each refused under C is refused under
//! them), so they all fit, or all fail, as it does.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap as HashMap;

use experiments::{Trace, TraceEvent};

use super::{build_policy, Block, Metered, Policy, PolicySpec, SimDevice};

/// Copies of the unlimited run kept at most, spread evenly over the trace.
const CHECKPOINTS: usize = 32;

/// Live blocks all kept copies may hold together (each costs its live table and the policy's
/// nodes), so that memory stays bounded whatever the trace holds live.
const COPIED_BLOCKS: usize = 4_000_000;

/// The capacities are searched in steps of this many bytes.
const STEP: u64 = SimDevice::GRANULE;

/// Probes the always-fits scan replays at most for one policy (the bisection's come on top):
/// past them it stops and says so, with the lowest cap it proved (see [`FittingCaps`]).
pub(crate) const ALWAYS_FITS_PROBES: usize = 2048;

/// Trace events the always-fits scan replays at most for one policy, all its probes together
/// (about 1.5 s of replay on one core), so that a long trace costs a few whole replays more.
const ALWAYS_FITS_EVENTS: usize = 32_000_000;

/// The smallest capacity, in 2 MiB steps, at which the trace replays in simulation with no
/// failed request (found by bisection below the unlimited run's peak); `None` when even
/// unlimited memory fails (a request the policy can never satisfy).
pub fn min_capacity(trace: &Trace, spec: &PolicySpec, device_bytes: u64) -> Result<Option<u64>, experiments::Error> {
    build_policy(spec)?;
    min_capacity_of(trace, &|| build_policy(spec).expect("checked above"), device_bytes)
}

/// [`min_capacity`] for any policy, built afresh by `build` for each probe that cannot start
/// from a copy of the unlimited run (see [`Policy::resumable_copy`]).
pub fn min_capacity_of(
    trace: &Trace,
    build: &dyn Fn() -> Box<dyn Policy>,
    device_bytes: u64,
) -> Result<Option<u64>, experiments::Error> {
    let options = SearchOptions {
        copied_blocks: COPIED_BLOCKS,
        scan: None,
        spans: false,
    };
    let found = search(trace, build, device_bytes, options).0;
    experiments::cancel::check()?;
    Ok(found.map(|caps| caps.smallest))
}

/// The caps a trace fits under, in 2 MiB steps, as far as the search proved them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FittingCaps {
    /// The smallest cap that fits, as [`min_capacity`] finds it (the cap 2 MiB below it fails).
    pub(crate) smallest: u64,
    /// The cap from which the trace fits at every cap up to the unlimited run's peak reserved
    /// (rounded up to 2 MiB), each of them replayed or answered by a probe that made the same
    /// decisions: the smallest such cap where `exact`; where not, a cap the scan proved so, the
    /// smallest lying between `smallest` and it.
    pub(crate) always: u64,
    /// Whether `always` is the smallest such cap: the cap 2 MiB below it failed (or is below
    /// `smallest`, which the bisection saw fail). False where the scan stopped at its bound
    /// ([`ALWAYS_FITS_PROBES`] probes, or [`ALWAYS_FITS_EVENTS`] events replayed), or where the
    /// unlimited run's peak itself failed (a garbage-collection threshold can make a cap just
    /// above the unlimited peak behave differently): then `always` is the cap from which every
    /// probe is the unlimited run.
    pub(crate) exact: bool,
    /// Probes the scan replayed (the bisection's not counted).
    pub(crate) probes: usize,
}

/// [`min_capacity_of`] and, with `scan`, the cap from which the trace always fits (see
/// [`FittingCaps`]), the scan replaying at most that many probes (without, `always` is the
/// unlimited run's peak and not `exact`); `None` when even unlimited memory fails. `spans`:
/// the policy's only decision that depends on the cap is whether a device request fits under
/// it, every such request going through the meter (see the module's notes), so that one probe
/// answers for a range of caps.
pub(crate) fn fitting_caps_of(
    trace: &Trace,
    build: &dyn Fn() -> Box<dyn Policy>,
    device_bytes: u64,
    scan: Option<usize>,
    spans: bool,
) -> Result<Option<FittingCaps>, experiments::Error> {
    let options = SearchOptions {
        copied_blocks: COPIED_BLOCKS,
        scan,
        spans,
    };
    let found = search(trace, build, device_bytes, options).0;
    experiments::cancel::check()?;
    Ok(found)
}

/// How a search goes.
#[derive(Debug, Clone, Copy)]
struct SearchOptions {
    /// Live blocks the unlimited run's copies may hold together.
    copied_blocks: usize,
    /// The always-fits scan, replaying at most this many probes.
    scan: Option<usize>,
    /// Whether one probe answers for the caps down to what its granted requests held.
    spans: bool,
}

/// The search (see [`SearchOptions`]); also says how many copies of the unlimited run it kept.
fn search(
    trace: &Trace,
    build: &dyn Fn() -> Box<dyn Policy>,
    device_bytes: u64,
    options: SearchOptions,
) -> (Option<FittingCaps>, usize) {
    let SearchOptions {
        copied_blocks,
        scan,
        spans,
    } = options;
    let start = || ProbeState::fresh(build(), device_bytes, trace);
    let mut copies = Copies {
        kept: Vec::new(),
        blocks_budget: copied_blocks,
    };
    let unlimited = start().run(trace, None, Some(&mut copies));
    let checkpoints = copies.kept;
    if !unlimited.fits {
        return (None, checkpoints.len());
    }
    // Every cap's answer, by capacity in steps: probed, or (with `spans`) answered by a probe
    // that made the same decisions.
    let mut tried = BTreeMap::new();
    let replayed = std::cell::Cell::new(0);
    let held_at_start = trace.start.as_ref().map_or(0, experiments::StartState::reserved);
    let probe = |tried: &mut BTreeMap<u64, bool>, steps: u64| -> bool {
        if let Some(&fits) = tried.get(&steps) {
            return fits;
        }
        let capacity = steps * STEP;
        // What the window began with is held under the cap, as a whole replay says.
        if capacity < held_at_start {
            tried.insert(steps, false);
            return false;
        }
        // `needed` only grows along the trace: the last copy this capacity agrees with.
        let from = checkpoints.partition_point(|copy| copy.needed <= capacity);
        let state = match from.checked_sub(1).and_then(|i| checkpoints[i].copy()) {
            // Up to the copy, every cap from its `needed` up decides as the unlimited run did.
            Some(state) => ProbeState {
                granted: state.needed,
                ..state
            },
            None => start(),
        };
        let end = state.run(trace, Some(capacity), None);
        replayed.set(replayed.get() + end.replayed);
        // Each cap from what the granted requests held up to this one decides as this one did.
        let lowest = if spans {
            end.granted.div_ceil(STEP).min(steps)
        } else {
            steps
        };
        for same in lowest..=steps {
            tried.entry(same).or_insert(end.fits);
        }
        end.fits
    };
    // Below the peak of requested bytes nothing fits, whatever the policy (requested <= allocated
    // <= reserved <= capacity), so the search starts there rather than at 0.
    let top = unlimited.peak_reserved.div_ceil(STEP);
    let mut fits = top;
    let mut fails = (unlimited.peak_requested.div_ceil(STEP))
        .saturating_sub(1)
        .min(fits.saturating_sub(1));
    while fits - fails > 1 {
        let mid = fails + (fits - fails) / 2;
        if probe(&mut tried, mid) {
            fits = mid;
        } else {
            fails = mid;
        }
    }
    let smallest = fits;
    // The scan: down from the top, every cap answered, until one fails or the smallest is
    // reached (the cap below it fails). A cap that fits replays the trace to its end from its
    // copy, so the scan is bounded; the bisection's answers are reused.
    let (mut always, mut exact, mut probes) = (top, false, 0);
    if let Some(max_probes) = scan {
        let bisected = replayed.get();
        let mut steps = top;
        (always, exact) = loop {
            if !tried.contains_key(&steps) {
                if probes == max_probes || replayed.get() - bisected >= ALWAYS_FITS_EVENTS {
                    break (steps + 1, false);
                }
                probes += 1;
            }
            if !probe(&mut tried, steps) {
                if steps == top {
                    // Not even the unlimited run's peak: from where every probe is the
                    // unlimited run, which fits.
                    break (unlimited.needed.div_ceil(STEP).max(top + 1), false);
                }
                break (steps + 1, true);
            }
            if steps <= smallest {
                break (steps, true);
            }
            steps -= 1;
        };
    }
    let caps = FittingCaps {
        smallest: smallest * STEP,
        always: always * STEP,
        exact,
        probes,
    };
    (Some(caps), checkpoints.len())
}

/// The copies of its state the unlimited run keeps, and how many live blocks they may hold
/// together.
struct Copies {
    kept: Vec<ProbeState>,
    blocks_budget: usize,
}

impl Copies {
    fn keep(&mut self, state: ProbeState, peak_requested: u64) {
        // Every probe's capacity is at least the trace's peak of requested bytes: a copy that
        // agrees with that much makes every earlier one useless.
        if state.needed <= peak_requested {
            self.kept.clear();
        }
        self.kept.push(state);
        // Past the budget, every other copy but the latest goes: fewer copies only make probes
        // start earlier, with the same answer.
        let held = |kept: &Vec<ProbeState>| kept.iter().map(|copy| copy.live.entries.len()).sum::<usize>();
        while self.kept.len() > 1 && held(&self.kept) > self.blocks_budget {
            let latest = self.kept.len() - 1;
            let mut index = 0;
            self.kept.retain(|_| {
                let keep = index % 2 == 1 || index == latest;
                index += 1;
                keep
            });
        }
    }
}

/// What a probe ends with.
struct ProbeEnd {
    fits: bool,
    peak_reserved: u64,
    peak_requested: u64,
    /// The smallest capacity that would have refused nothing (for the unlimited run: from
    /// where a probe is the unlimited run).
    needed: u64,
    /// What the device requests it was granted held, at most (see [`ProbeState::granted`]).
    granted: u64,
    /// Events it replayed.
    replayed: usize,
}

/// Everything a probe's replay carries from one event to the next.
struct ProbeState {
    policy: Box<dyn Policy>,
    device: SimDevice,
    live: LiveBlocks,
    /// The next event to replay.
    at: usize,
    reserved: u64,
    peak_reserved: u64,
    /// The smallest capacity that would have refused nothing so far.
    needed: u64,
    /// The most bytes held right after a device request the meter granted (reserved plus the
    /// request), from the start or the copy it began from (where it is that copy's `needed`).
    granted: u64,
    requested: u64,
    peak_requested: u64,
}

impl ProbeState {
    fn fresh(mut policy: Box<dyn Policy>, device_bytes: u64, trace: &Trace) -> ProbeState {
        let mut device = SimDevice::new(device_bytes);
        let mut live = LiveBlocks::for_trace(trace);
        let (mut reserved, mut needed, mut granted, mut requested) = (0, 0, 0, 0);
        if let Some(start) = &trace.start {
            let mut meter = Metered::new(&mut device, None);
            meter.priming = true;
            // A start the policy cannot take fails the replay itself, which says why.
            for a in policy.adopt(&mut meter, start).unwrap_or_default() {
                live.insert(a.id, a.block, a.requested);
                if a.pending {
                    live.let_go(a.id);
                } else {
                    requested += a.requested;
                }
            }
            (reserved, needed) = (meter.reserved, meter.needed.max(policy.limit_needed()));
            granted = needed;
        }
        ProbeState {
            policy,
            device,
            live,
            at: 0,
            reserved,
            peak_reserved: reserved,
            needed,
            granted,
            requested,
            peak_requested: requested,
        }
    }

    /// A copy to go on from, when the policy can be copied.
    fn copy(&self) -> Option<ProbeState> {
        Some(ProbeState {
            policy: self.policy.resumable_copy()?,
            device: self.device.clone(),
            live: self.live.clone(),
            ..*self
        })
    }

    /// Replays from `at` to the end (or the first refusal) under `capacity`. With `checkpoints`
    /// (the unlimited run), leaves copies of its state behind, dropping those every probe can
    /// do without.
    fn run(mut self, trace: &Trace, capacity: Option<u64>, mut checkpoints: Option<&mut Copies>) -> ProbeEnd {
        let events = trace.events.len();
        let began = self.at;
        let stride = events.div_ceil(CHECKPOINTS).max(1);
        let limited_by_policy = capacity.is_some_and(|capacity| self.policy.limit_memory(capacity));
        let meter_capacity = if limited_by_policy { None } else { capacity };
        let mut fits = true;
        if meter_capacity.is_some() {
            // The meter refuses past the cap, and counts what it refuses among what it granted.
            self.granted = u64::MAX;
        }
        while fits && self.at < events {
            let end = if checkpoints.is_some() {
                (self.at + stride).min(events)
            } else {
                events
            };
            fits = self.advance(trace, end, meter_capacity);
            if let (true, true, Some(copies)) = (fits, end < events, checkpoints.as_deref_mut()) {
                if let Some(state) = self.copy() {
                    copies.keep(state, self.peak_requested);
                }
            }
        }
        ProbeEnd {
            fits,
            peak_reserved: self.peak_reserved,
            peak_requested: self.peak_requested,
            needed: self.needed,
            granted: self.granted,
            replayed: self.at - began,
        }
    }

    /// Replays events `at..end`; false at the first request refused. The steps are those of
    /// [`crate::replay_policy`] with everything but the refusal left out.
    fn advance(&mut self, trace: &Trace, end: usize, meter_capacity: Option<u64>) -> bool {
        let mut meter = Metered::new(&mut self.device, meter_capacity);
        meter.reserved = self.reserved;
        meter.peak_reserved = self.peak_reserved;
        meter.needed = self.granted;
        let policy = &mut self.policy;
        let live = &mut self.live;
        let mut fits = true;
        let pooled = !trace.pool_of_id.is_empty();
        for (k, event) in trace.events[self.at..end].iter().enumerate() {
            // A cancelled search ends its probes at once; its caller reports the cancel.
            if k % 4096 == 0 && experiments::cancel::requested() {
                fits = false;
                break;
            }
            match *event {
                // Every probe has a cap: a release right before a device allocation is left to
                // the policy, as in a capped replay.
                TraceEvent::EmptyCache { within_request: true } => {}
                TraceEvent::EmptyCache { within_request: false } => {
                    policy.empty_cache(&mut meter);
                    for block in policy.drain_finished() {
                        if let Some(done) = live.let_go_at(block.addr) {
                            live.remove(done);
                        }
                    }
                }
                TraceEvent::ReleasePool { pool } => policy.release_pool(pool),
                TraceEvent::Alloc { id, size, stream } => {
                    if pooled {
                        policy.select_pool(trace.pool_of(id));
                    }
                    let result = policy.allocate(&mut meter, size, stream);
                    for block in policy.drain_finished() {
                        if let Some(done) = live.let_go_at(block.addr) {
                            live.remove(done);
                        }
                    }
                    let Ok(block) = result else {
                        fits = false;
                        break;
                    };
                    live.insert(id, block, size);
                    self.requested += size;
                    self.peak_requested = self.peak_requested.max(self.requested);
                }
                TraceEvent::FreeRequested { id } => {
                    if let Some((block, size)) = live.let_go(id) {
                        self.requested -= size;
                        policy.free_requested(&mut meter, block);
                    }
                }
                TraceEvent::Free { id } => {
                    if let Some(entry) = live.remove(id) {
                        if !entry.let_go {
                            self.requested -= entry.size;
                        }
                        policy.free(&mut meter, entry.block);
                    }
                }
            }
        }
        self.at = end;
        self.reserved = meter.reserved;
        self.peak_reserved = meter.peak_reserved;
        // The cap is the policy's or the meter's; whichever it is, both bounds together are safe.
        self.granted = meter.needed;
        self.needed = self.needed.max(meter.needed).max(policy.limit_needed());
        fits
    }
}

/// A live block of a probe.
#[derive(Debug, Clone, Copy)]
struct Entry {
    id: u64,
    block: Block,
    size: u64,
    let_go: bool,
}

/// The live blocks of a probe, kept together so that a copy costs what is live, not what the
/// trace's ids span; an index by id finds them.
#[derive(Clone)]
struct LiveBlocks {
    entries: Vec<Entry>,
    index: LiveIndex,
}

/// Where each live id's entry is: a vector where the ids are dense (every importer numbers them
/// from 0), a hash map otherwise.
#[derive(Clone)]
enum LiveIndex {
    Dense(Vec<u32>),
    Sparse(HashMap<u64, u32>),
}

const ABSENT: u32 = u32::MAX;

impl LiveBlocks {
    fn for_trace(trace: &Trace) -> LiveBlocks {
        let index = match crate::replay::dense_id_slots(trace) {
            Some(slots) => LiveIndex::Dense(vec![ABSENT; slots]),
            None => LiveIndex::Sparse(HashMap::default()),
        };
        LiveBlocks {
            entries: Vec::new(),
            index,
        }
    }

    fn position(&self, id: u64) -> Option<usize> {
        let at = match &self.index {
            LiveIndex::Dense(slots) => slots.get(id as usize).copied().unwrap_or(ABSENT),
            LiveIndex::Sparse(map) => map.get(&id).copied().unwrap_or(ABSENT),
        };
        (at != ABSENT).then_some(at as usize)
    }

    fn set_position(&mut self, id: u64, at: u32) {
        match &mut self.index {
            LiveIndex::Dense(slots) => slots[id as usize] = at,
            LiveIndex::Sparse(map) => {
                if at == ABSENT {
                    map.remove(&id);
                } else {
                    map.insert(id, at);
                }
            }
        }
    }

    fn insert(&mut self, id: u64, block: Block, size: u64) {
        if let Some(old) = self.position(id) {
            // An id allocated again while live replaces its block, as the replay's table does.
            self.entries[old] = Entry {
                id,
                block,
                size,
                let_go: false,
            };
            return;
        }
        self.set_position(id, self.entries.len() as u32);
        self.entries.push(Entry {
            id,
            block,
            size,
            let_go: false,
        });
    }

    /// Marks `id` let go; its block and requested size, when it was live and not yet let go.
    fn let_go(&mut self, id: u64) -> Option<(Block, u64)> {
        let at = self.position(id)?;
        let entry = &mut self.entries[at];
        if entry.let_go {
            return None;
        }
        entry.let_go = true;
        Some((entry.block, entry.size))
    }

    fn remove(&mut self, id: u64) -> Option<Entry> {
        let at = self.position(id)?;
        let entry = self.entries.swap_remove(at);
        self.set_position(id, ABSENT);
        if let Some(moved) = self.entries.get(at) {
            self.set_position(moved.id, at as u32);
        }
        Some(entry)
    }

    /// The id of the live block at `addr` that the program has let go of.
    fn let_go_at(&self, addr: u64) -> Option<u64> {
        self.entries
            .iter()
            .find(|entry| entry.let_go && entry.block.addr == addr)
            .map(|entry| entry.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build_pytorch_policy;
    use experiments::AllocConf;

    #[test]
    fn every_policy_gets_the_answer_of_whole_replays() {
        let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/traces/resnet18_default.pickle");
        let trace = Trace::load(&path).unwrap();
        let device_bytes = 80 << 30;
        for info in experiments::POLICIES {
            let spec = PolicySpec::parse(info.name).unwrap();
            let build = || build_policy(&spec).unwrap();
            let fits = |capacity: Option<u64>| {
                let options = crate::ReplayOptions::probe(capacity);
                let mut device = SimDevice::new(device_bytes);
                let result = crate::replay_policy(
                    &trace,
                    "probe",
                    build(),
                    &mut device,
                    options,
                    &mut (),
                    experiments::BackendKind::Sim,
                )
                .unwrap();
                (
                    result.failed_allocs == 0,
                    result.peak_reserved_bytes,
                    result.peak_requested_bytes,
                )
            };
            let step = SimDevice::GRANULE;
            let (ok, reserved, requested) = fits(None);
            let whole = ok.then(|| {
                let (mut fails, mut fit) = (requested.div_ceil(step).saturating_sub(1), reserved.div_ceil(step));
                fails = fails.min(fit.saturating_sub(1));
                while fit - fails > 1 {
                    let mid = fails + (fit - fails) / 2;
                    if fits(Some(mid * step)).0 {
                        fit = mid;
                    } else {
                        fails = mid;
                    }
                }
                fit * step
            });
            assert_eq!(
                min_capacity_of(&trace, &build, device_bytes).unwrap(),
                whole,
                "{}",
                info.name
            );
        }
    }

    #[test]
    fn copies_past_their_budget_are_thinned_and_the_answer_stays() {
        let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/traces/resnet18_default.pickle");
        let trace = Trace::load(&path).unwrap();
        let conf = AllocConf::parse("").unwrap();
        let build = || build_pytorch_policy(&conf);
        let options = |copied_blocks| SearchOptions {
            copied_blocks,
            scan: Some(64),
            spans: true,
        };
        let (answer, copies) = search(&trace, &build, 80 << 30, options(COPIED_BLOCKS));
        let (thinned, one) = search(&trace, &build, 80 << 30, options(0));
        assert!(copies > 1, "the resnet18 trace keeps several copies: {copies}");
        assert_eq!(one, 1);
        assert_eq!(answer, thinned);
        assert!(answer.is_some());
    }
}

#[cfg(test)]
mod always_fits_tests {
    use super::*;
    use crate::build_pytorch_policy;
    use experiments::AllocConf;

    /// A committed recording (`workload/name`) and the settings it was recorded under.
    fn recording(name: &str) -> (Trace, AllocConf, u64) {
        let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../reports/reference/h100/alloc-traces");
        let meta: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join(format!("{name}.json"))).unwrap()).unwrap();
        let trace = Trace::load(&dir.join(format!("{name}.pickle.gz"))).unwrap();
        let conf = AllocConf::parse(meta["alloc_conf"].as_str().unwrap()).unwrap();
        (trace, conf, meta["device_total_bytes"].as_u64().unwrap())
    }

    /// Whether a whole replay (no copies, no search) under `capacity` fits, and its peak reserved.
    fn whole_replay(trace: &Trace, conf: &AllocConf, device_bytes: u64, capacity: Option<u64>) -> (bool, u64) {
        let mut device = SimDevice::new(device_bytes);
        let result = crate::replay_policy(
            trace,
            "probe",
            build_pytorch_policy(conf),
            &mut device,
            crate::ReplayOptions::probe(capacity),
            &mut (),
            experiments::BackendKind::Sim,
        )
        .unwrap();
        (result.failed_allocs == 0, result.peak_reserved_bytes)
    }

    #[test]
    fn always_fits_is_exact_where_fitting_is_not_monotone() {
        // The serving workload under max_split_size_mb:64, as recorded: it fits at 270 MiB,
        // fails at some caps above, and fits at every cap from 276 MiB up.
        let (trace, conf, device_bytes) = recording("serve/max_split");
        let build = || build_pytorch_policy(&conf);
        let caps = fitting_caps_of(&trace, &build, device_bytes, Some(ALWAYS_FITS_PROBES), true)
            .unwrap()
            .unwrap();
        assert_eq!(
            Some(caps.smallest),
            min_capacity_of(&trace, &build, device_bytes).unwrap()
        );
        assert_eq!(
            (caps.smallest, caps.always, caps.exact),
            (270 << 20, 276 << 20, true),
            "{caps:?}"
        );
        assert!(caps.always >= caps.smallest);
        let (fits, peak) = whole_replay(&trace, &conf, device_bytes, None);
        assert!(fits);
        let top = peak.div_ceil(STEP) * STEP;
        let mut capacity = caps.always;
        while capacity <= top {
            assert!(
                whole_replay(&trace, &conf, device_bytes, Some(capacity)).0,
                "{capacity} B does not fit"
            );
            capacity += STEP;
        }
        assert!(!whole_replay(&trace, &conf, device_bytes, Some(caps.always - STEP)).0);
        assert!(whole_replay(&trace, &conf, device_bytes, Some(caps.smallest)).0);
    }

    #[test]
    fn one_probe_answers_for_the_caps_that_decide_as_it_does() {
        // Every recording of the two small workloads, under its own settings and those of the
        // others: the search with spans finds what probing every cap finds.
        let names = [
            "default",
            "max_split",
            "max_split_rounding",
            "roundup4",
            "roundup_list",
            "roundup_list2",
        ];
        let mut compared = 0;
        for workload in ["serve", "random"] {
            let (trace, _, device_bytes) = recording(&format!("{workload}/default"));
            for name in names {
                let (_, conf, _) = recording(&format!("{workload}/{name}"));
                let build = || build_pytorch_policy(&conf);
                let every = fitting_caps_of(&trace, &build, device_bytes, Some(usize::MAX), false).unwrap();
                let spans = fitting_caps_of(&trace, &build, device_bytes, Some(usize::MAX), true).unwrap();
                let strip = |caps: Option<FittingCaps>| caps.map(|c| (c.smallest, c.always, c.exact));
                assert_eq!(strip(spans), strip(every), "{workload}/{name}");
                assert!(spans.unwrap().probes <= every.unwrap().probes);
                compared += 1;
            }
        }
        assert_eq!(compared, 12);
    }
}
