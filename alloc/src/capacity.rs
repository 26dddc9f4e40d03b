//! The smallest capacity a trace fits in: bisection over probes, each a replay reduced to "does
//! every request succeed", started where its capacity first matters; and the smallest capacity
//! from which it fits at every larger one, by a scan down from the unlimited run's peak.
//!
//! A probe under capacity C makes the same decisions as the unlimited run for as long as every
//! check of the cap in the unlimited run would have passed C: PyTorch's allocator checks it at
//! each device request and, with a garbage-collection threshold, at each cache miss. So the
//! unlimited run leaves copies of its state behind, each with the smallest capacity that agrees
//! with it up to there, and a probe starts from the latest copy its capacity agrees with
//! instead of from the first event. A whole replay that decides as the unlimited run does
//! (PyTorch's allocator over a fresh simulated device, under a cap it turned out never to need)
//! leaves those copies itself ([`Copier`]), so that replaying many settings (`tune`) does not
//! replay each of them twice.
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

use std::cell::RefCell;
use std::collections::BTreeMap;

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use experiments::Trace;

use super::device::{MeterCounts, Metered};
use super::period::{LazyPeriod, Periodicity};
use super::replayer::{Frozen, LiveBlocks, Replayer};
use super::{AlikeLimits, Error, Policy, PolicySpec, Recipe, SimDevice};

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
pub fn min_capacity(trace: &Trace, spec: &PolicySpec, device_bytes: u64) -> Result<Option<u64>, Error> {
    let recipe = Recipe::of(spec)?;
    min_capacity_of(trace, &|| recipe.build(), device_bytes)
}

/// [`min_capacity`] for any policy, built afresh by `build` for each probe that cannot start
/// from a copy of the unlimited run (see [`Policy::resumable_copy`]).
pub fn min_capacity_of(
    trace: &Trace,
    build: &dyn Fn() -> Box<dyn Policy>,
    device_bytes: u64,
) -> Result<Option<u64>, Error> {
    let options = SearchOptions {
        copied_blocks: COPIED_BLOCKS,
        scan: None,
        spans: false,
        memo: true,
    };
    let found = search(
        trace,
        build,
        device_bytes,
        options,
        None,
        Some(&LazyPeriod::new(trace)),
        None,
    )
    .caps;
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
/// answers for a range of caps. `unlimited`: the unlimited run, where a whole replay made it
/// (see [`Copier`]); the search makes its own without. `live`: an empty table of live blocks
/// made for the trace, where one was (made here without).
#[allow(clippy::too_many_arguments)]
pub(crate) fn fitting_caps_of(
    trace: &Trace,
    build: &dyn Fn() -> Box<dyn Policy>,
    device_bytes: u64,
    scan: Option<usize>,
    spans: bool,
    unlimited: Option<UnlimitedRun>,
    period: Option<&LazyPeriod<'_>>,
    live: Option<&LiveBlocks>,
) -> Result<Option<FittingCaps>, Error> {
    let options = SearchOptions {
        copied_blocks: COPIED_BLOCKS,
        scan,
        spans,
        memo: true,
    };
    let found = search(trace, build, device_bytes, options, unlimited, period, live).caps;
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
    /// Whether a probe may end as another that was in its state did (see [`Memo`]), and go on
    /// from a copy the probe before it left (see [`Prefix`]).
    memo: bool,
}

/// What a search found, how many copies of the unlimited run it kept, and every cap it
/// answered (in steps: fits or not), probed or answered by a probe that decided alike.
// `copies` and `answers` are what the tests check the search by.
#[cfg_attr(not(test), allow(dead_code))]
struct Searched {
    caps: Option<FittingCaps>,
    copies: usize,
    answers: BTreeMap<u64, bool>,
    /// Probes that stopped where their state repeated (see `period.rs`).
    cut_short: usize,
    /// Probes that ended as another in their state did (see [`Memo`]).
    answered: usize,
    /// Probes that went on from a copy an earlier probe left (see [`Prefix`]).
    went_on: usize,
}

/// The search (see [`SearchOptions`]), from `shared`, the unlimited run a whole replay made,
/// where there is one; `live`, an empty table of live blocks made for the trace, where one was.
fn search(
    trace: &Trace,
    build: &dyn Fn() -> Box<dyn Policy>,
    device_bytes: u64,
    options: SearchOptions,
    shared: Option<UnlimitedRun>,
    period: Option<&LazyPeriod<'_>>,
    live: Option<&LiveBlocks>,
) -> Searched {
    let SearchOptions {
        copied_blocks,
        scan,
        spans,
        memo,
    } = options;
    // The live blocks' table, made for the trace once: each probe's is a copy.
    let empty = live.cloned().unwrap_or_else(|| LiveBlocks::for_trace(trace));
    let start = || ProbeState::fresh(build(), device_bytes, trace, empty.clone());
    let (unlimited, checkpoints) = match shared {
        Some(run) => (run.end, run.copies.kept),
        None => {
            let mut copies = Copies {
                kept: Vec::new(),
                blocks_budget: copied_blocks,
            };
            let end = start().run(trace, None, Some(&mut copies), None, None, None);
            (end, copies.kept)
        }
    };
    if !unlimited.fits {
        return Searched {
            caps: None,
            copies: checkpoints.len(),
            answers: BTreeMap::new(),
            cut_short: 0,
            answered: 0,
            went_on: 0,
        };
    }
    // Every cap's answer, by capacity in steps: probed, or (with `spans`) answered by a probe
    // that made the same decisions.
    let mut tried = BTreeMap::new();
    let replayed = std::cell::Cell::new(0);
    let cut_short = std::cell::Cell::new(0);
    let answered = std::cell::Cell::new(0);
    let went_on = std::cell::Cell::new(0);
    let memo = memo.then(|| RefCell::new(Memo::new(trace)));
    // The copies the latest probe left, for the next that began where it did (see [`Prefix`]).
    let prefix = RefCell::new(Prefix {
        began: usize::MAX,
        copies: Vec::new(),
    });
    // The caps the search may probe: from the peak of requested bytes to the unlimited peak.
    let top = unlimited.peak_reserved.div_ceil(STEP);
    let floor = unlimited.peak_requested.div_ceil(STEP);
    // What this policy holds once it has taken over the window's start (a policy that does not
    // know PyTorch's layout holds only the live blocks, not the recording's segments).
    let held_at_start = if trace.start.is_some() {
        start().counts.reserved
    } else {
        0
    };
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
        // A copy is worth leaving while a cap not yet answered, other than this one, decided
        // alike up to it.
        let answered_caps: &BTreeMap<u64, bool> = tried;
        let worth_copying = |alike: AlikeLimits| {
            let low = alike.from.div_ceil(STEP).max(floor);
            let high = alike.below.div_ceil(STEP).min(top + 1);
            if low >= high {
                return false;
            }
            let caps = high - low - u64::from((low..high).contains(&steps));
            let known = answered_caps.range(low..high).filter(|&(&cap, _)| cap != steps).count() as u64;
            known < caps
        };
        let shared = Shared {
            prefix: &prefix,
            worth_copying: &worth_copying,
        };
        let end = state.run(trace, Some(capacity), None, period, memo.as_ref(), Some(shared));
        replayed.set(replayed.get() + end.replayed);
        cut_short.set(cut_short.get() + usize::from(end.cut_short));
        answered.set(answered.get() + usize::from(end.answered));
        went_on.set(went_on.get() + usize::from(end.went_on));
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
    let mut fits = top;
    let mut fails = floor.saturating_sub(1).min(fits.saturating_sub(1));
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
    Searched {
        caps: Some(caps),
        copies: checkpoints.len(),
        answers: tried,
        cut_short: cut_short.get(),
        answered: answered.get(),
        went_on: went_on.get(),
    }
}

/// The unlimited run of a search, made by a whole replay instead (see [`Copier`]): how it
/// ended and the copies it left.
pub(crate) struct UnlimitedRun {
    end: ProbeEnd,
    copies: Copies,
}

/// Leaves behind, from a whole replay, the copies the search's unlimited run would: a replay
/// of a PyTorch policy over a fresh simulated device, with no start to take over, replays every
/// event as the unlimited run does while no check of its cap (if it has one) decided otherwise
/// than no cap would, which [`Copier::finish`] sees at the end (what it needed is within its
/// cap). Then the search need not replay the trace once more.
pub(crate) struct Copier {
    copies: Copies,
    stride: usize,
    events: usize,
}

impl Copier {
    /// For a replay of `trace`: the copies at the events the unlimited run would make them.
    pub(crate) fn new(trace: &Trace) -> Copier {
        Copier {
            copies: Copies {
                kept: Vec::new(),
                blocks_budget: COPIED_BLOCKS,
            },
            stride: trace.events.len().div_ceil(CHECKPOINTS).max(1),
            events: trace.events.len(),
        }
    }

    /// Before event `index` of a replay that has refused nothing so far: a copy where the
    /// unlimited run makes one.
    pub(crate) fn before(&mut self, index: usize, replayer: &Replayer, meter: &Metered<'_>) {
        if index == 0 || !index.is_multiple_of(self.stride) {
            return;
        }
        let (Some(copy), Some(device)) = (replayer.resumable_copy(), meter.device().resumable_copy()) else {
            return;
        };
        let counts = meter.counts();
        let state = ProbeState {
            replayer: copy,
            device,
            at: index,
            counts,
            needed: counts.needed.max(replayer.policy.limit_needed()),
            granted: counts.needed,
            refused_start: false,
        };
        self.copies.keep(state, replayer.held.peak_requested);
    }

    /// The unlimited run, after the replay's last event: `None` unless the replay refused
    /// nothing and needed no more than `capacity`, its cap (it then decided everything as the
    /// unlimited run does).
    pub(crate) fn finish(
        self,
        replayer: &Replayer,
        meter: &Metered<'_>,
        refused: bool,
        capacity: Option<u64>,
    ) -> Option<UnlimitedRun> {
        let counts = meter.counts();
        let needed = counts.needed.max(replayer.policy.limit_needed());
        if refused || capacity.is_some_and(|capacity| needed > capacity) {
            return None;
        }
        let end = ProbeEnd {
            fits: true,
            peak_reserved: counts.peak_reserved,
            peak_requested: replayer.held.peak_requested,
            needed,
            granted: counts.needed,
            replayed: self.events,
            cut_short: false,
            answered: false,
            went_on: false,
        };
        Some(UnlimitedRun {
            end,
            copies: self.copies,
        })
    }
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
        let held = |kept: &Vec<ProbeState>| kept.iter().map(|copy| copy.replayer.live.len()).sum::<usize>();
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
    /// Events it replayed, or would have, had its state not repeated.
    replayed: usize,
    /// It stopped where its state repeated.
    cut_short: bool,
    /// It ended as another probe that was in its state did (see [`Memo`]); its `peak_reserved`,
    /// `peak_requested` and `needed` are then those up to there (only the unlimited run's are
    /// read).
    answered: bool,
    /// It went on from a copy an earlier probe left (see [`Prefix`]).
    went_on: bool,
}

/// Events a probe replays at most (an eighth of the trace where that is less) before it keeps
/// its states, to find them repeating.
const KEEP_STATES_AFTER: usize = 100_000;

/// Words of states a probe keeps at most to find its state repeating.
const SEEN_WORDS: usize = 1 << 22;

/// The first of `period`'s repetitions to start at or after event `at`.
fn repetition_at_or_after(period: &Periodicity, at: usize) -> usize {
    let Periodicity { start, period } = *period;
    if at <= start {
        start
    } else {
        start + (at - start).div_ceil(period) * period
    }
}

/// The states a probe was in at the starts of the trace's repetitions (see `period.rs`).
struct SeenStates<'p> {
    period: &'p Periodicity,
    /// The next repetition's start, where the state is taken.
    next_at: usize,
    states: HashSet<Vec<u64>>,
    words: usize,
}

impl<'p> SeenStates<'p> {
    fn new(period: &'p Periodicity, from: usize) -> SeenStates<'p> {
        let mut seen = SeenStates {
            period,
            next_at: 0,
            states: HashSet::default(),
            words: 0,
        };
        seen.next_at = seen.start_at_or_after(from);
        seen
    }

    /// The first repetition's start at or after event `at`.
    fn start_at_or_after(&self, at: usize) -> usize {
        repetition_at_or_after(self.period, at)
    }

    /// Whether `probe`'s state (at a repetition's start) is one it was in before; keeps it
    /// otherwise, and moves on to the next repetition.
    fn repeats(&mut self, probe: &ProbeState) -> bool {
        self.next_at = self.start_at_or_after(probe.at + 1);
        let mut state = Vec::new();
        if !probe.canonical_state(&mut state) {
            return false;
        }
        if self.states.contains(&state) {
            return true;
        }
        if self.words + state.len() <= SEEN_WORDS {
            self.words += state.len();
            self.states.insert(state);
        }
        false
    }
}

/// What [`ProbeState::advance`] replayed.
struct Stretch {
    /// The event refused (or where a cancel stopped it).
    failed_at: Option<usize>,
    /// The most its granted device requests held (reserved plus the request).
    granted: u64,
}

/// Events between the memo's events at least (a [`MEMO_EVENTS`]th of the trace where that is
/// more).
const MEMO_STRIDE: usize = 4096;

/// The memo's events in a trace, at most.
const MEMO_EVENTS: usize = 64;

/// Words of states the memo keeps at most (each search has its own).
const MEMO_WORDS: usize = 1 << 22;

/// What followed a probe's state at one of the memo's events, to the probe's end.
#[derive(Debug, Clone, Copy)]
struct Followed {
    /// The capacities that decided as the probe's did, from that state on.
    alike: AlikeLimits,
    /// The most its granted device requests held, from that state on.
    granted: u64,
    /// The event it failed at; `None`: it fitted.
    failed_at: Option<usize>,
}

/// The states the probes of one search were in at every `stride`th event, and what followed
/// each, so that a later probe in the same state there, under a capacity that decided alike
/// from there on, ends as that probe did without replaying the rest.
///
/// Why that is exact. A probe's state at event `k`, written as [`ProbeState::canonical_state`]
/// writes it (what the policy's, the device's and the replayer's later decisions can see), and
/// the events from `k` on decide every later step, but for the checks of the capacity. The
/// policy says, for each stretch, which capacities its checks there would have answered as
/// they were answered ([`Policy::take_alike_limits`]: PyTorch's allocator checks the cap when
/// it asks the device for memory, granted for every cap from what would be held, refused for
/// every cap below it; and, with a garbage-collection threshold, before each device request,
/// collecting nothing for every cap from the least that collects nothing, and collecting the
/// same blocks for every cap whose target, what is held less the cap's threshold, runs the same
/// rounds of the collection: see `Caching::garbage_collect`). Two probes in the same state at `k`, the later one's capacity
/// within what was alike for the earlier from `k` to its end, take the same first step, so are
/// in the same state after it, and so on by induction: every check is answered alike, so the
/// later probe fails at the event the earlier failed at, or fits, and its granted requests
/// hold what the earlier's did. States are compared whole (not by hash), at the same event.
pub(crate) struct Memo {
    stride: usize,
    /// By state (its event first): what followed it, in each probe that was in it.
    states: HashMap<Vec<u64>, Vec<Followed>>,
    words: usize,
}

impl Memo {
    pub(crate) fn new(trace: &Trace) -> Memo {
        Memo {
            stride: (trace.events.len() / MEMO_EVENTS).max(MEMO_STRIDE),
            states: HashMap::default(),
            words: 0,
        }
    }

    /// What followed `state` in a probe whose capacity decided as `capacity` does.
    fn find(&self, state: &[u64], capacity: u64) -> Option<Followed> {
        self.states
            .get(state)?
            .iter()
            .find(|followed| followed.alike.contains(capacity))
            .copied()
    }

    /// Keeps what followed `state` (while its words are within [`MEMO_WORDS`]).
    fn keep(&mut self, state: Vec<u64>, followed: Followed) {
        if let Some(known) = self.states.get_mut(&state) {
            known.push(followed);
        } else if self.words + state.len() <= MEMO_WORDS {
            self.words += state.len();
            self.states.insert(state, vec![followed]);
        }
    }
}

/// A copy a capped probe left at one of the memo's events, for a later probe of the search that
/// began where it began, under a capacity that decided alike up to there (see [`Prefix`]).
struct PrefixCopy {
    /// The event it was left before.
    at: usize,
    /// The capacities that decided as the probe's did, from where it began up to here.
    alike: AlikeLimits,
    replayer: Frozen,
    device: SimDevice,
    counts: MeterCounts,
    needed: u64,
    granted: u64,
    /// The stretches the probe replayed since the copy before (see [`ProbeState::run`]).
    stretches: Vec<(AlikeLimits, u64)>,
    /// Its state here as the memo keeps it, where it could be said.
    state: Option<Vec<u64>>,
}

/// The copies the latest probe of a search left behind (with those of the probe it went on from),
/// so that the next one that began where it began goes on from the last copy its capacity
/// agrees with, instead of replaying the stretch they have in common.
///
/// Why that is exact: the argument of [`Memo`], read forwards. Two probes that begin in the same
/// state (the same copy of the unlimited run, or the first event) take the same first step when
/// the later one's capacity answers that step's checks of the cap as the earlier one's did, so
/// are in the same state after it, and so on by induction: up to an event where every check
/// since the start was answered alike (the later capacity within the limits the policy said
/// were alike over each stretch, [`Policy::take_alike_limits`]), the later probe is in the
/// state the earlier one was in, which the copy holds (its policy then limited to the later
/// capacity). What the later probe would have seen on the way (its stretches' limits, its states
/// for the memo) is the earlier one's, kept with the copies. Its count of events replayed starts
/// where it began, not at the copy, so the scan's budget is spent as before.
struct Prefix {
    /// Where the probe began (the unlimited run's copy it went on from, or 0).
    began: usize,
    copies: Vec<PrefixCopy>,
}

/// What a probe shares with the other probes of its search besides the memo.
#[derive(Clone, Copy)]
struct Shared<'a> {
    prefix: &'a RefCell<Prefix>,
    /// Whether a copy whose capacities alike up to it are these could serve a later probe.
    worth_copying: &'a dyn Fn(AlikeLimits) -> bool,
}

/// Everything a probe's replay carries from one event to the next.
struct ProbeState {
    replayer: Replayer,
    device: SimDevice,
    /// The next event to replay.
    at: usize,
    /// The meter's figures.
    counts: MeterCounts,
    /// The smallest capacity that would have refused nothing so far.
    needed: u64,
    /// The most bytes held right after a device request the meter granted (reserved plus the
    /// request), from the start or the copy it began from (where it is that copy's `needed`).
    granted: u64,
    /// The policy could not hold the state the trace began in: nothing fits.
    refused_start: bool,
}

impl ProbeState {
    fn fresh(policy: Box<dyn Policy>, device_bytes: u64, trace: &Trace, live: LiveBlocks) -> ProbeState {
        let mut device = SimDevice::new(device_bytes);
        // Every probe has a cap: a release right before a device allocation is the policy's.
        let mut replayer = Replayer::with_live(policy, trace, true, live);
        let mut counts = MeterCounts::default();
        let (mut needed, mut refused_start) = (0, false);
        if trace.start.is_some() {
            let mut meter = Metered::resume(&mut device, None, counts, false);
            // A start the policy cannot hold fails every probe, as it fails the replay.
            refused_start = !matches!(replayer.adopt_start(trace, &mut meter, &mut ()), Ok(None));
            counts = meter.counts();
            needed = counts.needed.max(replayer.policy.limit_needed());
        }
        ProbeState {
            replayer,
            device,
            at: 0,
            counts,
            needed,
            granted: needed,
            refused_start,
        }
    }

    /// A copy to go on from, when the policy can be copied.
    fn copy(&self) -> Option<ProbeState> {
        Some(ProbeState {
            replayer: self.replayer.resumable_copy()?,
            device: self.device.clone(),
            ..*self
        })
    }

    fn peak_requested(&self) -> u64 {
        self.replayer.held.peak_requested
    }

    /// Replays from `at` to the end (or the first refusal) under `capacity`. With `checkpoints`
    /// (the unlimited run), leaves copies of its state behind, dropping those every probe can
    /// do without. With `period` (the trace repeats itself), stops where its state at a
    /// repetition's start is one it was in at an earlier one: the rest repeats what followed
    /// that (see `period.rs`), so it fits and its figures are final. With `memo` (a probe of a
    /// policy that says which limits decide as its own), stops where its state at one of the
    /// memo's events is one another probe was in there, under a capacity that decided alike from
    /// there on: it then ends as that probe did (see [`Memo`]); and leaves what followed its own
    /// states there for later probes. Its `replayed` counts the events a probe without either
    /// shortcut would have replayed (to the end, or to the end of the stretch it failed in), so
    /// that what the scan's budget allows does not depend on them.
    #[allow(clippy::too_many_arguments)]
    fn run(
        mut self,
        trace: &Trace,
        capacity: Option<u64>,
        mut checkpoints: Option<&mut Copies>,
        period: Option<&LazyPeriod<'_>>,
        memo: Option<&RefCell<Memo>>,
        shared: Option<Shared<'_>>,
    ) -> ProbeEnd {
        let events = trace.events.len();
        let began = self.at;
        let stride = events.div_ceil(CHECKPOINTS).max(1);
        let limited_by_policy = capacity.is_some_and(|capacity| self.replayer.policy.limit_memory(capacity));
        let meter_capacity = if limited_by_policy { None } else { capacity };
        let mut fits = !self.refused_start;
        if meter_capacity.is_some() {
            // The meter refuses past the cap, and counts what it refuses among what it granted.
            self.granted = u64::MAX;
        }
        // The memo, where the policy says which limits decide alike (what it says of the
        // stretch before this probe began is not this probe's: forgotten).
        let memo = match (memo, capacity) {
            (Some(memo), Some(_)) if limited_by_policy && checkpoints.is_none() => {
                self.replayer.policy.take_alike_limits().map(|_| memo)
            }
            _ => None,
        };
        let memo_stride = memo.map_or(usize::MAX, |memo| memo.borrow().stride);
        // Each stretch between the memo's events: the limits alike over it, and the most its
        // granted requests held.
        let mut stretches: Vec<(AlikeLimits, u64)> = Vec::new();
        // This probe's states at the memo's events (the event first), each with the number of
        // stretches before it.
        let mut states: Vec<(Vec<u64>, usize)> = Vec::new();
        let mut answer: Option<Followed> = None;
        let mut failed_at = None;
        // The copies this probe leaves (after those it went on from), and the capacities alike
        // from where it began up to here.
        let shared = shared.filter(|_| memo.is_some());
        let mut chain: Vec<PrefixCopy> = Vec::new();
        let mut alike_so_far = AlikeLimits::ANY;
        let mut copying = shared.is_some();
        let mut went_on = false;
        if let (Some(shared), Some(capacity), Some(memo)) = (shared, capacity, memo) {
            let mut prefix = shared.prefix.borrow_mut();
            let agrees = if prefix.began == began {
                prefix
                    .copies
                    .iter()
                    .take_while(|copy| copy.alike.contains(capacity))
                    .count()
            } else {
                0
            };
            if agrees > 0 {
                let mut inherited = std::mem::take(&mut prefix.copies);
                inherited.truncate(agrees);
                let last = &inherited[agrees - 1];
                if let Some(mut replayer) = last.replayer.thaw() {
                    // The copy's policy was limited to the earlier probe's capacity.
                    replayer.policy.limit_memory(capacity);
                    replayer.policy.take_alike_limits();
                    self.replayer = replayer;
                    self.device = last.device.clone();
                    self.at = last.at;
                    self.counts = last.counts;
                    self.needed = last.needed;
                    self.granted = last.granted;
                    alike_so_far = last.alike;
                    for copy in &inherited {
                        stretches.extend_from_slice(&copy.stretches);
                        if let Some(state) = &copy.state {
                            states.push((state.clone(), stretches.len()));
                        }
                    }
                    // Met there by a probe that decided alike from there on, it ends as that
                    // one did (the check the loop makes at each of the memo's events).
                    if let Some(state) = &last.state {
                        if let Some(followed) = memo.borrow().find(state, capacity) {
                            answer = Some(followed);
                            states.pop();
                        }
                    }
                    chain = inherited;
                    went_on = true;
                } else {
                    prefix.copies = inherited;
                }
            }
        }
        // A probe's states are kept only once it has gone some way (most that fail, fail
        // early); the unlimited run keeps none.
        let mut keep_states_from = match (capacity, period) {
            (Some(_), Some(_)) => began + (events / 8).min(KEEP_STATES_AFTER),
            _ => usize::MAX,
        };
        let mut seen: Option<SeenStates> = None;
        let mut cut_short = false;
        while fits && self.at < events && answer.is_none() {
            let mut end = if checkpoints.is_some() {
                (self.at + stride).min(events)
            } else {
                events
            };
            if self.at >= keep_states_from {
                // Asked once: where the trace has no period, the probe goes on to its end.
                keep_states_from = usize::MAX;
                seen = period
                    .and_then(LazyPeriod::get)
                    .map(|period| SeenStates::new(period, self.at));
            }
            match &seen {
                Some(seen) => end = end.min(seen.next_at),
                None => end = end.min(keep_states_from),
            }
            // Where a probe without the memo would stop (the stretch it replays in one go).
            let whole_end = end;
            if memo.is_some() {
                end = end.min((self.at / memo_stride + 1).saturating_mul(memo_stride));
            }
            let stretch = self.advance(trace, end, meter_capacity);
            fits = stretch.failed_at.is_none();
            if !fits {
                failed_at = stretch.failed_at;
                self.at = whole_end;
            }
            if let Some(memo) = memo {
                let alike = self.replayer.policy.take_alike_limits().unwrap_or(AlikeLimits::NONE);
                stretches.push((alike, stretch.granted));
                alike_so_far = alike_so_far.and(alike);
                if fits && self.at < events && self.at.is_multiple_of(memo_stride) {
                    let mut state = vec![self.at as u64];
                    let said = self.canonical_state(&mut state);
                    if said {
                        let found = memo.borrow().find(&state, capacity.unwrap_or(u64::MAX));
                        if let Some(followed) = found {
                            answer = Some(followed);
                            break;
                        }
                    }
                    if let (true, Some(shared)) = (copying, shared) {
                        copying = (shared.worth_copying)(alike_so_far);
                        if copying {
                            self.leave_copy(&mut chain, alike_so_far, &stretches, said.then(|| state.clone()));
                        }
                    }
                    if said {
                        states.push((state, stretches.len()));
                    }
                }
            }
            if let (true, Some(seen)) = (fits, seen.as_mut()) {
                if self.at == seen.next_at && seen.repeats(&self) {
                    self.at = events;
                    cut_short = true;
                    break;
                }
            }
            if let (true, true, Some(copies)) = (fits, end < events, checkpoints.as_deref_mut()) {
                if let Some(state) = self.copy() {
                    let peak_requested = self.peak_requested();
                    copies.keep(state, peak_requested);
                }
            }
        }
        if let Some(followed) = answer {
            // It ends as the probe it met did: fits or fails at the same event, its granted
            // requests holding as much.
            self.granted = self.granted.max(followed.granted);
            failed_at = followed.failed_at;
            fits = failed_at.is_none();
            self.at = match failed_at {
                None => events,
                // The end of the stretch a probe without the memo would have failed in.
                Some(failed) => {
                    let repetition_after = |at: usize| {
                        period
                            .and_then(LazyPeriod::get)
                            .map_or(events, |period| repetition_at_or_after(period, at).min(events))
                    };
                    if keep_states_from != usize::MAX {
                        if failed < keep_states_from {
                            keep_states_from.min(events)
                        } else {
                            repetition_after(failed + 1)
                        }
                    } else if seen.is_some() {
                        repetition_after(failed + 1)
                    } else {
                        events
                    }
                }
            };
        }
        if let (Some(shared), false) = (shared, chain.is_empty()) {
            *shared.prefix.borrow_mut() = Prefix { began, copies: chain };
        }
        // What followed each of its states, for later probes: not where the period cut it
        // short (what followed then includes stretches before the state), nor when cancelled.
        if let Some(memo) = memo.filter(|_| !cut_short && !experiments::cancel::requested()) {
            let mut followed = answer.unwrap_or(Followed {
                alike: AlikeLimits::ANY,
                granted: 0,
                failed_at,
            });
            let mut memo = memo.borrow_mut();
            let mut next = stretches.len();
            for (state, from) in states.into_iter().rev() {
                for &(alike, granted) in &stretches[from..next] {
                    followed.alike = followed.alike.and(alike);
                    followed.granted = followed.granted.max(granted);
                }
                next = from;
                memo.keep(state, followed);
            }
        }
        ProbeEnd {
            fits,
            peak_reserved: self.counts.peak_reserved,
            peak_requested: self.peak_requested(),
            needed: self.needed,
            granted: self.granted,
            replayed: self.at - began,
            cut_short,
            answered: answer.is_some(),
            went_on,
        }
    }

    /// Leaves a copy of itself at the end of `chain` (see [`Prefix`]): `alike`, the capacities
    /// alike from where it began; `stretches`, every stretch it replayed (those since the copy
    /// before are kept); `state`, its state for the memo.
    fn leave_copy(
        &self,
        chain: &mut Vec<PrefixCopy>,
        alike: AlikeLimits,
        stretches: &[(AlikeLimits, u64)],
        state: Option<Vec<u64>>,
    ) {
        let Some(replayer) = self.replayer.freeze() else { return };
        let replayed: usize = chain.iter().map(|copy| copy.stretches.len()).sum();
        chain.push(PrefixCopy {
            at: self.at,
            alike,
            replayer,
            device: self.device.clone(),
            counts: self.counts,
            needed: self.needed,
            granted: self.granted,
            stretches: stretches[replayed..].to_vec(),
            state,
        });
    }

    /// Replays events `at..end` through the replay's own steps, up to the first request
    /// refused.
    fn advance(&mut self, trace: &Trace, end: usize, meter_capacity: Option<u64>) -> Stretch {
        // The meter counts this stretch's most held after a granted request on its own.
        let counts = MeterCounts {
            needed: 0,
            ..self.counts
        };
        let mut meter = Metered::resume(&mut self.device, meter_capacity, counts, false);
        let mut failed_at = None;
        for index in self.at..end {
            // A cancelled search ends its probes at once; its caller reports the cancel.
            if (index - self.at).is_multiple_of(4096) && experiments::cancel::requested() {
                failed_at = Some(index);
                break;
            }
            // Without an observer nothing can fail but the request itself.
            if !self.replayer.step(trace, index, &mut meter, &mut ()).unwrap_or(false) {
                failed_at = Some(index);
                break;
            }
        }
        self.at = end;
        self.counts = meter.counts();
        let granted = self.counts.needed;
        // The cap is the policy's or the meter's; whichever it is, both bounds together are safe.
        self.granted = self.granted.max(granted);
        self.counts.needed = self.granted;
        self.needed = self
            .needed
            .max(self.counts.needed)
            .max(self.replayer.policy.limit_needed());
        Stretch { failed_at, granted }
    }

    /// Its state as far as later decisions can see it, at event `at` (see `period.rs`).
    fn canonical_state(&self, out: &mut Vec<u64>) -> bool {
        if !self.device.canonical_state(out) {
            return false;
        }
        out.push(self.counts.reserved);
        self.replayer.canonical_state(self.at, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build_pytorch_policy;
    use experiments::AllocConf;

    /// Every trace committed to the repository.
    fn committed_traces() -> Vec<std::path::PathBuf> {
        let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut paths = Vec::new();
        for dir in [
            "tests/traces",
            "tests/traces/formats",
            "reports/reference/h100/real-jobs",
            "reports/reference/h100/alloc-traces/gpt",
            "reports/reference/h100/alloc-traces/random",
            "reports/reference/h100/alloc-traces/resnet18",
            "reports/reference/h100/alloc-traces/serve",
        ] {
            for entry in std::fs::read_dir(root.join(dir)).unwrap() {
                let path = entry.unwrap().path();
                let name = path.to_string_lossy();
                if name.ends_with(".pickle") || name.ends_with(".pickle.gz") {
                    paths.push(path);
                }
            }
        }
        paths.sort();
        paths
    }

    /// The probes and whole replays step through events in one place, so they must agree: every
    /// cap a search answered (by a probe from a copy of the unlimited run, or by a probe that
    /// decided alike) is replayed whole from the first event, and fits exactly where the search
    /// said. Every committed trace, under every policy and every setting of tune's grid; in a
    /// debug build a fixed sample of them (one in fifteen, and four caps per search), all of
    /// them in a release build or with VRAMLAB_FULL_CHECKS set (about 4 minutes in release).
    #[test]
    fn probes_answer_as_whole_replays_do() {
        let full = !cfg!(debug_assertions) || std::env::var_os("VRAMLAB_FULL_CHECKS").is_some();
        let device_bytes = 80 << 30;
        let mut choices: Vec<crate::PolicyChoice> = experiments::POLICIES
            .iter()
            .map(|p| {
                let spec = PolicySpec::parse(p.name).unwrap();
                crate::PolicyChoice::Named(spec.clone(), Recipe::of(&spec).unwrap())
            })
            .collect();
        for settings in crate::DEFAULT_TUNE_GRID {
            choices.push(crate::PolicyChoice::pytorch(settings).unwrap());
        }
        let (mut searches, mut compared) = (0, 0);
        for (t, path) in committed_traces().iter().enumerate() {
            let trace = Trace::load(path).unwrap();
            let period = LazyPeriod::new(&trace);
            for (c, choice) in choices.iter().enumerate() {
                if !full && (t + c) % 15 != 0 {
                    continue;
                }
                let build = || choice.build();
                let options = SearchOptions {
                    copied_blocks: COPIED_BLOCKS,
                    scan: Some(64),
                    spans: choice.decides_by_requests_alone(),
                    memo: true,
                };
                let searched = search(&trace, &build, device_bytes, options, None, Some(&period), None);
                searches += 1;
                let mut answers: Vec<(u64, bool)> = searched.answers.into_iter().collect();
                if !full {
                    // The caps either side of where fitting starts and stops are the telling ones.
                    let telling = |(steps, _): &(u64, bool)| {
                        searched.caps.is_some_and(|caps| {
                            [caps.smallest, caps.always].iter().any(|&at| {
                                let at = at / STEP;
                                *steps == at || *steps + 1 == at
                            })
                        })
                    };
                    answers.retain(telling);
                }
                for (steps, fits) in answers {
                    let mut device = SimDevice::new(device_bytes);
                    let whole = crate::replay_policy(
                        &trace,
                        "whole",
                        choice.build(),
                        &mut device,
                        crate::ReplayOptions::probe(Some(steps * STEP)),
                        &mut (),
                        experiments::BackendKind::Sim,
                    )
                    .unwrap();
                    assert_eq!(
                        whole.failed_allocs == 0,
                        fits,
                        "{} under {} at {} B: the search said {}, a whole replay {}",
                        path.display(),
                        choice.label(),
                        steps * STEP,
                        if fits { "fits" } else { "fails" },
                        whole.first_failure.as_deref().unwrap_or("fits")
                    );
                    compared += 1;
                }
            }
        }
        assert!(
            searches > 50 && compared > 100,
            "{searches} searches, {compared} caps compared"
        );
    }

    /// A replay that leaves the search's unlimited run behind (tune, and replays of several
    /// settings) answers as the search's own run does: every committed trace under settings of
    /// tune's grid, with no cap, a cap above every need and a cap that binds, each result the
    /// same field for field (timings are not taken) with and without sharing. A fixed sample of
    /// the pairs of trace and setting: one in eight in a release build or with
    /// VRAMLAB_FULL_CHECKS set (about a minute on 2 cores), one in 96 in a debug build (18 s
    /// here, of CI's 20 minutes).
    #[test]
    fn a_replay_leaves_the_unlimited_run_the_search_makes() {
        let full = !cfg!(debug_assertions) || std::env::var_os("VRAMLAB_FULL_CHECKS").is_some();
        let device_bytes = 80 << 30;
        let choices: Vec<crate::PolicyChoice> = crate::DEFAULT_TUNE_GRID
            .iter()
            .map(|settings| crate::PolicyChoice::pytorch(settings).unwrap())
            .collect();
        let (mut compared, mut shared) = (0, 0);
        let one_in = if full { 8 } else { 96 };
        let mut check = |trace: &Trace, choices: &[crate::PolicyChoice], name: &str| {
            let peak = crate::replay_choices(trace, &choices[..1], device_bytes, crate::ReplayOptions::default())
                .unwrap()[0]
                .peak_reserved_bytes;
            for capacity in [None, Some(device_bytes), Some(peak - peak / 8)] {
                let options = crate::ReplayOptions {
                    capacity,
                    time_ops: false,
                    ..crate::ReplayOptions::default()
                };
                let run = |sharing| {
                    crate::choice::replay_each_sharing(trace, choices, device_bytes, options, true, sharing).unwrap()
                };
                let (with, without) = (run(true), run(false));
                let json = |results: &Vec<experiments::PolicyResult>| serde_json::to_value(results).unwrap();
                assert_eq!(json(&with), json(&without), "{name} under {capacity:?}");
                compared += with.len();
                // How often the replay's own run was the search's (the comparison above means
                // something only where it was).
                for choice in choices {
                    let mut device = SimDevice::new(device_bytes);
                    let left = crate::replay::replay_leaving_copies(
                        trace,
                        "copies",
                        choice.build(),
                        &mut device,
                        options,
                        &mut (),
                        experiments::BackendKind::Sim,
                        Some(Copier::new(trace)),
                        None,
                    )
                    .unwrap()
                    .1;
                    shared += usize::from(left.is_some());
                }
            }
        };
        for (t, path) in committed_traces().iter().enumerate() {
            let sample: Vec<crate::PolicyChoice> = choices
                .iter()
                .enumerate()
                .filter(|(c, _)| (t + c) % one_in == 0)
                .map(|(_, choice)| choice.clone())
                .collect();
            let mut trace = Trace::load(path).unwrap();
            if !sample.is_empty() {
                check(&trace, &sample, &path.display().to_string());
            }
            // Under its own settings, a recording that kept no addresses of its segments
            // replays over a counting device, as the search's probes do, and shares its run.
            if t % (one_in / 2) == 0 && trace.start.is_none() {
                trace.recorded_ops.iter_mut().for_each(|op| op.addr = 0);
                let own = crate::choose_policies(&trace, None, &[]).unwrap();
                if own.iter().all(|choice| choice.is_recording_of(&trace)) {
                    check(&trace, &own, &format!("{} without addresses", path.display()));
                }
            }
        }
        assert!(
            compared > 3 * committed_traces().len() / one_in && shared > compared / 3,
            "{compared} results compared, {shared} shared"
        );
    }

    /// A probe that stops where its state repeats answers as the probe that replays to the end
    /// does: a training loop's recording (gpt) repeated and cut off mid-iteration, under every
    /// setting of tune's grid, every cap each search answered the same, with and without the
    /// shortcut. A fixed sample of the settings in a debug build (one in four), all of them in
    /// a release build or with VRAMLAB_FULL_CHECKS set.
    #[test]
    fn probes_cut_short_by_a_repeating_state_answer_as_whole_probes_do() {
        let full = !cfg!(debug_assertions) || std::env::var_os("VRAMLAB_FULL_CHECKS").is_some();
        let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../reports/reference/h100/alloc-traces/gpt/default.pickle.gz");
        let gpt = Trace::load(&path).unwrap();
        let iteration = crate::period::repeated(&gpt, 1, 0).events.len();
        let trace = crate::period::repeated(&gpt, 6, iteration / 2);
        let period = LazyPeriod::new(&trace);
        assert!(period.get().is_some(), "the loop repeats");
        let device_bytes = 80 << 30;
        let (mut compared, mut cut_short) = (0, 0);
        for (c, settings) in crate::DEFAULT_TUNE_GRID.iter().enumerate() {
            if !full && c % 4 != 0 {
                continue;
            }
            let choice = crate::PolicyChoice::pytorch(settings).unwrap();
            let build = || choice.build();
            let options = SearchOptions {
                copied_blocks: COPIED_BLOCKS,
                scan: Some(16),
                spans: choice.decides_by_requests_alone(),
                memo: true,
            };
            let with = search(&trace, &build, device_bytes, options, None, Some(&period), None);
            let without = search(&trace, &build, device_bytes, options, None, None, None);
            assert_eq!(with.caps, without.caps, "{settings}");
            assert_eq!(with.answers, without.answers, "{settings}");
            assert_eq!(without.cut_short, 0);
            compared += with.answers.len();
            cut_short += with.cut_short;
        }
        // The comparison means something only where probes were cut short.
        assert!(
            compared > 20 && cut_short > 5,
            "{compared} caps compared, {cut_short} probes cut short"
        );
    }

    /// `traces`' events one after another, each closing what it left live and naming its
    /// blocks anew: a trace whose passes differ and never repeat.
    fn passes(traces: &[&Trace]) -> Trace {
        let mut events = Vec::new();
        let mut base = 0;
        for trace in traces {
            let mut once: Vec<experiments::TraceEvent> = trace.events.clone();
            let mut live = std::collections::BTreeSet::new();
            for event in &once {
                match *event {
                    experiments::TraceEvent::Alloc { id, .. } => {
                        live.insert(id);
                    }
                    experiments::TraceEvent::Free { id } => {
                        live.remove(&id);
                    }
                    _ => {}
                }
            }
            once.extend(live.into_iter().map(|id| experiments::TraceEvent::Free { id }));
            let span = once.iter().filter_map(crate::replayer::named).max().unwrap_or(0) + 1;
            events.extend(once.iter().map(|event| match *event {
                experiments::TraceEvent::Alloc { id, size, stream } => experiments::TraceEvent::Alloc {
                    id: id + base,
                    size,
                    stream,
                },
                experiments::TraceEvent::FreeRequested { id } => {
                    experiments::TraceEvent::FreeRequested { id: id + base }
                }
                experiments::TraceEvent::Free { id } => experiments::TraceEvent::Free { id: id + base },
                other => other,
            }));
            base += span;
        }
        Trace::new("passes", experiments::TraceSource::Synthetic, events)
    }

    /// A probe that ends as another probe in its state did (the memo), or goes on from a copy
    /// the probe before it left (the prefix they share), answers as a probe that replays from
    /// its start to its end does: every committed trace, and a trace of passes of the committed
    /// recordings that never repeats, under every setting of tune's grid (a fixed sample in a
    /// debug build, VRAMLAB_FULL_CHECKS or not: every other setting for the passes, one pair in
    /// ten of the rest, 30 s here; all in a release build),
    /// the same caps and every cap answered the same, with and without both. Whole
    /// replays check the memo's answers in CI's full checks (`probes_answer_as_whole_replays_do`
    /// searches with it, every trace and setting), which keeps CI's time.
    #[test]
    fn probes_answered_by_the_memo_answer_as_whole_probes_do() {
        let full = !cfg!(debug_assertions);
        let device_bytes = 80 << 30;
        let recordings: Vec<Trace> = ["gpt", "serve", "resnet18", "random"]
            .iter()
            .map(|name| {
                let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!(
                    "../reports/reference/h100/alloc-traces/{name}/default.pickle.gz"
                ));
                Trace::load(&path).unwrap()
            })
            .collect();
        let [gpt, serve, resnet, random] = [&recordings[0], &recordings[1], &recordings[2], &recordings[3]];
        let mut traces = vec![passes(&[serve, gpt, random, serve, resnet, random, gpt, serve])];
        traces.extend(committed_traces().iter().map(|path| Trace::load(path).unwrap()));
        let (mut compared, mut answered, mut answered_passes, mut went_on) = (0, 0, 0, 0);
        for (t, trace) in traces.iter().enumerate() {
            let period = LazyPeriod::new(trace);
            for (c, settings) in crate::DEFAULT_TUNE_GRID.iter().enumerate() {
                if !full && (t + c) % (if t == 0 { 2 } else { 10 }) != 0 {
                    continue;
                }
                let choice = crate::PolicyChoice::pytorch(settings).unwrap();
                let build = || choice.build();
                let options = |memo| SearchOptions {
                    copied_blocks: COPIED_BLOCKS,
                    scan: Some(64),
                    spans: choice.decides_by_requests_alone(),
                    memo,
                };
                let with = search(trace, &build, device_bytes, options(true), None, Some(&period), None);
                let without = search(trace, &build, device_bytes, options(false), None, Some(&period), None);
                assert_eq!(with.caps, without.caps, "{} under {settings}", trace.name);
                assert_eq!(with.answers, without.answers, "{} under {settings}", trace.name);
                assert_eq!(without.answered, 0);
                assert_eq!(without.went_on, 0);
                compared += with.answers.len();
                answered += with.answered;
                went_on += with.went_on;
                if t == 0 {
                    answered_passes += with.answered;
                }
            }
        }
        // The comparison means something only where probes were answered by the memo.
        assert!(
            compared > 500 && answered > 100 && answered_passes > 20 && went_on > 100,
            "{compared} caps compared, {answered} probes answered by the memo ({answered_passes} on the passes), \
             {went_on} went on from an earlier probe's copy"
        );
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
            memo: true,
        };
        let period = LazyPeriod::new(&trace);
        let whole = search(
            &trace,
            &build,
            80 << 30,
            options(COPIED_BLOCKS),
            None,
            Some(&period),
            None,
        );
        let thinned = search(&trace, &build, 80 << 30, options(0), None, None, None);
        let (answer, copies) = (whole.caps, whole.copies);
        let (thinned, one) = (thinned.caps, thinned.copies);
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
        let period = LazyPeriod::new(&trace);
        let caps = fitting_caps_of(
            &trace,
            &build,
            device_bytes,
            Some(ALWAYS_FITS_PROBES),
            true,
            None,
            Some(&period),
            None,
        )
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
                let period = LazyPeriod::new(&trace);
                let every =
                    fitting_caps_of(&trace, &build, device_bytes, Some(usize::MAX), false, None, None, None).unwrap();
                let spans = fitting_caps_of(
                    &trace,
                    &build,
                    device_bytes,
                    Some(usize::MAX),
                    true,
                    None,
                    Some(&period),
                    None,
                )
                .unwrap();
                let strip = |caps: Option<FittingCaps>| caps.map(|c| (c.smallest, c.always, c.exact));
                assert_eq!(strip(spans), strip(every), "{workload}/{name}");
                assert!(spans.unwrap().probes <= every.unwrap().probes);
                compared += 1;
            }
        }
        assert_eq!(compared, 12);
    }
}
