//! The smallest capacity a trace fits in: bisection over probes, each a replay reduced to "does
//! every request succeed", started where its capacity first matters.
//!
//! A probe under capacity C makes the same decisions as the unlimited run for as long as every
//! check of the cap in the unlimited run would have passed C: PyTorch's allocator checks it at
//! each device request and, with a garbage-collection threshold, at each cache miss. So the
//! unlimited run leaves copies of its state behind, each with the smallest capacity that agrees
//! with it up to there, and a probe starts from the latest copy its capacity agrees with
//! instead of from the first event.

use rustc_hash::FxHashMap as HashMap;

use experiments::{Trace, TraceEvent};

use super::{build_policy, Block, Metered, Policy, PolicySpec, SimDevice};

/// Copies of the unlimited run kept at most, spread evenly over the trace.
const CHECKPOINTS: usize = 32;

/// Live blocks all kept copies may hold together (each costs its live table and the policy's
/// nodes), so that memory stays bounded whatever the trace holds live.
const COPIED_BLOCKS: usize = 4_000_000;

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
    Ok(search(trace, build, device_bytes, COPIED_BLOCKS).0)
}

/// The search, its copies holding at most `copied_blocks` live blocks together; also says how
/// many copies it kept.
fn search(
    trace: &Trace,
    build: &dyn Fn() -> Box<dyn Policy>,
    device_bytes: u64,
    copied_blocks: usize,
) -> (Option<u64>, usize) {
    const STEP: u64 = SimDevice::GRANULE;
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
    let probe = |capacity: u64| -> bool {
        // `needed` only grows along the trace: the last copy this capacity agrees with.
        let from = checkpoints.partition_point(|copy| copy.needed <= capacity);
        let state = match from.checked_sub(1).and_then(|i| checkpoints[i].copy()) {
            Some(state) => state,
            None => start(),
        };
        state.run(trace, Some(capacity), None).fits
    };
    // Below the peak of requested bytes nothing fits, whatever the policy (requested <= allocated
    // <= reserved <= capacity), so the search starts there rather than at 0.
    let mut fits = unlimited.peak_reserved.div_ceil(STEP);
    let mut fails = (unlimited.peak_requested.div_ceil(STEP))
        .saturating_sub(1)
        .min(fits.saturating_sub(1));
    while fits - fails > 1 {
        let mid = fails + (fits - fails) / 2;
        if probe(mid * STEP) {
            fits = mid;
        } else {
            fails = mid;
        }
    }
    (Some(fits * STEP), checkpoints.len())
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
    requested: u64,
    peak_requested: u64,
}

impl ProbeState {
    fn fresh(mut policy: Box<dyn Policy>, device_bytes: u64, trace: &Trace) -> ProbeState {
        let mut device = SimDevice::new(device_bytes);
        let mut live = LiveBlocks::for_trace(trace);
        let (mut reserved, mut needed, mut requested) = (0, 0, 0);
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
        }
        ProbeState {
            policy,
            device,
            live,
            at: 0,
            reserved,
            peak_reserved: reserved,
            needed,
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
        let stride = events.div_ceil(CHECKPOINTS).max(1);
        let limited_by_policy = capacity.is_some_and(|capacity| self.policy.limit_memory(capacity));
        let meter_capacity = if limited_by_policy { None } else { capacity };
        let mut fits = true;
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
        }
    }

    /// Replays events `at..end`; false at the first request refused. The steps are those of
    /// [`crate::replay_policy`] with everything but the refusal left out.
    fn advance(&mut self, trace: &Trace, end: usize, meter_capacity: Option<u64>) -> bool {
        let mut meter = Metered::new(&mut self.device, meter_capacity);
        meter.reserved = self.reserved;
        meter.peak_reserved = self.peak_reserved;
        meter.needed = self.needed;
        let policy = &mut self.policy;
        let live = &mut self.live;
        let mut fits = true;
        let pooled = !trace.pool_of_id.is_empty();
        for event in &trace.events[self.at..end] {
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
        self.needed = meter.needed.max(policy.limit_needed());
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
        let (answer, copies) = search(&trace, &build, 80 << 30, COPIED_BLOCKS);
        let (thinned, one) = search(&trace, &build, 80 << 30, 0);
        assert!(copies > 1, "the resnet18 trace keeps several copies: {copies}");
        assert_eq!(one, 1);
        assert_eq!(answer, thinned);
        assert!(answer.is_some());
    }
}
