//! Where a trace repeats itself, so that a probe of the capacity search can stop once its own
//! state repeats: a training loop's snapshot is the same iteration over and over, and a probe
//! under a cap settles into the same cache at the same point of each iteration.
//!
//! The argument, which makes the shortcut exact. From event `start` on, event `k + period` does
//! what event `k` does: same kind, size, stream and pool, and the block it names was named last
//! as many events before ([`Periodicity::same`]; a free of a block the trace never named before
//! repeats nothing). A policy's state at an event, written so that only what its later
//! decisions can see is kept (blocks in address order, not their addresses; a live block by
//! how many events ago the trace last named it, its tag, not by its id:
//! [`Policy::canonical_state`]), decides what it does with the events that follow. Let a
//! probe's state at `c2` equal its state at an earlier `c1`, both repetitions' starts. Then
//! event `c2 + k` meets the state event `c1 + k` met, for every `k` to the trace's end (an
//! event naming a block names the one with the tag its twin's block had); and, where `c1 + k`
//! lies past `c2`, that state is in turn the one of an event a repetition earlier, and so on.
//! Every decision after `c2` is one made between `c1` and `c2`: nothing later is refused, and
//! every running maximum (peak reserved, what was needed, what was granted) holds its final
//! value.
//!
//! [`Policy::canonical_state`]: crate::Policy::canonical_state

use experiments::{Trace, TraceEvent};
use rustc_hash::FxHashMap as HashMap;

use super::replayer::{dense_id_slots, named, Live};

/// Events of the trace's end that must be seen again earlier for a period to be tried.
const WINDOW: usize = 256;

/// Periods tried at most (the nearest repeats of the trace's last events first).
const CANDIDATES: usize = 32;

/// A period is used only where the trace repeats it at least this many times.
const MIN_REPEATS: usize = 3;

/// An event that names no block, or one the trace never named before.
const FIRST: u32 = u32::MAX;

/// How a trace repeats: from `start` on, with `period`.
pub(crate) struct Periodicity {
    /// From this event on, event `k + period` does what event `k` does, to the trace's end.
    pub(crate) start: usize,
    pub(crate) period: usize,
}

/// A trace's [`Periodicity`], found when first asked for (most searches never need it: their
/// probes fail early), once for all who share it.
pub(crate) struct LazyPeriod<'t> {
    trace: &'t Trace,
    found: std::sync::OnceLock<Option<Periodicity>>,
}

impl<'t> LazyPeriod<'t> {
    pub(crate) fn new(trace: &'t Trace) -> LazyPeriod<'t> {
        LazyPeriod {
            trace,
            found: std::sync::OnceLock::new(),
        }
    }

    /// The trace's period, found on the first call.
    pub(crate) fn get(&self) -> Option<&Periodicity> {
        self.found.get_or_init(|| Periodicity::of(self.trace)).as_ref()
    }
}

/// For each event naming a block, how many events before it the trace last named that block
/// ([`FIRST`]: never, or no block).
struct Behind(Vec<u32>);

impl Behind {
    fn of(trace: &Trace) -> Behind {
        let events = &trace.events;
        let mut behind = vec![FIRST; events.len()];
        // The event that last named each id: a table where the ids are dense, else a map.
        let mut dense = dense_id_slots(trace).map(|slots| vec![FIRST; slots]);
        let mut sparse: HashMap<u64, u32> = HashMap::default();
        for (k, id) in events
            .iter()
            .enumerate()
            .filter_map(|(k, event)| Some((k, named(event)?)))
        {
            let before = match dense.as_mut() {
                Some(last) => std::mem::replace(&mut last[id as usize], k as u32),
                None => sparse.insert(id, k as u32).unwrap_or(FIRST),
            };
            if before != FIRST {
                behind[k] = k as u32 - before;
            }
        }
        Behind(behind)
    }

    /// Whether event `b` does what event `a` does (see the module's notes).
    fn same(&self, trace: &Trace, a: usize, b: usize) -> bool {
        let alike = match (trace.events[a], trace.events[b]) {
            (
                TraceEvent::Alloc { id, size, stream },
                TraceEvent::Alloc {
                    id: id_b,
                    size: size_b,
                    stream: stream_b,
                },
            ) => size == size_b && stream == stream_b && trace.pool_of(id) == trace.pool_of(id_b),
            // A free of a block never named before (one the trace began with, or never had)
            // repeats nothing.
            (TraceEvent::FreeRequested { .. }, TraceEvent::FreeRequested { .. })
            | (TraceEvent::Free { .. }, TraceEvent::Free { .. }) => self.0[a] != FIRST,
            (x, y) => return x == y,
        };
        alike && self.0[a] == self.0[b]
    }

    /// A hash of what event `k` does, for finding candidate periods ([`Behind::same`] decides).
    fn shape(&self, trace: &Trace, k: usize) -> u64 {
        let (kind, a, b) = match trace.events[k] {
            TraceEvent::Alloc { id, size, stream } => (1, size, stream ^ (u64::from(trace.pool_of(id)) << 48)),
            TraceEvent::FreeRequested { .. } => (2, 0, 0),
            TraceEvent::Free { .. } => (3, 0, 0),
            TraceEvent::EmptyCache { within_request } => (4, u64::from(within_request), 0),
            TraceEvent::ReleasePool { pool } => (5, u64::from(pool), 0),
        };
        let mix = |h: u64, v: u64| (h.rotate_left(5) ^ v).wrapping_mul(0x517c_c1b7_2722_0a95);
        mix(mix(mix(kind, a), b), u64::from(self.0[k]))
    }

    /// The first event from which every event `k` does what `k + period` does, up to the end.
    fn repeats_from(&self, trace: &Trace, period: usize) -> Option<usize> {
        let n = trace.events.len();
        let mut k = n.checked_sub(period + 1)?;
        loop {
            if !self.same(trace, k, k + period) {
                return Some(k + 1);
            }
            if k == 0 {
                return Some(0);
            }
            k -= 1;
        }
    }
}

impl Periodicity {
    /// The trace's period: the smallest, among the nearest earlier repeats of its last
    /// [`WINDOW`] events, that it repeats at least [`MIN_REPEATS`] times up to its end, and where
    /// that repetition begins; `None` where there is none (or the trace is too long to count
    /// its events in 32 bits).
    pub(crate) fn of(trace: &Trace) -> Option<Periodicity> {
        let n = trace.events.len();
        if n < WINDOW * MIN_REPEATS || n >= FIRST as usize {
            return None;
        }
        let behind = Behind::of(trace);
        let shape = |k: usize| behind.shape(trace, k);
        // A rolling hash over windows of WINDOW shapes, slid back from the trace's end.
        const BASE: u64 = 0x0000_0100_0000_01b3;
        let top = BASE.wrapping_pow(WINDOW as u32 - 1);
        let window_hash =
            |from: usize| (from..from + WINDOW).fold(0u64, |h, k| h.wrapping_mul(BASE).wrapping_add(shape(k)));
        let tail = n - WINDOW;
        let target = window_hash(tail);
        let mut from = tail - 1;
        let mut rolling = window_hash(from);
        let mut tried = 0;
        loop {
            if rolling == target && (0..WINDOW).all(|i| behind.same(trace, from + i, tail + i)) {
                let period = tail - from;
                if let Some(start) = behind.repeats_from(trace, period) {
                    if n - start >= MIN_REPEATS * period {
                        return Some(Periodicity { start, period });
                    }
                }
                tried += 1;
                if tried == CANDIDATES {
                    return None;
                }
            }
            if from == 0 || (tail - from + 1) * MIN_REPEATS > n {
                return None;
            }
            // One event back: the window's last shape leaves, one comes in front.
            rolling = rolling
                .wrapping_sub(shape(from + WINDOW - 1))
                .wrapping_mul(inverse(BASE));
            from -= 1;
            rolling = rolling.wrapping_add(shape(from).wrapping_mul(top));
        }
    }

    /// Events since the trace last named `live`'s block, at event `at`. The blocks the trace
    /// began with all have one tag: the repetitions never name them.
    pub(crate) fn tag(live: &Live, at: usize) -> u64 {
        match live.last {
            Live::ADOPTED => u64::MAX,
            last => at as u64 - u64::from(last),
        }
    }
}

/// The multiplicative inverse of an odd number modulo 2^64 (Newton's iteration).
const fn inverse(odd: u64) -> u64 {
    let mut x = odd;
    let mut i = 0;
    while i < 6 {
        x = x.wrapping_mul(2u64.wrapping_sub(odd.wrapping_mul(x)));
        i += 1;
    }
    x
}

/// `trace`'s events `times` over, each time closing what it left live and naming its blocks
/// anew, less the last `cut` events: a loop's snapshot cut off mid-iteration.
#[cfg(test)]
pub(crate) fn repeated(trace: &Trace, times: usize, cut: usize) -> Trace {
    let mut once: Vec<TraceEvent> = trace.events.clone();
    let mut live = std::collections::BTreeSet::new();
    for event in &once {
        match *event {
            TraceEvent::Alloc { id, .. } => {
                live.insert(id);
            }
            TraceEvent::Free { id } => {
                live.remove(&id);
            }
            _ => {}
        }
    }
    once.extend(live.into_iter().map(|id| TraceEvent::Free { id }));
    let span = once.iter().filter_map(named).max().unwrap_or(0) + 1;
    let mut events = Vec::with_capacity(once.len() * times);
    for time in 0..times as u64 {
        events.extend(once.iter().map(|event| match *event {
            TraceEvent::Alloc { id, size, stream } => TraceEvent::Alloc {
                id: id + time * span,
                size,
                stream,
            },
            TraceEvent::FreeRequested { id } => TraceEvent::FreeRequested { id: id + time * span },
            TraceEvent::Free { id } => TraceEvent::Free { id: id + time * span },
            other => other,
        }));
    }
    events.truncate(events.len() - cut);
    Trace::new(&format!("{} x{times}", trace.name), trace.source, events)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recording(name: &str) -> Trace {
        let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../reports/reference/h100/alloc-traces")
            .join(format!("{name}.pickle.gz"));
        Trace::load(&path).unwrap()
    }

    #[test]
    fn a_loop_cut_off_mid_iteration_repeats_with_its_iteration() {
        let gpt = recording("gpt/default");
        let whole = repeated(&gpt, 5, 0);
        let iteration = whole.events.len() / 5;
        for cut in [0, 1, iteration / 3, iteration - 1] {
            let trace = repeated(&gpt, 5, cut);
            let found = Periodicity::of(&trace).unwrap_or_else(|| panic!("no period with {cut} cut"));
            // The recording may repeat a shorter step within itself; the repetition found is
            // a divisor of the iteration, and holds from its start (the first iteration's own
            // first events, optimizer state made once, may be the exception).
            assert_eq!(iteration % found.period, 0, "period {} of {iteration}", found.period);
            assert!(found.start < iteration, "{cut} cut: from {}", found.start);
            let behind = Behind::of(&trace);
            let last = trace.events.len() - found.period;
            assert!((found.start..last).all(|k| behind.same(&trace, k, k + found.period)));
        }
    }

    #[test]
    fn a_trace_that_never_repeats_has_no_period() {
        let mut events = Vec::new();
        for id in 0..5000u64 {
            events.push(TraceEvent::Alloc {
                id,
                size: 512 * (id + 1),
                stream: 0,
            });
            if id % 3 == 2 {
                events.push(TraceEvent::Free { id: id - 1 });
            }
        }
        let trace = Trace::new("growing", experiments::TraceSource::Synthetic, events);
        assert!(Periodicity::of(&trace).is_none());
        // The same request over and over, each freed at once: a period of two events.
        let found = Periodicity::of(&alloc_then_free("steady", |id| id)).unwrap();
        assert_eq!((found.start, found.period), (0, 2));
    }

    #[test]
    fn a_free_of_a_block_from_before_the_trace_repeats_nothing() {
        // Every event alike but the frees name blocks the trace never allocated.
        assert!(Periodicity::of(&alloc_then_free("orphans", |id| id + 1_000_000)).is_none());
    }

    /// 5,000 requests of 4 KiB, each followed by a free of the block `freed` names.
    fn alloc_then_free(name: &str, freed: impl Fn(u64) -> u64) -> Trace {
        let mut events = Vec::new();
        for id in 0..5000u64 {
            events.push(TraceEvent::Alloc {
                id,
                size: 4096,
                stream: 0,
            });
            events.push(TraceEvent::Free { id: freed(id) });
        }
        Trace::new(name, experiments::TraceSource::Synthetic, events)
    }
}
