//! The nodes of a policy's block lists, by index: an index let go is used again, so a long
//! replay holds as many nodes as blocks exist at once, not as many as were ever made.

use std::ops::{Index, IndexMut};

#[derive(Clone)]
pub(crate) struct Slots<T> {
    items: Vec<T>,
    vacant: Vec<usize>,
}

impl<T> Default for Slots<T> {
    fn default() -> Self {
        Slots {
            items: Vec::new(),
            vacant: Vec::new(),
        }
    }
}

impl<T> Slots<T> {
    /// Stores `item`, in a vacant slot when there is one; returns its index.
    pub(crate) fn add(&mut self, item: T) -> usize {
        match self.vacant.pop() {
            Some(idx) => {
                self.items[idx] = item;
                idx
            }
            None => {
                self.items.push(item);
                self.items.len() - 1
            }
        }
    }

    /// Lets slot `idx` be used again (its item stays until then, unread).
    pub(crate) fn release(&mut self, idx: usize) {
        self.vacant.push(idx);
    }

    /// How many slots there are, in use or let go of.
    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    /// Every slot with its item, ascending, those let go of too (with the item they held).
    pub(crate) fn every_slot(&self) -> impl Iterator<Item = (usize, &T)> + '_ {
        self.items.iter().enumerate()
    }

    /// The indices in use, ascending.
    pub(crate) fn in_use(&self) -> impl Iterator<Item = usize> + '_ {
        let mut vacant = vec![false; self.items.len()];
        for &idx in &self.vacant {
            vacant[idx] = true;
        }
        (0..self.items.len()).filter(move |&idx| !vacant[idx])
    }
}

impl<T> Index<usize> for Slots<T> {
    type Output = T;
    fn index(&self, idx: usize) -> &T {
        &self.items[idx]
    }
}

impl<T> IndexMut<usize> for Slots<T> {
    fn index_mut(&mut self, idx: usize) -> &mut T {
        &mut self.items[idx]
    }
}
