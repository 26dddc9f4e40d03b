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
//!
//! Each vector (the one of a small set, and each run) holds its keys from the largest down
//! ([`Desc`]). Best fit asks for the smallest blocks, and they are the ones split and merged
//! most: on the non-repeating trace (issue 39's fifth session) an insertion or a removal in a
//! set of about 45 keys fell about 8 keys from the smallest, so that with the keys from the
//! smallest up it shifted the other 35 or so; from the largest down it shifts those 8. So a
//! set stays one vector up to 128 keys (64 before): there a tune of that trace took 2.5% fewer
//! instructions (256: about as many as 128), runs cost a scan of the runs' last keys first.

use std::iter::Rev;
use std::ops::{Bound, RangeBounds};

/// The most keys a run holds: a run that grows past it is cut in two halves.
const RUN: usize = 32;

/// Runs of fewer keys than this are joined with a neighbour where the two fit in one run.
const THIN: usize = RUN / 4;

/// Above this many keys a set is cut into runs; once one run is left, a vector again.
const LARGE: usize = 128;

#[derive(Debug, Clone)]
pub(crate) enum OrderedSet<K> {
    /// At most [`LARGE`] keys (and not yet one run of them after being larger): one vector.
    Small(Desc<K>),
    Runs(Runs<K>),
}

impl<K> Default for OrderedSet<K> {
    fn default() -> Self {
        OrderedSet::Small(Desc(Vec::new()))
    }
}

impl<K: Ord + Copy> OrderedSet<K> {
    /// Adds `key`; false when it was there already.
    pub(crate) fn insert(&mut self, key: K) -> bool {
        match self {
            OrderedSet::Small(keys) => {
                let at = keys.first(|k| *k >= key);
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
            OrderedSet::Small(keys) => {
                let at = keys.first(|k| k >= key);
                if keys.get(at) != Some(key) {
                    return false;
                }
                keys.remove(at);
                true
            }
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
                // One pass over the keys from the smallest: a smaller `new` (a split's rest)
                // goes before `old`, so `old` lies past where `new` goes; a larger one (a
                // merged block) after it.
                if new < *old {
                    let to = keys.first(|k| *k >= new);
                    let at = to + keys.first_from(to, |k| k >= old);
                    if keys.get(at) != Some(old) {
                        return false;
                    }
                    keys.shift_in_below(to, at, new);
                } else {
                    let at = keys.first(|k| k >= old);
                    if keys.get(at) != Some(old) {
                        return false;
                    }
                    let to = at + 1 + keys.first_from(at + 1, |k| *k >= new);
                    keys.shift_in_above(at, to, new);
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
                    Bound::Included(s) => keys.first(|k| k >= s),
                    Bound::Excluded(s) => keys.first(|k| k > s),
                    Bound::Unbounded => 0,
                };
                let end = match range.end_bound() {
                    Bound::Included(e) => keys.first(|k| k > e),
                    Bound::Excluded(e) => keys.first(|k| k >= e),
                    Bound::Unbounded => keys.len(),
                };
                Keys {
                    front: keys.between(start, end.max(start)),
                    middle: [].iter(),
                    back: Desc::none(),
                }
            }
            OrderedSet::Runs(runs) => runs.range(range),
        }
    }

    /// Every key, in order.
    pub(crate) fn iter(&self) -> Keys<'_, K> {
        self.range(..)
    }

    /// The first key at least `key`: `range(key..).next()`, without making the range (best
    /// fit asks it of every request).
    #[inline]
    pub(crate) fn first_at_least(&self, key: &K) -> Option<&K> {
        match self {
            OrderedSet::Small(keys) => keys.get(keys.first(|k| k >= key)),
            OrderedSet::Runs(runs) => {
                let (run, at) = runs.position(|k| k >= key);
                runs.runs.get(run)?.get(at)
            }
        }
    }
}

/// Keys in order, held from the largest down so that the smallest lie at the vector's end:
/// every place is counted from the smallest key (place 0), as in a vector in order.
#[derive(Debug, Clone)]
pub(crate) struct Desc<K>(Vec<K>);

impl<K: Copy> Desc<K> {
    fn len(&self) -> usize {
        self.0.len()
    }

    /// Where place `at` is held.
    #[inline]
    fn held(&self, at: usize) -> usize {
        self.0.len() - 1 - at
    }

    /// The key at place `at`.
    #[inline]
    fn get(&self, at: usize) -> Option<&K> {
        let held = self.0.len().checked_sub(at + 1)?;
        Some(&self.0[held])
    }

    /// The largest key.
    fn last(&self) -> Option<&K> {
        self.0.first()
    }

    /// The place of the first key that is `past` (the keys are in order), or the length: a
    /// scan from the smallest key (at these sizes a scan, whose branches the processor
    /// predicts, beats a binary search's unpredictable ones).
    #[inline]
    fn first(&self, past: impl Fn(&K) -> bool) -> usize {
        self.0.iter().rev().position(past).unwrap_or(self.0.len())
    }

    /// [`Desc::first`] among the keys from place `from` on, counted from there.
    #[inline]
    fn first_from(&self, from: usize, past: impl Fn(&K) -> bool) -> usize {
        let rest = &self.0[..self.0.len() - from];
        rest.iter().rev().position(past).unwrap_or(rest.len())
    }

    /// Puts `key` at place `at`, the keys from there on one place up.
    #[inline]
    fn insert(&mut self, at: usize, key: K) {
        let held = self.0.len() - at;
        self.0.insert(held, key);
    }

    /// Takes out the key at place `at`.
    #[inline]
    fn remove(&mut self, at: usize) -> K {
        let held = self.held(at);
        self.0.remove(held)
    }

    /// Puts `new` at place `to`, the keys from there up to the one at place `at` (which goes)
    /// one place up.
    #[inline]
    fn shift_in_below(&mut self, to: usize, at: usize, new: K) {
        let (held_at, held_to) = (self.held(at), self.held(to));
        self.0.copy_within(held_at + 1..=held_to, held_at);
        self.0[held_to] = new;
    }

    /// Puts `new` right before place `to`, the keys after the one at place `at` (which goes)
    /// one place down.
    #[inline]
    fn shift_in_above(&mut self, at: usize, to: usize, new: K) {
        let len = self.0.len();
        let (held_at, held_below_to) = (self.held(at), len - to);
        self.0.copy_within(held_below_to..held_at, held_below_to + 1);
        self.0[held_below_to] = new;
    }

    /// The keys from place `at` on, taken out (the keys above them).
    fn split_off(&mut self, at: usize) -> Desc<K> {
        let upper = self.0.drain(..self.0.len() - at).collect();
        Desc(upper)
    }

    /// Adds `upper`'s keys, every one above every key here.
    fn extend_above(&mut self, upper: &Desc<K>) {
        self.0.splice(0..0, upper.0.iter().copied());
    }

    /// The keys at places `from..to`, in order.
    fn between(&self, from: usize, to: usize) -> Rev<std::slice::Iter<'_, K>> {
        let len = self.0.len();
        self.0[len - to..len - from].iter().rev()
    }

    /// Every key, in order.
    fn in_order(&self) -> Rev<std::slice::Iter<'_, K>> {
        self.0.iter().rev()
    }

    /// No keys.
    fn none<'a>() -> Rev<std::slice::Iter<'a, K>> {
        [].iter().rev()
    }
}

/// A large set's keys, in runs.
#[derive(Debug, Clone)]
pub(crate) struct Runs<K> {
    /// The keys, in order: each run non-empty and every key of a run below every key of the
    /// next.
    runs: Vec<Desc<K>>,
    /// Each run's last (largest) key, scanned to find the run a key falls in.
    lasts: Vec<K>,
}

impl<K: Ord + Copy> Runs<K> {
    /// The keys of a vector in order, in runs of half the most a run holds.
    fn of(keys: &Desc<K>) -> Runs<K> {
        let in_order: Vec<K> = keys.in_order().copied().collect();
        let runs: Vec<Desc<K>> = in_order
            .chunks(RUN / 2)
            .map(|chunk| Desc(chunk.iter().rev().copied().collect()))
            .collect();
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
            Some(keys) => (run, keys.first(past)),
            None => (self.runs.len(), 0),
        }
    }

    /// Sets run `run`'s last key after a change to it.
    fn update_last(&mut self, run: usize) {
        self.lasts[run] = *self.runs[run].last().expect("runs are not empty");
    }

    fn insert(&mut self, key: K) -> bool {
        let Some(run) = self.run_of(|k| *k >= key) else {
            self.runs.push(Desc(vec![key]));
            self.lasts.push(key);
            return true;
        };
        let keys = &mut self.runs[run];
        let at = keys.first(|k| *k >= key);
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
            self.runs[lower].extend_above(&upper);
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
            if new > *old {
                let to = at + 1 + keys.first_from(at + 1, |k| *k >= new);
                keys.shift_in_above(at, to, new);
            } else {
                let to = keys.first(|k| *k >= new).min(at);
                keys.shift_in_below(to, at, new);
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
        if start.0 == end.0 {
            let front = self
                .runs
                .get(start.0)
                .map_or(Desc::none(), |keys| keys.between(start.1, end.1));
            return Keys {
                front,
                middle: [].iter(),
                back: Desc::none(),
            };
        }
        let back = self.runs.get(end.0).map_or(Desc::none(), |keys| keys.between(0, end.1));
        let first = &self.runs[start.0];
        Keys {
            front: first.between(start.1, first.len()),
            middle: self.runs[start.0 + 1..end.0].iter(),
            back,
        }
    }
}

/// Runs past which their last keys are searched by halves, not scanned.
const MANY_RUNS: usize = 16;

/// The index of the first of the runs' last keys that is `past`: a scan of a few, a binary
/// search of many (a cache of thousands of blocks, as an unlimited replay of a long trace
/// keeps, has hundreds of runs).
fn first_run<K>(lasts: &[K], past: impl Fn(&K) -> bool) -> usize {
    if lasts.len() > MANY_RUNS {
        lasts.partition_point(|k| !past(k))
    } else {
        lasts.iter().position(past).unwrap_or(lasts.len())
    }
}

/// The keys of an [`OrderedSet`] range: the rest of the run it starts in, the whole runs
/// between, and the start of the run it ends in.
pub(crate) struct Keys<'a, K> {
    front: Rev<std::slice::Iter<'a, K>>,
    middle: std::slice::Iter<'a, Desc<K>>,
    back: Rev<std::slice::Iter<'a, K>>,
}

impl<'a, K: Copy> Iterator for Keys<'a, K> {
    type Item = &'a K;
    fn next(&mut self) -> Option<&'a K> {
        loop {
            if let Some(key) = self.front.next() {
                return Some(key);
            }
            match self.middle.next() {
                Some(run) => self.front = run.in_order(),
                None => return self.back.next(),
            }
        }
    }
}

impl<K: Copy> DoubleEndedIterator for Keys<'_, K> {
    fn next_back(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(key) = self.back.next_back() {
                return Some(key);
            }
            match self.middle.next_back() {
                Some(run) => self.back = run.in_order(),
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
            let keys: Vec<K> = keys.in_order().copied().collect();
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
            assert_eq!(ours.first_at_least(&from), theirs.range(from..).next());
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
