//! What the allocator held when a snapshot's trace began, rebuilt from the snapshot's final
//! `segments` and the trace itself.
//!
//! A snapshot keeps its last `max_entries` events, and its `segments` describe the state at the
//! end. Together they fix the state when the window opened:
//!
//! - the segments that existed then are the final ones, less those the trace allocated or
//!   mapped, plus those it freed or unmapped (the device operations undone from the end);
//! - the blocks live then are those the trace frees without having allocated them, and the
//!   final live blocks it never allocated;
//! - everything else in a segment is free, and free neighbours are one block (PyTorch merges
//!   them once their streams are done).
//!
//! A live block's size is its request rounded by the recorded settings (`round_size`), plus
//! the tail a large-pool block keeps when the rest was too small to split off (at most 1 MiB:
//! in the large pool every free block is larger than that, so a shorter gap before the next
//! block is the tail). What the snapshot does not determine is said in [`StartState::unknowns`].

use std::collections::{BTreeMap, HashSet};

use serde::{Deserialize, Serialize};

use super::{DeviceAction, RecordedOp};
use crate::AllocConf;

use crate::pytorch::{MIN_BLOCK_SIZE, SMALL_BUFFER, SMALL_SIZE};
/// How far apart two mapped ranges of one expandable segment may lie: PyTorch reserves the
/// device's memory and an eighth more for each, so 2^38 B covers any device made so far.
const RESERVATION_SPAN: u64 = 1 << 38;

/// A block's state, as PyTorch's snapshot names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BlockState {
    /// Cached (`inactive`).
    Free,
    /// Handed out (`active_allocated`).
    Allocated,
    /// Let go by the program, still in use by a stream (`active_pending_free`).
    Pending,
}

impl BlockState {
    /// The state a snapshot's block `state` string names; `None` for one vramlab does not know.
    pub fn from_snapshot(state: &str) -> Option<BlockState> {
        match state {
            "inactive" => Some(BlockState::Free),
            "active_allocated" => Some(BlockState::Allocated),
            s if s.starts_with("active_pending") || s.starts_with("active_awaiting") => Some(BlockState::Pending),
            _ => None,
        }
    }
}

/// One block of a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartBlock {
    /// Its first byte (the recording's address).
    pub addr: u64,
    /// Its size.
    pub size: u64,
    /// What the program asked for (0 when free).
    pub requested: u64,
    /// Free, allocated or pending.
    pub state: BlockState,
    /// The trace's id for a live block (its later frees name it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<u64>,
    /// Its stream.
    pub stream: u64,
}

/// A segment as PyTorch's snapshot lists one (for an expandable segment, one mapped range).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartSegment {
    /// Its first byte.
    pub addr: u64,
    /// Its size.
    pub size: u64,
    /// The stream its blocks serve.
    pub stream: u64,
    /// Its pool: an index into the trace's `pools` (0: the default pools).
    pub pool: u32,
    /// Large pool (true) or small.
    pub is_large: bool,
    /// A mapped range of an expandable segment.
    pub expandable: bool,
    /// Its blocks, in address order, covering it.
    pub blocks: Vec<StartBlock>,
}

impl StartSegment {
    /// Bytes of its blocks in `state`.
    pub fn bytes_in(&self, state: BlockState) -> u64 {
        self.blocks.iter().filter(|b| b.state == state).map(|b| b.size).sum()
    }
}

/// The address range PyTorch reserved for one expandable segment (one per pool, stream and
/// pool size), as far as the recording shows it: its lowest known address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reservation {
    /// The lowest address known to lie in it.
    pub base: u64,
    /// Its stream.
    pub stream: u64,
    /// Its pool (an index into the trace's `pools`).
    pub pool: u32,
    /// Large pool (true) or small.
    pub is_large: bool,
}

/// The allocator's state when the trace began.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartState {
    /// The segments that existed, with their blocks.
    pub segments: Vec<StartSegment>,
    /// Blocks live at the start whose segment is not known (a trace without final segments,
    /// or a block no known segment holds): a policy places them itself.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub loose: Vec<StartBlock>,
    /// Expandable segments' address ranges.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reservations: Vec<Reservation>,
    /// How many bytes live blocks' sizes may be short by: unsplit tails beside free blocks
    /// that the snapshot does not record (0: every size is determined).
    #[serde(default)]
    pub undetermined_bytes: u64,
    /// Segments whose pool neither the final segments nor the trace tell.
    #[serde(default)]
    pub undetermined_pools: usize,
}

impl StartState {
    /// Bytes held from the device at the start.
    pub fn reserved(&self) -> u64 {
        self.segments.iter().map(|s| s.size).sum()
    }

    /// Bytes of live blocks at the start (those let go of but pending included when `pending`).
    pub fn allocated(&self) -> u64 {
        self.blocks()
            .filter(|b| b.state == BlockState::Allocated)
            .map(|b| b.size)
            .sum()
    }

    /// Every block, segments' and loose.
    pub fn blocks(&self) -> impl Iterator<Item = &StartBlock> {
        self.segments.iter().flat_map(|s| s.blocks.iter()).chain(&self.loose)
    }

    /// Whether the allocator held nothing.
    pub fn is_empty(&self) -> bool {
        self.segments.is_empty() && self.loose.is_empty()
    }
}

/// A segment of a snapshot's final `segments` list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct FinalSegment {
    /// Its first byte.
    pub addr: u64,
    /// Its size.
    pub size: u64,
    /// Its stream.
    pub stream: u64,
    /// `segment_pool_id`; (0, 0) for the default pools.
    pub pool_id: (i64, i64),
    /// `segment_type == "large"`.
    pub is_large: bool,
    /// `is_expandable`.
    pub expandable: bool,
    /// Its blocks: address, size, requested size, state.
    pub blocks: Vec<(u64, u64, u64, BlockState)>,
    /// What the snapshot says the blocks sum to: `allocated_size`, `active_size` and
    /// `requested_size`, where it says them as integers (checked against the blocks, never
    /// used).
    pub summary: [Option<i128>; 3],
}

/// A block the trace frees without having allocated it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Preexisting {
    pub id: u64,
    pub addr: u64,
    pub requested: u64,
    pub stream: u64,
    /// The trace's first word on it is `free_completed` (its request came before the window,
    /// in a trace that records requests).
    pub completed_first: bool,
    /// The trace event of its first free: it is live until then.
    pub freed_at: usize,
}

/// A segment or mapped range while the device operations are undone.
#[derive(Debug, Clone, Copy)]
struct Extent {
    end: u64,
    stream: u64,
    pool: u32,
    is_large: bool,
    /// Its pool was read from the final segments, not assumed.
    pool_known: bool,
    /// Which segment it is: a number given in order of appearance, the same in every pass
    /// over the same operations.
    serial: u32,
}

/// Segments and mapped ranges by first address.
#[derive(Debug, Clone, Default)]
pub(super) struct Extents {
    regular: BTreeMap<u64, Extent>,
    mapped: BTreeMap<u64, Extent>,
    serials: u32,
}

impl Extents {
    fn containing(map: &BTreeMap<u64, Extent>, addr: u64) -> Option<(u64, Extent)> {
        map.range(..=addr)
            .next_back()
            .filter(|(_, e)| addr < e.end)
            .map(|(&a, &e)| (a, e))
    }

    /// The segment or mapped range holding `addr`.
    fn at(&self, addr: u64) -> Option<(u64, Extent, bool)> {
        Self::containing(&self.regular, addr)
            .map(|(a, e)| (a, e, false))
            .or_else(|| Self::containing(&self.mapped, addr).map(|(a, e)| (a, e, true)))
    }

    /// The pool of the memory at `addr`, when a known extent holds it: the pool, whether the
    /// final segments said so, and the segment's serial.
    pub(super) fn pool_at(&self, addr: u64) -> Option<(u32, bool, u32)> {
        self.at(addr).map(|(_, e, _)| (e.pool, e.pool_known, e.serial))
    }

    fn serial(&mut self) -> u32 {
        self.serials += 1;
        self.serials - 1
    }

    /// Takes `[addr, end)` out of the mapped ranges.
    fn unmap(&mut self, addr: u64, end: u64) {
        let overlapping: Vec<(u64, Extent)> = self
            .mapped
            .range(..end)
            .filter(|(&a, e)| e.end > addr && a < end)
            .map(|(&a, &e)| (a, e))
            .collect();
        for (a, e) in overlapping {
            self.mapped.remove(&a);
            if a < addr {
                self.mapped.insert(a, Extent { end: addr, ..e });
            }
            if e.end > end {
                self.mapped.insert(end, e);
            }
        }
    }

    /// The mapped range's neighbour that tells a new range's pool and size class.
    fn near(&self, addr: u64, stream: u64) -> Option<Extent> {
        let before = self
            .mapped
            .range(..addr)
            .next_back()
            .map(|(&a, &e)| (addr - a.min(addr), e));
        let after = self.mapped.range(addr..).next().map(|(&a, &e)| (a - addr, e));
        [before, after]
            .into_iter()
            .flatten()
            .filter(|(distance, e)| *distance < RESERVATION_SPAN && e.stream == stream)
            .min_by_key(|(distance, _)| *distance)
            .map(|(_, e)| e)
    }

    /// Adds `[addr, end)` to the mapped ranges, of the reservation its neighbours lie in.
    fn map(&mut self, addr: u64, end: u64, stream: u64) {
        self.unmap(addr, end);
        let serial = self.serial();
        let like = self.near(addr, stream).unwrap_or(Extent {
            end,
            stream,
            pool: 0,
            is_large: end - addr != SMALL_BUFFER,
            pool_known: false,
            serial,
        });
        self.mapped.insert(addr, Extent { end, stream, ..like });
    }

    /// A segment of `op`'s, in pool `pool` where known.
    fn segment(&mut self, op: &RecordedOp, pool: Option<u32>) -> Extent {
        Extent {
            end: op.addr.saturating_add(op.size),
            stream: op.stream,
            pool: pool.unwrap_or(0),
            is_large: op.size != SMALL_BUFFER,
            pool_known: pool.is_some(),
            serial: self.serial(),
        }
    }

    /// Applies one device operation, forwards; a segment it allocates is in pool `pool` where
    /// known.
    pub(super) fn apply(&mut self, op: &RecordedOp, pool: Option<u32>) {
        let end = op.addr.saturating_add(op.size);
        match op.action {
            DeviceAction::SegmentAlloc => {
                let extent = self.segment(op, pool);
                self.regular.insert(op.addr, extent);
            }
            DeviceAction::SegmentFree => {
                self.regular.remove(&op.addr);
            }
            DeviceAction::SegmentMap => {
                self.map(op.addr, end, op.stream);
                if let Some(pool) = pool {
                    if let Some(extent) = self.mapped.get_mut(&op.addr) {
                        extent.pool = pool;
                        extent.pool_known = true;
                    }
                }
            }
            DeviceAction::SegmentUnmap => self.unmap(op.addr, end),
            DeviceAction::Oom => {}
        }
    }
}

/// What the rebuild found.
pub(super) struct Rebuilt {
    pub start: StartState,
    /// The segments at the start, for following the trace's operations forwards.
    pub extents: Extents,
    /// Private pools' PyTorch ids, in order of first appearance (index 1 onwards).
    pub pools: Vec<(i64, i64)>,
    /// Segments allocated in the window and still there at the end, by the index of the
    /// operation that allocated them: their pool.
    pub final_pools: BTreeMap<usize, u32>,
    /// The start's segments whose pool the final segments do not record: address -> serial.
    pub unknown_serials: BTreeMap<u64, u32>,
    /// What the snapshot does not determine, in plain words.
    pub unknowns: Vec<String>,
}

/// What the trace shows of its window, for the rebuild.
pub(super) struct Window<'a> {
    /// Its device operations, in order.
    pub ops: &'a [RecordedOp],
    /// The blocks it frees without allocating them.
    pub preexisting: &'a [Preexisting],
    /// The addresses it allocated that are still live at its end.
    pub live_at_end: &'a HashSet<u64>,
    /// Each allocation's event and address.
    pub allocations: &'a [(usize, u64)],
    /// Whether it records free requests apart from completions.
    pub requests_recorded: bool,
    /// The first id free for blocks it never names.
    pub next_id: u64,
}

/// Rebuilds the starting state from the final segments and what the trace shows of its window,
/// under the recorded settings.
pub(super) fn rebuild(finals: &[FinalSegment], window: Window<'_>, conf: &AllocConf) -> Rebuilt {
    let Window {
        ops,
        preexisting,
        live_at_end,
        allocations,
        requests_recorded,
        mut next_id,
    } = window;
    let mut unknowns = Vec::new();
    let mut pools: Vec<(i64, i64)> = Vec::new();
    let mut pool_index = |id: (i64, i64)| -> u32 {
        if id == (0, 0) {
            return 0;
        }
        match pools.iter().position(|&p| p == id) {
            Some(i) => i as u32 + 1,
            None => {
                pools.push(id);
                pools.len() as u32
            }
        }
    };
    // The state at the end, then every device operation undone, last first.
    let mut extents = Extents::default();
    for segment in finals {
        let extent = Extent {
            end: segment.addr + segment.size,
            stream: segment.stream,
            pool: pool_index(segment.pool_id),
            is_large: segment.is_large,
            pool_known: true,
            serial: 0,
        };
        if segment.expandable {
            extents.mapped.insert(segment.addr, extent);
        } else {
            extents.regular.insert(segment.addr, extent);
        }
    }
    let final_extents = extents.clone();
    let mut inconsistent = 0usize;
    let mut unknown_pool_bytes = (0usize, 0u64);
    for op in ops.iter().rev() {
        let end = op.addr.saturating_add(op.size);
        match op.action {
            DeviceAction::SegmentAlloc => {
                if extents.regular.remove(&op.addr).is_none() {
                    inconsistent += 1;
                }
            }
            DeviceAction::SegmentFree => {
                let extent = extents.segment(op, None);
                extents.regular.insert(op.addr, extent);
            }
            DeviceAction::SegmentMap => extents.unmap(op.addr, end),
            DeviceAction::SegmentUnmap => extents.map(op.addr, end, op.stream),
            DeviceAction::Oom => {}
        }
    }
    if inconsistent > 0 {
        unknowns.push(format!(
            "{inconsistent} segment allocations in the trace are neither among the final segments nor freed later in it: the final segments and the trace disagree"
        ));
    }
    // Segments allocated in the window and still there at the end (no later free of the same
    // address) keep their final pool.
    let mut final_pools: BTreeMap<usize, u32> = BTreeMap::new();
    let mut freed_later: HashSet<u64> = HashSet::new();
    // Likewise pages mapped in the window that lie in a final expandable segment keep its pool
    // (an expandable segment serves one pool for its life; without this, the allocations in a
    // private pool's expandable segments were replayed in the default pools).
    for (i, op) in ops.iter().enumerate().rev() {
        let end = op.addr.saturating_add(op.size);
        match op.action {
            DeviceAction::SegmentFree => {
                freed_later.insert(op.addr);
            }
            DeviceAction::SegmentAlloc if !freed_later.contains(&op.addr) => {
                if let Some(e) = final_extents.regular.get(&op.addr) {
                    final_pools.insert(i, e.pool);
                }
            }
            DeviceAction::SegmentMap => {
                if let Some((_, e)) = Extents::containing(&final_extents.mapped, op.addr).filter(|(_, e)| e.end >= end)
                {
                    final_pools.insert(i, e.pool);
                }
            }
            _ => {}
        }
    }
    // Serials of the start's segments count from here, the same in every later pass.
    let mut numbered = Extents {
        serials: 0,
        ..Extents::default()
    };
    for (map, into) in [(&extents.regular, false), (&extents.mapped, true)] {
        for (&a, &e) in map {
            let e = Extent {
                serial: numbered.serial(),
                ..e
            };
            if into {
                numbered.mapped.insert(a, e);
            } else {
                numbered.regular.insert(a, e);
            }
        }
    }
    let mut extents = numbered;
    // Mapped ranges that touch are one segment (PyTorch reports each contiguous mapped run).
    let mut merged: BTreeMap<u64, Extent> = BTreeMap::new();
    for (addr, e) in std::mem::take(&mut extents.mapped) {
        match merged.last_entry() {
            Some(mut last)
                if last.get().end == addr
                    && (last.get().stream, last.get().pool, last.get().is_large) == (e.stream, e.pool, e.is_large) =>
            {
                last.get_mut().end = e.end;
                last.get_mut().pool_known &= e.pool_known;
            }
            _ => {
                merged.insert(addr, e);
            }
        }
    }
    extents.mapped = merged;

    // Live blocks at the start, by the segment that holds them.
    let mut unknown_serials = BTreeMap::new();
    let mut segments: Vec<StartSegment> = extents
        .regular
        .iter()
        .map(|(&a, e)| (a, e, false))
        .chain(extents.mapped.iter().map(|(&a, e)| (a, e, true)))
        .map(|(addr, e, expandable)| {
            if !e.pool_known {
                unknown_pool_bytes.0 += 1;
                unknown_pool_bytes.1 += e.end - addr;
                unknown_serials.insert(addr, e.serial);
            }
            StartSegment {
                addr,
                size: e.end - addr,
                stream: e.stream,
                pool: e.pool,
                is_large: e.is_large,
                expandable,
                blocks: Vec::new(),
            }
        })
        .collect();
    segments.sort_by_key(|s| s.addr);
    let holder = |segments: &[StartSegment], addr: u64| -> Option<usize> {
        let i = segments.partition_point(|s| s.addr <= addr).checked_sub(1)?;
        (addr < segments[i].addr + segments[i].size).then_some(i)
    };
    let mut loose = Vec::new();
    // (segment, block) with its size when the final state gives it.
    let mut live: Vec<(usize, StartBlock, bool)> = Vec::new();
    for p in preexisting {
        let state = if p.completed_first && requests_recorded {
            BlockState::Pending
        } else {
            BlockState::Allocated
        };
        let block = StartBlock {
            addr: p.addr,
            size: conf.round_size(p.requested),
            requested: p.requested,
            state,
            id: Some(p.id),
            stream: p.stream,
        };
        match holder(&segments, p.addr) {
            Some(i) => live.push((i, block, false)),
            None => loose.push(block),
        }
    }
    let freed_before_end: HashSet<u64> = preexisting.iter().map(|p| p.addr).collect();
    let mut misplaced = 0usize;
    for segment in finals {
        for &(addr, size, requested, state) in &segment.blocks {
            if state == BlockState::Free || live_at_end.contains(&addr) || freed_before_end.contains(&addr) {
                continue;
            }
            // Live at the end, never allocated in the window: live all along.
            let block = StartBlock {
                addr,
                size,
                requested,
                state,
                id: Some(next_id),
                stream: segment.stream,
            };
            next_id += 1;
            match holder(&segments, addr) {
                Some(i) => live.push((i, block, true)),
                None => {
                    misplaced += 1;
                    loose.push(block);
                }
            }
        }
    }
    if misplaced > 0 {
        unknowns.push(format!(
            "{misplaced} blocks live at the end were never allocated in the trace, yet lie in segments it allocated: the final segments and the trace disagree"
        ));
    }
    if !loose.is_empty() && !finals.is_empty() {
        unknowns.push(format!(
            "{} blocks freed in the trace but allocated before it lie in no segment the snapshot shows at the start: they are placed by the replay itself",
            loose.len()
        ));
    }
    live.sort_by_key(|(i, b, _)| (*i, b.addr));
    // The first event at which the trace allocated at each address: a free block is always
    // handed out from its start, so the lowest address allocated after a live block, while it
    // lived, is where the free block after it began.
    let mut first_allocated: BTreeMap<u64, usize> = BTreeMap::new();
    if !live.is_empty() {
        for &(at, addr) in allocations {
            first_allocated.entry(addr).or_insert(at);
        }
    }
    let freed_at: BTreeMap<u64, usize> = preexisting.iter().map(|p| (p.addr, p.freed_at)).collect();
    let (mut undetermined, mut undetermined_bytes) = (0usize, 0u64);
    let mut overlaps = 0usize;
    for (k, &(i, block, exact)) in live.iter().enumerate() {
        let segment = &segments[i];
        let boundary = live
            .get(k + 1)
            .filter(|(j, _, _)| *j == i)
            .map_or(segment.addr + segment.size, |(_, next, _)| next.addr);
        let mut block = block;
        if !exact {
            let rounded_end = block.addr.saturating_add(block.size);
            if rounded_end > boundary {
                overlaps += 1;
                block.size = boundary - block.addr;
                // PyTorch's counters keep the requested bytes within the allocated ones: a
                // block cut short by the next is taken as requesting no more than it holds.
                block.requested = block.requested.min(block.size);
            } else if segment.is_large && !segment.expandable && boundary > rounded_end {
                // The large pool splits off only a rest of more than 1 MiB (and never splits a
                // block of max_split_size or more, which keeps a tail under
                // max_non_split_rounding): every free block there is larger than 1 MiB, so a gap
                // of at most 1 MiB is this block's own tail. A longer one is a tail and a free
                // block, told apart by where the trace allocated next to the block while it
                // lived; where it never did, the tail is not recorded.
                let gap = boundary - rounded_end;
                let oversize = block.size >= conf.max_split_size;
                let longest_tail = if oversize {
                    conf.max_non_split_rounding.saturating_sub(1)
                } else {
                    SMALL_SIZE
                };
                let lived_until = freed_at.get(&block.addr).copied().unwrap_or(usize::MAX);
                let next_start = first_allocated
                    .range(rounded_end..boundary)
                    .find(|(_, &at)| at < lived_until)
                    .map(|(&addr, _)| addr);
                match next_start {
                    Some(start) if start - rounded_end <= longest_tail => block.size += start - rounded_end,
                    _ if gap <= SMALL_SIZE => block.size += gap,
                    _ => {
                        // A tail of t and a free block of more than 1 MiB: t is below both the
                        // longest tail and the gap less 1 MiB.
                        let most = longest_tail.min(gap - SMALL_SIZE - MIN_BLOCK_SIZE);
                        if oversize && gap <= longest_tail {
                            block.size += gap;
                        }
                        undetermined += 1;
                        undetermined_bytes += most;
                    }
                }
            }
        }
        segments[i].blocks.push(block);
    }
    if overlaps > 0 {
        unknowns.push(format!(
            "{overlaps} blocks live at the start would overlap the next one at their rounded size: the recorded settings are not those the snapshot names (each is cut short at the next, and its requested bytes, which its free names, to what it holds)"
        ));
    }
    if undetermined > 0 {
        unknowns.push(format!(
            "{undetermined} large blocks live at the start may keep an unsplit tail the snapshot does not record (it lies beside a free block): they are replayed at their rounded size, so the allocated bytes before they are freed may be up to {undetermined_bytes} B more"
        ));
    }
    // The free space between live blocks: one block per gap.
    for segment in &mut segments {
        let mut blocks = Vec::with_capacity(segment.blocks.len() * 2 + 1);
        let mut cursor = segment.addr;
        for block in std::mem::take(&mut segment.blocks) {
            if block.addr > cursor {
                blocks.push(free_block(cursor, block.addr - cursor, segment.stream));
            }
            cursor = block.addr + block.size;
            blocks.push(block);
        }
        let end = segment.addr + segment.size;
        if cursor < end {
            blocks.push(free_block(cursor, end - cursor, segment.stream));
        }
        segment.blocks = blocks;
    }
    if unknown_pool_bytes.0 > 0 && !pools.is_empty() {
        unknowns.push(format!(
            "{} segments ({} B) existed at the start but not at the end: their pool is not recorded (how it is told is said below)",
            unknown_pool_bytes.0, unknown_pool_bytes.1
        ));
    }
    let reservations = reservations_of(&segments, ops);
    Rebuilt {
        start: StartState {
            segments,
            loose,
            reservations,
            undetermined_bytes,
            undetermined_pools: 0,
        },
        extents,
        pools,
        final_pools,
        unknown_serials,
        unknowns,
    }
}

fn free_block(addr: u64, size: u64, stream: u64) -> StartBlock {
    StartBlock {
        addr,
        size,
        requested: 0,
        state: BlockState::Free,
        id: None,
        stream,
    }
}

/// One reservation per (pool, stream, size class) of the expandable ranges at the start, based
/// at the lowest address known to lie in it (the start's ranges and the trace's mappings).
fn reservations_of(segments: &[StartSegment], ops: &[RecordedOp]) -> Vec<Reservation> {
    let mut out: Vec<Reservation> = Vec::new();
    for segment in segments.iter().filter(|s| s.expandable) {
        match out
            .iter_mut()
            .find(|r| (r.pool, r.stream, r.is_large) == (segment.pool, segment.stream, segment.is_large))
        {
            Some(r) => r.base = r.base.min(segment.addr),
            None => out.push(Reservation {
                base: segment.addr,
                stream: segment.stream,
                pool: segment.pool,
                is_large: segment.is_large,
            }),
        }
    }
    for op in ops
        .iter()
        .filter(|op| matches!(op.action, DeviceAction::SegmentMap | DeviceAction::SegmentUnmap))
    {
        // A mapping at or above a reservation's base lies in the highest such reservation; only
        // one below every reservation of its stream, and near one, moves that one's base down.
        let inside = out.iter().any(|r| r.stream == op.stream && r.base <= op.addr);
        if inside {
            continue;
        }
        if let Some(r) = out
            .iter_mut()
            .filter(|r| r.stream == op.stream && op.addr < r.base && r.base - op.addr < RESERVATION_SPAN)
            .min_by_key(|r| r.base - op.addr)
        {
            r.base = op.addr;
        }
    }
    out
}
