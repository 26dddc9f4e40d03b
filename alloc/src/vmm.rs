//! The bookkeeping of a device buffer that grows in place on the CUDA virtual memory API:
//! one reserved virtual range, physical chunks mapped one after another from its base.
//!
//! It runs over a [`VmmDriver`], the real driver in `hw` or [`SimVmm`] here, so the same code
//! decides every step on a GPU and in property tests. Growing first tries the fast path (reserve
//! the addresses right after the current range, so nothing moves); failing that, the slow path
//! reserves a larger range elsewhere and maps the existing chunks again there (no data is
//! copied: the chunks hold it). Any failed step is undone, so the buffer is left as it was.

use std::collections::{BTreeMap, HashMap};

/// A driver call that failed, worded for the user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{call}: {reason}")]
pub struct VmmError {
    /// The driver function.
    pub call: &'static str,
    /// Why (the driver's error, or out of memory).
    pub reason: String,
    /// The device had no memory for it (CUDA_ERROR_OUT_OF_MEMORY): an outcome a growth
    /// experiment records, where any other failure is an error.
    pub out_of_memory: bool,
}

impl VmmError {
    /// The device ran out of memory in `call`.
    pub fn out_of_memory(call: &'static str) -> VmmError {
        VmmError {
            call,
            reason: "out of memory".into(),
            out_of_memory: true,
        }
    }

    /// Any other failure of `call`.
    pub fn failed(call: &'static str, reason: impl Into<String>) -> VmmError {
        VmmError {
            call,
            reason: reason.into(),
            out_of_memory: false,
        }
    }
}

/// The virtual memory calls a growable buffer needs (cuMemAddressReserve, cuMemAddressFree,
/// cuMemCreate, cuMemRelease, cuMemMap, cuMemUnmap, cuMemSetAccess).
pub trait VmmDriver {
    /// Reserves `size` bytes of addresses, at `at` if given and free (else anywhere); returns the base.
    fn reserve(&mut self, size: u64, at: Option<u64>) -> Result<u64, VmmError>;
    /// Frees a reservation (nothing may be mapped in it).
    fn free_range(&mut self, base: u64, size: u64);
    /// Creates a physical chunk of `size` bytes; returns its handle.
    fn create(&mut self, size: u64) -> Result<u64, VmmError>;
    /// Releases a physical chunk (it must be unmapped everywhere).
    fn release(&mut self, handle: u64);
    /// Maps a whole chunk at `addr`.
    fn map(&mut self, addr: u64, size: u64, handle: u64) -> Result<(), VmmError>;
    /// Unmaps `[addr, addr + size)`.
    fn unmap(&mut self, addr: u64, size: u64);
    /// Makes `[addr, addr + size)` readable and writable by the device.
    fn set_access(&mut self, addr: u64, size: u64) -> Result<(), VmmError>;
}

/// Which way a grow went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrowPath {
    /// The reserved range already had room.
    InPlace,
    /// The addresses after the range were free and now extend it.
    Extended,
    /// A new, larger range elsewhere; every chunk was mapped again there.
    Moved,
}

/// A buffer's chunks and range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrowableLayout {
    granularity: u64,
    /// Reserved ranges that together make one contiguous span from `base`: (base, size).
    ranges: Vec<(u64, u64)>,
    /// Physical chunks, mapped back to back from `base`: (handle, size).
    chunks: Vec<(u64, u64)>,
}

impl GrowableLayout {
    /// An empty buffer that reserves `reserve` bytes of addresses up front (0: none yet).
    pub fn new(driver: &mut dyn VmmDriver, granularity: u64, reserve: u64) -> Result<GrowableLayout, VmmError> {
        assert!(granularity > 0, "granularity must be positive");
        let mut layout = GrowableLayout {
            granularity,
            ranges: Vec::new(),
            chunks: Vec::new(),
        };
        if reserve > 0 {
            let size = layout.round(reserve);
            let base = driver.reserve(size, None)?;
            layout.ranges.push((base, size));
        }
        Ok(layout)
    }

    fn round(&self, bytes: u64) -> u64 {
        bytes.div_ceil(self.granularity) * self.granularity
    }

    /// The buffer's first byte (`None` before any address is reserved).
    pub fn base(&self) -> Option<u64> {
        self.ranges.first().map(|r| r.0)
    }

    /// Bytes mapped (usable).
    pub fn size(&self) -> u64 {
        self.chunks.iter().map(|c| c.1).sum()
    }

    /// Bytes of addresses reserved.
    pub fn reserved(&self) -> u64 {
        self.ranges.iter().map(|r| r.1).sum()
    }

    /// The chunks, in address order: (handle, size).
    pub fn chunks(&self) -> &[(u64, u64)] {
        &self.chunks
    }

    /// The reserved ranges, in address order: (base, size).
    pub fn ranges(&self) -> &[(u64, u64)] {
        &self.ranges
    }

    /// Grows to at least `bytes` (rounded up to the granularity) with new chunks, one per
    /// reserved range the new bytes fall in. On error every step taken is undone and the
    /// layout, and what it holds from the driver, is unchanged.
    pub fn grow(&mut self, driver: &mut dyn VmmDriver, bytes: u64) -> Result<GrowPath, VmmError> {
        let old = self.size();
        let new = self.round(bytes);
        if new <= old {
            return Ok(GrowPath::InPlace);
        }
        let Some(base) = self.base() else {
            let base = driver.reserve(new, None)?;
            self.ranges.push((base, new));
            return self
                .map_new(driver, base, old, new, GrowPath::Extended)
                .inspect_err(|_| {
                    let (base, size) = self.ranges.pop().expect("reserved above");
                    driver.free_range(base, size);
                });
        };
        if self.reserved() >= new {
            return self.map_new(driver, base, old, new, GrowPath::InPlace);
        }
        let end = base + self.reserved();
        let wanted = new - self.reserved();
        let got = driver.reserve(wanted, Some(end))?;
        if got == end {
            self.ranges.push((got, wanted));
            return self
                .map_new(driver, base, old, new, GrowPath::Extended)
                .inspect_err(|_| {
                    let (base, size) = self.ranges.pop().expect("extended above");
                    driver.free_range(base, size);
                });
        }
        driver.free_range(got, wanted);
        self.move_and_grow(driver, old, new)
    }

    /// Creates and maps chunks for `[old, new)` of the span at `base`, one per reserved range
    /// they fall in; on error unmaps and releases whatever it made.
    fn map_new(
        &mut self,
        driver: &mut dyn VmmDriver,
        base: u64,
        old: u64,
        new: u64,
        path: GrowPath,
    ) -> Result<GrowPath, VmmError> {
        let mut pieces = Vec::new();
        let mut range_start = 0;
        for &(_, size) in &self.ranges {
            let (lo, hi) = (old.max(range_start), new.min(range_start + size));
            if lo < hi {
                pieces.push((lo, hi - lo));
            }
            range_start += size;
        }
        let mut made: Vec<(u64, u64)> = Vec::new();
        for (offset, size) in pieces {
            match map_chunk(driver, base + offset, size) {
                Ok(handle) => made.push((handle, size)),
                Err(e) => {
                    let mut offset = old;
                    for &(handle, size) in &made {
                        driver.unmap(base + offset, size);
                        driver.release(handle);
                        offset += size;
                    }
                    return Err(e);
                }
            }
        }
        self.chunks.extend(made);
        Ok(path)
    }

    /// The slow path: a new range of `new` bytes elsewhere; every existing chunk is mapped there
    /// too, then the new chunk. Only when all of it worked does the old range go.
    fn move_and_grow(&mut self, driver: &mut dyn VmmDriver, old: u64, new: u64) -> Result<GrowPath, VmmError> {
        let target = driver.reserve(new, None)?;
        let mut mapped = 0;
        let mut failure = None;
        for &(handle, size) in &self.chunks {
            let result = driver.map(target + mapped, size, handle).and_then(|()| {
                driver
                    .set_access(target + mapped, size)
                    .inspect_err(|_| driver.unmap(target + mapped, size))
            });
            if let Err(e) = result {
                failure = Some(e);
                break;
            }
            mapped += size;
        }
        let fresh = match failure {
            None => map_chunk(driver, target + old, new - old).map_err(Some),
            Some(e) => Err(Some(e)),
        };
        let handle = match fresh {
            Ok(handle) => handle,
            Err(e) => {
                let mut offset = 0;
                for &(_, size) in &self.chunks {
                    if offset >= mapped {
                        break;
                    }
                    driver.unmap(target + offset, size);
                    offset += size;
                }
                driver.free_range(target, new);
                return Err(e.expect("a failure"));
            }
        };
        self.unmap_all(driver);
        for (base, size) in self.ranges.drain(..) {
            driver.free_range(base, size);
        }
        self.ranges.push((target, new));
        self.chunks.push((handle, new - old));
        Ok(GrowPath::Moved)
    }

    fn unmap_all(&mut self, driver: &mut dyn VmmDriver) {
        if let Some(base) = self.base() {
            let mut offset = 0;
            for &(_, size) in &self.chunks {
                driver.unmap(base + offset, size);
                offset += size;
            }
        }
    }

    /// Shrinks to the smallest whole number of chunks holding `bytes`; returns the new size.
    pub fn shrink(&mut self, driver: &mut dyn VmmDriver, bytes: u64) -> u64 {
        let base = match self.base() {
            Some(base) => base,
            None => return 0,
        };
        while let Some(&(handle, size)) = self.chunks.last() {
            let start = self.size() - size;
            if start < bytes {
                break;
            }
            driver.unmap(base + start, size);
            driver.release(handle);
            self.chunks.pop();
        }
        self.size()
    }

    /// Unmaps and releases everything and frees the addresses.
    pub fn release_all(&mut self, driver: &mut dyn VmmDriver) {
        self.unmap_all(driver);
        for (handle, _) in self.chunks.drain(..) {
            driver.release(handle);
        }
        for (base, size) in self.ranges.drain(..) {
            driver.free_range(base, size);
        }
    }
}

/// Creates a chunk of `size` bytes and maps it at `addr` with access; undoes itself on error.
fn map_chunk(driver: &mut dyn VmmDriver, addr: u64, size: u64) -> Result<u64, VmmError> {
    let handle = driver.create(size)?;
    if let Err(e) = driver.map(addr, size, handle) {
        driver.release(handle);
        return Err(e);
    }
    if let Err(e) = driver.set_access(addr, size) {
        driver.unmap(addr, size);
        driver.release(handle);
        return Err(e);
    }
    Ok(handle)
}

/// A simulated virtual address space and physical memory, for tests and for predicting peak
/// memory: reservations come from a sorted free list, chunks count against a capacity, and
/// it can be told to refuse the fast path or to fail any call.
#[derive(Debug, Clone, Default)]
pub struct SimVmm {
    /// Reserved ranges: base -> size.
    pub reserved: BTreeMap<u64, u64>,
    /// Live chunks: handle -> size.
    pub handles: HashMap<u64, u64>,
    /// Mappings: address -> (size, handle).
    pub mapped: BTreeMap<u64, (u64, u64)>,
    /// Addresses with access set: address -> size.
    pub accessible: BTreeMap<u64, u64>,
    /// Physical bytes the device has.
    pub capacity: u64,
    /// When set, reservations at a given address land elsewhere (the fast path fails).
    pub refuse_fast_path: bool,
    /// Fail the n-th call from now (0: the next), for testing undo.
    pub fail_at: Option<u64>,
    next_handle: u64,
    next_addr: u64,
}

impl SimVmm {
    /// A device with `capacity` bytes of physical memory.
    pub fn new(capacity: u64) -> SimVmm {
        SimVmm {
            capacity,
            next_addr: 1 << 40,
            ..SimVmm::default()
        }
    }

    /// Physical bytes in use.
    pub fn physical(&self) -> u64 {
        self.handles.values().sum()
    }

    fn tick(&mut self, call: &'static str) -> Result<(), VmmError> {
        match self.fail_at {
            Some(0) => {
                self.fail_at = None;
                Err(VmmError::failed(call, "injected failure"))
            }
            Some(n) => {
                self.fail_at = Some(n - 1);
                Ok(())
            }
            None => Ok(()),
        }
    }

    fn overlaps(&self, base: u64, size: u64) -> bool {
        self.reserved
            .range(..base + size)
            .next_back()
            .is_some_and(|(&b, &s)| b + s > base)
    }
}

impl VmmDriver for SimVmm {
    fn reserve(&mut self, size: u64, at: Option<u64>) -> Result<u64, VmmError> {
        self.tick("cuMemAddressReserve")?;
        let base = match at {
            Some(addr) if !self.refuse_fast_path && !self.overlaps(addr, size) => addr,
            _ => {
                let base = self.next_addr;
                // Leave a gap, so the next range never happens to follow this one.
                self.next_addr += size + (1 << 30);
                base
            }
        };
        self.next_addr = self.next_addr.max(base + size + (1 << 30));
        self.reserved.insert(base, size);
        Ok(base)
    }
    fn free_range(&mut self, base: u64, size: u64) {
        assert_eq!(
            self.reserved.remove(&base),
            Some(size),
            "freeing a range that was not reserved"
        );
        assert!(
            self.mapped.range(base..base + size).next().is_none(),
            "freeing a mapped range"
        );
    }
    fn create(&mut self, size: u64) -> Result<u64, VmmError> {
        self.tick("cuMemCreate")?;
        if self.physical() + size > self.capacity {
            return Err(VmmError::out_of_memory("cuMemCreate"));
        }
        self.next_handle += 1;
        self.handles.insert(self.next_handle, size);
        Ok(self.next_handle)
    }
    fn release(&mut self, handle: u64) {
        assert!(
            !self.mapped.values().any(|&(_, h)| h == handle),
            "releasing a chunk that is still mapped"
        );
        assert!(self.handles.remove(&handle).is_some(), "releasing an unknown chunk");
    }
    fn map(&mut self, addr: u64, size: u64, handle: u64) -> Result<(), VmmError> {
        self.tick("cuMemMap")?;
        assert_eq!(
            self.handles.get(&handle),
            Some(&size),
            "mapping a chunk at the wrong size"
        );
        let inside = self
            .reserved
            .range(..=addr)
            .next_back()
            .is_some_and(|(&b, &s)| addr + size <= b + s);
        assert!(inside, "mapping outside a reservation");
        assert!(
            self.mapped
                .range(..addr + size)
                .next_back()
                .is_none_or(|(&a, &(s, _))| a + s <= addr),
            "mapping over a mapping"
        );
        self.mapped.insert(addr, (size, handle));
        Ok(())
    }
    fn unmap(&mut self, addr: u64, size: u64) {
        assert_eq!(
            self.mapped.remove(&addr).map(|m| m.0),
            Some(size),
            "unmapping what is not mapped"
        );
        self.accessible.remove(&addr);
    }
    fn set_access(&mut self, addr: u64, size: u64) -> Result<(), VmmError> {
        self.tick("cuMemSetAccess")?;
        self.accessible.insert(addr, size);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const G: u64 = 2 << 20;

    #[derive(Debug, Clone)]
    enum Op {
        Grow(u64),
        Shrink(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (1u64..200).prop_map(|mib| Op::Grow(mib << 20)),
            1 => (0u64..200).prop_map(|mib| Op::Shrink(mib << 20)),
        ]
    }

    /// What a correct layout always satisfies, checked against the simulated driver's state.
    fn check(layout: &GrowableLayout, vmm: &SimVmm) -> Result<(), TestCaseError> {
        prop_assert!(layout.size().is_multiple_of(G) && layout.size() <= layout.reserved());
        prop_assert_eq!(layout.chunks().iter().map(|c| c.1).sum::<u64>(), vmm.physical());
        prop_assert_eq!(vmm.handles.len(), layout.chunks().len());
        let reserved: u64 = vmm.reserved.values().sum();
        prop_assert_eq!(reserved, layout.reserved(), "only the buffer's ranges are reserved");
        let mut expected = layout.base().unwrap_or(0);
        for w in layout.ranges().windows(2) {
            prop_assert_eq!(w[0].0 + w[0].1, w[1].0, "ranges are contiguous");
        }
        for &(handle, size) in layout.chunks() {
            prop_assert_eq!(
                vmm.mapped.get(&expected),
                Some(&(size, handle)),
                "chunks mapped back to back"
            );
            prop_assert_eq!(vmm.accessible.get(&expected), Some(&size), "access set on every chunk");
            expected += size;
        }
        prop_assert_eq!(vmm.mapped.len(), layout.chunks().len(), "nothing else is mapped");
        Ok(())
    }

    proptest! {
        #[test]
        fn bookkeeping_matches_the_driver(
            ops in prop::collection::vec(op(), 1..40),
            reserve in prop_oneof![Just(0u64), (1u64..512).prop_map(|mib| mib << 20)],
            refuse_fast in any::<bool>(),
            capacity_mib in 64u64..2048,
        ) {
            let mut vmm = SimVmm::new(capacity_mib << 20);
            vmm.refuse_fast_path = refuse_fast;
            let mut layout = GrowableLayout::new(&mut vmm, G, reserve).unwrap();
            for op in ops {
                match op {
                    Op::Grow(bytes) => {
                        let before = layout.clone();
                        match layout.grow(&mut vmm, layout.size() + bytes) {
                            Ok(path) => {
                                prop_assert!(layout.size() >= before.size() + bytes);
                                if refuse_fast && path == GrowPath::Extended && before.base().is_some() {
                                    prop_assert!(false, "extended although the fast path was refused");
                                }
                            }
                            Err(_) => prop_assert_eq!(&layout, &before, "a failed grow changes nothing"),
                        }
                    }
                    Op::Shrink(bytes) => {
                        let size = layout.shrink(&mut vmm, bytes);
                        prop_assert!(size >= bytes.min(size) && (size == 0 || size - layout.chunks().last().unwrap().1 < bytes.max(1)));
                    }
                }
                check(&layout, &vmm)?;
            }
            layout.release_all(&mut vmm);
            prop_assert!(vmm.reserved.is_empty() && vmm.handles.is_empty() && vmm.mapped.is_empty());
        }

        #[test]
        fn any_failed_step_leaves_the_buffer_as_it_was(
            grows in prop::collection::vec(1u64..64, 1..12),
            fail_at in 0u64..8,
            refuse_fast in any::<bool>(),
        ) {
            let mut vmm = SimVmm::new(1 << 40);
            vmm.refuse_fast_path = refuse_fast;
            let mut layout = GrowableLayout::new(&mut vmm, G, 0).unwrap();
            for mib in grows {
                let before = layout.clone();
                let (reserved, handles, mapped) = (vmm.reserved.clone(), vmm.handles.clone(), vmm.mapped.clone());
                vmm.fail_at = Some(fail_at);
                let grown = layout.grow(&mut vmm, layout.size() + (mib << 20));
                vmm.fail_at = None;
                if grown.is_err() {
                    prop_assert_eq!(&layout, &before);
                    prop_assert_eq!(&vmm.handles, &handles);
                    prop_assert_eq!(&vmm.mapped, &mapped);
                    prop_assert_eq!(&vmm.reserved, &reserved);
                }
                check(&layout, &vmm)?;
            }
        }
    }

    #[test]
    fn growing_past_the_device_is_an_error_and_keeps_the_buffer() {
        let mut vmm = SimVmm::new(64 << 20);
        let mut layout = GrowableLayout::new(&mut vmm, G, 0).unwrap();
        layout.grow(&mut vmm, 48 << 20).unwrap();
        let before = layout.clone();
        let err = layout.grow(&mut vmm, 96 << 20).unwrap_err();
        assert_eq!(err.call, "cuMemCreate");
        assert!(err.out_of_memory, "running out is told by its kind, not its wording");
        assert_eq!(layout, before);
        // Any other failure is not out of memory, whatever its text says.
        vmm.fail_at = Some(0);
        let err = layout.grow(&mut vmm, 64 << 20).unwrap_err();
        assert!(!err.out_of_memory, "{err}");
        assert_eq!(layout, before);
    }
}
