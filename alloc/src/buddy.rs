//! A binary buddy allocator: power-of-two blocks split in halves and merged with their buddy.

use std::collections::BTreeSet;

use rustc_hash::FxHashMap as HashMap;

use experiments::format_bytes;

use super::{AllocError, Block, DeviceMemory, FreeSpace, Policy};

pub(super) struct Buddy {
    arena: u64,
    min_block: u64,
    max_order: usize,
    arenas: BTreeSet<u64>,
    /// Free block addresses per order (order k holds blocks of min_block << k bytes).
    free: Vec<BTreeSet<u64>>,
    used: HashMap<u64, usize>,
    free_total: u64,
    splits: u64,
    merges: u64,
}

impl Buddy {
    pub(super) fn new(arena: u64, min_block: u64) -> Buddy {
        let max_order = (arena / min_block).trailing_zeros() as usize;
        Buddy {
            arena,
            min_block,
            max_order,
            arenas: BTreeSet::new(),
            free: vec![BTreeSet::new(); max_order + 1],
            used: HashMap::default(),
            free_total: 0,
            splits: 0,
            merges: 0,
        }
    }

    fn size_of(&self, order: usize) -> u64 {
        self.min_block << order
    }

    fn add_arena(&mut self, device: &mut dyn DeviceMemory) -> bool {
        match device.allocate(self.arena) {
            Some(base) => {
                self.arenas.insert(base);
                self.free[self.max_order].insert(base);
                self.free_total += self.arena;
                true
            }
            None => false,
        }
    }
}

impl Policy for Buddy {
    fn allocate(&mut self, device: &mut dyn DeviceMemory, size: u64, _stream: u64) -> Result<Block, AllocError> {
        if size > self.arena {
            return Err(AllocError(format!(
                "buddy: {} is larger than the {} arena",
                format_bytes(size),
                format_bytes(self.arena)
            )));
        }
        let block = size.max(self.min_block).next_power_of_two();
        let order = (block / self.min_block).trailing_zeros() as usize;
        let mut from = (order..=self.max_order).find(|&j| !self.free[j].is_empty());
        if from.is_none() {
            if !self.add_arena(device) {
                self.release_cached(device);
                if !self.add_arena(device) {
                    return Err(AllocError(format!(
                        "buddy: no free block of {} and the device refused another {} arena",
                        format_bytes(block),
                        format_bytes(self.arena)
                    )));
                }
            }
            from = Some(self.max_order);
        }
        let mut j = from.expect("an order with a free block");
        let addr = self.free[j].pop_first().expect("order has a free block");
        while j > order {
            j -= 1;
            let half = self.size_of(j);
            self.free[j].insert(addr + half);
            self.splits += 1;
        }
        self.used.insert(addr, order);
        self.free_total -= block;
        Ok(Block { addr, size: block })
    }

    fn free(&mut self, _device: &mut dyn DeviceMemory, block: Block) {
        let mut order = self.used.remove(&block.addr).expect("freed block was handed out");
        self.free_total += self.size_of(order);
        let base = *self
            .arenas
            .range(..=block.addr)
            .next_back()
            .expect("block lies in an arena");
        let mut addr = block.addr;
        while order < self.max_order {
            let buddy = base + ((addr - base) ^ self.size_of(order));
            if !self.free[order].remove(&buddy) {
                break;
            }
            self.merges += 1;
            addr = addr.min(buddy);
            order += 1;
        }
        self.free[order].insert(addr);
    }

    fn free_space(&self) -> FreeSpace {
        let largest = (0..=self.max_order)
            .rev()
            .find(|&j| !self.free[j].is_empty())
            .map_or(0, |j| self.size_of(j));
        FreeSpace {
            total: self.free_total,
            largest,
        }
    }

    fn alignment(&self) -> u64 {
        self.min_block.min(256)
    }

    fn release_cached(&mut self, device: &mut dyn DeviceMemory) {
        let whole: Vec<u64> = self.free[self.max_order].iter().copied().collect();
        for base in whole {
            self.free[self.max_order].remove(&base);
            self.arenas.remove(&base);
            self.free_total -= self.arena;
            device.free(base, self.arena);
        }
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("arenas", self.arenas.len() as u64),
            ("splits", self.splits),
            ("merges", self.merges),
        ]
    }
}
