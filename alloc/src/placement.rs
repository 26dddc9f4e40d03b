//! Where the CUDA driver puts a new segment, for a replay that has no recording's addresses.
//!
//! PyTorch's caching allocator breaks best-fit ties by address, so the order of its segments in
//! the address space decides which of two equal free blocks is reused. The recordings
//! (`scripts/placement_analysis.py`, `docs/VALIDATION.md`) show cudaMalloc in a fresh process:
//! - a segment goes at the low end of the lowest free range it fits in: what an earlier segment
//!   gave back, or what is left of a chunk;
//! - else in a new chunk, its size rounded up to 32 MiB, carved right below the lowest one;
//! - a fresh process starts with a free range below its first segments, which they fill from
//!   the bottom up (the model's one fitted figure, [`Placement::START`]).
//!
//! Sizes are rounded up to the 2 MiB granule. The recordings also hold the driver's own
//! allocations (kernel code loaded on first use, libraries' buffers), which no trace shows
//! and which move later segments; the model has none of them.

use std::collections::BTreeMap;

/// The driver's placement of segments (see the module's documentation).
#[derive(Debug, Clone)]
pub(crate) struct Placement {
    /// The lowest address taken so far: chunks are carved below it.
    bottom: u64,
    /// Free ranges between `bottom` and [`Placement::TOP`] (first address -> end), none
    /// adjacent to another.
    holes: BTreeMap<u64, u64>,
}

impl Placement {
    /// The top of the address range the chunks are carved down from (apart from the counted
    /// addresses a device hands out from `1 << 40` up, and from a recording's, near `1 << 47`).
    pub(crate) const TOP: u64 = 1 << 45;

    /// What a new chunk of address space is rounded up to: a segment that fits no free range
    /// gets a chunk of its size rounded up to this, right below the lowest one, and lies at
    /// the chunk's low end (the rest is a free range the next segments can use).
    pub(crate) const CHUNK: u64 = 32 << 20;

    /// The free range a fresh process starts with, which its first segments fill from the
    /// bottom up (fitted: `docs/VALIDATION.md`).
    pub(crate) const START: u64 = 448 << 20;

    /// Placement of a fresh process: nothing taken.
    pub(crate) fn new() -> Placement {
        Placement {
            bottom: Self::TOP - Self::START,
            holes: BTreeMap::from([(Self::TOP - Self::START, Self::TOP)]),
        }
    }

    /// Where a segment of `bytes` goes, taking it; `taken`: whether a range is already in use
    /// by something else (memory held before the trace began), which a new chunk skips.
    pub(crate) fn place(&mut self, bytes: u64, taken: &dyn Fn(u64, u64) -> bool) -> u64 {
        let bytes = super::round_up(bytes.max(1), super::SimDevice::GRANULE);
        let found = self
            .holes
            .iter()
            .find(|&(&start, &end)| end - start >= bytes)
            .map(|(&start, &end)| (start, end));
        let (start, end) = match found {
            Some(hole) => hole,
            None => self.carve(bytes, taken),
        };
        self.holes.remove(&start);
        if start + bytes < end {
            self.holes.insert(start + bytes, end);
        }
        start
    }

    /// A new chunk of at least `bytes` below every one before, as a free range (joined with a
    /// free range at the bottom).
    fn carve(&mut self, bytes: u64, taken: &dyn Fn(u64, u64) -> bool) -> (u64, u64) {
        let size = super::round_up(bytes, Self::CHUNK);
        let mut top = self.bottom;
        while top >= size + Self::CHUNK && taken(top - size, size) {
            top -= Self::CHUNK;
        }
        // What it skipped (in use by something else) is not the driver's to hand out.
        let start = top - size;
        self.bottom = start;
        self.free_range(start, top);
        let end = self.holes[&start];
        (start, end)
    }

    /// Gives back the segment of `bytes` at `addr`.
    pub(crate) fn release(&mut self, addr: u64, bytes: u64) {
        let bytes = super::round_up(bytes.max(1), super::SimDevice::GRANULE);
        self.free_range(addr, addr + bytes);
    }

    /// Adds `[start, end)` to the free ranges, joined with those it touches.
    fn free_range(&mut self, mut start: u64, mut end: u64) {
        if let Some((&before, &before_end)) = self.holes.range(..start).next_back() {
            if before_end == start {
                self.holes.remove(&before);
                start = before;
            }
        }
        if let Some(after_end) = self.holes.remove(&end) {
            end = after_end;
        }
        self.holes.insert(start, end);
    }

    /// Appends what decides its later placements: how far down it reaches and its free ranges,
    /// each from the top.
    pub(crate) fn canonical_state(&self, out: &mut Vec<u64>) {
        out.extend([Self::TOP - self.bottom, self.holes.len() as u64]);
        for (&start, &end) in &self.holes {
            out.extend([Self::TOP - start, end - start]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn free(_: u64, _: u64) -> bool {
        false
    }

    #[test]
    fn the_first_segments_fill_the_start_from_the_bottom_up() {
        let mut p = Placement::new();
        let base = Placement::TOP - Placement::START;
        assert_eq!(p.place(20 * MIB, &free), base);
        assert_eq!(p.place(2 * MIB, &free), base + 20 * MIB);
        // Rounded to the 2 MiB granule.
        assert_eq!(p.place(MIB, &free), base + 22 * MIB);
        assert_eq!(p.place(6 * MIB, &free), base + 24 * MIB);
    }

    #[test]
    fn a_segment_that_fits_nowhere_gets_a_chunk_below_and_leaves_its_rest_free() {
        let mut p = Placement::new();
        let base = Placement::TOP - Placement::START;
        assert_eq!(p.place(Placement::START, &free), base);
        // 20 MiB: a chunk of 32 below, the segment at its low end.
        let a = p.place(20 * MIB, &free);
        assert_eq!(a, base - 32 * MIB);
        // 40 MiB: a chunk of 64 below that one (the 12 MiB left above `a` is too small).
        let b = p.place(40 * MIB, &free);
        assert_eq!(b, a - 64 * MIB);
        // 12 MiB: the lowest free range it fits, the rest of `b`'s chunk.
        assert_eq!(p.place(12 * MIB, &free), b + 40 * MIB);
        assert_eq!(p.place(12 * MIB, &free), b + 52 * MIB);
        // Then the rest of `a`'s chunk.
        assert_eq!(p.place(12 * MIB, &free), a + 20 * MIB);
    }

    #[test]
    fn what_is_given_back_is_reused_lowest_first_and_joined_with_its_neighbours() {
        let mut p = Placement::new();
        let base = Placement::TOP - Placement::START;
        let a = p.place(16 * MIB, &free);
        let b = p.place(16 * MIB, &free);
        let c = p.place(16 * MIB, &free);
        assert_eq!((a, b, c), (base, base + 16 * MIB, base + 32 * MIB));
        p.release(c, 16 * MIB);
        p.release(a, 16 * MIB);
        assert_eq!(p.place(16 * MIB, &free), a);
        p.release(a, 16 * MIB);
        p.release(b, 16 * MIB);
        // a and b joined: 32 MiB fits where they were.
        assert_eq!(p.place(32 * MIB, &free), a);
    }

    #[test]
    fn a_chunk_skips_what_is_in_use() {
        let mut p = Placement::new();
        let base = Placement::TOP - Placement::START;
        p.place(Placement::START, &free);
        let used = base - 32 * MIB..base - 16 * MIB;
        let taken = |addr: u64, bytes: u64| addr < used.end && addr + bytes > used.start;
        assert_eq!(p.place(20 * MIB, &taken), base - 64 * MIB);
    }

    #[test]
    fn its_state_says_where_the_next_segments_go() {
        let (mut p, mut q) = (Placement::new(), Placement::new());
        let a = p.place(16 * MIB, &free);
        p.place(16 * MIB, &free);
        q.place(16 * MIB, &free);
        q.place(16 * MIB, &free);
        let (mut x, mut y) = (Vec::new(), Vec::new());
        p.canonical_state(&mut x);
        q.canonical_state(&mut y);
        assert_eq!(x, y);
        p.release(a, 16 * MIB);
        x.clear();
        p.canonical_state(&mut x);
        assert_ne!(x, y);
    }
}
