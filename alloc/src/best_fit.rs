//! A coalescing best-fit suballocator over one pool that grows by whole device segments.

use std::collections::{BTreeMap, BTreeSet};

use rustc_hash::FxHashMap as HashMap;

use experiments::format_bytes;

use super::slots::Slots;
use super::{round_up, AllocError, Block, DeviceMemory, FreeSpace, Policy};

const SEGMENT_ROUND: u64 = 2 << 20;

/// A block of a segment, linked to its neighbours in address order so that a free finds the
/// blocks it merges with without a search.
#[derive(Debug, Clone, Copy)]
struct Node {
    addr: u64,
    size: u64,
    free: bool,
    prev: Option<usize>,
    next: Option<usize>,
}

pub(super) struct BestFit {
    grow_by: u64,
    alignment: u64,
    nodes: Slots<Node>,
    /// Free blocks by (size, address): best fit is the first at or above the request.
    free_set: BTreeSet<(u64, u64, usize)>,
    /// Handed-out blocks by address.
    handed_out: HashMap<u64, usize>,
    /// Segments by base: their size and the node at their start.
    segments: BTreeMap<u64, (u64, usize)>,
    free_total: u64,
    splits: u64,
    merges: u64,
}

impl BestFit {
    pub(super) fn new(grow_by: u64, alignment: u64) -> BestFit {
        BestFit {
            grow_by,
            alignment,
            nodes: Slots::default(),
            free_set: BTreeSet::new(),
            handed_out: HashMap::default(),
            segments: BTreeMap::new(),
            free_total: 0,
            splits: 0,
            merges: 0,
        }
    }

    fn add_node(&mut self, node: Node) -> usize {
        self.nodes.add(node)
    }

    fn insert_free(&mut self, idx: usize) {
        let node = &mut self.nodes[idx];
        node.free = true;
        self.free_set.insert((node.size, node.addr, idx));
        self.free_total += node.size;
    }

    fn remove_free(&mut self, idx: usize) {
        let node = &mut self.nodes[idx];
        node.free = false;
        self.free_set.remove(&(node.size, node.addr, idx));
        self.free_total -= node.size;
    }

    /// Takes free neighbour `other` into `idx` (both out of the free set afterwards but `idx`).
    fn absorb(&mut self, idx: usize, other: Option<usize>) {
        let Some(other) = other.filter(|&o| self.nodes[o].free) else {
            return;
        };
        self.remove_free(other);
        let gone = self.nodes[other];
        let node = &mut self.nodes[idx];
        if gone.addr < node.addr {
            node.addr = gone.addr;
            node.prev = gone.prev;
            if let Some(p) = gone.prev {
                self.nodes[p].next = Some(idx);
            }
        } else {
            node.next = gone.next;
            if let Some(n) = gone.next {
                self.nodes[n].prev = Some(idx);
            }
        }
        self.nodes[idx].size += gone.size;
        if gone.prev.is_none() {
            if let Some(segment) = self.segments.get_mut(&gone.addr) {
                segment.1 = idx;
            }
        }
        self.nodes.release(other);
        self.merges += 1;
    }

    fn grow(&mut self, device: &mut dyn DeviceMemory, size: u64) -> Option<()> {
        let bytes = round_up(size, SEGMENT_ROUND).max(self.grow_by);
        let base = device.allocate(bytes)?;
        let idx = self.add_node(Node {
            addr: base,
            size: bytes,
            free: false,
            prev: None,
            next: None,
        });
        self.segments.insert(base, (bytes, idx));
        self.insert_free(idx);
        Some(())
    }
}

impl Policy for BestFit {
    fn allocate(&mut self, device: &mut dyn DeviceMemory, size: u64, _stream: u64) -> Result<Block, AllocError> {
        let size = round_up(size.max(1), self.alignment);
        let mut fit = self.free_set.range((size, 0, 0)..).next().copied();
        if fit.is_none() {
            let grown = self.grow(device, size).or_else(|| {
                self.release_cached(device);
                self.grow(device, size)
            });
            if grown.is_none() {
                return Err(AllocError(format!(
                    "best-fit: no free block of {} and the device refused a new segment",
                    format_bytes(size)
                )));
            }
            fit = self.free_set.range((size, 0, 0)..).next().copied();
        }
        let (_, addr, idx) = fit.expect("a segment large enough was just added");
        self.remove_free(idx);
        let node = self.nodes[idx];
        if node.size > size {
            self.splits += 1;
            let rest = self.add_node(Node {
                addr: addr + size,
                size: node.size - size,
                free: false,
                prev: Some(idx),
                next: node.next,
            });
            if let Some(n) = node.next {
                self.nodes[n].prev = Some(rest);
            }
            self.nodes[idx].next = Some(rest);
            self.nodes[idx].size = size;
            self.insert_free(rest);
        }
        self.handed_out.insert(addr, idx);
        Ok(Block { addr, size })
    }

    fn free(&mut self, _device: &mut dyn DeviceMemory, block: Block) {
        let idx = self.handed_out.remove(&block.addr).expect("freed block was handed out");
        self.absorb(idx, self.nodes[idx].next);
        self.absorb(idx, self.nodes[idx].prev);
        self.insert_free(idx);
    }

    fn free_space(&self) -> FreeSpace {
        FreeSpace {
            total: self.free_total,
            largest: self.free_set.last().map_or(0, |&(size, _, _)| size),
        }
    }

    fn alignment(&self) -> u64 {
        self.alignment
    }

    fn release_cached(&mut self, device: &mut dyn DeviceMemory) {
        let whole: Vec<(u64, u64, usize)> = self
            .segments
            .iter()
            .filter(|(_, &(size, idx))| self.nodes[idx].free && self.nodes[idx].size == size)
            .map(|(&base, &(size, idx))| (base, size, idx))
            .collect();
        for (base, size, idx) in whole {
            self.remove_free(idx);
            self.nodes.release(idx);
            self.segments.remove(&base);
            device.free(base, size);
        }
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("segments", self.segments.len() as u64),
            ("splits", self.splits),
            ("merges", self.merges),
        ]
    }
}
