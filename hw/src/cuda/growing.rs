//! A device buffer that grows by one of the growth family's three strategies, measured: its
//! peak is what the driver reports in use (cuMemGetInfo) at the grow's fullest moment, and a
//! refusal is the driver's.

use cudarc::driver::result::DriverError;
use cudarc::driver::sys;

use super::context::{Gpu, Stream};
use super::driver::{self, is_out_of_memory};
use super::launch::{launch_pattern, Kernel};
use super::memory::{prefetch_to_device, DeviceBuffer, DeviceSpan, ManagedBuffer};
use super::vmm::CudaVmm;
use crate::error::{HwError, Result};

/// How a [`GrowingBuffer`] holds its memory.
enum Backing {
    /// cuMemAlloc: the buffer, and with a reserve its whole capacity.
    Plain(DeviceBuffer),
    /// cuMemAllocManaged.
    Managed(ManagedBuffer),
    /// A reserved virtual range with chunks mapped into it.
    Vmm {
        layout: allocators::GrowableLayout,
        driver: CudaVmm,
    },
    /// Nothing yet.
    Empty,
}

impl Backing {
    /// All the memory it holds now (for vmm, what is mapped).
    fn span(&self) -> Option<DeviceSpan<'_>> {
        match self {
            Backing::Plain(buffer) => Some(buffer.span()),
            Backing::Managed(buffer) => Some(buffer.span()),
            Backing::Vmm { layout, .. } => layout.base().map(|base| DeviceSpan::held(base, layout.size())),
            Backing::Empty => None,
        }
    }
}

/// What one grow did.
pub(crate) struct GrowOutcome {
    /// Whether the buffer now has the new size (else it is as it was).
    pub(crate) grown: bool,
    /// Device memory in use at the grow's peak beyond what was in use before the buffer was
    /// made, as the driver reports it (cuMemGetInfo).
    pub(crate) peak_bytes: u64,
    /// Why it did not grow: the driver's refusal.
    pub(crate) refusal: Option<String>,
    /// Why the grow was not tried (vramlab's own safety limit); nothing was measured.
    pub(crate) not_measured: Option<String>,
}

/// What backs a [`GrowingBuffer`], and so how it grows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BackedBy {
    /// cuMemAlloc the new size, copy, free the old.
    Copy,
    /// Managed memory, prefetched to the device.
    Managed,
    /// Physical chunks mapped into a reserved virtual range.
    Vmm,
}

/// A device buffer that grows by one of the three strategies of the growth family. It owns
/// every allocation it makes, and each frees itself on every path (after the context is
/// synchronized); kernels run on it only through [`Gpu::enqueue`], which synchronizes before
/// any memory can be freed or unmapped.
pub(crate) struct GrowingBuffer<'g> {
    gpu: &'g Gpu,
    strategy: BackedBy,
    capacity: Option<u64>,
    size: u64,
    /// Device bytes in use before the buffer held anything.
    baseline: u64,
    /// Whether grows ask the driver for their peak (the query takes time of its own).
    measure_peaks: bool,
    backing: Backing,
    stream: Stream,
    mismatches: DeviceBuffer,
}

impl<'g> GrowingBuffer<'g> {
    /// An empty buffer; with `capacity`, that much is set aside first (allocated for copy,
    /// allocated unbacked for managed, reserved as addresses for vmm).
    pub(crate) fn new(gpu: &'g Gpu, strategy: BackedBy, capacity: Option<u64>) -> Result<GrowingBuffer<'g>> {
        use BackedBy::*;
        let mismatches = gpu.device_buffer(8)?;
        gpu.fill(&mismatches, 0)?;
        let stream = gpu.stream()?;
        gpu.synchronize()?;
        let baseline = in_use(gpu)?;
        let backing = match (strategy, capacity) {
            (Copy, Some(bytes)) => {
                Backing::Plain(DeviceBuffer::new(&gpu.ctx, bytes as usize).map_err(HwError::cuda("cuMemAlloc"))?)
            }
            (Managed, Some(bytes)) => Backing::Managed(
                ManagedBuffer::allocate(&gpu.ctx, bytes as usize).map_err(HwError::cuda("cuMemAllocManaged"))?,
            ),
            (Vmm, reserve) => {
                let mut driver = CudaVmm::new(&gpu.ctx)?;
                let granularity = driver.granularity();
                let layout = allocators::GrowableLayout::new(&mut driver, granularity, reserve.unwrap_or(0))
                    .map_err(|e| HwError::Unsupported(e.to_string()))?;
                Backing::Vmm { layout, driver }
            }
            _ => Backing::Empty,
        };
        Ok(GrowingBuffer {
            gpu,
            strategy,
            capacity,
            size: 0,
            baseline,
            measure_peaks: true,
            backing,
            stream,
            mismatches,
        })
    }

    /// Whether grows measure their peak (on by default); a timed grow turns it off.
    pub(crate) fn measure_peaks(&mut self, on: bool) {
        self.measure_peaks = on;
    }

    /// Device bytes this buffer's grows have added to what was in use, now (0 when peaks are
    /// not measured). The work queued so far finishes first either way.
    fn held(&self) -> Result<u64> {
        self.gpu.synchronize()?;
        if !self.measure_peaks {
            return Ok(0);
        }
        Ok(in_use(self.gpu)?.saturating_sub(self.baseline))
    }

    /// Grows to `bytes`, keeping the contents. Running out of memory is an outcome, not an error;
    /// a managed grow that would pass `managed_limit` is not tried.
    pub(crate) fn grow(&mut self, bytes: u64, managed_limit: u64) -> Result<GrowOutcome> {
        use BackedBy::*;
        let old = self.size;
        let outcome = |grown: bool, peak_bytes: u64, refusal: Option<String>| GrowOutcome {
            grown,
            peak_bytes,
            refusal,
            not_measured: None,
        };
        if self.capacity.is_some_and(|c| self.strategy != Vmm && bytes <= c) {
            if let Backing::Managed(buffer) = &self.backing {
                let new_part = DeviceSpan::held(buffer.ptr + old, bytes - old);
                if bytes > old {
                    prefetch_to_device(new_part, self.gpu.ctx.cu_device(), self.stream.raw)
                        .map_err(HwError::cuda("cuMemPrefetchAsync"))?;
                }
            }
            self.size = bytes;
            return Ok(outcome(true, self.held()?, None));
        }
        match self.strategy {
            Copy | Managed => {
                let holding = self.capacity.unwrap_or(old);
                if self.strategy == Managed && holding + bytes > managed_limit {
                    return Ok(GrowOutcome {
                        grown: false,
                        peak_bytes: 0,
                        refusal: None,
                        not_measured: Some(format!(
                            "{} B of managed memory would pass vramlab's limit of {managed_limit} B (oversubscribing managed memory can hang a shared GPU)",
                            holding + bytes
                        )),
                    });
                }
                let made = if self.strategy == Copy {
                    DeviceBuffer::new(&self.gpu.ctx, bytes as usize).map(Backing::Plain)
                } else {
                    ManagedBuffer::allocate(&self.gpu.ctx, bytes as usize).map(Backing::Managed)
                };
                let new = match made {
                    Ok(new) => new,
                    Err(e) if is_out_of_memory(&e) => {
                        return Ok(outcome(
                            false,
                            self.held()?,
                            Some("the driver: out of device memory".into()),
                        ))
                    }
                    Err(e) => {
                        return Err(HwError::Cuda {
                            call: "cuMemAlloc",
                            reason: e,
                        })
                    }
                };
                // From here the new allocation is owned by `new`: any error below frees it and
                // leaves the buffer as it was.
                let to = new.span().expect("a new allocation");
                if self.strategy == Managed {
                    prefetch_to_device(to, self.gpu.ctx.cu_device(), self.stream.raw)
                        .map_err(HwError::cuda("cuMemPrefetchAsync"))?;
                }
                if let Some(from) = self.backing.span().filter(|_| old > 0) {
                    copy(self.gpu, to, from, old).map_err(HwError::cuda("cuMemcpy"))?;
                }
                let peak = self.held()?;
                // The old allocation frees itself here, once the copy is done (held synchronized).
                self.backing = new;
                self.capacity = self.capacity.map(|_| bytes);
                self.size = bytes;
                Ok(outcome(true, peak, None))
            }
            Vmm => {
                let Backing::Vmm { layout, driver } = &mut self.backing else {
                    unreachable!("vmm backing")
                };
                match layout.grow(driver, bytes) {
                    Ok(_) => {
                        self.size = layout.size();
                        Ok(outcome(true, self.held()?, None))
                    }
                    Err(e) if e.out_of_memory => Ok(outcome(false, self.held()?, Some(format!("the driver: {e}")))),
                    Err(e) => Err(HwError::Unsupported(e.to_string())),
                }
            }
        }
    }

    /// Shrinks a VMM buffer to the fewest whole chunks holding `bytes` (unmapping and releasing
    /// the rest); returns the new size. Only the vmm strategy can give memory back in place.
    pub(crate) fn shrink(&mut self, bytes: u64) -> Result<u64> {
        let Backing::Vmm { layout, driver } = &mut self.backing else {
            return Err(HwError::Unsupported(format!(
                "shrink: a {:?} buffer cannot give memory back in place",
                self.strategy
            )));
        };
        // Nothing may use the chunks being unmapped: every kernel ran inside Gpu::enqueue.
        self.size = layout.shrink(driver, bytes);
        Ok(self.size)
    }

    /// Empties a copy buffer that grows inside an allocated reserve, keeping the reserve, so the
    /// next grows start from nothing without allocating it again (tens of GiB: a quarter of a
    /// second each time). Its grows move no data, so one in a kept reserve is the grow a fresh
    /// reserve would see. False, and nothing changed, for any other buffer.
    pub(crate) fn restart_in_reserve(&mut self) -> bool {
        let in_reserve =
            self.strategy == BackedBy::Copy && self.capacity.is_some() && matches!(self.backing, Backing::Plain(_));
        if in_reserve {
            self.size = 0;
        }
        in_reserve
    }

    /// Bytes the buffer holds now.
    pub(crate) fn size(&self) -> u64 {
        self.size
    }

    fn pattern(&self, kernel: &Kernel, bytes: u64, tag: u32, check: bool) -> Result<()> {
        if bytes > self.size || !bytes.is_multiple_of(4) {
            return Err(HwError::Unsupported(format!(
                "{bytes} B is not whole words of the {} B buffer",
                self.size
            )));
        }
        let block = self
            .backing
            .span()
            .ok_or_else(|| HwError::Unsupported("the buffer is empty".into()))?;
        let block = DeviceSpan::held(block.ptr, bytes);
        let mismatches = check.then_some(&self.mismatches);
        launch_pattern(self.gpu, &self.stream, kernel, block, tag, mismatches)
    }

    /// Writes the pattern of `tag` over the whole buffer.
    pub(crate) fn stamp(&self, kernel: &Kernel, tag: u32) -> Result<()> {
        self.pattern(kernel, self.size, tag, false)
    }

    /// Counts words of the first `bytes` that lost the pattern of `tag` (adds to [`GrowingBuffer::mismatches`]).
    pub(crate) fn verify(&self, kernel: &Kernel, bytes: u64, tag: u32) -> Result<()> {
        self.pattern(kernel, bytes, tag, true)
    }

    pub(crate) fn mismatches(&self) -> Result<u64> {
        let mut bytes = [0u8; 8];
        self.gpu.download_range(&mut bytes, &self.mismatches, 0)?;
        Ok(u64::from_le_bytes(bytes))
    }
}

impl Drop for GrowingBuffer<'_> {
    fn drop(&mut self) {
        let _ = self.gpu.synchronize();
        if let Backing::Vmm { mut layout, mut driver } = std::mem::replace(&mut self.backing, Backing::Empty) {
            layout.release_all(&mut driver);
        }
        // A plain or managed backing frees itself as it drops.
    }
}

/// Device bytes in use on `gpu` now (total minus free, cuMemGetInfo).
fn in_use(gpu: &Gpu) -> Result<u64> {
    let (free, total) = gpu.memory_info()?;
    Ok(total - free)
}

/// Copies the first `bytes` of `from` into `to` (synchronous for device memory).
fn copy(gpu: &Gpu, to: DeviceSpan<'_>, from: DeviceSpan<'_>, bytes: u64) -> std::result::Result<(), DriverError> {
    if bytes > to.bytes || bytes > from.bytes {
        return Err(DriverError(sys::CUresult::CUDA_ERROR_INVALID_VALUE));
    }
    gpu.ctx.bind_to_thread()?;
    // SAFETY: both spans are live allocations borrowed from their owners, at least `bytes` long
    // (checked); cuMemcpy between device allocations completes before it returns.
    driver::call(|| unsafe { sys::cuMemcpy(to.ptr, from.ptr, bytes as usize) }.result())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every guarded driver call of every strategy's grows is made to fail in turn; each time
    /// the error comes back as an error or a refusal, and once the buffer is gone every
    /// allocation, mapping and reservation it made has been freed.
    #[test]
    #[ignore = "needs an NVIDIA GPU; run with --ignored on a GPU machine"]
    fn an_injected_failure_anywhere_in_a_grow_leaks_nothing() {
        let gpu = Gpu::open().expect("a GPU");
        let (free, _) = gpu.memory_info().unwrap();
        let limit = free / 2;
        let mut paths = 0;
        for strategy in [BackedBy::Copy, BackedBy::Managed, BackedBy::Vmm] {
            for capacity in [None, Some(256u64 << 20)] {
                for (code, name) in [
                    (sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY, "out of memory"),
                    (sys::CUresult::CUDA_ERROR_UNKNOWN, "unknown"),
                ] {
                    for fail_at in 0.. {
                        let live = driver::live_allocations();
                        driver::fail_after(fail_at, code);
                        let result = GrowingBuffer::new(&gpu, strategy, capacity).and_then(|mut buffer| {
                            for bytes in [64u64 << 20, 128 << 20, 512 << 20] {
                                buffer.grow(bytes, limit)?;
                            }
                            Ok(())
                        });
                        let exhausted = driver::injection_pending();
                        assert_eq!(
                            driver::live_allocations(),
                            live,
                            "{strategy:?} reserve {capacity:?}: {name} at guarded call {fail_at} ({result:?}) left allocations behind"
                        );
                        paths += 1;
                        if exhausted {
                            break;
                        }
                    }
                }
            }
        }
        assert!(paths > 20, "only {paths} failure paths were walked");
    }
}
