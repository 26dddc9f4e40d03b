//! A coalescing best-fit suballocator over one pool that grows by whole device segments.

use std::collections::{BTreeMap, BTreeSet};

use experiments::format_bytes;

use super::{round_up, AllocError, Block, DeviceMemory, FreeSpace, Policy};

const SEGMENT_ROUND: u64 = 2 << 20;

#[derive(Debug, Clone, Copy)]
struct Node {
    size: u64,
    free: bool,
    segment: u64,
}

pub(super) struct BestFit {
    grow_by: u64,
    alignment: u64,
    blocks: BTreeMap<u64, Node>,
    free_set: BTreeSet<(u64, u64)>,
    segments: BTreeMap<u64, u64>,
    free_total: u64,
    splits: u64,
    merges: u64,
}

impl BestFit {
    pub(super) fn new(grow_by: u64, alignment: u64) -> BestFit {
        BestFit {
            grow_by,
            alignment,
            blocks: BTreeMap::new(),
            free_set: BTreeSet::new(),
            segments: BTreeMap::new(),
            free_total: 0,
            splits: 0,
            merges: 0,
        }
    }

    fn insert_free(&mut self, addr: u64, size: u64, segment: u64) {
        self.blocks.insert(
            addr,
            Node {
                size,
                free: true,
                segment,
            },
        );
        self.free_set.insert((size, addr));
        self.free_total += size;
    }

    fn remove_free(&mut self, addr: u64) -> Node {
        let node = self.blocks.remove(&addr).expect("free block is tracked");
        self.free_set.remove(&(node.size, addr));
        self.free_total -= node.size;
        node
    }

    fn grow(&mut self, device: &mut dyn DeviceMemory, size: u64) -> Option<()> {
        let bytes = round_up(size, SEGMENT_ROUND).max(self.grow_by);
        let base = device.allocate(bytes)?;
        self.segments.insert(base, bytes);
        self.insert_free(base, bytes, base);
        Some(())
    }
}

impl Policy for BestFit {
    fn allocate(&mut self, device: &mut dyn DeviceMemory, size: u64, _stream: u64) -> Result<Block, AllocError> {
        let size = round_up(size.max(1), self.alignment);
        let mut fit = self.free_set.range((size, 0)..).next().copied();
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
            fit = self.free_set.range((size, 0)..).next().copied();
        }
        let (_, addr) = fit.expect("a segment large enough was just added");
        let node = self.remove_free(addr);
        if node.size > size {
            self.splits += 1;
            self.insert_free(addr + size, node.size - size, node.segment);
        }
        self.blocks.insert(
            addr,
            Node {
                size,
                free: false,
                segment: node.segment,
            },
        );
        Ok(Block { addr, size })
    }

    fn free(&mut self, _device: &mut dyn DeviceMemory, block: Block) {
        let node = self.blocks.remove(&block.addr).expect("freed block was handed out");
        let (mut addr, mut size) = (block.addr, node.size);
        let next = self.blocks.range(addr + size..).next().map(|(&a, &n)| (a, n));
        if let Some((next_addr, next)) = next {
            if next_addr == addr + size && next.free && next.segment == node.segment {
                self.remove_free(next_addr);
                size += next.size;
                self.merges += 1;
            }
        }
        let prev = self.blocks.range(..addr).next_back().map(|(&a, &n)| (a, n));
        if let Some((prev_addr, prev)) = prev {
            if prev_addr + prev.size == addr && prev.free && prev.segment == node.segment {
                self.remove_free(prev_addr);
                addr = prev_addr;
                size += prev.size;
                self.merges += 1;
            }
        }
        self.insert_free(addr, size, node.segment);
    }

    fn free_space(&self) -> FreeSpace {
        FreeSpace {
            total: self.free_total,
            largest: self.free_set.last().map_or(0, |&(size, _)| size),
        }
    }

    fn alignment(&self) -> u64 {
        self.alignment
    }

    fn release_cached(&mut self, device: &mut dyn DeviceMemory) {
        let whole: Vec<(u64, u64)> = self
            .segments
            .iter()
            .filter(|(base, size)| self.blocks.get(base).is_some_and(|n| n.free && n.size == **size))
            .map(|(&b, &s)| (b, s))
            .collect();
        for (base, size) in whole {
            self.remove_free(base);
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
