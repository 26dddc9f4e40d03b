//! PyTorch 2.11's CUDA caching allocator (`DeviceCachingAllocator` in
//! c10/cuda/CUDACachingAllocator.cpp), rule for rule, under any `PYTORCH_ALLOC_CONF`:
//!
//! - `round_size`: under 512 B to 512; else, where the size's interval has d > 1
//!   `roundup_power2_divisions` and the size exceeds 512 x d, up to the next 1/d step of its
//!   power of two; else up to a multiple of 512;
//! - requests up to 1 MiB use the small pool (2 MiB segments), larger ones the large pool
//!   (`large_segment_size`, 20 MiB, below 10 MiB; else rounded up to 2 MiB);
//! - best fit per stream: the smallest free block, then the lowest address (`get_free_block`),
//!   refusing blocks of `max_split_size` or more for smaller requests, and blocks more than
//!   `max_non_split_rounding` larger than a request of `max_split_size` or more;
//! - on a miss: garbage collection (a cap and a threshold set), the device allocation, then
//!   the release of cached oversize blocks and a second try, then the release of every
//!   unsplit cached block after synchronising every stream and a counted retry, then out of
//!   memory. Under a cap (`set_per_process_memory_fraction`) a device allocation that would
//!   take the total past it fails without asking the device;
//! - a block is split when the rest is at least 512 B (small pool, expandable segments) or more
//!   than 1 MiB (large pool, requests under `max_split_size`); a freed block merges with free
//!   neighbours once work on other streams has finished (`free_completed`);
//! - expandable segments: one virtual range per stream and pool, mapped page by page (2 MiB
//!   small, `large_segment_size` large) from its lowest free address; best fit counts a free
//!   block's unmapped tail as part of its size; releasing the cache unmaps whole free pages.
//!
//! Statistics are counted where PyTorch counts them, under its names ([`PytorchStats`]).

use super::ordered_set::OrderedSet;

use experiments::{
    format_bytes, AllocConf, BlockState, BlockView, PytorchStats, SegmentView, StartBlock, StartSegment, StartState,
};

use super::slots::Slots;
use super::{round_up, Adopted, AlikeLimits, AllocError, Block, DeviceMemory, FreeSpace, Policy, NO_HANDLE};

use experiments::pytorch::{MIN_BLOCK_SIZE as MIN_BLOCK, SMALL_SIZE};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pool {
    Small = 0,
    Large = 1,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Cached: in its pool's free set (mapped) or unmapped set.
    Free,
    /// Handed out.
    Allocated,
    /// Let go by the program, still in use by another stream (`free_requested`, not completed).
    Pending,
}

#[derive(Debug, Clone)]
struct Node {
    addr: u64,
    size: u64,
    requested: u64,
    stream: u64,
    pool: Pool,
    /// The pool family it belongs to: 0 the default pools, k > 0 private pool k (a CUDA
    /// graph's, a MemPool's).
    owner: u32,
    state: State,
    mapped: bool,
    prev: Option<usize>,
    next: Option<usize>,
    /// The expandable segment it lies in.
    segment: Option<usize>,
    /// Its pool's `get_free_block` count when it was last cached (garbage collection's age).
    gc_base: u64,
}

impl Node {
    fn is_split(&self) -> bool {
        self.prev.is_some() || self.next.is_some()
    }
}

#[derive(Clone)]
struct ExpandableSegment {
    base: u64,
    page: u64,
    size: u64,
}

/// A cached block in its stream's free set: ordered by size, then address (no two cached
/// blocks share an address), its node carried along. Compared as one 128-bit number, which
/// costs a scan one comparison a key where the tuple (stream, size, address, node) cost a
/// chain of them.
#[derive(Debug, Clone, Copy)]
struct FreeKey {
    size: u64,
    addr: u64,
    idx: usize,
}

impl FreeKey {
    /// The first key of every block of at least `size` bytes.
    fn at_least(size: u64) -> FreeKey {
        FreeKey { size, addr: 0, idx: 0 }
    }

    fn rank(&self) -> u128 {
        u128::from(self.size) << 64 | u128::from(self.addr)
    }
}

impl PartialEq for FreeKey {
    fn eq(&self, other: &FreeKey) -> bool {
        self.rank() == other.rank()
    }
}

impl Eq for FreeKey {}

impl PartialOrd for FreeKey {
    fn partial_cmp(&self, other: &FreeKey) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for FreeKey {
    fn cmp(&self, other: &FreeKey) -> std::cmp::Ordering {
        self.rank().cmp(&other.rank())
    }
}

/// A pool's cached (free, mapped) blocks: a set per stream, the streams in order, so that
/// best fit within a stream is a range query of its set, and every block in the order of
/// (stream, size, address) is the sets one after another.
#[derive(Default, Clone)]
struct FreeSets {
    streams: Vec<(u64, OrderedSet<FreeKey>)>,
}

impl FreeSets {
    /// Where `stream`'s set is, or would go; the first stream's looked at first (most traces
    /// use one stream).
    #[inline]
    fn place(&self, stream: u64) -> Result<usize, usize> {
        match self.streams.first() {
            Some(&(first, _)) if first == stream => Ok(0),
            _ => self.streams.binary_search_by_key(&stream, |&(s, _)| s),
        }
    }

    /// The set of `stream`'s blocks, where it has had any.
    #[inline]
    fn of(&self, stream: u64) -> Option<&OrderedSet<FreeKey>> {
        let at = self.place(stream).ok()?;
        Some(&self.streams[at].1)
    }

    /// The set of `stream`'s blocks, made empty where it has had none.
    #[inline]
    fn of_mut(&mut self, stream: u64) -> &mut OrderedSet<FreeKey> {
        let at = match self.streams.first() {
            Some(&(first, _)) if first == stream => 0,
            _ => self.place_of_another(stream),
        };
        &mut self.streams[at].1
    }

    /// Where the set of a stream other than the first is, made where it has had none (kept
    /// out of [`FreeSets::of_mut`], which the common case then enters and leaves quickly).
    #[cold]
    #[inline(never)]
    fn place_of_another(&mut self, stream: u64) -> usize {
        match self.place(stream) {
            Ok(at) => at,
            Err(at) => {
                self.streams.insert(at, (stream, OrderedSet::default()));
                at
            }
        }
    }

    /// Every block, by (stream, size, address).
    fn iter(&self) -> impl Iterator<Item = (u64, &FreeKey)> + '_ {
        self.streams
            .iter()
            .flat_map(|(stream, set)| set.iter().map(move |key| (*stream, key)))
    }
}

type UnmappedKey = (u64, u64, usize);

#[derive(Default, Clone)]
struct PoolState {
    /// Free mapped blocks, ordered by (stream, size, address): best fit is a range query.
    blocks: FreeSets,
    /// Unmapped ranges of expandable segments, ordered by (stream, address).
    unmapped: OrderedSet<UnmappedKey>,
    /// `get_free_blocks_call_count`: counted whenever a garbage-collection threshold is set
    /// (PyTorch counts it only under a cap too; only the collection reads it).
    free_block_calls: u64,
}

/// A statistic as PyTorch keeps one: the current value and the highest it reached.
#[derive(Debug, Clone, Copy, Default)]
struct Stat {
    current: u64,
    peak: u64,
}

impl Stat {
    fn add(&mut self, amount: u64) {
        self.current += amount;
        self.peak = self.peak.max(self.current);
    }
    fn sub(&mut self, amount: u64) {
        self.current -= amount;
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Stats {
    allocated: Stat,
    reserved: Stat,
    active: Stat,
    requested: Stat,
    inactive_split: Stat,
    segments: Stat,
    retries: u64,
    ooms: u64,
    syncs: u64,
    device_allocs: u64,
    device_frees: u64,
}

#[derive(Clone)]
pub(super) struct Caching {
    conf: AllocConf,
    small_page: u64,
    /// `allowed_memory_maximum` once a cap is set (`set_per_process_memory_fraction`).
    allowed: Option<u64>,
    /// The smallest `allowed` that would have refused none of the segments asked for so far.
    limit_needed: u64,
    /// The limits that decide as `allowed` did since [`Policy::take_alike_limits`] last
    /// asked (see there).
    alike: AlikeLimits,
    nodes: Slots<Node>,
    /// Per pool family (default, then private pools), its small and large pool.
    pools: Vec<PoolState>,
    /// The pool family the next request is served from (PyTorch's `get_pool`).
    current: u32,
    /// Private pools whose owner has let go of them: their cached memory goes back at the
    /// next release of the cache (`graph_pools_freeable`).
    freeable: Vec<bool>,
    segments: Vec<ExpandableSegment>,
    /// `total_allocated_memory`: bytes held from the device.
    total: u64,
    free_bytes: u64,
    stats: Stats,
    splits: u64,
    merges: u64,
    gc_releases: u64,
    /// Pending blocks a flush finished before the program's trace did.
    finished: Vec<Block>,
}

impl Caching {
    /// PyTorch's allocator under `conf`; `small_page` is the small pool's mapping unit under
    /// expandable segments (2 MiB in PyTorch).
    pub(super) fn new(conf: AllocConf, small_page: u64) -> Caching {
        Caching {
            conf,
            small_page,
            allowed: None,
            limit_needed: 0,
            alike: AlikeLimits::ANY,
            nodes: Slots::default(),
            pools: vec![PoolState::default(), PoolState::default()],
            current: 0,
            freeable: vec![false],
            segments: Vec::new(),
            total: 0,
            free_bytes: 0,
            stats: Stats::default(),
            splits: 0,
            merges: 0,
            gc_releases: 0,
            finished: Vec::new(),
        }
    }

    /// `round_size`: the bytes a request of `size` takes.
    pub(super) fn round_size(&self, size: u64) -> u64 {
        self.conf.round_size(size)
    }

    /// Takes over the state a trace began in: its segments at the addresses the device gives
    /// them, their blocks as they were, counted as PyTorch counts them (the window's peaks
    /// start there). Blocks no known segment holds are allocated as requests.
    fn adopt_start(&mut self, device: &mut dyn DeviceMemory, start: &StartState) -> Result<Vec<Adopted>, AllocError> {
        let mut adopted = Vec::new();
        for segment in start.segments.iter().filter(|s| !s.expandable) {
            self.ensure_family(segment.pool);
            let base = device.adopt(segment.addr, segment.size).ok_or_else(|| {
                AllocError(format!(
                    "the trace's starting segment of {} does not fit on the device",
                    format_bytes(segment.size)
                ))
            })?;
            self.total += segment.size;
            self.stats.segments.add(1);
            self.stats.reserved.add(segment.size);
            let split = segment.blocks.len() > 1;
            self.adopt_blocks(segment, &segment.blocks, base, None, true, split, &mut adopted);
        }
        for reservation in &start.reservations {
            self.ensure_family(reservation.pool);
            let kind = if reservation.is_large { Pool::Large } else { Pool::Small };
            let page = self.page_of(kind);
            let ranges: Vec<&StartSegment> = start
                .segments
                .iter()
                .filter(|s| {
                    s.expandable
                        && (s.pool, s.stream, s.is_large)
                            == (reservation.pool, reservation.stream, reservation.is_large)
                })
                .collect();
            let total = device.total_bytes();
            let reach = ranges
                .iter()
                .map(|r| r.addr + r.size - reservation.base)
                .max()
                .unwrap_or(0);
            let size = round_up(total.saturating_add(total / 8).max(reach).max(1), page);
            let base = device
                .adopt_reservation(reservation.base, size)
                .ok_or_else(|| AllocError("the trace's starting expandable segment has no address range".into()))?;
            self.segments.push(ExpandableSegment { base, page, size });
            let segment = self.segments.len() - 1;
            // The reservation as blocks: unmapped gaps between the mapped ranges' blocks.
            let mut prev: Option<usize> = None;
            let mut cursor = reservation.base;
            let end = reservation.base + size;
            let gap = |this: &mut Caching, from: u64, to: u64, prev: &mut Option<usize>| {
                if to > from {
                    let idx = this.add_node(Node {
                        addr: base + (from - reservation.base),
                        size: to - from,
                        requested: 0,
                        stream: reservation.stream,
                        pool: kind,
                        owner: reservation.pool,
                        state: State::Free,
                        mapped: false,
                        prev: *prev,
                        next: None,
                        segment: Some(segment),
                        gc_base: 0,
                    });
                    if let Some(p) = *prev {
                        this.nodes[p].next = Some(idx);
                    }
                    this.insert_unmapped(idx);
                    *prev = Some(idx);
                }
            };
            for range in ranges {
                gap(self, cursor, range.addr, &mut prev);
                if !device.map(base + (range.addr - reservation.base), range.size) {
                    return Err(AllocError(
                        "the trace's starting mapped memory does not fit on the device".into(),
                    ));
                }
                self.total += range.size;
                self.stats.reserved.add(range.size);
                let offset_base = base + (range.addr - reservation.base);
                prev = self.adopt_blocks(range, &range.blocks, offset_base, prev, false, false, &mut adopted);
                cursor = range.addr + range.size;
            }
            gap(self, cursor, end, &mut prev);
        }
        for block in &start.loose {
            let Some(id) = block.id else { continue };
            self.select_pool(0);
            let (placed, handle) = self.allocate_handled(device, block.requested, block.stream)?;
            if block.state == BlockState::Pending {
                self.free_requested_handled(device, placed, handle);
            }
            adopted.push(Adopted {
                id,
                block: placed,
                requested: block.requested,
                stream: block.stream,
                pending: block.state == BlockState::Pending,
                handle,
            });
        }
        self.limit_needed = self.limit_needed.max(self.total);
        Ok(adopted)
    }

    /// Links `blocks` of `segment` (placed at `base` on the device) after `prev`, caching the
    /// free ones and handing out the live ones; the last node.
    #[allow(clippy::too_many_arguments)]
    fn adopt_blocks(
        &mut self,
        segment: &StartSegment,
        blocks: &[StartBlock],
        base: u64,
        mut prev: Option<usize>,
        whole_segment: bool,
        split: bool,
        adopted: &mut Vec<Adopted>,
    ) -> Option<usize> {
        let kind = if segment.is_large { Pool::Large } else { Pool::Small };
        let expandable = (!whole_segment).then(|| self.segments.len() - 1);
        for block in blocks {
            let addr = base + (block.addr - segment.addr);
            let state = match block.state {
                BlockState::Free => State::Free,
                BlockState::Allocated => State::Allocated,
                BlockState::Pending => State::Pending,
            };
            let idx = self.add_node(Node {
                addr,
                size: block.size,
                requested: block.requested,
                stream: segment.stream,
                pool: kind,
                owner: segment.pool,
                state,
                mapped: true,
                prev,
                next: None,
                segment: expandable,
                gc_base: 0,
            });
            if let Some(p) = prev {
                self.nodes[p].next = Some(idx);
            }
            prev = Some(idx);
            match state {
                State::Free => {
                    self.insert_free(idx);
                    if split && expandable.is_none() {
                        self.stats.inactive_split.add(block.size);
                    }
                }
                State::Allocated | State::Pending => {
                    self.stats.active.add(block.size);
                    self.stats.requested.add(block.requested);
                    if state == State::Allocated {
                        self.stats.allocated.add(block.size);
                    }
                    if let Some(id) = block.id {
                        adopted.push(Adopted {
                            id,
                            block: Block { addr, size: block.size },
                            requested: block.requested,
                            stream: segment.stream,
                            pending: state == State::Pending,
                            handle: handle_of(idx),
                        });
                    }
                }
            }
        }
        prev
    }

    /// `get_allocation_size`: the segment a miss allocates for a rounded request.
    fn allocation_size(&self, size: u64) -> u64 {
        self.conf.allocation_size(size)
    }

    /// The index of pool `kind` of family `owner` in `pools`.
    fn slot(owner: u32, kind: Pool) -> usize {
        owner as usize * 2 + kind as usize
    }

    /// Makes room for pool family `owner`.
    fn ensure_family(&mut self, owner: u32) {
        let families = owner as usize + 1;
        if self.freeable.len() < families {
            self.freeable.resize(families, false);
            self.pools.resize_with(families * 2, PoolState::default);
        }
    }

    /// The pool a node's free set lives in.
    fn pool_of(&self, idx: usize) -> usize {
        let n = &self.nodes[idx];
        Self::slot(n.owner, n.pool)
    }

    fn add_node(&mut self, node: Node) -> usize {
        self.nodes.add(node)
    }

    /// Lets go of a node's slot: only a free node's (merged into a neighbour, or given back to
    /// the device), so that every slot let go of holds a free node (see [`Caching::node_of`]).
    fn release_node(&mut self, idx: usize) {
        debug_assert_eq!(self.nodes[idx].state, State::Free);
        self.nodes.release(idx);
    }

    fn free_key(&self, idx: usize) -> FreeKey {
        let n = &self.nodes[idx];
        FreeKey {
            size: n.size,
            addr: n.addr,
            idx,
        }
    }

    /// `insert_into_blocks`: caches a free mapped block, restarting its garbage-collection age.
    fn insert_free(&mut self, idx: usize) {
        let (pool, key) = self.becoming_free(idx);
        let stream = self.nodes[idx].stream;
        self.pools[pool].blocks.of_mut(stream).insert(key);
    }

    /// A cached block (its key `whole` from before the split or the merge) gives its place in
    /// the free set to `rest`, the part of it a split left free or the block it was merged
    /// into (of the same stream): one shift of the set instead of two.
    fn replace_free(&mut self, whole: FreeKey, rest: usize) {
        let (pool, key) = self.becoming_free(rest);
        let stream = self.nodes[rest].stream;
        let replaced = self.pools[pool].blocks.of_mut(stream).replace(&whole, key);
        debug_assert!(replaced, "block {} was not in the free set", whole.idx);
        self.free_bytes -= whole.size;
    }

    /// What caching `idx` changes besides the set: its garbage-collection age restarts and its
    /// bytes count as free. Its pool and key, for the set.
    fn becoming_free(&mut self, idx: usize) -> (usize, FreeKey) {
        let pool = self.pool_of(idx);
        self.nodes[idx].gc_base = self.pools[pool].free_block_calls;
        self.free_bytes += self.nodes[idx].size;
        (pool, self.free_key(idx))
    }

    fn remove_free(&mut self, idx: usize) {
        let key = self.free_key(idx);
        let pool = self.pool_of(idx);
        let stream = self.nodes[idx].stream;
        let removed = self.pools[pool].blocks.of_mut(stream).remove(&key);
        debug_assert!(removed, "block {idx} was not in the free set");
        self.free_bytes -= self.nodes[idx].size;
    }

    fn insert_unmapped(&mut self, idx: usize) {
        let (pool, n) = (self.pool_of(idx), &self.nodes[idx]);
        self.pools[pool].unmapped.insert((n.stream, n.addr, idx));
    }

    fn remove_unmapped(&mut self, idx: usize) {
        let (pool, n) = (self.pool_of(idx), &self.nodes[idx]);
        self.pools[pool].unmapped.remove(&(n.stream, n.addr, idx));
    }

    /// Inserts a new free node right after `idx`, covering all but its first `keep` bytes.
    fn split_off(&mut self, idx: usize, keep: u64, mapped: bool) -> usize {
        let n = self.nodes[idx].clone();
        let rest = self.add_node(Node {
            addr: n.addr + keep,
            size: n.size - keep,
            requested: 0,
            stream: n.stream,
            pool: n.pool,
            owner: n.owner,
            state: State::Free,
            mapped,
            prev: Some(idx),
            next: n.next,
            segment: n.segment,
            gc_base: 0,
        });
        if let Some(next) = n.next {
            self.nodes[next].prev = Some(rest);
        }
        self.nodes[idx].next = Some(rest);
        self.nodes[idx].size = keep;
        rest
    }

    /// `try_merge_blocks`: merges `src` into `dst` when it is a cached neighbour in the same
    /// mapping state; returns the bytes taken in. `dst` must be out of every set.
    fn try_merge(&mut self, dst: usize, src: Option<usize>) -> u64 {
        self.try_merge_keeping(dst, src, None)
    }

    /// [`Caching::try_merge`]; with `place`, where it holds no key yet, a mapped `src` keeps
    /// its place in the free set, its key left in `place`, for `dst` to take with
    /// [`Caching::replace_free`] (one shift of the set instead of two). The set is then the
    /// same as after [`Caching::try_merge`] once `dst` is cached.
    fn try_merge_keeping(&mut self, dst: usize, src: Option<usize>, place: Option<&mut Option<FreeKey>>) -> u64 {
        let Some(src) = src else { return 0 };
        if self.nodes[src].state != State::Free || self.nodes[src].mapped != self.nodes[dst].mapped {
            return 0;
        }
        if self.nodes[src].mapped {
            match place {
                Some(place @ None) => *place = Some(self.free_key(src)),
                _ => self.remove_free(src),
            }
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
        self.release_node(src);
        self.merges += 1;
        s.size
    }

    /// The size a block could reach by mapping the unmapped block after it.
    fn expandable_size(&self, idx: usize) -> u64 {
        let n = &self.nodes[idx];
        n.size
            + n.next
                .filter(|&next| !self.nodes[next].mapped)
                .map_or(0, |next| self.nodes[next].size)
    }

    /// `get_free_block`.
    fn get_free_block(&mut self, pool: Pool, stream: u64, size: u64) -> Option<usize> {
        // PyTorch counts only under a cap; counting without one changes nothing (only garbage
        // collection reads the count), and lets a capped replay go on from an uncapped one.
        let slot = Self::slot(self.current, pool);
        if self.conf.garbage_collection_threshold > 0.0 {
            self.pools[slot].free_block_calls += 1;
        }
        let set = self.pools[slot].blocks.of(stream)?;
        let from = FreeKey::at_least(size);
        let mut chosen = set.first_at_least(&from)?.idx;
        if self.conf.expandable_segments {
            for next in set.range(from..).skip(1).map(|key| key.idx) {
                if self.nodes[chosen].segment.is_none() || self.expandable_size(next) >= self.expandable_size(chosen) {
                    break;
                }
                chosen = next;
            }
        }
        let max_split = self.conf.max_split_size;
        let found = self.nodes[chosen].size;
        if (size < max_split && found >= max_split)
            || (size >= max_split && found >= size.saturating_add(self.conf.max_non_split_rounding))
        {
            return None;
        }
        // Left in the free set: the caller takes it out, or puts what a split leaves in its place.
        Some(chosen)
    }

    /// `alloc_block`: a new segment, or more of an expandable one.
    fn alloc_block(
        &mut self,
        device: &mut dyn DeviceMemory,
        pool: Pool,
        stream: u64,
        size: u64,
        retry: bool,
    ) -> Option<usize> {
        if retry {
            self.stats.retries += 1;
        }
        let bytes = self.allocation_size(size);
        let held_after = self.total.saturating_add(bytes);
        self.limit_needed = self.limit_needed.max(held_after);
        if self.allowed.is_some_and(|allowed| held_after > allowed) {
            // Refused: so is it under every limit below `held_after`, and under none above.
            self.alike.below = self.alike.below.min(held_after);
            return None;
        }
        // Granted: so is it under every limit from `held_after` up.
        self.alike.from = self.alike.from.max(held_after);
        if self.conf.expandable_segments {
            return self.try_allocate_expandable(device, pool, stream, size);
        }
        let addr = device.allocate(bytes)?;
        self.total += bytes;
        self.stats.segments.add(1);
        self.stats.reserved.add(bytes);
        self.stats.device_allocs += 1;
        Some(self.add_node(Node {
            addr,
            size: bytes,
            requested: 0,
            stream,
            pool,
            owner: self.current,
            state: State::Free,
            mapped: true,
            prev: None,
            next: None,
            segment: None,
            gc_base: 0,
        }))
    }

    fn page_of(&self, pool: Pool) -> u64 {
        match pool {
            Pool::Small => self.small_page,
            Pool::Large => self.conf.large_segment_size,
        }
    }

    /// `find_expandable_block`: the lowest address with room for `size`, or a new segment.
    fn find_expandable_block(
        &mut self,
        device: &mut dyn DeviceMemory,
        pool: Pool,
        stream: u64,
        size: u64,
    ) -> Option<usize> {
        let tails: Vec<usize> = self.pools[Self::slot(self.current, pool)]
            .unmapped
            .range((stream, 0, 0)..)
            .take_while(|key| key.0 == stream)
            .map(|key| key.2)
            .collect();
        for tail in tails {
            let mut start = tail;
            if let Some(prev) = self.nodes[tail].prev.filter(|&p| self.nodes[p].state == State::Free) {
                start = prev;
            }
            let (mut bytes, mut cursor) = (0, Some(start));
            while let Some(c) = cursor.filter(|&c| bytes < size && self.nodes[c].state == State::Free) {
                bytes += self.nodes[c].size;
                cursor = self.nodes[c].next;
            }
            if bytes >= size {
                return Some(start);
            }
        }
        // A new segment reserves address space for all the device's memory and 1/8 more, or
        // (2.15's expandable_segments_reserve, on streams without a class) the reserve set,
        // never more than that (`clamp_reserve_bytes`, c10/cuda/CUDAAllocatorConfig.h:126 at 2.15).
        let page = self.page_of(pool);
        let total = device.total_bytes();
        let full = total.saturating_add(total / 8);
        let reserve = self
            .conf
            .expandable_segments_reserve
            .map_or(full, |spec| spec.bytes(total).min(full));
        let virtual_size = round_up(reserve.max(1), page);
        let base = device.reserve(virtual_size)?;
        self.segments.push(ExpandableSegment {
            base,
            page,
            size: virtual_size,
        });
        let idx = self.add_node(Node {
            addr: base,
            size: virtual_size,
            requested: 0,
            stream,
            pool,
            owner: self.current,
            state: State::Free,
            mapped: false,
            prev: None,
            next: None,
            segment: Some(self.segments.len() - 1),
            gc_base: 0,
        });
        self.insert_unmapped(idx);
        Some(idx)
    }

    /// `map_block`: maps the pages covering the first `size` bytes of unmapped block `idx`,
    /// merges them with free mapped neighbours and caches the result.
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
        self.total += mapped;
        self.stats.reserved.add(mapped);
        self.stats.device_allocs += 1;
        Some(idx)
    }

    /// `try_allocate_expandable_block`.
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

    /// `release_block`: returns a whole cached segment to the device.
    fn release_block(&mut self, device: &mut dyn DeviceMemory, idx: usize) {
        self.remove_free(idx);
        let (addr, size) = (self.nodes[idx].addr, self.nodes[idx].size);
        device.free(addr, size);
        self.total -= size;
        self.stats.segments.sub(1);
        self.stats.reserved.sub(size);
        self.stats.device_frees += 1;
        self.release_node(idx);
    }

    /// `garbage_collect_cached_blocks`: under a cap, once more than the threshold's share of it
    /// is held, releases unsplit cached large blocks at least as old as their average age
    /// (in `get_free_block` calls), oldest rounds first, until the excess is reclaimed.
    ///
    /// Returns the limits under which it would have done just what it did (see
    /// [`Policy::take_alike_limits`]). Its only use of the limit is the target, `total` less the
    /// limit's threshold: it does nothing where the threshold reaches `total`; else it frees
    /// blocks in rounds that do not depend on the target (each frees every unsplit cached
    /// block at least as old as the average age of those left, the ages and order being the
    /// state's), and goes on to another round while what it has reclaimed is below the target
    /// (and the last round freed something, and blocks are left). Every target above what was
    /// reclaimed before its last round, and (where it stopped because it had reclaimed enough)
    /// at most what it reclaimed, runs the same rounds; the threshold growing with the limit,
    /// those targets are an interval of limits.
    fn garbage_collect(&mut self, device: &mut dyn DeviceMemory) -> AlikeLimits {
        let Some(allowed) = self.allowed else {
            return AlikeLimits::ANY;
        };
        let fraction = self.conf.garbage_collection_threshold;
        let threshold = gc_threshold(fraction, allowed);
        if self.total <= threshold {
            // Nothing collected: nor under any limit whose threshold reaches `total`.
            return AlikeLimits {
                from: least_limit_with_threshold(fraction, self.total),
                below: u64::MAX,
            };
        }
        let total = self.total;
        let target = total - threshold;
        let large = Self::slot(0, Pool::Large);
        let calls = self.pools[large].free_block_calls;
        let age = |n: &Node| calls - n.gc_base;
        let unsplit: Vec<usize> = self.pools[large]
            .blocks
            .iter()
            .map(|(_, k)| k.idx)
            .filter(|&i| !self.nodes[i].is_split() && self.nodes[i].segment.is_none())
            .collect();
        let mut total_age: u64 = unsplit.iter().map(|&i| age(&self.nodes[i])).sum();
        let mut count = unsplit.len() as u64;
        let (mut reclaimed, mut freed) = (0u64, true);
        // What was reclaimed before the last round run: every target above it enters that round.
        let mut before_last = 0u64;
        while reclaimed < target && freed && count > 0 {
            before_last = reclaimed;
            let threshold_age = total_age as f64 / count as f64;
            freed = false;
            let order: Vec<usize> = self.pools[large].blocks.iter().map(|(_, k)| k.idx).collect();
            for idx in order {
                let node = &self.nodes[idx];
                if !node.is_split() && node.segment.is_none() && age(node) as f64 >= threshold_age {
                    freed = true;
                    reclaimed += node.size;
                    total_age -= age(node);
                    count -= 1;
                    self.gc_releases += 1;
                    self.release_block(device, idx);
                }
            }
        }
        // A target above `before_last` enters every round this one entered (`reclaimed` only
        // grows); where the loop stopped for having reclaimed enough alone, a target above
        // `reclaimed` would go on to another round.
        let stopped_by_target = freed && count > 0;
        let from = if stopped_by_target {
            // target' <= reclaimed: threshold' >= total - reclaimed.
            least_limit_with_threshold(fraction, total - reclaimed)
        } else {
            0
        };
        // target' > before_last: threshold' < total - before_last.
        let below = least_limit_with_threshold(fraction, total - before_last);
        AlikeLimits { from, below }
    }

    /// The smallest `allowed` under which [`Caching::garbage_collect`] would do nothing now.
    fn least_limit_collecting_nothing(&self) -> u64 {
        let fraction = self.conf.garbage_collection_threshold;
        let collects = |allowed: u64| self.total > (fraction * allowed as f64) as u64;
        let mut allowed = (self.total as f64 / fraction).ceil() as u64;
        while collects(allowed) {
            allowed += 1;
        }
        allowed
    }

    /// `release_available_cached_blocks`: with `max_split_size` set, returns one cached
    /// oversize block large enough for the request, or the largest ones until enough is freed.
    fn release_available(&mut self, device: &mut dyn DeviceMemory, pool: Pool, stream: u64, size: u64) -> bool {
        let max_split = self.conf.max_split_size;
        if max_split == u64::MAX || self.conf.expandable_segments {
            return false;
        }
        let wanted = size.max(max_split);
        let Some(set) = self.pools[Self::slot(self.current, pool)].blocks.of(stream) else {
            return false;
        };
        if let Some(&FreeKey { idx, .. }) = set.first_at_least(&FreeKey::at_least(wanted)) {
            if self.nodes[idx].is_split() {
                // PyTorch would cudaFree the middle of a segment here; no trace has shown it.
                return false;
            }
            self.release_block(device, idx);
            return true;
        }
        let oversize: Vec<usize> = set
            .range(..FreeKey::at_least(wanted))
            .rev()
            .take_while(|k| k.size >= max_split)
            .map(|k| k.idx)
            .collect();
        let mut released = 0;
        for idx in oversize {
            if released >= wanted {
                break;
            }
            if self.nodes[idx].is_split() {
                return false;
            }
            released += self.nodes[idx].size;
            self.release_block(device, idx);
        }
        released >= wanted
    }

    /// `release_cached_blocks`: synchronises every stream (finishing every pending free), then
    /// releases every unsplit cached segment and unmaps every free page.
    fn release_cached_blocks(&mut self, device: &mut dyn DeviceMemory) {
        self.stats.syncs += 1;
        // Every slot let go of holds a free node (see `Caching::node_of`).
        let mut pending: Vec<usize> = self
            .nodes
            .every_slot()
            .filter(|&(_, n)| n.state == State::Pending)
            .map(|(i, _)| i)
            .collect();
        pending.sort_unstable_by_key(|&i| self.nodes[i].addr);
        for idx in pending {
            let block = Block {
                addr: self.nodes[idx].addr,
                size: self.nodes[idx].size,
            };
            self.finished.push(block);
            self.free_block(idx);
        }
        self.release_free_segments(device, false);
    }

    /// `release_blocks` on the default pools (large, then small) and then on every private pool
    /// whose owner let go of it (small, then large; `everything`: every private pool): every
    /// unsplit cached segment back to the device, every whole free page of an expandable
    /// segment unmapped.
    fn release_free_segments(&mut self, device: &mut dyn DeviceMemory, everything: bool) {
        let mut order = vec![Self::slot(0, Pool::Large), Self::slot(0, Pool::Small)];
        for owner in 1..self.freeable.len() as u32 {
            if everything || self.freeable[owner as usize] {
                order.extend([Self::slot(owner, Pool::Small), Self::slot(owner, Pool::Large)]);
            }
        }
        for pool in order {
            let cached: Vec<usize> = self.pools[pool].blocks.iter().map(|(_, k)| k.idx).collect();
            let mut to_unmap = Vec::new();
            for idx in cached {
                if self.nodes[idx].segment.is_some() {
                    to_unmap.push(idx);
                } else if !self.nodes[idx].is_split() {
                    self.release_block(device, idx);
                }
            }
            for idx in to_unmap {
                self.unmap_free_block(device, idx);
            }
        }
    }

    /// `unmap_block`: unmaps the whole pages inside free block `idx` of an expandable segment,
    /// and gives back the segment's address range once nothing of it is mapped.
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
        self.total -= stop - begin;
        self.stats.reserved.sub(stop - begin);
        self.stats.device_frees += 1;
        if self.nodes[middle].is_split() {
            self.insert_unmapped(middle);
        } else {
            let whole = &self.segments[segment];
            device.release(whole.base, whole.size);
            self.release_node(middle);
        }
    }

    /// `free_block`: caches a block whose work has finished, merging it with free neighbours.
    fn free_block(&mut self, idx: usize) {
        let (size, requested) = (self.nodes[idx].size, self.nodes[idx].requested);
        self.nodes[idx].state = State::Free;
        let (prev, next) = (self.nodes[idx].prev, self.nodes[idx].next);
        let mut inactive_change: i128 = 0;
        // The first free neighbour's place in the free set, which the merged block takes.
        let mut place = None;
        for neighbour in [prev, next] {
            let subsumed = self.try_merge_keeping(idx, neighbour, Some(&mut place));
            if subsumed > 0 {
                inactive_change -= i128::from(subsumed);
            }
        }
        match place {
            Some(whole) => self.replace_free(whole, idx),
            None => self.insert_free(idx),
        }
        if self.nodes[idx].is_split() {
            inactive_change += i128::from(self.nodes[idx].size);
        }
        if self.nodes[idx].segment.is_none() {
            if inactive_change > 0 {
                self.stats.inactive_split.add(inactive_change as u64);
            } else {
                self.stats.inactive_split.sub((-inactive_change) as u64);
            }
        }
        self.stats.active.sub(size);
        self.stats.requested.sub(requested);
    }

    /// PyTorch's `free`: the block stops counting as allocated.
    fn release_request(&mut self, idx: usize) {
        self.nodes[idx].state = State::Pending;
        self.stats.allocated.sub(self.nodes[idx].size);
    }

    /// The node of a block handed out (allocated, or let go of and pending): the one `handle`
    /// names, where it is that block, else the one at its address (a caller without the handle).
    /// Handed-out blocks lie at different addresses, and a node whose slot is let go of is
    /// free (only cached nodes are merged away or released), so the scan finds the same node
    /// a map by address would.
    fn node_of(&self, block: Block, handle: u32) -> Option<usize> {
        let handed_out = |n: &Node| n.addr == block.addr && n.state != State::Free;
        let at = handle as usize;
        if handle != NO_HANDLE && at < self.nodes.len() && handed_out(&self.nodes[at]) {
            return Some(at);
        }
        self.nodes.every_slot().find(|(_, n)| handed_out(n)).map(|(i, _)| i)
    }

    /// Every node in use, by address: the segments' first blocks by address, each followed by
    /// the blocks after it (a segment's blocks lie one after another, and segments do not
    /// overlap), instead of a sort of every node. Sorted where a node lies in no chain of them
    /// (none should).
    fn nodes_by_address(&self) -> Vec<usize> {
        let in_use: Vec<usize> = self.nodes.in_use().collect();
        let mut heads: Vec<usize> = in_use
            .iter()
            .copied()
            .filter(|&idx| self.nodes[idx].prev.is_none())
            .collect();
        heads.sort_unstable_by_key(|&idx| self.nodes[idx].addr);
        let mut order = Vec::with_capacity(in_use.len());
        for head in heads {
            let mut cursor = Some(head);
            while let Some(idx) = cursor.filter(|_| order.len() <= in_use.len()) {
                order.push(idx);
                cursor = self.nodes[idx].next;
            }
        }
        if order.len() != in_use.len() {
            let mut order = in_use;
            order.sort_unstable_by_key(|&idx| self.nodes[idx].addr);
            return order;
        }
        debug_assert!(order
            .windows(2)
            .all(|pair| self.nodes[pair[0]].addr < self.nodes[pair[1]].addr));
        order
    }

    fn out_of_memory(&mut self, request: u64, size: u64) -> AllocError {
        self.stats.ooms += 1;
        let limit = match self.allowed {
            Some(allowed) => format!(
                "the cap of {} ({} held)",
                format_bytes(allowed),
                format_bytes(self.total)
            ),
            None => "the device".to_string(),
        };
        let largest = |pool: Pool| {
            self.pools[Self::slot(self.current, pool)]
                .blocks
                .iter()
                .map(|(_, k)| k.size)
                .max()
                .unwrap_or(0)
        };
        let cached = self.total - self.stats.allocated.current;
        AllocError(format!(
            "{} requested ({} rounded, {} from the device) is refused by {limit} even after the cache was released; \
             then {} reserved, {} allocated, {} cached but unallocated, largest free block {} (large pool) / {} (small pool), {:.0}% of the cached bytes outside the largest",
            format_bytes(request),
            format_bytes(size),
            format_bytes(self.allocation_size(size)),
            format_bytes(self.total),
            format_bytes(self.stats.allocated.current),
            format_bytes(cached),
            format_bytes(largest(Pool::Large)),
            format_bytes(largest(Pool::Small)),
            self.free_space().fragmentation() * 100.0
        ))
    }
}

/// The handle of node `idx` ([`NO_HANDLE`] past what a handle can name).
fn handle_of(idx: usize) -> u32 {
    u32::try_from(idx).ok().filter(|&h| h != NO_HANDLE).unwrap_or(NO_HANDLE)
}

/// `garbage_collect_cached_blocks`'s threshold under `allowed`, as PyTorch computes it
/// (`fraction * allowed` in floating point, truncated): never smaller for a larger `allowed`.
fn gc_threshold(fraction: f64, allowed: u64) -> u64 {
    (fraction * allowed as f64) as u64
}

/// The smallest limit whose garbage-collection threshold is at least `bytes` (searched
/// exactly around the estimate, the threshold never shrinking as the limit grows).
fn least_limit_with_threshold(fraction: f64, bytes: u64) -> u64 {
    if bytes == 0 {
        return 0;
    }
    let mut limit = (bytes as f64 / fraction).ceil() as u64;
    while limit > 0 && gc_threshold(fraction, limit - 1) >= bytes {
        limit -= 1;
    }
    while gc_threshold(fraction, limit) < bytes {
        limit += 1;
    }
    limit
}

impl Policy for Caching {
    fn allocate(&mut self, device: &mut dyn DeviceMemory, request: u64, stream: u64) -> Result<Block, AllocError> {
        self.allocate_handled(device, request, stream).map(|(block, _)| block)
    }

    fn allocate_handled(
        &mut self,
        device: &mut dyn DeviceMemory,
        request: u64,
        stream: u64,
    ) -> Result<(Block, u32), AllocError> {
        let size = self.round_size(request);
        let pool = if size <= SMALL_SIZE { Pool::Small } else { Pool::Large };
        let mut found = self.get_free_block(pool, stream, size);
        let cached = found.is_some();
        if found.is_none() {
            if self.conf.garbage_collection_threshold > 0.0 {
                let least = self.least_limit_collecting_nothing();
                self.limit_needed = self.limit_needed.max(least);
                match self.allowed {
                    // Collection does nothing under `allowed`: nor under any limit from `least` up.
                    Some(allowed) if allowed >= least => self.alike.from = self.alike.from.max(least),
                    // What it frees depends on the limit: alike under the limits it reports.
                    Some(allowed) => {
                        let collected = self.garbage_collect(device);
                        debug_assert!(collected.contains(allowed), "{collected:?} {allowed}");
                        self.alike = self.alike.and(collected);
                    }
                    None => {}
                }
            }
            found = self
                .alloc_block(device, pool, stream, size, false)
                .or_else(|| {
                    self.release_available(device, pool, stream, size)
                        .then(|| self.alloc_block(device, pool, stream, size, false))
                        .flatten()
                })
                .or_else(|| {
                    self.release_cached_blocks(device);
                    self.alloc_block(device, pool, stream, size, true)
                });
        }
        let Some(idx) = found else {
            return Err(self.out_of_memory(request, size));
        };
        let already_split = self.nodes[idx].is_split();
        let expandable = self.nodes[idx].segment.is_some();
        let remaining = self.nodes[idx].size - size;
        let split = if pool == Pool::Small || self.conf.expandable_segments {
            remaining >= MIN_BLOCK
        } else {
            size < self.conf.max_split_size && remaining > SMALL_SIZE
        };
        if split {
            let whole = cached.then(|| self.free_key(idx));
            let rest = self.split_off(idx, size, true);
            match whole {
                Some(whole) => self.replace_free(whole, rest),
                None => self.insert_free(rest),
            }
            self.splits += 1;
            if !expandable {
                if already_split {
                    self.stats.inactive_split.sub(size);
                } else {
                    self.stats.inactive_split.add(self.nodes[rest].size);
                }
            }
        } else {
            if cached {
                self.remove_free(idx);
            }
            if already_split && !expandable {
                self.stats.inactive_split.sub(self.nodes[idx].size);
            }
        }
        let node = &mut self.nodes[idx];
        node.state = State::Allocated;
        node.requested = request;
        let block = Block {
            addr: node.addr,
            size: node.size,
        };
        self.stats.allocated.add(block.size);
        self.stats.active.add(block.size);
        self.stats.requested.add(request);
        Ok((block, handle_of(idx)))
    }

    fn free_requested(&mut self, device: &mut dyn DeviceMemory, block: Block) {
        self.free_requested_handled(device, block, NO_HANDLE);
    }

    fn free_requested_handled(&mut self, _device: &mut dyn DeviceMemory, block: Block, handle: u32) {
        if let Some(idx) = self.node_of(block, handle) {
            if self.nodes[idx].state == State::Allocated {
                self.release_request(idx);
            }
        }
    }

    fn free(&mut self, device: &mut dyn DeviceMemory, block: Block) {
        self.free_handled(device, block, NO_HANDLE);
    }

    fn free_handled(&mut self, _device: &mut dyn DeviceMemory, block: Block, handle: u32) {
        let idx = self.node_of(block, handle).expect("freed block was handed out");
        if self.nodes[idx].state == State::Allocated {
            self.release_request(idx);
        }
        self.free_block(idx);
    }

    fn free_space(&self) -> FreeSpace {
        let largest = self
            .pools
            .iter()
            .filter_map(|pool| pool.blocks.iter().map(|(_, key)| key.size).max())
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
        // The cache given back after the trace, every pool's: no stream to synchronise,
        // nothing counted.
        self.release_free_segments(device, true);
    }

    fn empty_cache(&mut self, device: &mut dyn DeviceMemory) {
        self.release_cached_blocks(device);
    }

    fn select_pool(&mut self, pool: u32) {
        self.ensure_family(pool);
        self.current = pool;
    }

    fn release_pool(&mut self, pool: u32) {
        self.ensure_family(pool);
        self.freeable[pool as usize] = true;
    }

    fn adopt(&mut self, device: &mut dyn DeviceMemory, start: &StartState) -> Result<Vec<Adopted>, AllocError> {
        self.adopt_start(device, start)
    }

    fn drain_finished(&mut self) -> Vec<Block> {
        std::mem::take(&mut self.finished)
    }

    fn may_have_finished(&self) -> bool {
        !self.finished.is_empty()
    }

    fn limit_memory(&mut self, capacity: u64) -> bool {
        self.allowed = Some(capacity);
        true
    }

    fn resumable_copy(&self) -> Option<Box<dyn Policy>> {
        Some(Box::new(self.clone()))
    }

    fn limit_needed(&self) -> u64 {
        self.limit_needed
    }

    fn take_alike_limits(&mut self) -> Option<AlikeLimits> {
        Some(std::mem::replace(&mut self.alike, AlikeLimits::ANY))
    }

    fn canonical_state(&self, tag: &mut dyn FnMut(u64) -> Option<u64>, out: &mut Vec<u64>) -> bool {
        if !self.finished.is_empty() {
            return false;
        }
        let order = self.nodes_by_address();
        out.extend([self.total, self.free_bytes, u64::from(self.current), order.len() as u64]);
        out.extend(self.freeable.iter().map(|&freeable| u64::from(freeable)));
        for idx in order {
            let n = &self.nodes[idx];
            let state = match n.state {
                State::Free => 0,
                State::Allocated => 1,
                State::Pending => 2,
            };
            let flags = state
                | (n.pool as u64) << 2
                | u64::from(n.mapped) << 3
                | u64::from(n.prev.is_none()) << 4
                | u64::from(n.next.is_none()) << 5
                | u64::from(n.owner) << 8;
            out.extend([flags, n.size, n.stream]);
            if n.state == State::Free {
                // The age only of a block garbage collection may read (its counts are read
                // only as ages).
                let collectable = self.conf.garbage_collection_threshold > 0.0
                    && n.owner == 0
                    && n.pool == Pool::Large
                    && !n.is_split()
                    && n.segment.is_none();
                if collectable {
                    let calls = self.pools[self.pool_of(idx)].free_block_calls;
                    out.push(calls.wrapping_sub(n.gc_base));
                }
            } else {
                let Some(tag) = tag(n.addr) else { return false };
                out.extend([tag, n.requested]);
            }
            if let Some(segment) = n.segment {
                let segment = &self.segments[segment];
                out.extend([n.addr - segment.base, segment.size, segment.page]);
            }
        }
        true
    }

    fn reset_peak_stats(&mut self) {
        // CUDACachingAllocator.cpp, resetPeakStats: every stat's peak becomes its current value.
        let s = &mut self.stats;
        for stat in [
            &mut s.allocated,
            &mut s.reserved,
            &mut s.active,
            &mut s.requested,
            &mut s.inactive_split,
            &mut s.segments,
        ] {
            stat.peak = stat.current;
        }
    }

    fn pytorch_stats(&self) -> Option<PytorchStats> {
        let s = &self.stats;
        Some(PytorchStats {
            allocated_peak: s.allocated.peak,
            allocated_current: s.allocated.current,
            reserved_peak: s.reserved.peak,
            reserved_current: s.reserved.current,
            active_peak: s.active.peak,
            requested_peak: s.requested.peak,
            inactive_split_peak: s.inactive_split.peak,
            segment_peak: s.segments.peak,
            num_alloc_retries: s.retries,
            num_ooms: s.ooms,
            num_sync_all_streams: s.syncs,
            num_device_alloc: s.device_allocs,
            num_device_free: s.device_frees,
        })
    }

    fn segments(&self) -> Vec<SegmentView> {
        // A segment starts at a mapped block with no mapped block before it (PyTorch reports
        // each mapped range of an expandable segment as a segment of its own).
        let mut out: Vec<SegmentView> = self
            .nodes
            .in_use()
            .filter(|&i| {
                let n = &self.nodes[i];
                n.mapped && n.prev.is_none_or(|p| !self.nodes[p].mapped)
            })
            .map(|head| {
                let mut blocks = Vec::new();
                let mut cursor = Some(head);
                while let Some(i) = cursor.filter(|&i| self.nodes[i].mapped) {
                    let n = &self.nodes[i];
                    let (state, requested) = match n.state {
                        State::Allocated => ("active_allocated", n.requested),
                        State::Pending => ("active_pending_free", n.requested),
                        State::Free => ("inactive", 0),
                    };
                    blocks.push(BlockView {
                        address: n.addr,
                        size: n.size,
                        requested_size: requested,
                        state: state.to_string(),
                    });
                    cursor = n.next;
                }
                let n = &self.nodes[head];
                SegmentView {
                    address: n.addr,
                    pool: n.owner,
                    stream: n.stream,
                    is_large: n.pool == Pool::Large,
                    is_expandable: n.segment.is_some(),
                    blocks,
                }
            })
            .collect();
        out.sort_by_key(|s| s.address);
        out
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("splits", self.splits),
            ("merges", self.merges),
            ("oom_cache_flushes", self.stats.syncs),
            ("gc_releases", self.gc_releases),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rounded(conf: &str, size: u64) -> u64 {
        Caching::new(AllocConf::parse(conf).unwrap(), 2 << 20).round_size(size)
    }

    #[test]
    fn rounding_follows_pytorch() {
        assert_eq!(rounded("", 1), 512);
        assert_eq!(rounded("", 1000), 1024);
        // PyTorch's own example: 1200 with 4 divisions rounds to 1280 (1024 + 256) -- but only
        // above 512 x 4 = 2048 bytes; below that the plain 512-byte rounding holds.
        assert_eq!(rounded("roundup_power2_divisions:4", 1200), 1536);
        assert_eq!(rounded("roundup_power2_divisions:4", 5000), 5120);
        assert_eq!(rounded("roundup_power2_divisions:4", 5 << 20), 5 << 20);
        assert_eq!(rounded("roundup_power2_divisions:4", (5 << 20) + 1), 6 << 20);
        assert_eq!(rounded("roundup_power2_divisions:4", (1 << 20) + 1), 1_310_720);
        assert_eq!(rounded("roundup_power2_divisions:1", (1 << 20) + 1), (1 << 20) + 512);
    }

    /// What a garbage collection reports alike (issue 39): under every limit within it, a
    /// collection from the same state frees the same blocks, and the limit it ran under lies
    /// within it. Caches of unsplit blocks of many sizes and ages, collected under limits that
    /// run one round, several, or stop for want of blocks to free.
    #[test]
    fn collections_alike_under_the_limits_they_report() {
        use crate::SimDevice;
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let (mut collections, mut inside, mut ranges) = (0, 0, 0);
        for (round, conf) in [
            "garbage_collection_threshold:0.6",
            "garbage_collection_threshold:0.8,max_split_size_mb:128",
        ]
        .iter()
        .cycle()
        .take(24)
        .enumerate()
        {
            let mut policy = Caching::new(AllocConf::parse(conf).unwrap(), 2 << 20);
            let mut device = SimDevice::new(1 << 40);
            // Blocks of many sizes, freed in a shuffled order between requests that hit or
            // miss the cache, so that the cached blocks' ages differ.
            let mut live: Vec<Block> = Vec::new();
            for _ in 0..(40 + round * 8) {
                let size = ((next() % 96) + 2) << 20;
                live.push(policy.allocate(&mut device, size, 0).unwrap());
                if next() % 3 == 0 && !live.len().is_multiple_of(5) {
                    let at = (next() as usize) % live.len();
                    let block = live.swap_remove(at);
                    policy.free_requested(&mut device, block);
                    policy.free(&mut device, block);
                }
            }
            let (total, fraction) = (policy.total, policy.conf.garbage_collection_threshold);
            let collected = |allowed: u64| {
                let (mut policy, mut device) = (policy.clone(), device.clone());
                policy.limit_memory(allowed);
                let alike = policy.garbage_collect(&mut device);
                let cached: Vec<(u64, u64, u64, usize)> = policy
                    .pools
                    .iter()
                    .flat_map(|p| p.blocks.iter().map(|(stream, k)| (stream, k.size, k.addr, k.idx)))
                    .collect();
                (alike, policy.total, cached)
            };
            // Limits from well below what would collect everything to past what collects nothing.
            let (low, high) = (
                (total as f64 * 0.5) as u64,
                (total as f64 / fraction) as u64 + (64 << 20),
            );
            let mut allowed = low;
            while allowed < high {
                let (alike, held, cached) = collected(allowed);
                assert!(alike.contains(allowed), "{alike:?} {allowed}");
                collections += usize::from(held < total);
                ranges += 1;
                // Every limit within what it reported, the ends first, frees the same blocks.
                let ends = [alike.from, alike.below.saturating_sub(1).min(high * 2)];
                let inner = (0..4).map(|_| alike.from + next() % (ends[1] - alike.from + 1));
                for other in ends.into_iter().chain(inner) {
                    let (_, other_held, other_cached) = collected(other);
                    assert_eq!(
                        (other_held, &other_cached),
                        (held, &cached),
                        "{conf}: {allowed} and {other} within {alike:?}"
                    );
                    inside += 1;
                }
                allowed += (next() % (96 << 20)) + 1;
            }
        }
        assert!(
            collections > 100 && ranges > collections && inside > 500,
            "{collections} {ranges} {inside}"
        );
    }
}
