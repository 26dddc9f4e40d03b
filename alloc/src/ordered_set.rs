//! A set kept in order for best-fit range queries, sized for free lists: short sorted vectors
//! searched by a scan (at these sizes a scan, whose branches the processor predicts, beats a
//! binary search's unpredictable ones, and shifting a few keys beats a B-tree's node handling).
//!
//! A set of at most [`LARGE`] keys is one sorted vector. A larger one is cut into runs of at
//! most [`RUN`] keys (a run that grows past it is cut in halves, one that thins below a quarter
//! of it joins a neighbour where the two fit in one), and is one vector again once one run is
//! left: a B-tree of two levels whose nodes are plain vectors, searched by a scan of the runs'
//! last keys (by halves past [`MANY_RUNS`] runs), then of one run.
//!
//! Until issue 39's fourth session a set of more than 64 keys became a `BTreeSet`. Under a cap
//! that its cache fills, PyTorch's free sets hold hundreds of blocks: on the non-repeating
//! 1.5 M-event trace, 37% of `tune`'s 272 M operations on them found 64 to 511 keys (most of
//! the rest 32 to 63), and the B-tree's took about a quarter of its time. Measured there (one
//! thread, a grid of four settings): runs of 16, 32 and 64 keys alike within the noise, runs
//! searched by a binary search (even one without branches) about a quarter slower; small sets
//! in runs too (no plain vector) a few percent slower per operation than in one vector.

use std::ops::{Bound, RangeBounds};

/// The most keys a run holds: a run that grows past it is cut in two halves.
const RUN: usize = 32;

/// Runs of fewer keys than this are joined with a neighbour where the two fit in one run.
const THIN: usize = RUN / 4;

/// Above this many keys a set is cut into runs; once one run is left, a vector again.
const LARGE: usize = 64;

#[derive(Debug, Clone)]
pub(crate) enum OrderedSet<K> {
    /// At most [`LARGE`] keys (and not yet one run of them after being larger): one vector.
    Small(Vec<K>),
    Runs(Runs<K>),
}

impl<K> Default for OrderedSet<K> {
    fn default() -> Self {
        OrderedSet::Small(Vec::new())
    }
}

impl<K: Ord + Copy> OrderedSet<K> {
    /// Adds `key`; false when it was there already.
    pub(crate) fn insert(&mut self, key: K) -> bool {
        match self {
            OrderedSet::Small(keys) => {
                let at = first(keys, |k| *k >= key);
                if keys.get(at) == Some(&key) {
                    return false;
                }
                keys.insert(at, key);
                if keys.len() > LARGE {
                    *self = OrderedSet::Runs(Runs::of(keys));
                }
                true
            }
            OrderedSet::Runs(runs) => runs.insert(key),
        }
    }

    /// Removes `key`; false when it was not there.
    pub(crate) fn remove(&mut self, key: &K) -> bool {
        match self {
            OrderedSet::Small(keys) => match keys.iter().position(|k| k == key) {
                Some(at) => {
                    keys.remove(at);
                    true
                }
                None => false,
            },
            OrderedSet::Runs(runs) => {
                let removed = runs.remove(key);
                if runs.runs.len() == 1 {
                    *self = OrderedSet::Small(runs.runs.pop().expect("one run"));
                }
                removed
            }
        }
    }

    /// Puts `new` in place of `old`; false (and nothing changed) when `old` was not there.
    /// `new` must not be in the set already.
    pub(crate) fn replace(&mut self, old: &K, new: K) -> bool {
        match self {
            OrderedSet::Small(keys) => {
                // One pass over the keys: a smaller `new` (a split's rest) goes before `old`, so
                // `old` lies past where `new` goes; a larger one (a merged block) after it.
                if new < *old {
                    let to = first(keys, |k| *k >= new);
                    let Some(at) = keys[to..].iter().position(|k| k == old) else {
                        return false;
                    };
                    shift_in_below(keys, to, to + at, new);
                } else {
                    let Some(at) = keys.iter().position(|k| k == old) else {
                        return false;
                    };
                    let to = at + 1 + first(&keys[at + 1..], |k| *k >= new);
                    shift_in_above(keys, at, to, new);
                }
                true
            }
            OrderedSet::Runs(runs) => {
                let replaced = runs.replace(old, new);
                if runs.runs.len() == 1 {
                    *self = OrderedSet::Small(runs.runs.pop().expect("one run"));
                }
                replaced
            }
        }
    }

    /// The keys within `range`, in order (and in reverse with `.rev()`).
    pub(crate) fn range(&self, range: impl RangeBounds<K>) -> Keys<'_, K> {
        match self {
            OrderedSet::Small(keys) => {
                let start = match range.start_bound() {
                    Bound::Included(s) => first(keys, |k| k >= s),
                    Bound::Excluded(s) => first(keys, |k| k > s),
                    Bound::Unbounded => 0,
                };
                let end = match range.end_bound() {
                    Bound::Included(e) => first(keys, |k| k > e),
                    Bound::Excluded(e) => first(keys, |k| k >= e),
                    Bound::Unbounded => keys.len(),
                };
                Keys {
                    front: keys[start..end.max(start)].iter(),
                    middle: [].iter(),
                    back: [].iter(),
                }
            }
            OrderedSet::Runs(runs) => runs.range(range),
        }
    }

    /// Every key, in order.
    pub(crate) fn iter(&self) -> Keys<'_, K> {
        self.range(..)
    }
}

/// A large set's keys, in runs.
#[derive(Debug, Clone)]
pub(crate) struct Runs<K> {
    /// The keys, in order: each run non-empty and every key of a run below every key of the
    /// next.
    runs: Vec<Vec<K>>,
    /// Each run's last (largest) key, scanned to find the run a key falls in.
    lasts: Vec<K>,
}

impl<K: Ord + Copy> Runs<K> {
    /// The keys of a vector in order, in runs of half the most a run holds.
    fn of(keys: &[K]) -> Runs<K> {
        let runs: Vec<Vec<K>> = keys.chunks(RUN / 2).map(<[K]>::to_vec).collect();
        let lasts = runs
            .iter()
            .map(|run| *run.last().expect("chunks are not empty"))
            .collect();
        Runs { runs, lasts }
    }

    /// The run a key that is `past` would lie in: the first whose last key is past, or the
    /// last run (a key past none of them goes at its end). `None` when empty.
    fn run_of(&self, past: impl Fn(&K) -> bool) -> Option<usize> {
        let last = self.runs.len().checked_sub(1)?;
        Some(first_run(&self.lasts, past).min(last))
    }

    /// Where the first key that is `past` lies, as (run, place in it); past every key:
    /// (the number of runs, 0).
    fn position(&self, past: impl Fn(&K) -> bool) -> (usize, usize) {
        let run = first_run(&self.lasts, &past);
        match self.runs.get(run) {
            // The run's last key is past: the place is within it.
            Some(keys) => (run, first(keys, past)),
            None => (self.runs.len(), 0),
        }
    }

    /// Sets run `run`'s last key after a change to it.
    fn update_last(&mut self, run: usize) {
        self.lasts[run] = *self.runs[run].last().expect("runs are not empty");
    }

    fn insert(&mut self, key: K) -> bool {
        let Some(run) = self.run_of(|k| *k >= key) else {
            self.runs.push(vec![key]);
            self.lasts.push(key);
            return true;
        };
        let keys = &mut self.runs[run];
        let at = first(keys, |k| *k >= key);
        if keys.get(at) == Some(&key) {
            return false;
        }
        keys.insert(at, key);
        if keys.len() > RUN {
            let upper = keys.split_off(RUN / 2);
            self.runs.insert(run + 1, upper);
            self.lasts.insert(run + 1, key);
            self.update_last(run + 1);
        }
        self.update_last(run);
        true
    }

    fn remove(&mut self, key: &K) -> bool {
        let (run, at) = self.position(|k| k >= key);
        if self.runs.get(run).and_then(|keys| keys.get(at)) != Some(key) {
            return false;
        }
        self.runs[run].remove(at);
        self.after_removal(run);
        true
    }

    /// Keeps the runs in shape after run `run` lost a key: gone where empty, joined with a
    /// neighbour where thin and the two fit in one run.
    fn after_removal(&mut self, run: usize) {
        let len = self.runs[run].len();
        if len == 0 {
            self.runs.remove(run);
            self.lasts.remove(run);
            return;
        }
        self.update_last(run);
        if len >= THIN {
            return;
        }
        let fits = |other: usize| self.runs.get(other).is_some_and(|keys| keys.len() + len <= RUN);
        let joined = if fits(run + 1) {
            Some(run)
        } else if run > 0 && fits(run - 1) {
            Some(run - 1)
        } else {
            None
        };
        if let Some(lower) = joined {
            let upper = self.runs.remove(lower + 1);
            self.lasts.remove(lower + 1);
            self.runs[lower].extend_from_slice(&upper);
            self.update_last(lower);
        }
    }

    fn replace(&mut self, old: &K, new: K) -> bool {
        let (run, at) = self.position(|k| k >= old);
        if self.runs.get(run).and_then(|keys| keys.get(at)) != Some(old) {
            return false;
        }
        // Within the same run (where `new` lies above the last key of the run before, and at
        // most at this run's last key unless it is the last run): one shift.
        let lowest = run == 0 || self.lasts[run - 1] < new;
        let highest = run + 1 == self.runs.len() || new <= self.lasts[run];
        if lowest && highest {
            let keys = &mut self.runs[run];
            // Where `new` goes: past `old` where it is larger, else before it.
            let to = if new > *old {
                at + 1 + first(&keys[at + 1..], |k| *k >= new)
            } else {
                first(&keys[..at], |k| *k >= new)
            };
            if to <= at {
                shift_in_below(keys, to, at, new);
            } else {
                shift_in_above(keys, at, to, new);
            }
            self.update_last(run);
            return true;
        }
        self.runs[run].remove(at);
        self.after_removal(run);
        self.insert(new)
    }

    fn range(&self, range: impl RangeBounds<K>) -> Keys<'_, K> {
        let start = match range.start_bound() {
            Bound::Included(s) => self.position(|k| k >= s),
            Bound::Excluded(s) => self.position(|k| k > s),
            Bound::Unbounded => (0, 0),
        };
        let end = match range.end_bound() {
            Bound::Included(e) => self.position(|k| k > e),
            Bound::Excluded(e) => self.position(|k| k >= e),
            Bound::Unbounded => (self.runs.len(), 0),
        };
        let end = end.max(start);
        let empty: &[K] = &[];
        if start.0 == end.0 {
            let front = self.runs.get(start.0).map_or(empty, |keys| &keys[start.1..end.1]);
            return Keys {
                front: front.iter(),
                middle: [].iter(),
                back: empty.iter(),
            };
        }
        let back = self.runs.get(end.0).map_or(empty, |keys| &keys[..end.1]);
        Keys {
            front: self.runs[start.0][start.1..].iter(),
            middle: self.runs[start.0 + 1..end.0].iter(),
            back: back.iter(),
        }
    }
}

/// Runs past which their last keys are searched by halves, not scanned.
const MANY_RUNS: usize = 16;

/// [`first`] over the runs' last keys: a scan of a few, a binary search of many (a cache of
/// thousands of blocks, as an unlimited replay of a long trace keeps, has hundreds of runs).
fn first_run<K>(lasts: &[K], past: impl Fn(&K) -> bool) -> usize {
    if lasts.len() > MANY_RUNS {
        lasts.partition_point(|k| !past(k))
    } else {
        first(lasts, past)
    }
}

/// The index of the first key that is `past` (the keys are in order), or the length.
fn first<K>(keys: &[K], past: impl Fn(&K) -> bool) -> usize {
    // A scan: at these sizes it beats a binary search's unpredictable branches.
    keys.iter().position(past).unwrap_or(keys.len())
}

/// Puts `new` at `to`, the keys from there up to the one at `at` (which goes) one place up.
fn shift_in_below<K: Copy>(keys: &mut [K], to: usize, at: usize, new: K) {
    keys.copy_within(to..at, to + 1);
    keys[to] = new;
}

/// Puts `new` right before `to`, the keys after the one at `at` (which goes) one place down.
fn shift_in_above<K: Copy>(keys: &mut [K], at: usize, to: usize, new: K) {
    keys.copy_within(at + 1..to, at);
    keys[to - 1] = new;
}

/// The keys of an [`OrderedSet`] range: the rest of the run it starts in, the whole runs
/// between, and the start of the run it ends in.
pub(crate) struct Keys<'a, K> {
    front: std::slice::Iter<'a, K>,
    middle: std::slice::Iter<'a, Vec<K>>,
    back: std::slice::Iter<'a, K>,
}

impl<'a, K> Iterator for Keys<'a, K> {
    type Item = &'a K;
    fn next(&mut self) -> Option<&'a K> {
        loop {
            if let Some(key) = self.front.next() {
                return Some(key);
            }
            match self.middle.next() {
                Some(run) => self.front = run.iter(),
                None => return self.back.next(),
            }
        }
    }
}

impl<K> DoubleEndedIterator for Keys<'_, K> {
    fn next_back(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(key) = self.back.next_back() {
                return Some(key);
            }
            match self.middle.next_back() {
                Some(run) => self.back = run.iter(),
                None => return self.front.next_back(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// Every run non-empty and at most [`RUN`] long, in order, its last key kept.
    fn check_shape<K: Ord + Copy + std::fmt::Debug>(set: &Runs<K>) {
        assert_eq!(set.runs.len(), set.lasts.len());
        for (run, keys) in set.runs.iter().enumerate() {
            assert!(!keys.is_empty() && keys.len() <= RUN, "run {run}: {} keys", keys.len());
            assert!(keys.windows(2).all(|pair| pair[0] < pair[1]));
            assert_eq!(keys.last(), Some(&set.lasts[run]));
            if run > 0 {
                assert!(set.lasts[run - 1] < keys[0]);
            }
        }
    }

    #[test]
    fn it_orders_and_ranges_like_a_btree_set_through_every_size() {
        let mut ours = OrderedSet::default();
        let mut theirs = BTreeSet::new();
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let (mut one_run, mut many_runs) = (0, 0);
        for step in 0..200_000u64 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            // Grow to dozens of runs (over a thousand keys) and shrink to none
            // again, several times over.
            let phase = (step / 10_000) % 2 == 0;
            let key = (state % 3, (state >> 3) % 700);
            if state.is_multiple_of(7) {
                // Replace a key that is there (or one that is not) by one that is not.
                let old = theirs
                    .iter()
                    .nth((state >> 20) as usize % (theirs.len() + 1))
                    .copied()
                    .unwrap_or(key);
                let new = (state % 3, (state >> 12) % 700);
                if !theirs.contains(&new) {
                    let expected = theirs.remove(&old) && theirs.insert(new);
                    assert_eq!(ours.replace(&old, new), expected);
                }
            } else if phase != state.is_multiple_of(4) {
                assert_eq!(ours.insert(key), theirs.insert(key));
            } else {
                // While shrinking, mostly keys that are there (random ones would rarely be).
                let key = match theirs.iter().nth((state >> 24) as usize % (theirs.len() + 1)) {
                    Some(&there) if !phase && !state.is_multiple_of(3) => there,
                    _ => key,
                };
                assert_eq!(ours.remove(&key), theirs.remove(&key));
            }
            let from = (state % 3, (state >> 8) % 700);
            let to = (state % 3, (state >> 30) % 700);
            assert_eq!(ours.range(from..).next(), theirs.range(from..).next());
            assert_eq!(ours.range(..from).next_back(), theirs.range(..from).next_back());
            if step % 97 == 0 {
                if let OrderedSet::Runs(runs) = &ours {
                    check_shape(runs);
                }
                assert!(ours.iter().eq(theirs.iter()));
                assert!(ours.iter().rev().eq(theirs.iter().rev()));
                let (low, high) = (from.min(to), from.max(to));
                assert!(ours.range(low..high).eq(theirs.range(low..high)));
                assert!(ours.range(low..=high).rev().eq(theirs.range(low..=high).rev()));
                assert!(ours
                    .range((Bound::Excluded(low), Bound::Unbounded))
                    .eq(theirs.range((Bound::Excluded(low), Bound::Unbounded))));
                // Both ends taken alternately meet in the middle.
                let mut keys = ours.range(low..=high);
                let mut both = Vec::new();
                let mut forward = true;
                while let Some(key) = if forward { keys.next() } else { keys.next_back() } {
                    both.push(*key);
                    forward = !forward;
                }
                both.sort();
                assert!(both.iter().eq(theirs.range(low..=high)));
            }
            match &ours {
                OrderedSet::Small(_) => one_run += 1,
                OrderedSet::Runs(runs) if runs.runs.len() > 4 => many_runs += 1,
                OrderedSet::Runs(_) => {}
            }
        }
        assert!(
            one_run > 1000 && many_runs > 1000,
            "both shapes were exercised: {one_run} {many_runs}"
        );
    }
}
