//! Device memory handed to allocator policies as bare addresses.

use std::collections::BTreeMap;

use cudarc::driver::result::{self, DriverError};

use super::context::{bind, Gpu, Stream};
use super::driver::{self, is_out_of_memory};
use super::launch::{launch_pattern, Kernel};
use super::memory::{DeviceBuffer, DeviceSpan};
use super::vmm::{granularity, Mapping, Reservation};
use crate::error::{HwError, Result};

/// Device memory handed to allocator policies as bare addresses: cuMemAlloc/cuMemFree, the
/// stream-ordered pool (cuMemAllocAsync/cuMemFreeAsync), and VMM ranges (cuMemAddressReserve,
/// then one [`Mapping`] per granule). It owns everything it hands out, launches kernels only on
/// memory it holds, and frees whatever is left when dropped.
pub(crate) struct PolicyMemory<'g> {
    gpu: &'g Gpu,
    granularity: u64,
    total: u64,
    /// Mappings go before the reservations they lie in (fields drop in order).
    mappings: BTreeMap<u64, Mapping>,
    reservations: BTreeMap<u64, Reservation>,
    plain: BTreeMap<u64, DeviceBuffer>,
    /// Stream-ordered allocations (address -> bytes), freed on `stream` before it goes.
    pooled: BTreeMap<u64, u64>,
    stream: Stream,
    mismatches: DeviceBuffer,
    fault: Option<HwError>,
}

impl<'g> PolicyMemory<'g> {
    pub(crate) fn new(gpu: &'g Gpu, total: u64) -> Result<PolicyMemory<'g>> {
        let mismatches = gpu.device_buffer(8)?;
        gpu.fill(&mismatches, 0)?;
        Ok(PolicyMemory {
            gpu,
            granularity: granularity(gpu.ctx.cu_device())?,
            total,
            mappings: BTreeMap::new(),
            reservations: BTreeMap::new(),
            plain: BTreeMap::new(),
            pooled: BTreeMap::new(),
            stream: gpu.stream()?,
            mismatches,
            fault: None,
        })
    }

    /// A CUDA error other than running out of memory, if one happened since the last call.
    pub(crate) fn take_fault(&mut self) -> Option<HwError> {
        self.fault.take()
    }

    /// Out of memory is an answer a policy handles; any other error is a fault to report.
    fn refused(&mut self, call: &'static str, error: DriverError) {
        if !is_out_of_memory(&error) && self.fault.is_none() {
            self.fault = Some(HwError::Cuda { call, reason: error });
        }
    }

    /// Whether `[addr, addr + bytes)` lies in memory this object holds.
    fn holds(&self, addr: u64, bytes: u64) -> bool {
        let end = addr.saturating_add(bytes);
        if let Some((&start, buffer)) = self.plain.range(..=addr).next_back() {
            if end <= start + buffer.bytes as u64 {
                return true;
            }
        }
        if let Some((&start, &len)) = self.pooled.range(..=addr).next_back() {
            if end <= start + len {
                return true;
            }
        }
        let g = self.granularity;
        (addr / g * g..end)
            .step_by(g as usize)
            .all(|granule| self.mappings.contains_key(&granule))
    }

    fn pattern_launch(&self, kernel: &Kernel, addr: u64, bytes: u64, tag: u32, check: bool) -> Result<()> {
        if !self.holds(addr, bytes) || !addr.is_multiple_of(4) || !bytes.is_multiple_of(4) {
            return Err(HwError::DataMismatch(format!(
                "a policy handed out [{addr:#x}, +{bytes}) which is not 4-byte aligned memory it holds"
            )));
        }
        // Held (checked above) until this object drops, which the borrow of self outlasts.
        let block = DeviceSpan::held(addr, bytes);
        let mismatches = check.then_some(&self.mismatches);
        launch_pattern(self.gpu, &self.stream, kernel, block, tag, mismatches)
    }

    /// Writes the pattern of `tag` over a block (synchronously).
    pub(crate) fn stamp(&self, kernel: &Kernel, addr: u64, bytes: u64, tag: u32) -> Result<()> {
        self.pattern_launch(kernel, addr, bytes, tag, false)
    }

    /// Counts the block's words that no longer hold the pattern of `tag` (synchronously).
    pub(crate) fn verify(&self, kernel: &Kernel, addr: u64, bytes: u64, tag: u32) -> Result<()> {
        self.pattern_launch(kernel, addr, bytes, tag, true)
    }

    /// Damaged words found by every `verify` so far.
    pub(crate) fn mismatches(&self) -> Result<u64> {
        let mut bytes = [0u8; 8];
        self.gpu.download_range(&mut bytes, &self.mismatches, 0)?;
        Ok(u64::from_le_bytes(bytes))
    }

    fn unmap_range(&mut self, addr: u64, bytes: u64) {
        let end = addr.saturating_add(bytes);
        let granules: Vec<u64> = self.mappings.range(addr..end).map(|(&g, _)| g).collect();
        for granule in granules {
            self.mappings.remove(&granule);
        }
    }
}

impl allocators::DeviceMemory for PolicyMemory<'_> {
    fn allocate(&mut self, bytes: u64) -> Option<u64> {
        match DeviceBuffer::new(&self.gpu.ctx, bytes as usize) {
            Ok(buffer) => {
                let addr = buffer.ptr;
                self.plain.insert(addr, buffer);
                Some(addr)
            }
            Err(e) => {
                self.refused("cuMemAlloc", e);
                None
            }
        }
    }

    fn free(&mut self, addr: u64, _bytes: u64) {
        self.plain.remove(&addr);
    }

    fn allocate_stream_ordered(&mut self, bytes: u64) -> Option<u64> {
        if bind(&self.gpu.ctx).is_err() {
            return None;
        }
        let stream = self.stream.raw;
        // SAFETY: the stream is alive; the memory is used only by kernels on this stream (and
        // synchronously), and freed by `free_stream_ordered` or on drop.
        match driver::call(|| unsafe { result::malloc_async(stream, bytes as usize) }) {
            Ok(addr) => {
                driver::made();
                self.pooled.insert(addr, bytes);
                Some(addr)
            }
            Err(e) => {
                self.refused("cuMemAllocAsync", e);
                None
            }
        }
    }

    fn free_stream_ordered(&mut self, addr: u64, _bytes: u64) {
        if self.pooled.remove(&addr).is_some() {
            let _ = bind(&self.gpu.ctx);
            driver::freed();
            // SAFETY: addr came from cuMemAllocAsync on this stream and leaves `pooled`: freed once.
            if let Err(e) = unsafe { result::free_async(addr, self.stream.raw) } {
                self.refused("cuMemFreeAsync", e);
            }
        }
    }

    fn reserve(&mut self, bytes: u64) -> Option<u64> {
        let bytes = bytes.div_ceil(self.granularity) * self.granularity;
        match Reservation::new(&self.gpu.ctx, bytes) {
            Ok(reservation) => {
                let base = reservation.base;
                self.reservations.insert(base, reservation);
                Some(base)
            }
            Err(e) => {
                self.refused("cuMemAddressReserve", e);
                None
            }
        }
    }

    fn release(&mut self, addr: u64, _bytes: u64) {
        if let Some(reservation) = self.reservations.remove(&addr) {
            self.unmap_range(reservation.base, reservation.bytes);
        }
    }

    fn map(&mut self, addr: u64, bytes: u64) -> bool {
        let g = self.granularity;
        let reservation = self
            .reservations
            .range(..=addr)
            .next_back()
            .map(|(_, r)| r)
            .filter(|r| r.covers(addr, bytes));
        let Some(reservation) = reservation.filter(|_| addr.is_multiple_of(g) && bytes.is_multiple_of(g)) else {
            self.fault.get_or_insert(HwError::Unsupported(format!(
                "map of [{addr:#x}, +{bytes}): not whole granules of a reservation"
            )));
            return false;
        };
        let device = self.gpu.ctx.cu_device();
        let mut made = Vec::new();
        let mut failure = None;
        for granule in (addr..addr + bytes).step_by(g as usize) {
            match Mapping::new(&self.gpu.ctx, reservation, granule, g, device, &[device]) {
                Ok(mapping) => made.push(mapping),
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        if let Some((call, e)) = failure {
            // Dropping the granules mapped so far unmaps them: all of the range or none.
            drop(made);
            self.refused(call, e);
            return false;
        }
        for mapping in made {
            self.mappings.insert(mapping.addr, mapping);
        }
        true
    }

    fn unmap(&mut self, addr: u64, bytes: u64) {
        self.unmap_range(addr, bytes);
    }

    fn total_bytes(&self) -> u64 {
        self.total
    }
}

impl Drop for PolicyMemory<'_> {
    fn drop(&mut self) {
        let _ = bind(&self.gpu.ctx);
        // SAFETY: the stream is alive; waiting for it lets every stream-ordered free complete.
        let _ = unsafe { result::stream::synchronize(self.stream.raw) };
        for (addr, _) in std::mem::take(&mut self.pooled) {
            driver::freed();
            // SAFETY: each address came from cuMemAllocAsync on this stream and is freed once.
            let _ = unsafe { result::free_async(addr, self.stream.raw) };
        }
        // SAFETY: as above; the pool's frees complete before the stream is destroyed.
        let _ = unsafe { result::stream::synchronize(self.stream.raw) };
        // The owned allocations, mappings and reservations free themselves as the fields drop.
    }
}
