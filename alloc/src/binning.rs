//! Fixed-size bins for small requests, carved from device chunks; an upstream policy for the rest.

use rustc_hash::FxHashMap as HashMap;

use experiments::format_bytes;

use super::{AllocError, Block, DeviceMemory, FreeSpace, Policy};

pub(super) struct Binning {
    min_bin: u64,
    max_bin: u64,
    chunk: u64,
    free_lists: HashMap<u64, Vec<u64>>,
    /// Which bin each handed-out small block came from.
    small: HashMap<u64, u64>,
    chunks: Vec<(u64, u64)>,
    cached: u64,
    large: Box<dyn Policy>,
}

impl Binning {
    pub(super) fn new(min_bin: u64, max_bin: u64, chunk: u64, large: Box<dyn Policy>) -> Binning {
        Binning {
            min_bin,
            max_bin,
            chunk,
            free_lists: HashMap::default(),
            small: HashMap::default(),
            chunks: Vec::new(),
            cached: 0,
            large,
        }
    }
}

impl Policy for Binning {
    fn allocate(&mut self, device: &mut dyn DeviceMemory, size: u64, stream: u64) -> Result<Block, AllocError> {
        if size > self.max_bin {
            return self.large.allocate(device, size, stream);
        }
        let bin = size.max(self.min_bin).next_power_of_two();
        let list = self.free_lists.entry(bin).or_default();
        if list.is_empty() {
            let chunk = self.chunk.max(bin);
            let base = device.allocate(chunk).ok_or_else(|| {
                AllocError(format!(
                    "binning: the device refused a {} chunk for the {} bin",
                    format_bytes(chunk),
                    format_bytes(bin)
                ))
            })?;
            self.chunks.push((base, chunk));
            // Highest address first, so blocks are handed out in address order.
            list.extend((0..chunk / bin).rev().map(|i| base + i * bin));
            self.cached += chunk / bin * bin;
        }
        let addr = list.pop().expect("bin was just refilled");
        self.cached -= bin;
        self.small.insert(addr, bin);
        Ok(Block { addr, size: bin })
    }

    fn free(&mut self, device: &mut dyn DeviceMemory, block: Block) {
        match self.small.remove(&block.addr) {
            Some(bin) => {
                self.cached += bin;
                self.free_lists.entry(bin).or_default().push(block.addr);
            }
            None => self.large.free(device, block),
        }
    }

    fn free_space(&self) -> FreeSpace {
        let upstream = self.large.free_space();
        let largest_bin = self
            .free_lists
            .iter()
            .filter(|(_, list)| !list.is_empty())
            .map(|(&bin, _)| bin)
            .max()
            .unwrap_or(0);
        FreeSpace {
            total: self.cached + upstream.total,
            largest: largest_bin.max(upstream.largest),
        }
    }

    fn alignment(&self) -> u64 {
        self.min_bin.min(self.large.alignment())
    }

    fn release_cached(&mut self, device: &mut dyn DeviceMemory) {
        // A chunk is shared by many blocks of its bin: chunks go back only when no small block is live.
        if self.small.is_empty() {
            for (base, bytes) in self.chunks.drain(..) {
                device.free(base, bytes);
            }
            self.free_lists.clear();
            self.cached = 0;
        }
        self.large.release_cached(device);
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let mut counters = vec![("chunks", self.chunks.len() as u64)];
        counters.extend(self.large.counters());
        counters
    }
}
