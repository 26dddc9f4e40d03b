//! PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp), default and with
//! expandable segments, rebuilt from its documented rules:
//!
//! - requests are rounded up to 512 B; up to 1 MiB they use the small pool, above it the large;
//! - a miss allocates a segment: 2 MiB for small requests, 20 MiB for requests under 10 MiB,
//!   else the request rounded up to 2 MiB;
//! - best fit per stream (smallest free block, then lowest address); a block is split when the
//!   rest is at least 512 B (small pool) or more than 1 MiB (large pool);
//! - a freed block merges with free neighbours of its own segment; segments are kept;
//! - when the device refuses, cached oversize blocks and then every whole free segment are
//!   returned and the allocation is retried once;
//! - `max_split_size`: blocks that large are never split, nor used for a smaller request, nor
//!   for a request 20 MiB smaller than themselves;
//! - expandable segments: one virtual range per stream and pool, mapped page by page (2 MiB
//!   small, 20 MiB large) as the tail needs to grow; splits keep any rest of at least 512 B,
//!   and best fit prefers, among equal candidates, the block that cannot grow.

use std::collections::{BTreeSet, HashMap};

use experiments::format_bytes;

use super::{round_up, AllocError, Block, DeviceMemory, FreeSpace, Policy};

const MIN_BLOCK: u64 = 512;
const SMALL_SIZE: u64 = 1 << 20;
const SMALL_BUFFER: u64 = 2 << 20;
const LARGE_BUFFER: u64 = 20 << 20;
const MIN_LARGE_ALLOC: u64 = 10 << 20;
const ROUND_LARGE: u64 = 2 << 20;

/// Plain segments (PyTorch's default) or expandable segments.
#[derive(Debug, Clone, Copy)]
pub(super) enum Mode {
    Segments { max_split: u64 },
    Expandable { small_page: u64, large_page: u64 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pool {
    Small = 0,
    Large = 1,
}

#[derive(Debug, Clone)]
struct Node {
    addr: u64,
    size: u64,
    stream: u64,
    pool: Pool,
    allocated: bool,
    mapped: bool,
    prev: Option<usize>,
    next: Option<usize>,
    /// The expandable segment it lies in.
    segment: Option<usize>,
}

struct ExpandableSegment {
    base: u64,
    page: u64,
}

type FreeKey = (u64, u64, u64, usize);
type UnmappedKey = (u64, u64, usize);

pub(super) struct Caching {
    mode: Mode,
    nodes: Vec<Node>,
    vacant: Vec<usize>,
    /// Free mapped blocks per pool, ordered by (stream, size, address): best fit is a range query.
    free_sets: [BTreeSet<FreeKey>; 2],
    /// Unmapped tails of expandable segments per pool, ordered by (stream, address).
    unmapped: [BTreeSet<UnmappedKey>; 2],
    active: HashMap<u64, usize>,
    segments: Vec<ExpandableSegment>,
    free_bytes: u64,
    splits: u64,
    merges: u64,
    flushes: u64,
}

fn round_size(size: u64) -> u64 {
    if size < MIN_BLOCK {
        MIN_BLOCK
    } else {
        round_up(size, MIN_BLOCK)
    }
}

fn allocation_size(size: u64) -> u64 {
    if size <= SMALL_SIZE {
        SMALL_BUFFER
    } else if size < MIN_LARGE_ALLOC {
        LARGE_BUFFER
    } else {
        round_up(size, ROUND_LARGE)
    }
}

impl Caching {
    pub(super) fn new(mode: Mode) -> Caching {
        Caching {
            mode,
            nodes: Vec::new(),
            vacant: Vec::new(),
            free_sets: [BTreeSet::new(), BTreeSet::new()],
            unmapped: [BTreeSet::new(), BTreeSet::new()],
            active: HashMap::new(),
            segments: Vec::new(),
            free_bytes: 0,
            splits: 0,
            merges: 0,
            flushes: 0,
        }
    }

    fn max_split(&self) -> u64 {
        match self.mode {
            Mode::Segments { max_split } => max_split,
            Mode::Expandable { .. } => u64::MAX,
        }
    }

    fn expandable(&self) -> bool {
        matches!(self.mode, Mode::Expandable { .. })
    }

    fn add_node(&mut self, node: Node) -> usize {
        match self.vacant.pop() {
            Some(idx) => {
                self.nodes[idx] = node;
                idx
            }
            None => {
                self.nodes.push(node);
                self.nodes.len() - 1
            }
        }
    }

    fn free_key(&self, idx: usize) -> FreeKey {
        let n = &self.nodes[idx];
        (n.stream, n.size, n.addr, idx)
    }

    fn insert_free(&mut self, idx: usize) {
        let key = self.free_key(idx);
        self.free_sets[self.nodes[idx].pool as usize].insert(key);
        self.free_bytes += self.nodes[idx].size;
    }

    fn remove_free(&mut self, idx: usize) {
        let key = self.free_key(idx);
        let removed = self.free_sets[self.nodes[idx].pool as usize].remove(&key);
        debug_assert!(removed, "block {idx} was not in the free set");
        self.free_bytes -= self.nodes[idx].size;
    }

    fn insert_unmapped(&mut self, idx: usize) {
        let n = &self.nodes[idx];
        self.unmapped[n.pool as usize].insert((n.stream, n.addr, idx));
    }

    fn remove_unmapped(&mut self, idx: usize) {
        let n = &self.nodes[idx];
        self.unmapped[n.pool as usize].remove(&(n.stream, n.addr, idx));
    }

    /// Inserts a new node right after `idx`, covering its last `size` bytes.
    fn split_off(&mut self, idx: usize, keep: u64, mapped: bool) -> usize {
        let n = self.nodes[idx].clone();
        let rest = self.add_node(Node {
            addr: n.addr + keep,
            size: n.size - keep,
            stream: n.stream,
            pool: n.pool,
            allocated: false,
            mapped,
            prev: Some(idx),
            next: n.next,
            segment: n.segment,
        });
        if let Some(next) = n.next {
            self.nodes[next].prev = Some(rest);
        }
        self.nodes[idx].next = Some(rest);
        self.nodes[idx].size = keep;
        rest
    }

    /// Merges `src` into `dst` when it is a free neighbour in the same mapping state.
    /// `dst` must be out of every set; `src` leaves its set and is deleted.
    fn try_merge(&mut self, dst: usize, src: Option<usize>) {
        let Some(src) = src else { return };
        if self.nodes[src].allocated || self.nodes[src].mapped != self.nodes[dst].mapped {
            return;
        }
        if self.nodes[src].mapped {
            self.remove_free(src);
        } else {
            self.remove_unmapped(src);
        }
        let s = self.nodes[src].clone();
        if self.nodes[dst].prev == Some(src) {
            self.nodes[dst].addr = s.addr;
            self.nodes[dst].prev = s.prev;
            if let Some(p) = s.prev {
                self.nodes[p].next = Some(dst);
            }
        } else {
            self.nodes[dst].next = s.next;
            if let Some(n) = s.next {
                self.nodes[n].prev = Some(dst);
            }
        }
        self.nodes[dst].size += s.size;
        self.vacant.push(src);
        self.merges += 1;
    }

    /// The size a block could reach by mapping the unmapped block after it.
    fn expandable_size(&self, idx: usize) -> u64 {
        let n = &self.nodes[idx];
        n.size
            + n.next
                .filter(|&next| !self.nodes[next].mapped)
                .map_or(0, |next| self.nodes[next].size)
    }

    fn get_free_block(&mut self, pool: Pool, stream: u64, size: u64) -> Option<usize> {
        let set = &self.free_sets[pool as usize];
        let mut candidates = set.range((stream, size, 0, 0)..).take_while(|key| key.0 == stream);
        let mut chosen = candidates.next()?.3;
        if self.expandable() {
            for &(_, _, _, next) in candidates {
                if self.nodes[chosen].segment.is_none() || self.expandable_size(next) >= self.expandable_size(chosen) {
                    break;
                }
                chosen = next;
            }
        }
        let max_split = self.max_split();
        let found = self.nodes[chosen].size;
        if (size < max_split && found >= max_split) || (size >= max_split && found >= size + LARGE_BUFFER) {
            return None;
        }
        self.remove_free(chosen);
        Some(chosen)
    }

    fn alloc_block(&mut self, device: &mut dyn DeviceMemory, pool: Pool, stream: u64, size: u64) -> Option<usize> {
        if self.expandable() {
            return self.try_allocate_expandable(device, pool, stream, size);
        }
        let bytes = allocation_size(size);
        let addr = device.allocate(bytes)?;
        Some(self.add_node(Node {
            addr,
            size: bytes,
            stream,
            pool,
            allocated: false,
            mapped: true,
            prev: None,
            next: None,
            segment: None,
        }))
    }

    fn page_of(&self, pool: Pool) -> u64 {
        match (self.mode, pool) {
            (Mode::Expandable { small_page, .. }, Pool::Small) => small_page,
            (Mode::Expandable { large_page, .. }, Pool::Large) => large_page,
            (Mode::Segments { .. }, _) => unreachable!("only expandable segments have pages"),
        }
    }

    fn find_expandable_block(
        &mut self,
        device: &mut dyn DeviceMemory,
        pool: Pool,
        stream: u64,
        size: u64,
    ) -> Option<usize> {
        let tails: Vec<usize> = self.unmapped[pool as usize]
            .range((stream, 0, 0)..)
            .take_while(|key| key.0 == stream)
            .map(|key| key.2)
            .collect();
        for tail in tails {
            let mut start = tail;
            if let Some(prev) = self.nodes[tail].prev.filter(|&p| !self.nodes[p].allocated) {
                start = prev;
            }
            let (mut bytes, mut cursor) = (0, Some(start));
            while let Some(c) = cursor.filter(|&c| bytes < size && !self.nodes[c].allocated) {
                bytes += self.nodes[c].size;
                cursor = self.nodes[c].next;
            }
            if bytes >= size {
                return Some(start);
            }
        }
        // A new segment reserves as much address space as the device has memory, and 1/8 more.
        let page = self.page_of(pool);
        let total = device.total_bytes();
        let virtual_size = round_up(total + total / 8, page);
        let base = device.reserve(virtual_size)?;
        self.segments.push(ExpandableSegment { base, page });
        let idx = self.add_node(Node {
            addr: base,
            size: virtual_size,
            stream,
            pool,
            allocated: false,
            mapped: false,
            prev: None,
            next: None,
            segment: Some(self.segments.len() - 1),
        });
        self.insert_unmapped(idx);
        Some(idx)
    }

    /// Maps the first `size` bytes (rounded up to pages) of unmapped block `idx`, merges them
    /// with free mapped neighbours and returns the merged free block.
    fn map_block(&mut self, device: &mut dyn DeviceMemory, idx: usize, size: u64) -> Option<usize> {
        let segment = self.nodes[idx]
            .segment
            .expect("unmapped blocks lie in expandable segments");
        let (base, page) = (self.segments[segment].base, self.segments[segment].page);
        let begin = self.nodes[idx].addr;
        let mapped = base + round_up(begin + size - base, page) - begin;
        if !device.map(begin, mapped) {
            return None;
        }
        self.remove_unmapped(idx);
        self.nodes[idx].mapped = true;
        if mapped < self.nodes[idx].size {
            let rest = self.split_off(idx, mapped, false);
            self.insert_unmapped(rest);
        }
        let (prev, next) = (self.nodes[idx].prev, self.nodes[idx].next);
        self.try_merge(idx, prev);
        self.try_merge(idx, next);
        self.insert_free(idx);
        Some(idx)
    }

    fn try_allocate_expandable(
        &mut self,
        device: &mut dyn DeviceMemory,
        pool: Pool,
        stream: u64,
        size: u64,
    ) -> Option<usize> {
        let mut candidate = self.find_expandable_block(device, pool, stream, size)?;
        if !self.nodes[candidate].mapped {
            let first = self.nodes[candidate].size.min(size);
            candidate = self.map_block(device, candidate, first)?;
        }
        while self.nodes[candidate].size < size {
            let remaining = size - self.nodes[candidate].size;
            let next = self.nodes[candidate].next?;
            let grow = remaining.min(self.nodes[next].size);
            candidate = self.map_block(device, next, grow)?;
        }
        self.remove_free(candidate);
        Some(candidate)
    }

    /// With `max_split_size` set: returns cached oversize segments of this pool and stream.
    fn release_available(&mut self, device: &mut dyn DeviceMemory, pool: Pool, stream: u64, size: u64) -> bool {
        let max_split = self.max_split();
        if max_split == u64::MAX || self.expandable() {
            return false;
        }
        let wanted = size.max(max_split);
        let set = &self.free_sets[pool as usize];
        let whole = |n: &Node| n.prev.is_none() && n.next.is_none();
        if let Some(&(_, _, _, idx)) = set.range((stream, wanted, 0, 0)..).next().filter(|k| k.0 == stream) {
            if whole(&self.nodes[idx]) {
                self.release_segment(device, idx);
                return true;
            }
        }
        let oversize: Vec<usize> = set
            .range((stream, 0, 0, 0)..(stream, wanted, 0, 0))
            .rev()
            .take_while(|k| k.1 >= max_split)
            .map(|k| k.3)
            .filter(|&idx| whole(&self.nodes[idx]))
            .collect();
        let mut released = 0;
        for idx in oversize {
            if released >= wanted {
                break;
            }
            released += self.nodes[idx].size;
            self.release_segment(device, idx);
        }
        released >= wanted
    }

    fn release_segment(&mut self, device: &mut dyn DeviceMemory, idx: usize) {
        self.remove_free(idx);
        device.free(self.nodes[idx].addr, self.nodes[idx].size);
        self.vacant.push(idx);
    }

    /// Unmaps the whole pages inside free block `idx` of an expandable segment.
    fn unmap_free_block(&mut self, device: &mut dyn DeviceMemory, idx: usize) {
        let segment = self.nodes[idx].segment.expect("expandable block");
        let (base, page) = (self.segments[segment].base, self.segments[segment].page);
        let (addr, end) = (self.nodes[idx].addr, self.nodes[idx].addr + self.nodes[idx].size);
        let begin = base + round_up(addr - base, page);
        let stop = base + (end - base) / page * page;
        if begin >= stop {
            return;
        }
        self.remove_free(idx);
        device.unmap(begin, stop - begin);
        let mut middle = idx;
        if begin > addr {
            middle = self.split_off(idx, begin - addr, true);
            self.insert_free(idx);
        }
        if stop < end {
            let after = self.split_off(middle, stop - begin, true);
            self.insert_free(after);
        }
        self.nodes[middle].mapped = false;
        let (prev, next) = (self.nodes[middle].prev, self.nodes[middle].next);
        self.try_merge(middle, prev);
        self.try_merge(middle, next);
        self.insert_unmapped(middle);
    }
}

impl Policy for Caching {
    fn allocate(&mut self, device: &mut dyn DeviceMemory, request: u64, stream: u64) -> Result<Block, AllocError> {
        let size = round_size(request);
        let pool = if size <= SMALL_SIZE { Pool::Small } else { Pool::Large };
        let found = match self.get_free_block(pool, stream, size) {
            Some(idx) => Some(idx),
            None => self
                .alloc_block(device, pool, stream, size)
                .or_else(|| {
                    self.release_available(device, pool, stream, size)
                        .then(|| self.alloc_block(device, pool, stream, size))
                        .flatten()
                })
                .or_else(|| {
                    self.flushes += 1;
                    self.release_cached(device);
                    self.alloc_block(device, pool, stream, size)
                }),
        };
        let idx = found.ok_or_else(|| {
            let what = if self.expandable() {
                "mapping more of its segment".to_string()
            } else {
                format!("a {} segment", format_bytes(allocation_size(size)))
            };
            AllocError(format!(
                "caching: {} requested ({} rounded); the device refused {what} even after the cache was emptied",
                format_bytes(request),
                format_bytes(size)
            ))
        })?;
        let remaining = self.nodes[idx].size - size;
        let split = if pool == Pool::Small || self.expandable() {
            remaining >= MIN_BLOCK
        } else {
            size < self.max_split() && remaining > SMALL_SIZE
        };
        if split {
            let rest = self.split_off(idx, size, true);
            self.insert_free(rest);
            self.splits += 1;
        }
        self.nodes[idx].allocated = true;
        let block = Block {
            addr: self.nodes[idx].addr,
            size: self.nodes[idx].size,
        };
        self.active.insert(block.addr, idx);
        Ok(block)
    }

    fn free(&mut self, _device: &mut dyn DeviceMemory, block: Block) {
        let idx = self.active.remove(&block.addr).expect("freed block was handed out");
        self.nodes[idx].allocated = false;
        let (prev, next) = (self.nodes[idx].prev, self.nodes[idx].next);
        self.try_merge(idx, prev);
        self.try_merge(idx, next);
        self.insert_free(idx);
    }

    fn free_space(&self) -> FreeSpace {
        let largest = self
            .free_sets
            .iter()
            .flat_map(|set| set.iter())
            .map(|key| key.1)
            .max()
            .unwrap_or(0);
        FreeSpace {
            total: self.free_bytes,
            largest,
        }
    }

    fn alignment(&self) -> u64 {
        MIN_BLOCK
    }

    fn release_cached(&mut self, device: &mut dyn DeviceMemory) {
        let free: Vec<usize> = self
            .free_sets
            .iter()
            .flat_map(|set| set.iter().map(|key| key.3))
            .collect();
        for idx in free {
            if self.expandable() {
                self.unmap_free_block(device, idx);
            } else if self.nodes[idx].prev.is_none() && self.nodes[idx].next.is_none() {
                self.release_segment(device, idx);
            }
        }
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("splits", self.splits),
            ("merges", self.merges),
            ("oom_cache_flushes", self.flushes),
        ]
    }
}
