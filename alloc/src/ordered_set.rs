//! A set kept in order for best-fit range queries, sized for free lists: a sorted vector searched
//! by a scan while it is small (a caching allocator's free set holds about 18 blocks on average;
//! there a B-tree's node handling, or a binary search's unpredictable branches, cost more than
//! reading every key and shifting a few), a B-tree once it grows.

use std::collections::btree_set::{self, BTreeSet};
use std::ops::{Bound, RangeBounds};

/// Above this many keys the set becomes a B-tree; below a quarter of it, a vector again.
const LARGE: usize = 64;

#[derive(Debug, Clone)]
pub(crate) enum OrderedSet<K> {
    Small(Vec<K>),
    Large(BTreeSet<K>),
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
                    *self = OrderedSet::Large(keys.drain(..).collect());
                }
                true
            }
            OrderedSet::Large(set) => set.insert(key),
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
            OrderedSet::Large(set) => {
                let removed = set.remove(key);
                if set.len() < LARGE / 4 {
                    *self = OrderedSet::Small(std::mem::take(set).into_iter().collect());
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
                let Some(at) = keys.iter().position(|k| k == old) else {
                    return false;
                };
                let to = first(keys, |k| *k >= new);
                if to <= at {
                    keys[to..=at].rotate_right(1);
                    keys[to] = new;
                } else {
                    keys[at..to].rotate_left(1);
                    keys[to - 1] = new;
                }
                true
            }
            OrderedSet::Large(set) => set.remove(old) && set.insert(new),
        }
    }

    /// The keys within `range`, in order (and in reverse with `.rev()`).
    pub(crate) fn range(&self, range: impl RangeBounds<K>) -> Keys<'_, K> {
        match self {
            OrderedSet::Small(keys) => {
                // A scan: at these sizes it beats a binary search's unpredictable branches.
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
                Keys::Small(keys[start..end.max(start)].iter())
            }
            OrderedSet::Large(set) => Keys::Large(set.range(range)),
        }
    }

    /// Every key, in order.
    pub(crate) fn iter(&self) -> Keys<'_, K> {
        self.range(..)
    }
}

/// The index of the first key that is `past` (the keys are in order), or the length.
fn first<K>(keys: &[K], past: impl Fn(&K) -> bool) -> usize {
    keys.iter().position(past).unwrap_or(keys.len())
}

/// The keys of an [`OrderedSet`] range.
pub(crate) enum Keys<'a, K> {
    Small(std::slice::Iter<'a, K>),
    Large(btree_set::Range<'a, K>),
}

impl<'a, K> Iterator for Keys<'a, K> {
    type Item = &'a K;
    fn next(&mut self) -> Option<&'a K> {
        match self {
            Keys::Small(keys) => keys.next(),
            Keys::Large(keys) => keys.next(),
        }
    }
}

impl<K> DoubleEndedIterator for Keys<'_, K> {
    fn next_back(&mut self) -> Option<Self::Item> {
        match self {
            Keys::Small(keys) => keys.next_back(),
            Keys::Large(keys) => keys.next_back(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_orders_and_ranges_like_a_btree_set_through_both_forms() {
        let mut ours = OrderedSet::default();
        let mut theirs = BTreeSet::new();
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let (mut grew, mut shrank) = (0, 0);
        for step in 0..20_000u64 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            // Grow past LARGE and shrink below LARGE / 4 again, several times over.
            let phase = (step / 2_000) % 2 == 0;
            let key = (state % 3, state % 200);
            if state.is_multiple_of(7) {
                // Replace a key that is there (or one that is not) by one that is not.
                let old = theirs
                    .iter()
                    .nth((state >> 20) as usize % (theirs.len() + 1))
                    .copied()
                    .unwrap_or(key);
                let new = (state % 3, (state >> 12) % 200);
                if !theirs.contains(&new) {
                    let expected = theirs.remove(&old) && theirs.insert(new);
                    assert_eq!(ours.replace(&old, new), expected);
                }
            } else if phase != state.is_multiple_of(4) {
                assert_eq!(ours.insert(key), theirs.insert(key));
            } else {
                assert_eq!(ours.remove(&key), theirs.remove(&key));
            }
            let from = (state % 3, (state >> 8) % 200);
            assert_eq!(ours.range(from..).next(), theirs.range(from..).next());
            assert_eq!(ours.range(..from).next_back(), theirs.range(..from).next_back());
            if step % 97 == 0 {
                assert!(ours.iter().eq(theirs.iter()));
                assert!(ours.iter().rev().eq(theirs.iter().rev()));
            }
            match (&ours, theirs.len()) {
                (OrderedSet::Large(_), n) if n > LARGE => grew += 1,
                (OrderedSet::Small(_), n) if n < LARGE / 4 => shrank += 1,
                _ => {}
            }
        }
        assert!(grew > 0 && shrank > 0, "both forms were exercised: {grew} {shrank}");
    }
}
