//! The simplest policies: the device allocator itself, a bump arena, and power-of-two buckets.

use rustc_hash::FxHashMap as HashMap;

use experiments::format_bytes;

use super::{round_up, AllocError, Block, DeviceMemory, FreeSpace, Policy};

/// Every request to the device allocator: the baseline the others are measured against.
pub(super) struct CudaMalloc {
    round: u64,
    stream_ordered: bool,
}

impl CudaMalloc {
    pub(super) fn new(round: u64, stream_ordered: bool) -> CudaMalloc {
        CudaMalloc { round, stream_ordered }
    }
}

impl Policy for CudaMalloc {
    fn allocate(&mut self, device: &mut dyn DeviceMemory, size: u64, _stream: u64) -> Result<Block, AllocError> {
        let bytes = round_up(size.max(1), self.round);
        let addr = if self.stream_ordered {
            device.allocate_stream_ordered(bytes)
        } else {
            device.allocate(bytes)
        };
        addr.map(|addr| Block { addr, size: bytes })
            .ok_or_else(|| AllocError(format!("the device refused {}", format_bytes(bytes))))
    }

    fn free(&mut self, device: &mut dyn DeviceMemory, block: Block) {
        if self.stream_ordered {
            device.free_stream_ordered(block.addr, block.size)
        } else {
            device.free(block.addr, block.size)
        }
    }

    fn free_space(&self) -> FreeSpace {
        FreeSpace::default()
    }

    fn alignment(&self) -> u64 {
        self.round
    }

    fn release_cached(&mut self, _device: &mut dyn DeviceMemory) {}
}

/// One arena, requests satisfied in order; memory comes back only when all of it does.
pub(super) struct Bump {
    arena: u64,
    alignment: u64,
    reset_when_empty: bool,
    base: Option<u64>,
    offset: u64,
    live: u64,
    frozen: bool,
    resets: u64,
}

impl Bump {
    pub(super) fn new(arena: u64, alignment: u64, reset_when_empty: bool) -> Bump {
        Bump {
            arena,
            alignment,
            reset_when_empty,
            base: None,
            offset: 0,
            live: 0,
            frozen: false,
            resets: 0,
        }
    }

    /// Freezes the arena: every later request fails until [`Bump::release_all`].
    #[cfg(test)]
    pub(super) fn commit(&mut self) {
        self.frozen = true;
    }

    /// Forgets every block (the caller promises none is in use) and unfreezes.
    pub(super) fn release_all(&mut self) {
        self.offset = 0;
        self.live = 0;
        self.frozen = false;
        self.resets += 1;
    }
}

impl Policy for Bump {
    fn allocate(&mut self, device: &mut dyn DeviceMemory, size: u64, _stream: u64) -> Result<Block, AllocError> {
        if self.frozen {
            return Err(AllocError(format!(
                "bump: arena committed; {} requested",
                format_bytes(size)
            )));
        }
        let base = match self.base {
            Some(base) => base,
            None => {
                let base = device.allocate(self.arena).ok_or_else(|| {
                    AllocError(format!(
                        "bump: the device refused the {} arena",
                        format_bytes(self.arena)
                    ))
                })?;
                *self.base.insert(base)
            }
        };
        let size = round_up(size.max(1), self.alignment);
        if size > self.arena - self.offset {
            return Err(AllocError(format!(
                "bump: {} requested at offset {} of a {} arena ({} left)",
                format_bytes(size),
                format_bytes(self.offset),
                format_bytes(self.arena),
                format_bytes(self.arena - self.offset)
            )));
        }
        let block = Block {
            addr: base + self.offset,
            size,
        };
        self.offset += size;
        self.live += 1;
        Ok(block)
    }

    fn free(&mut self, _device: &mut dyn DeviceMemory, _block: Block) {
        self.live -= 1;
        if self.live == 0 && self.reset_when_empty {
            self.release_all();
        }
    }

    fn free_space(&self) -> FreeSpace {
        let tail = if self.base.is_some() && !self.frozen {
            self.arena - self.offset
        } else {
            0
        };
        FreeSpace {
            total: tail,
            largest: tail,
        }
    }

    fn alignment(&self) -> u64 {
        self.alignment
    }

    fn release_cached(&mut self, device: &mut dyn DeviceMemory) {
        if self.live == 0 {
            if let Some(base) = self.base.take() {
                device.free(base, self.arena);
            }
        }
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![("resets", self.resets)]
    }
}

/// Power-of-two size classes; each class keeps the blocks returned to it.
pub(super) struct Buckets {
    min: u64,
    free_lists: HashMap<u64, Vec<u64>>,
    cached: u64,
    hits: u64,
    misses: u64,
    returns: u64,
}

impl Buckets {
    pub(super) fn new(min: u64) -> Buckets {
        Buckets {
            min,
            free_lists: HashMap::default(),
            cached: 0,
            hits: 0,
            misses: 0,
            returns: 0,
        }
    }

    fn class(&self, size: u64) -> Option<u64> {
        size.max(self.min).checked_next_power_of_two()
    }
}

impl Policy for Buckets {
    fn allocate(&mut self, device: &mut dyn DeviceMemory, size: u64, _stream: u64) -> Result<Block, AllocError> {
        let class = self
            .class(size)
            .ok_or_else(|| AllocError(format!("buckets: {size} bytes has no power-of-two class")))?;
        if let Some(addr) = self.free_lists.get_mut(&class).and_then(Vec::pop) {
            self.hits += 1;
            self.cached -= class;
            return Ok(Block { addr, size: class });
        }
        self.misses += 1;
        let addr = device.allocate(class).or_else(|| {
            // Give every cached block back and try once more before failing.
            self.release_cached(device);
            device.allocate(class)
        });
        addr.map(|addr| Block { addr, size: class }).ok_or_else(|| {
            AllocError(format!(
                "buckets: the device refused a {} block for a {} request",
                format_bytes(class),
                format_bytes(size)
            ))
        })
    }

    fn free(&mut self, _device: &mut dyn DeviceMemory, block: Block) {
        self.returns += 1;
        self.cached += block.size;
        self.free_lists.entry(block.size).or_default().push(block.addr);
    }

    fn free_space(&self) -> FreeSpace {
        let largest = self
            .free_lists
            .iter()
            .filter(|(_, list)| !list.is_empty())
            .map(|(&class, _)| class)
            .max()
            .unwrap_or(0);
        FreeSpace {
            total: self.cached,
            largest,
        }
    }

    fn alignment(&self) -> u64 {
        256
    }

    fn release_cached(&mut self, device: &mut dyn DeviceMemory) {
        for (class, list) in self.free_lists.iter_mut() {
            for addr in list.drain(..) {
                device.free(addr, *class);
            }
        }
        self.cached = 0;
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![("hits", self.hits), ("misses", self.misses), ("returns", self.returns)]
    }
}
